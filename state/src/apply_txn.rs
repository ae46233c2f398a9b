//! Applying the transaction ops (DESIGN §1, §4, §5): pure, like the rest of `apply`.
//!
//! Ending a transaction — by EndTxn, by fencing in InitProducerId, or by the broker's abort —
//! writes one control batch into every partition the transaction wrote, at that partition's
//! log end, removes the transaction from the partitions' open set (moving their last stable
//! offset), records an abort in the aborted-transaction index, and commits or drops the group
//! offsets it held. All of it happens in one apply, so no reader ever sees half a decision.

use kafka_compat::control::{control_batch, Marker};
use kafka_compat::error_code;

use super::command::{
    AbortTxnsOp, EndTxnOp, InitTxnProducerOp, LeaderStamp, OffsetCommitOp, OpResult, TxnOffsetCommitOp,
};
use super::effect::Effect;
use super::groups::CommitResult;
use super::producers::Allocation;
use super::txns::{Ended, TxnError};
use super::{AbortedTxn, BrokerState};

pub fn init_txn_producer(
    state: &mut BrokerState,
    stamp: &LeaderStamp,
    op: &InitTxnProducerOp,
    effects: &mut Vec<Effect>,
) -> OpResult {
    let allocation = Allocation::of(&state.limits, stamp.now_ms);
    let producers = &mut state.producers;
    let limits = &state.limits;
    let result = state.txns.init_producer(op, stamp.now_ms, limits, &mut || producers.allocate(&allocation));
    let result = result.map(|(id, aborted)| {
        if let Some(ended) = aborted {
            decide(state, ended, *stamp, effects);
        }
        id
    });
    state.txns.assert_invariants_of([&op.transactional_id]);
    OpResult::Txn(result)
}

/// KIP-447: the commit is checked as a member's OffsetCommit would be (generation, member,
/// partition, metadata size), then held by the transaction.
pub fn txn_offset_commit(state: &mut BrokerState, now_ms: i64, op: &TxnOffsetCommitOp) -> OpResult {
    let results = check_txn_offsets(state, op);
    let accepted: Vec<bool> = results.iter().map(|(code, _)| *code == error_code::NONE).collect();
    let outcome = if accepted.iter().any(|ok| *ok) {
        state.txns.add_offsets(op, now_ms, &accepted).map(|()| results)
    } else {
        // Nothing to hold; the epoch still decides whether the client is told it is fenced.
        match state.txns.by_id.get(&op.transactional_id) {
            Some(meta) => meta.check_epoch(op.producer).map(|()| results),
            None => Err(TxnError::InvalidProducerIdMapping),
        }
    };
    state.txns.assert_invariants_of([&op.transactional_id]);
    OpResult::TxnOffsets(outcome)
}

/// The checks a TxnOffsetCommit's commits pass as a member's OffsetCommit would: one result
/// per commit. Shared with a commit of a transaction coordinated by another group (`xgroup`).
pub(crate) fn check_txn_offsets(state: &BrokerState, op: &TxnOffsetCommitOp) -> Vec<CommitResult> {
    let mut as_commit = OffsetCommitOp {
        group_id: op.group_id.clone(),
        generation_id: op.generation_id,
        member_id: op.member_id.clone(),
        commits: op.commits.clone(),
    };
    // A KIP-848 group decides membership by member epoch; `Groups` then checks the rest.
    let consumer_group = crate::apply_consumer::check_txn_offset_commit(state, op);
    if consumer_group == Some(error_code::NONE) {
        as_commit.generation_id = -1;
    }
    match consumer_group {
        Some(code) if code != error_code::NONE => vec![(code, None); op.commits.len()],
        _ => state.groups.check_commit(&state.topics, &as_commit, state.commit_rules()),
    }
}

pub fn end_txn(
    state: &mut BrokerState,
    stamp: &LeaderStamp,
    op: &EndTxnOp,
    effects: &mut Vec<Effect>,
) -> OpResult {
    let now = stamp.now_ms;
    let allocation = Allocation::of(&state.limits, now);
    let producers = &mut state.producers;
    let mut allocate = || producers.allocate(&allocation);
    let result = state.txns.end_txn(
        &op.transactional_id,
        op.producer,
        op.txn_commit,
        op.bump_epoch,
        now,
        &mut allocate,
    );
    let result = result.map(|(id, ended)| {
        if let Some(ended) = ended {
            decide(state, ended, *stamp, effects);
        }
        id
    });
    state.txns.assert_invariants_of([&op.transactional_id]);
    OpResult::Txn(result)
}

pub fn abort_txns(
    state: &mut BrokerState,
    stamp: &LeaderStamp,
    op: &AbortTxnsOp,
    effects: &mut Vec<Effect>,
) -> OpResult {
    for (transactional_id, seen) in &op.transactions {
        let still_open =
            state.txns.by_id.get(transactional_id).is_some_and(|m| {
                m.producer_id == seen.producer_id && m.producer_epoch == seen.producer_epoch
            });
        if !still_open {
            continue;
        }
        if let Some(ended) = state.txns.broker_abort(transactional_id, op.reason, stamp.now_ms) {
            decide(state, ended, *stamp, effects);
        }
    }
    state.txns.assert_invariants_of(op.transactions.iter().map(|(id, _)| id));
    OpResult::Done
}

/// Ends a transaction this group coordinates: the decision is recorded for the other groups
/// holding its data (`xgroup`, nothing with one group), then written here.
fn decide(state: &mut BrokerState, ended: Ended, stamp: LeaderStamp, effects: &mut Vec<Effect>) {
    state.xgroup.decided(ended.producer_id, ended.marker_epoch, ended.txn_commit);
    write_end(state, ended, stamp, effects);
}

/// Writes the markers and moves the offsets of one ended transaction.
pub(crate) fn write_end(
    state: &mut BrokerState,
    ended: Ended,
    stamp: LeaderStamp,
    effects: &mut Vec<Effect>,
) {
    for ((topic, partition), first_offset) in &ended.partitions {
        let Some(t) = state.topics.get_mut(topic) else { continue };
        let topic_id = t.topic_id;
        let Some(p) = usize::try_from(*partition).ok().and_then(|i| t.partitions.get_mut(i)) else {
            continue;
        };
        let marker_offset = p.log_end_offset;
        let batch = control_batch(&Marker {
            base_offset: marker_offset,
            partition_leader_epoch: stamp.term,
            timestamp_ms: stamp.now_ms,
            producer_id: ended.producer_id,
            producer_epoch: ended.marker_epoch,
            commit: ended.txn_commit,
            coordinator_epoch: stamp.term,
        });
        p.open_txns.remove(&ended.producer_id);
        if !ended.txn_commit {
            p.aborted_txns.push(AbortedTxn {
                producer_id: ended.producer_id,
                first_offset: *first_offset,
                last_offset: marker_offset,
            });
        }
        p.log_end_offset = marker_offset + 1;
        p.note_epoch(stamp.term, marker_offset);
        p.assert_invariants(topic, *partition);
        effects.push(Effect::Append { topic_id, partition: *partition, batch });
    }
    if ended.txn_commit {
        for (group, offsets) in ended.offsets {
            state.groups.store_txn_offsets(&group, offsets);
        }
    }
}

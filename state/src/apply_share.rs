//! Applying the KIP-932 share-group ops: membership (heartbeat, the leader's fencing,
//! liveness) and the share partitions' records (acquisition, acknowledgement, release, lock
//! expiry). The rules are `share_group`'s and `share_partition`'s; what lives here is where
//! they meet the rest of the state: one group id is one group of one type, a fenced member
//! gives back every record it holds, and an acquisition reads the partition's log start from
//! the state it meets. A member that leaves keeps what it acquired, as in Kafka 4.4: its share
//! session outlives its membership, so its final acknowledgements (ShareAcknowledge or
//! ShareFetch at epoch -1, which librdkafka sends after the leave) still count; the session's
//! end, its connection's close or the locks' expiry release the rest (`ShareRelease`,
//! `ShareExpireLocks`).

use kafka_compat::error_code;

use crate::command::{
    AcquirePartition, FenceShareMemberOp, OpResult, ShareAcknowledgeOp, ShareAcquireOp, ShareDeleteOffsetsOp,
    ShareExpireOp, ShareGroupHeartbeatOp, ShareLivenessOp, ShareReleaseOp, ShareResetOffsetsOp,
};
use crate::consumer_group::{Refusal, TopicId};
use crate::groups::CommitResult;
use crate::share_group::LEAVE_GROUP_MEMBER_EPOCH;
use crate::share_partition::{AckError, AcquireInput, Acquired};
use crate::BrokerState;

pub(crate) fn heartbeat(state: &mut BrokerState, op: &ShareGroupHeartbeatOp) -> OpResult {
    let group_id = &op.heartbeat.group_id;
    if let Some(refusal) = other_type(state, group_id) {
        return OpResult::ShareHeartbeat(Box::new(Err(refusal)));
    }
    let answer = state.share_groups.heartbeat(&state.topics, &op.heartbeat, &op.settings, op.now_ms);
    if answer.is_ok() && op.heartbeat.member_epoch != LEAVE_GROUP_MEMBER_EPOCH {
        // Outside the state machine's heartbeat: the leader's dry run of a steady heartbeat
        // must still find the group unchanged.
        state.share_groups.seen(group_id, &op.heartbeat.member_id, op.now_ms);
    }
    OpResult::ShareHeartbeat(Box::new(answer))
}

/// GROUP_ID_NOT_FOUND when a group of another type holds the id (Kafka's "Group X is not a
/// share group.").
pub fn other_type(state: &BrokerState, group_id: &str) -> Option<Refusal> {
    let taken = state.consumer_groups.groups.contains_key(group_id)
        || state.streams_groups.groups.contains_key(group_id)
        || state.groups.groups.contains_key(group_id);
    (taken && !state.share_groups.groups.contains_key(group_id)).then(|| {
        Refusal::new(error_code::GROUP_ID_NOT_FOUND, format!("Group {group_id} is not a share group."))
    })
}

/// Whether a share group holds the id: the other group types' joins refuse it.
pub fn is_share_group(state: &BrokerState, group_id: &str) -> bool {
    state.share_groups.groups.contains_key(group_id)
}

pub(crate) fn fence(state: &mut BrokerState, op: &FenceShareMemberOp) -> OpResult {
    let fenced = state.share_groups.fence(&op.group_id, &op.member_id);
    if fenced {
        state.share_states.release(&op.group_id, Some(&op.member_id), None, &op.limits);
    }
    OpResult::MemberFenced(fenced)
}

pub(crate) fn record_liveness(state: &mut BrokerState, op: &ShareLivenessOp) -> OpResult {
    for m in &op.members {
        state.share_groups.seen(&m.group_id, &m.member_id, m.seen_ms);
    }
    OpResult::Done
}

/// Acquires for one member, partition by partition in the op's order, the record budget
/// shared. A partition whose topic is gone acquires nothing.
pub(crate) fn acquire(state: &mut BrokerState, op: &ShareAcquireOp) -> OpResult {
    let mut budget = op.max_records.max(0);
    let mut results = Vec::with_capacity(op.partitions.len());
    for p in &op.partitions {
        let Some(log_start) = log_start(state, &p.topic_id, p.partition) else {
            results.push(Vec::new());
            continue;
        };
        if budget == 0 {
            results.push(Vec::new());
            continue;
        }
        let share = state.share_states.get_or_start(
            &op.group_id,
            p.topic_id,
            p.partition,
            p.start_offset.max(log_start),
        );
        let input = input(op, p, budget, log_start);
        let acquired = share.acquire(&input, &op.limits);
        budget = budget.saturating_sub(count(&acquired));
        results.push(acquired);
    }
    OpResult::ShareAcquired(results)
}

/// What the acquisition of partition `p` of `op` runs with, `max_records` of the budget left.
fn input<'a>(
    op: &'a ShareAcquireOp,
    p: &'a AcquirePartition,
    max_records: i32,
    log_start: i64,
) -> AcquireInput<'a> {
    AcquireInput {
        member_id: &op.member_id,
        max_records,
        batch_size: op.batch_size,
        record_limit_mode: op.record_limit_mode,
        deadline_ms: op.deadline_ms,
        batches: &p.batches,
        log_start_offset: log_start,
    }
}

/// The leader's dry run of `op`: whether its apply would acquire anything or start a share
/// partition the group never read, on copies, so an empty fetch writes no entry.
pub fn would_acquire(state: &BrokerState, op: &ShareAcquireOp) -> bool {
    op.partitions.iter().any(|p| {
        let Some(log_start) = log_start(state, &p.topic_id, p.partition) else { return false };
        let Some(share) = state.share_states.get(&op.group_id, &p.topic_id, p.partition) else { return true };
        let input = input(op, p, op.max_records.max(0), log_start);
        !share.clone().acquire(&input, &op.limits).is_empty()
    })
}

fn count(acquired: &[Acquired]) -> i32 {
    let n: i64 = acquired.iter().map(|a| a.last_offset - a.first_offset + 1).sum();
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The partition's log start offset, if the topic (by id) and partition exist.
fn log_start(state: &BrokerState, topic_id: &TopicId, partition: i32) -> Option<i64> {
    let (_, topic) = state.topic_by_id(topic_id)?;
    let p = usize::try_from(partition).ok().and_then(|i| topic.partitions.get(i))?;
    Some(p.log_start_offset)
}

pub(crate) fn acknowledge(state: &mut BrokerState, op: &ShareAcknowledgeOp) -> OpResult {
    let results = op
        .partitions
        .iter()
        .map(|p| match state.share_states.get_mut(&op.group_id, &p.topic_id, p.partition) {
            Some(share) => share.acknowledge(&op.member_id, &p.batches, op.now_ms, op.lock_ms, &op.limits),
            None => Err(AckError {
                code: error_code::INVALID_RECORD_STATE,
                message:
                    "The record state is invalid. The acknowledgement of delivery could not be completed."
                        .to_string(),
            }),
        })
        .collect();
    OpResult::ShareAcknowledged(results)
}

pub(crate) fn release(state: &mut BrokerState, op: &ShareReleaseOp) -> OpResult {
    let only = op.partitions.as_deref();
    state.share_states.release(&op.group_id, op.member_id.as_deref(), only, &op.limits);
    OpResult::Done
}

pub(crate) fn expire(state: &mut BrokerState, op: &ShareExpireOp) -> OpResult {
    state.share_states.expire(op.now_ms, &op.groups);
    OpResult::Done
}

/// The refusal of an offsets change: another type's id, or a share group with members
/// (Kafka's `throwIfShareGroupIsNotEmpty`).
fn not_empty_or_other(state: &BrokerState, group_id: &str) -> Option<Refusal> {
    if let Some(refusal) = other_type(state, group_id) {
        return Some(refusal);
    }
    let members = state.share_groups.groups.get(group_id).is_some_and(|g| !g.members.is_empty());
    members.then(|| Refusal::new(error_code::NON_EMPTY_GROUP, "The group is not empty."))
}

/// AlterShareGroupOffsets: each named partition starts over at its offset (never below the
/// log start), every record of it available again. A group no type holds is created empty,
/// as Kafka's `getOrMaybeCreateShareGroup`.
pub(crate) fn reset_offsets(state: &mut BrokerState, op: &ShareResetOffsetsOp) -> OpResult {
    if let Some(refusal) = not_empty_or_other(state, &op.group_id) {
        return OpResult::ShareOffsetsReset(Err(refusal));
    }
    state.share_groups.groups.entry(op.group_id.clone()).or_default();
    for (topic_id, partition, offset) in &op.partitions {
        let Some(log_start) = log_start(state, topic_id, *partition) else { continue };
        let share = state.share_states.get_or_start(&op.group_id, *topic_id, *partition, log_start);
        share.reset((*offset).max(log_start));
    }
    OpResult::ShareOffsetsReset(Ok(()))
}

/// DeleteShareGroupOffsets: forgets the group's state of each named topic; per topic whether
/// there was any (Kafka: "There is no offset information to delete.").
pub(crate) fn delete_offsets(state: &mut BrokerState, op: &ShareDeleteOffsetsOp) -> OpResult {
    if let Some(refusal) = not_empty_or_other(state, &op.group_id) {
        return OpResult::ShareOffsetsDeleted(Err(refusal));
    }
    let group = state.share_states.groups.get_mut(&op.group_id);
    let Some(group) = group else { return OpResult::ShareOffsetsDeleted(Ok(vec![false; op.topics.len()])) };
    let deleted = op.topics.iter().map(|t| group.remove(t).is_some()).collect();
    OpResult::ShareOffsetsDeleted(Ok(deleted))
}

/// DeleteGroups of a share group: only an empty one, with its share state. None when no share
/// group holds the id.
pub(crate) fn delete_group(state: &mut BrokerState, group_id: &str) -> Option<CommitResult> {
    let group = state.share_groups.groups.get(group_id)?;
    if !group.members.is_empty() {
        return Some((error_code::NON_EMPTY_GROUP, Some(format!("group '{group_id}' has members"))));
    }
    state.share_groups.groups.remove(group_id);
    state.share_states.drop_group(group_id);
    Some((error_code::NONE, None))
}

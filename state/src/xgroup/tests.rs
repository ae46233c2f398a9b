//! The cross-group transitions one at a time, with a coordinator state C and a participant
//! state P (the simulation in `state/tests/xgroup` plays them together under faults).

use kafka_compat::control::marker_is_commit;

use super::coordinator::{self, Resolution};
use super::ops::{apply_xop, XOp, XProduceOp, XResult};
use super::participant::Applied;
use super::{Decision, Instance};
use crate::command::{EndTxnOp, InitTxnProducerOp, LeaderStamp, Op, OpResult, PartitionAppend, ProduceOp};
use crate::testing::{create_topic, txn_batch};
use crate::txns::{ProducerIdEpoch, TxnError};
use crate::{apply_op, BrokerState, Effect};

const STAMP: LeaderStamp = LeaderStamp { now_ms: 10, term: 1 };
const C: u32 = 0;
const P: u32 = 1;

fn group() -> BrokerState {
    let mut state = BrokerState::default();
    state.xgroup.groups = 2;
    state.limits.txn_timeout_ms_max = 60_000;
    state.limits.producer_ids_live_max = 100;
    state.limits.transactional_ids_max = 10;
    apply_op(&mut state, &STAMP, &create_topic("out", 1, 1), &mut Vec::new());
    state
}

/// C with transactional id "t" initialized; its producer id and epoch.
fn coordinator_with_producer() -> (BrokerState, ProducerIdEpoch) {
    let mut c = group();
    let init = InitTxnProducerOp { transactional_id: "t".into(), timeout_ms: 60_000, expected: None };
    let OpResult::Txn(Ok(id)) = apply_op(&mut c, &STAMP, &Op::InitTxnProducer(init), &mut Vec::new()) else {
        panic!("init")
    };
    (c, id)
}

fn x(state: &mut BrokerState, op: XOp, effects: &mut Vec<Effect>) -> XResult {
    apply_xop(state, &STAMP, &op, effects)
}

fn write(p: &mut BrokerState, instance: Instance, prior: Option<Decision>, offset: i64, seq: i32) -> XResult {
    let batch = txn_batch(offset, 1, instance.producer_id, instance.epoch, seq);
    let produce = ProduceOp {
        partitions: vec![PartitionAppend { topic: "out".into(), partition: 0, batches: vec![batch] }],
    };
    x(p, XOp::Produce(XProduceOp { coordinator: C, instance, prior, produce }), &mut Vec::new())
}

fn end(c: &mut BrokerState, id: ProducerIdEpoch, commit: bool) -> OpResult {
    let op = EndTxnOp { transactional_id: "t".into(), producer: id, txn_commit: commit, bump_epoch: true };
    apply_op(c, &STAMP, &Op::EndTxn(op), &mut Vec::new())
}

#[test]
fn a_decision_lists_every_registered_participant_and_moves_the_instance_on() {
    let (mut c, id) = coordinator_with_producer();
    let joined = coordinator::join(&c, id, P, None).unwrap();
    assert_eq!(joined.instance, Instance { producer_id: id.producer_id, epoch: 0, n: 0 });
    assert_eq!(
        x(&mut c, XOp::Register { instance: joined.instance, group: P }, &mut Vec::new()),
        XResult::Registered(Ok(()))
    );
    assert!(matches!(end(&mut c, id, true), OpResult::Txn(Ok(_))));
    let waiting: Vec<_> = c.xgroup.deliveries().collect();
    assert_eq!(waiting, vec![(P, Decision { instance: joined.instance, commit: true })]);
    // Log order fences: a registration of the decided instance is refused.
    let late = x(&mut c, XOp::Register { instance: joined.instance, group: 2 }, &mut Vec::new());
    assert_eq!(late, XResult::Registered(Err(TxnError::Fenced)));
    assert_eq!(
        coordinator::current(&c, id.producer_id).unwrap().0,
        Instance { producer_id: id.producer_id, epoch: 1, n: 1 }
    );
    // Confirmed by P: nothing left to deliver.
    c.xgroup.delivered(&[(joined.instance, P)]);
    assert!(c.xgroup.undelivered.is_empty());
}

#[test]
fn the_pull_hears_the_decision_of_a_listed_group_and_abort_for_unlisted_data() {
    let (mut c, id) = coordinator_with_producer();
    let instance = coordinator::join(&c, id, P, None).unwrap().instance;
    assert_eq!(coordinator::resolve(&c, instance, P), Resolution::Open);
    x(&mut c, XOp::Register { instance, group: P }, &mut Vec::new());
    end(&mut c, id, true);
    assert_eq!(coordinator::resolve(&c, instance, P), Resolution::Decided(true));
    assert_eq!(coordinator::resolve(&c, instance, 2), Resolution::Decided(false), "group 2 was never listed");
}

#[test]
fn a_participant_writes_markers_once_and_refuses_late_writes_of_a_decided_instance() {
    let (c, id) = coordinator_with_producer();
    let instance = coordinator::join(&c, id, P, None).unwrap().instance;
    let mut p = group();
    assert!(matches!(write(&mut p, instance, None, 0, 0), XResult::Produced(Ok(_))));
    assert_eq!(p.partition("out", 0).unwrap().last_stable_offset(), 0, "open instance holds the LSO");
    let mut effects = Vec::new();
    let decide = XOp::Decisions { coordinator: C, decisions: vec![Decision { instance, commit: true }] };
    assert_eq!(x(&mut p, decide.clone(), &mut effects), XResult::Decisions(vec![Applied::Done]));
    let Effect::Append { batch, .. } = &effects[0] else { panic!("a marker") };
    assert_eq!(marker_is_commit(batch), Some(true));
    assert_eq!(p.partition("out", 0).unwrap().last_stable_offset(), 2);
    // Applying it again writes nothing; a late write of the instance is fenced.
    let mut again = Vec::new();
    assert_eq!(x(&mut p, decide, &mut again), XResult::Decisions(vec![Applied::Already]));
    assert!(again.is_empty());
    let XResult::Produced(Err(refusal)) = write(&mut p, instance, None, 2, 1) else {
        panic!("a late write applied")
    };
    assert!(refusal.message.contains("Fenced"), "{}", refusal.message);
}

#[test]
fn a_next_instance_waits_for_the_previous_decision_or_carries_it() {
    let (mut c, id) = coordinator_with_producer();
    let first = coordinator::join(&c, id, P, None).unwrap().instance;
    x(&mut c, XOp::Register { instance: first, group: P }, &mut Vec::new());
    let mut p = group();
    write(&mut p, first, None, 0, 0);
    let OpResult::Txn(Ok(next_id)) = end(&mut c, id, false) else { panic!("end") };
    // The next transaction's write, without the previous decision, is refused (retriable).
    let joined = coordinator::join(&c, next_id, P, p.xgroup.open_instance(id.producer_id)).unwrap();
    let XResult::Produced(Err(refusal)) = write(&mut p, joined.instance, None, 1, 0) else {
        panic!("overtook")
    };
    assert!(refusal.message.contains("PreviousUndecided"), "{}", refusal.message);
    // A decision of the newer instance is deferred behind the open one.
    let newer = XOp::Decisions {
        coordinator: C,
        decisions: vec![Decision { instance: joined.instance, commit: true }],
    };
    assert_eq!(x(&mut p.clone(), newer, &mut Vec::new()), XResult::Decisions(vec![Applied::Deferred]));
    // With the prior decision carried, the abort marker comes first (offset 1), then the
    // write, which the leader stamped behind it.
    assert_eq!(joined.prior, Some(Decision { instance: first, commit: false }));
    let XResult::Produced(Ok(produced)) = write(&mut p, joined.instance, joined.prior, 2, 0) else {
        panic!("write")
    };
    assert_eq!(produced[0].base_offset, 2);
    let partition = p.partition("out", 0).unwrap();
    assert_eq!(partition.aborted_txns.len(), 1);
    assert_eq!((partition.aborted_txns[0].last_offset, partition.log_end_offset), (1, 3));
}

#[test]
fn offsets_of_another_groups_transaction_are_pending_until_its_decision() {
    use super::ops::XTxnOffsetCommitOp;
    use crate::command::{OffsetCommitEntry, TxnOffsetCommitOp};
    let (c, id) = coordinator_with_producer();
    let instance = coordinator::join(&c, id, P, None).unwrap().instance;
    let mut p = group();
    let commit_of = |offset: i64| TxnOffsetCommitOp {
        transactional_id: "t".into(),
        producer: id,
        group_id: "cg".into(),
        generation_id: -1,
        member_id: String::new(),
        commits: vec![OffsetCommitEntry {
            topic: "out".into(),
            partition: 0,
            offset,
            leader_epoch: -1,
            metadata: None,
        }],
    };
    let op = XOp::TxnOffsetCommit(XTxnOffsetCommitOp {
        coordinator: C,
        instance,
        prior: None,
        commit: commit_of(5),
    });
    assert!(matches!(x(&mut p, op, &mut Vec::new()), XResult::TxnOffsets(Ok(_))));
    assert_eq!(
        p.pending_offsets_of("cg"),
        [("out".to_string(), 0)].into(),
        "require_stable sees them pending"
    );
    assert!(p.groups.committed("cg", "out", 0).is_none(), "not stored before the decision");
    let commit = XOp::Decisions { coordinator: C, decisions: vec![Decision { instance, commit: true }] };
    x(&mut p, commit, &mut Vec::new());
    assert_eq!(p.groups.committed("cg", "out", 0).map(|o| o.offset), Some(5));
    assert!(p.pending_offsets_of("cg").is_empty());
    // A late commit of the decided instance is fenced; nothing is stored.
    let late = XOp::TxnOffsetCommit(XTxnOffsetCommitOp {
        coordinator: C,
        instance,
        prior: None,
        commit: commit_of(9),
    });
    assert_eq!(x(&mut p, late, &mut Vec::new()), XResult::TxnOffsets(Err(TxnError::Fenced)));
    assert_eq!(p.groups.committed("cg", "out", 0).map(|o| o.offset), Some(5));
}

/// A review finding: deleting a topic dropped an open instance's partitions but kept its
/// pending offsets of that topic, which its commit then stored for a deleted topic.
#[test]
fn a_deleted_topic_leaves_the_pending_offsets_of_an_open_instance() {
    use super::ops::XTxnOffsetCommitOp;
    use crate::command::{DeleteTopicsOp, OffsetCommitEntry, TxnOffsetCommitOp};
    let (c, id) = coordinator_with_producer();
    let instance = coordinator::join(&c, id, P, None).unwrap().instance;
    let mut p = group();
    apply_op(&mut p, &STAMP, &create_topic("in", 1, 1), &mut Vec::new());
    let entry = |topic: &str| OffsetCommitEntry {
        topic: topic.into(),
        partition: 0,
        offset: 3,
        leader_epoch: -1,
        metadata: None,
    };
    let commit = TxnOffsetCommitOp {
        transactional_id: "t".into(),
        producer: id,
        group_id: "cg".into(),
        generation_id: -1,
        member_id: String::new(),
        commits: vec![entry("in"), entry("out")],
    };
    let op = XOp::TxnOffsetCommit(XTxnOffsetCommitOp { coordinator: C, instance, prior: None, commit });
    assert!(matches!(x(&mut p, op, &mut Vec::new()), XResult::TxnOffsets(Ok(_))));
    let delete = Op::DeleteTopics(DeleteTopicsOp { names: vec!["in".into()] });
    apply_op(&mut p, &STAMP, &delete, &mut Vec::new());
    assert_eq!(p.pending_offsets_of("cg"), [("out".to_string(), 0)].into(), "only the live topic's");
    let commit = XOp::Decisions { coordinator: C, decisions: vec![Decision { instance, commit: true }] };
    x(&mut p, commit, &mut Vec::new());
    assert!(p.groups.committed("cg", "in", 0).is_none(), "nothing stored for the deleted topic");
    assert_eq!(p.groups.committed("cg", "out", 0).map(|o| o.offset), Some(3));
}

/// Identify puts the group's producer ids in its own range, once: a repeated or late one never
/// moves the counter back, so no id is handed out twice.
#[test]
fn identify_allocates_from_the_groups_range_and_never_moves_back() {
    let mut state = BrokerState::default();
    let identify = XOp::Identify { group: 2, groups: 3 };
    assert_eq!(x(&mut state, identify.clone(), &mut Vec::new()), XResult::Done);
    assert_eq!(state.xgroup.groups, 3);
    assert_eq!(state.producers.next_producer_id, super::producer_id_base(2));
    let init = InitTxnProducerOp { transactional_id: "t".into(), timeout_ms: 60_000, expected: None };
    state.limits.txn_timeout_ms_max = 60_000;
    state.limits.producer_ids_live_max = 100;
    state.limits.transactional_ids_max = 10;
    let OpResult::Txn(Ok(id)) = apply_op(&mut state, &STAMP, &Op::InitTxnProducer(init), &mut Vec::new())
    else {
        panic!("init")
    };
    assert_eq!(id.producer_id, 2 << 48);
    assert_eq!(super::producer_id_group(id.producer_id), 2);
    x(&mut state, identify, &mut Vec::new());
    assert_eq!(state.producers.next_producer_id, (2 << 48) + 1, "a second Identify keeps the counter");
    assert_eq!(super::producer_id_group(41), 0, "group 0's range starts at 0");
}

/// `onelog.version` 9: a participant forgets a remote producer id only once its coordinator
/// no longer knows it and no decision of it waits for the participant, and never while it holds
/// an instance of it open; a write of the forgotten id is refused at JoinTxn.
#[test]
fn a_participant_forgets_a_producer_id_its_coordinator_forgot() {
    let (mut c, id) = coordinator_with_producer();
    let pid = id.producer_id;
    let instance = coordinator::join(&c, id, P, None).unwrap().instance;
    assert_eq!(x(&mut c, XOp::Register { instance, group: P }, &mut Vec::new()), XResult::Registered(Ok(())));
    let mut p = group();
    assert!(matches!(write(&mut p, instance, None, 0, 0), XResult::Produced(Ok(_))));
    assert!(p.xgroup.idle_remote(10).is_empty(), "an open instance is not idle");
    x(&mut p, XOp::Forget { producer_ids: vec![pid] }, &mut Vec::new());
    assert_eq!(p.xgroup.open_instance(pid), Some(instance), "an open instance is kept");

    assert!(matches!(end(&mut c, id, true), OpResult::Txn(Ok(_))));
    let decide = XOp::Decisions { coordinator: C, decisions: vec![Decision { instance, commit: true }] };
    x(&mut p, decide, &mut Vec::new());
    assert_eq!(p.xgroup.idle_remote(10), std::collections::BTreeMap::from([(C, vec![pid])]));
    assert!(coordinator::gone(&c, P, &[pid]).is_empty(), "known, and its decision waits for P");
    c.xgroup.delivered(&[(instance, P)]);
    assert!(coordinator::gone(&c, P, &[pid]).is_empty(), "its transactional id still maps to it");

    let later = LeaderStamp { now_ms: STAMP.now_ms + c.limits.transactional_id_expiration_ms + 1, term: 1 };
    let expire = Op::ExpireTransactionalIds(crate::command::ExpireTransactionalIdsOp {});
    apply_op(&mut c, &later, &expire, &mut Vec::new());
    assert_eq!(coordinator::gone(&c, P, &[pid, pid + 1]), vec![pid, pid + 1], "neither is known");
    assert_eq!(x(&mut p, XOp::Forget { producer_ids: vec![pid] }, &mut Vec::new()), XResult::Done);
    assert!(p.xgroup.remote.is_empty());
    assert_eq!(coordinator::join(&c, id, P, None).unwrap_err(), TxnError::InvalidProducerIdMapping);
    assert_eq!(XOp::Forget { producer_ids: vec![] }.onelog_version(), 9);
}

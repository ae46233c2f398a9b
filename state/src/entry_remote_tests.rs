//! Tests of stamping writes of a transaction another Raft group coordinates
//! (`Proposal::ProduceRemote`, docs/SCALING.md §3.1) into a participant group's entry: built by
//! `build_entry`, applied with the pure `apply_command`, answered from the results as the
//! broker's proposer does. The point throughout: the builder stamps every batch at the offset
//! apply finds, the prior decision's markers included, so apply never refuses the step.

use kafka_compat::batch::{parse_header, validate_record_set};
use kafka_compat::control::marker_is_commit;
use kafka_compat::error_code;

use crate::command::{Command, Op, OpResult};
use crate::entry::tests::{outcome, request, stamp, state_with_topic};
use crate::entry::{build_entry, Answer, Decision, Entry, EntryOptions, Proposal, UnstampedAppend};
use crate::testing::{batch, txn_batch};
use crate::xgroup::{producer_id_base, CrossGroup, GroupId, Instance, XOp, XResult};
use crate::{BrokerState, Effect};

use super::RemoteAppends;

/// The group coordinating the transactions; the state under test is group 1 of 3.
const C: GroupId = 2;

/// A producer id from C's range, as C allocates them.
fn producer_id() -> i64 {
    producer_id_base(C) + 5
}

/// Group 1 of a cluster of 3, with topic "t" of two partitions.
fn participant() -> BrokerState {
    let mut state = state_with_topic(2);
    CrossGroup::identify(&mut state, 1, 3);
    state
}

fn instance(epoch: i16, n: u32) -> Instance {
    Instance { producer_id: producer_id(), epoch, n }
}

fn decision(instance: Instance, commit: bool) -> crate::xgroup::Decision {
    crate::xgroup::Decision { instance, commit }
}

/// A write of `instance` to topic "t": one transactional batch of one record per (partition,
/// first sequence).
fn remote_write(
    instance: Instance,
    prior: Option<crate::xgroup::Decision>,
    parts: &[(i32, i32)],
) -> Proposal {
    let appends = parts
        .iter()
        .map(|&(partition, seq)| {
            let bytes = txn_batch(0, 1, instance.producer_id, instance.epoch, seq);
            let batches = validate_record_set(&bytes, usize::MAX).expect("valid batch");
            UnstampedAppend { topic: "t".into(), partition, batches }
        })
        .collect();
    Proposal::ProduceRemote(RemoteAppends { coordinator: C, instance, prior, appends })
}

/// C's decisions, as the participant's leader proposes them.
fn decisions(decided: Vec<crate::xgroup::Decision>) -> Proposal {
    Proposal::Op(Op::CrossGroup(Box::new(XOp::Decisions { coordinator: C, decisions: decided })))
}

fn build(state: &BrokerState, proposals: Vec<Proposal>) -> Entry {
    build_entry(state, stamp(), &EntryOptions::default(), proposals)
}

/// What applying an entry gave: one result per op, and the markers it wrote as
/// (partition, offset, commit).
struct Applied {
    results: Vec<OpResult>,
    markers: Vec<(i32, i64, bool)>,
}

fn apply(state: &mut BrokerState, command: &Command) -> Applied {
    let mut markers = Vec::new();
    let mut note = |_: &BrokerState, effects: &[Effect]| {
        for effect in effects {
            let Effect::Append { partition, batch, .. } = effect else { continue };
            if let Some(commit) = marker_is_commit(batch) {
                let offset = parse_header(batch).expect("a marker batch").base_offset;
                markers.push((*partition, offset, commit));
            }
        }
        Ok::<(), ()>(())
    };
    let results = crate::apply_command(state, command, &mut note).expect("no storage here").results;
    Applied { results, markers }
}

/// Every produce op and cross-group write of the entry applied as stamped.
fn assert_applied(results: &[OpResult]) {
    for result in results {
        let refused =
            matches!(result, OpResult::Produced(Err(_)) | OpResult::CrossGroup(XResult::Produced(Err(_))));
        assert!(!refused, "apply refused what the builder stamped: {results:?}");
    }
}

fn answers(decided: Vec<Decision>, results: &[OpResult]) -> Vec<Answer> {
    decided
        .into_iter()
        .map(|d| match d {
            Decision::Answered(answer) => answer,
            Decision::Waiting(waiting) => waiting.answer(results),
        })
        .collect()
}

/// Builds, applies (asserting nothing was refused) and answers one entry.
fn run(state: &mut BrokerState, proposals: Vec<Proposal>) -> (Vec<Answer>, Applied) {
    let built = build(state, proposals);
    let applied = apply(state, &built.command);
    assert_applied(&applied.results);
    (answers(built.decisions, &applied.results), applied)
}

/// The base offsets stamped into the cross-group write `op`, per partition, and its prior.
fn stamped(op: &Op) -> (Vec<(i32, i64)>, Option<crate::xgroup::Decision>) {
    let Op::CrossGroup(x) = op else { panic!("not a cross-group step: {op:?}") };
    let XOp::Produce(write) = x.as_ref() else { panic!("not a cross-group write: {x:?}") };
    let offsets = write
        .produce
        .partitions
        .iter()
        .map(|p| (p.partition, parse_header(&p.batches[0]).expect("stamped").base_offset))
        .collect();
    (offsets, write.prior)
}

/// The previous instance of the producer open here with data at offset 0 of both partitions.
fn with_open_prior() -> (BrokerState, Instance) {
    let mut state = participant();
    let first = instance(0, 0);
    run(&mut state, vec![remote_write(first, None, &[(0, 0), (1, 0)])]);
    assert_eq!(state.xgroup.open_instance(producer_id()), Some(first));
    (state, first)
}

#[test]
fn a_remote_write_is_stamped_at_the_log_end_and_holds_the_lso_until_its_commit_applies() {
    let mut state = participant();
    run(&mut state, vec![request(&[(0, batch(0, 3))])]);
    let first = instance(0, 0);
    let built = build(&state, vec![remote_write(first, None, &[(0, 0)])]);
    assert_eq!(built.command.ops.len(), 1);
    assert_eq!(stamped(&built.command.ops[0]), (vec![(0, 3)], None), "at the log end, 3");
    let applied = apply(&mut state, &built.command);
    assert_applied(&applied.results);
    assert_eq!(outcome(&answers(built.decisions, &applied.results)[0]), vec![(error_code::NONE, 3)]);
    assert_eq!(state.xgroup.open_instance(producer_id()), Some(first));
    let partition = state.partition("t", 0).unwrap();
    assert_eq!((partition.log_end_offset, partition.last_stable_offset()), (4, 3));
    // Later writes of others move the log end, not the LSO: the instance is still open.
    run(&mut state, vec![request(&[(0, batch(0, 2))])]);
    let partition = state.partition("t", 0).unwrap();
    assert_eq!((partition.log_end_offset, partition.last_stable_offset()), (6, 3));
    // C's commit, applied here: the marker at 6, and the LSO moves past it.
    let (_, applied) = run(&mut state, vec![decisions(vec![decision(first, true)])]);
    assert_eq!(applied.markers, vec![(0, 6, true)]);
    let partition = state.partition("t", 0).unwrap();
    assert_eq!((partition.log_end_offset, partition.last_stable_offset()), (7, 7));
    assert_eq!(state.xgroup.open_instance(producer_id()), None);
}

#[test]
fn a_write_carrying_the_prior_decision_is_stamped_after_the_priors_markers() {
    let (mut state, first) = with_open_prior();
    let old_end = state.partition("t", 0).unwrap().log_end_offset;
    let next = instance(1, 1);
    let prior = Some(decision(first, false));
    let built = build(&state, vec![remote_write(next, prior, &[(0, 0)])]);
    assert_eq!(stamped(&built.command.ops[0]), (vec![(0, old_end + 1)], prior), "behind the marker");
    let applied = apply(&mut state, &built.command);
    assert_applied(&applied.results);
    assert_eq!(
        outcome(&answers(built.decisions, &applied.results)[0]),
        vec![(error_code::NONE, old_end + 1)]
    );
    assert_eq!(applied.markers, vec![(0, old_end, false), (1, 1, false)], "one abort marker per partition");
    for p in 0..2 {
        let aborted = &state.partition("t", p).unwrap().aborted_txns;
        assert_eq!(aborted.iter().map(|a| (a.first_offset, a.last_offset)).collect::<Vec<_>>(), vec![(0, 1)]);
    }
    assert_eq!(state.xgroup.open_instance(producer_id()), Some(next));
    let partition = state.partition("t", 0).unwrap();
    assert_eq!((partition.log_end_offset, partition.last_stable_offset()), (old_end + 2, old_end + 1));
    assert_eq!(state.partition("t", 1).unwrap().last_stable_offset(), 2, "closed by its marker");
}

#[test]
fn an_ordinary_produce_queued_after_a_remote_write_is_stamped_before_it_and_both_apply() {
    let (mut state, first) = with_open_prior();
    let next = instance(1, 1);
    let prior = Some(decision(first, true));
    let built = build(&state, vec![remote_write(next, prior, &[(0, 0)]), request(&[(0, batch(0, 2))])]);
    assert!(matches!(built.command.ops[0], Op::Produce(_)), "the ordinary produce op goes first");
    // Data of the prior at 0, the ordinary batch at 1-2, the prior's marker at 3, the write at 4.
    assert_eq!(stamped(&built.command.ops[1]), (vec![(0, 4)], prior));
    let applied = apply(&mut state, &built.command);
    assert_applied(&applied.results);
    let answered = answers(built.decisions, &applied.results);
    assert_eq!(outcome(&answered[0]), vec![(error_code::NONE, 4)], "the remote write");
    assert_eq!(outcome(&answered[1]), vec![(error_code::NONE, 1)], "the ordinary produce");
    assert_eq!(applied.markers, vec![(0, 3, true), (1, 1, true)]);
    assert_eq!(state.partition("t", 0).unwrap().log_end_offset, 5);
}

#[test]
fn a_write_of_an_instance_at_or_below_the_fence_is_refused_at_stamping_without_an_op() {
    let mut state = participant();
    // C decided instance n=1 with no data here: the fence is n=1.
    let decided = instance(0, 1);
    run(&mut state, vec![decisions(vec![decision(decided, true)])]);
    for stale in [instance(0, 0), decided] {
        let built = build(&state, vec![remote_write(stale, None, &[(0, 0)]), request(&[(1, batch(0, 1))])]);
        assert_eq!(built.command.ops.len(), 1, "{stale}: only the ordinary produce op");
        assert!(matches!(built.command.ops[0], Op::Produce(_)));
        let Decision::Answered(answer) = &built.decisions[0] else {
            panic!("{stale}: left waiting on an entry that holds nothing for it")
        };
        assert_eq!(outcome(answer), vec![(error_code::INVALID_PRODUCER_EPOCH, -1)], "{stale}");
    }
    assert_eq!(state.partition("t", 0).unwrap().log_end_offset, 0);
}

#[test]
fn two_writes_of_one_producer_carrying_the_same_prior_count_its_markers_once() {
    let (mut state, first) = with_open_prior();
    let next = instance(1, 1);
    let prior = Some(decision(first, false));
    let built = build(
        &state,
        vec![remote_write(next, prior, &[(0, 0)]), remote_write(next, prior, &[(0, 1), (1, 0)])],
    );
    assert_eq!(built.command.ops.len(), 2);
    // One marker at 1 on each partition, then the writes.
    assert_eq!(stamped(&built.command.ops[0]).0, vec![(0, 2)]);
    assert_eq!(stamped(&built.command.ops[1]).0, vec![(0, 3), (1, 2)]);
    let applied = apply(&mut state, &built.command);
    assert_applied(&applied.results);
    let answered = answers(built.decisions, &applied.results);
    assert_eq!(outcome(&answered[0]), vec![(error_code::NONE, 2)]);
    assert_eq!(outcome(&answered[1]), vec![(error_code::NONE, 3), (error_code::NONE, 2)]);
    assert_eq!(
        applied.markers,
        vec![(0, 1, false), (1, 1, false)],
        "the second write's prior is applied already"
    );
    assert_eq!(state.partition("t", 0).unwrap().log_end_offset, 4);
    assert_eq!(state.partition("t", 1).unwrap().log_end_offset, 3);
    // A later entry's write still carrying it: the prior is fenced here now, so no marker.
    let built = build(&state, vec![remote_write(next, prior, &[(1, 1)])]);
    assert_eq!(stamped(&built.command.ops[0]).0, vec![(1, 3)], "at the log end");
    let applied = apply(&mut state, &built.command);
    assert_applied(&applied.results);
    assert!(applied.markers.is_empty());
}

/// A partition refused at stamping is left out of the step, so the slots of the partitions
/// after it must name their place among the partitions that went in.
#[test]
fn a_partition_refused_at_stamping_leaves_the_rest_of_a_remote_write_answered_with_its_own_offsets() {
    let mut state = participant();
    run(&mut state, vec![request(&[(1, batch(0, 4))])]);
    let write = remote_write(instance(0, 0), None, &[(9, 0), (0, 0), (1, 0)]);
    let (answered, _) = run(&mut state, vec![write]);
    assert_eq!(
        outcome(&answered[0]),
        vec![(error_code::UNKNOWN_TOPIC_OR_PARTITION, -1), (error_code::NONE, 0), (error_code::NONE, 4)]
    );
}

/// Issue 13: the proposer bounds entries by `Proposal::size_bytes`, so it must never be less
/// than what the stamped step encodes to.
#[test]
fn a_remote_writes_size_bounds_its_encoded_op() {
    let (state, first) = with_open_prior();
    let proposal = remote_write(instance(1, 1), Some(decision(first, true)), &[(0, 0), (1, 0)]);
    let bound = proposal.size_bytes();
    let built = build(&state, vec![proposal]);
    assert_eq!(built.command.ops.len(), 1);
    let encoded = bincode::serialized_size(&built.command.ops[0]).expect("encodes") as usize;
    assert!(bound >= encoded, "size_bytes {bound} below the encoded op's {encoded}");
}

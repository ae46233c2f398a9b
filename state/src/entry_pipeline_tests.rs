//! Tests of pipelined proposals (issue 31, `in_flight`): entries built back to back against
//! the same applied state plus the overlay of the entries in flight, then applied in order, as
//! the broker's proposer does when it hands a second entry to Raft before the first applies.

use kafka_compat::error_code;

use super::tests::{apply, init_txn, outcome, request, stamp, state_with_topic, txn_write};
use super::*;
use crate::command::EndTxnOp;
use crate::testing::producer_batch;

/// Builds `proposals` as the next entry in flight and proposes it (if it has ops).
fn pipelined(state: &BrokerState, in_flight: &mut InFlight, proposals: Vec<Proposal>) -> Entry {
    let built = build_entry_in_flight(state, in_flight, stamp(), &EntryOptions::default(), proposals);
    if !built.command.ops.is_empty() {
        in_flight.proposed(&built.command);
    }
    built
}

/// Applies `built` to `state`, settles it in `in_flight` and answers its proposals; every
/// produce op must apply as stamped.
fn settle(state: &mut BrokerState, in_flight: &mut InFlight, built: Entry) -> Vec<Answer> {
    let results = apply(state, &built.command);
    let refused = results.iter().any(|r| matches!(r, OpResult::Produced(Err(_))));
    assert!(!refused, "a pipelined entry did not apply as stamped: {results:?}");
    in_flight.settled(true);
    built
        .decisions
        .into_iter()
        .map(|d| match d {
            Decision::Answered(answer) => answer,
            Decision::Waiting(waiting) => waiting.answer(&results),
        })
        .collect()
}

#[test]
fn entries_built_before_the_last_applies_stamp_after_it_and_apply_as_stamped() {
    let mut state = state_with_topic(2);
    let mut in_flight = InFlight::default();
    // One idempotent producer's three batches on partition 0 and another's on partition 1,
    // each in its own entry, all three built before any applies.
    let first = pipelined(&state, &mut in_flight, vec![request(&[(0, producer_batch(0, 3, 1, 0, 0))])]);
    let second = pipelined(
        &state,
        &mut in_flight,
        vec![request(&[(0, producer_batch(0, 2, 1, 0, 3)), (1, producer_batch(0, 5, 2, 0, 0))])],
    );
    let third = pipelined(&state, &mut in_flight, vec![request(&[(0, producer_batch(0, 1, 1, 0, 5))])]);
    assert_eq!(in_flight.len(), 3);
    assert!(in_flight.may_build(), "produce ops hold nothing");
    assert_eq!(outcome(&settle(&mut state, &mut in_flight, first)[0]), vec![(0, 0)]);
    assert_eq!(outcome(&settle(&mut state, &mut in_flight, second)[0]), vec![(0, 3), (0, 0)]);
    assert_eq!(outcome(&settle(&mut state, &mut in_flight, third)[0]), vec![(0, 5)]);
    assert_eq!(state.partition("t", 0).unwrap().log_end_offset, 6);
    assert!(in_flight.is_empty() && in_flight.next_offset.is_empty(), "a drained pipeline drops its overlay");
}

/// Regression guard for the overlay itself: the same second entry built against the applied
/// state alone (what a pipelining proposer without the overlay would do) stamps offset 0 again
/// and sequence 3 out of order, and apply refuses it.
#[test]
fn without_the_overlay_the_second_entry_would_not_apply() {
    let mut state = state_with_topic(1);
    let first = build_entry(
        &state,
        stamp(),
        &EntryOptions::default(),
        vec![request(&[(0, producer_batch(0, 3, 1, 0, 0))])],
    );
    let second = build_entry(
        &state,
        stamp(),
        &EntryOptions::default(),
        vec![request(&[(0, producer_batch(0, 2, 1, 0, 3))])],
    );
    apply(&mut state, &first.command);
    let results = apply(&mut state, &second.command);
    assert!(matches!(results.as_slice(), [OpResult::Produced(Err(_))]), "{results:?}");
}

#[test]
fn a_retry_of_a_batch_still_in_flight_is_retriable_then_gets_the_original_offset() {
    let mut state = state_with_topic(1);
    let mut in_flight = InFlight::default();
    let original = pipelined(&state, &mut in_flight, vec![request(&[(0, producer_batch(0, 4, 7, 0, 0))])]);
    // The retry arrives (another connection) while the original's entry is in flight: its
    // outcome is unknown yet, so it is answered at once with a retriable error, and appends
    // nothing.
    let retry = pipelined(&state, &mut in_flight, vec![request(&[(0, producer_batch(0, 4, 7, 0, 0))])]);
    assert!(retry.command.ops.is_empty());
    match retry.decisions.as_slice() {
        [Decision::Answered(answer)] => {
            assert_eq!(outcome(answer), vec![(error_code::NOT_ENOUGH_REPLICAS, -1)])
        }
        other => panic!("{other:?}"),
    }
    settle(&mut state, &mut in_flight, original);
    // Retried again once the original is applied: its offsets, nothing appended.
    let again = pipelined(&state, &mut in_flight, vec![request(&[(0, producer_batch(0, 4, 7, 0, 0))])]);
    assert!(again.command.ops.is_empty());
    assert!(matches!(&again.decisions[..], [Decision::Answered(a)] if outcome(a) == vec![(0, 0)]));
}

#[test]
fn a_retry_in_the_same_entry_as_its_original_still_waits_for_it() {
    let state = state_with_topic(1);
    let mut in_flight = InFlight::default();
    let _earlier = pipelined(&state, &mut in_flight, vec![request(&[(0, producer_batch(0, 1, 3, 0, 0))])]);
    let batch = producer_batch(0, 2, 9, 0, 0);
    let built =
        pipelined(&state, &mut in_flight, vec![request(&[(0, batch.clone())]), request(&[(0, batch)])]);
    assert_eq!(built.command.ops.len(), 1);
    assert!(matches!(&built.decisions[1], Decision::Waiting(Waiting::Produce(slots))
        if matches!(slots[..], [Slot::DuplicateInEntry { .. }])));
}

#[test]
fn an_entry_with_a_barrier_op_holds_the_pipeline_until_everything_before_it_applied() {
    let mut state = state_with_topic(1);
    let id = init_txn(&mut state, "tx");
    let mut in_flight = InFlight::default();
    let write = pipelined(&state, &mut in_flight, vec![txn_write(id, 0)]);
    assert!(in_flight.may_build());
    let end = EndTxnOp { transactional_id: "tx".into(), producer: id, txn_commit: true, bump_epoch: false };
    let commit = pipelined(&state, &mut in_flight, vec![Proposal::Op(Op::EndTxn(end))]);
    assert!(!in_flight.may_build(), "the commit's marker takes an offset stamping cannot predict");
    settle(&mut state, &mut in_flight, write);
    assert!(!in_flight.may_build(), "held until the barrier itself applied");
    settle(&mut state, &mut in_flight, commit);
    assert!(in_flight.may_build() && in_flight.is_empty());
    // The marker took offset 1; the next write is stamped after it.
    let next = pipelined(&state, &mut in_flight, vec![request(&[(0, producer_batch(0, 1, 5, 0, 0))])]);
    assert_eq!(outcome(&settle(&mut state, &mut in_flight, next)[0]), vec![(0, 2)]);
}

#[test]
fn a_failed_or_abandoned_entry_holds_the_pipeline_until_it_drains() {
    let state = state_with_topic(1);
    let mut in_flight = InFlight::default();
    let _first = pipelined(&state, &mut in_flight, vec![request(&[(0, producer_batch(0, 1, 1, 0, 0))])]);
    let _second = pipelined(&state, &mut in_flight, vec![request(&[(0, producer_batch(0, 1, 1, 0, 1))])]);
    in_flight.settled(false);
    assert!(!in_flight.may_build(), "what the failed entry predicted is unknown");
    in_flight.settled(false);
    assert!(in_flight.may_build() && in_flight.next_offset.is_empty());
    // Built and then not proposed (the proposer refused it as oversized): nothing in flight,
    // so the overlay is dropped at once.
    let built = build_entry_in_flight(
        &state,
        &mut in_flight,
        stamp(),
        &EntryOptions::default(),
        vec![request(&[(0, producer_batch(0, 1, 1, 0, 0))])],
    );
    assert!(!built.command.ops.is_empty());
    in_flight.abandoned();
    assert!(in_flight.may_build() && in_flight.next_offset.is_empty());
}

//! Acquisition against Kafka 4.4.0's `SharePartition.acquire`: new records, batch size and
//! max-records alignment, record-limit mode, redelivery before new records, the in-flight
//! window, delivery-count throttling, aborted transactions, and batches the leader read
//! that overlap the window or leave a gap.

use super::test_support::{ack, log, view, Fetch, LIMITS};
use super::*;
use RecordState::{Acquired as Held, Archived, Available};

/// Two ranges of [0, 9] released once: back to Available with one delivery each.
fn released_twice_over(batch_size: i32) -> SharePartition {
    let mut sp = SharePartition::new(0);
    Fetch::by("a").batch_size(batch_size).run(&mut sp, &log(&[(0, 4), (5, 9)]), &LIMITS);
    assert_eq!(sp.release_member("a", &LIMITS), 10);
    sp
}

#[test]
fn new_records_are_acquired_as_one_in_flight_batch() {
    let mut sp = SharePartition::new(0);
    let got = Fetch::by("a").run(&mut sp, &log(&[(0, 4), (5, 9)]), &LIMITS);
    assert_eq!(got, [(0, 9, 1)]);
    assert_eq!(view(&sp), [(0, 9, Held, 1, "a")]);
    assert_eq!((sp.start_offset, sp.next_offset, sp.in_flight_count(), sp.acquired_count()), (0, 10, 10, 10));
    assert_eq!(sp.held_by("a"), [(0, 9)]);
    assert_eq!(sp.next_deadline(), Some(30_000));
    assert_eq!(sp.totals.acquired, 10);
}

/// Kafka's `createBatches`: more than BatchSize records are cut at log batch boundaries
/// into in-flight batches of at least BatchSize, each reported on its own.
#[test]
fn batch_size_cuts_new_records_at_log_batch_boundaries() {
    let mut sp = SharePartition::new(0);
    let got = Fetch::by("a").batch_size(7).run(&mut sp, &log(&[(0, 4), (5, 9), (10, 14)]), &LIMITS);
    assert_eq!(got, [(0, 9, 1), (10, 14, 1)]);
    assert_eq!(view(&sp), [(0, 9, Held, 1, "a"), (10, 14, Held, 1, "a")], "batches never join");
}

/// Kafka's `lastOffsetFromBatchWithRequestOffset`: MaxRecords ends at a batch end.
#[test]
fn max_records_rounds_up_to_the_batch_end() {
    let mut sp = SharePartition::new(0);
    assert_eq!(Fetch::by("a").max(5).run(&mut sp, &log(&[(0, 9), (10, 19)]), &LIMITS), [(0, 9, 1)]);
    assert_eq!(sp.next_offset, 10);
}

/// ShareAcquireMode record_limit: exactly MaxRecords; the batch's tail enters the window
/// Available with no delivery, and the next fetch takes it as a first delivery.
#[test]
fn record_limit_mode_acquires_exactly_max_records() {
    let mut sp = SharePartition::new(0);
    let got = Fetch::by("a").max(5).record_limit().run(&mut sp, &log(&[(0, 9), (10, 19)]), &LIMITS);
    assert_eq!(got, [(0, 4, 1)]);
    assert_eq!(view(&sp), [(0, 4, Held, 1, "a"), (5, 9, Available, 0, "")]);
    assert_eq!(sp.next_offset, 10);
    let got = Fetch::by("b").max(3).record_limit().run(&mut sp, &log(&[(10, 19)]), &LIMITS);
    assert_eq!(got, [(5, 7, 1)]);
}

#[test]
fn redeliveries_come_before_new_records() {
    let mut sp = SharePartition::new(0);
    Fetch::by("a").run(&mut sp, &log(&[(0, 9)]), &LIMITS);
    ack(&mut sp, "a", 0, 9, &[2]).unwrap();
    let got = Fetch::by("b").run(&mut sp, &log(&[(10, 19)]), &LIMITS);
    assert_eq!(got, [(0, 9, 2), (10, 19, 1)]);
    assert_eq!((sp.totals.acquired, sp.totals.redelivered), (30, 10));
}

/// Kafka acquires a whole available in-flight batch once it starts on it, and checks
/// MaxRecords only between batches.
#[test]
fn redelivery_takes_whole_batches_past_max_records() {
    let mut sp = released_twice_over(5);
    assert_eq!(Fetch::by("b").max(3).run(&mut sp, &[], &LIMITS), [(0, 4, 2)]);
    assert_eq!(view(&sp)[1], (5, 9, Available, 1, ""));
}

/// `lastOffsetAndMaxRecordsToAcquire`: at `group.share.partition.max.record.locks` nothing
/// new joins, yet available records in the window are still redelivered.
#[test]
fn full_window_acquires_nothing_new_but_still_redelivers() {
    let limits = Limits { max_in_flight_records: 10, ..LIMITS };
    let mut sp = SharePartition::new(0);
    let more = log(&[(0, 9), (10, 19)]);
    assert_eq!(Fetch::by("a").max(10).run(&mut sp, &more, &limits), [(0, 9, 1)]);
    assert_eq!(Fetch::by("b").run(&mut sp, &more, &limits), []);
    ack(&mut sp, "a", 0, 4, &[2]).unwrap();
    assert_eq!(Fetch::by("b").run(&mut sp, &more, &limits), [(0, 4, 2)]);
    assert_eq!(sp.next_offset, 10);
}

/// The window's headroom caps the record budget; the last batch is still taken whole.
#[test]
fn window_headroom_caps_new_records_at_a_batch_end() {
    let limits = Limits { max_in_flight_records: 10, ..LIMITS };
    let mut sp = SharePartition::new(0);
    let got = Fetch::by("a").run(&mut sp, &log(&[(0, 7), (8, 15), (16, 23)]), &limits);
    assert_eq!(got, [(0, 15, 1)]);
    assert_eq!(sp.in_flight_count(), 16);
}

/// Kafka's `throttleRecordsDeliveryLimit` (limit 5 → from 3 deliveries): a batch delivered
/// three times goes out in halves (`size >> 1`), and a record on its last attempt alone.
#[test]
fn throttling_halves_a_batch_then_goes_one_by_one() {
    let mut sp = SharePartition::new(0);
    Fetch::by("a").run(&mut sp, &log(&[(0, 7)]), &LIMITS);
    for _ in 0..2 {
        sp.release_member("a", &LIMITS);
        Fetch::by("a").run(&mut sp, &[], &LIMITS);
    }
    sp.release_member("a", &LIMITS);
    assert_eq!(view(&sp), [(0, 7, Available, 3, "")]);
    assert_eq!(Fetch::by("b").run(&mut sp, &log(&[(8, 9)]), &LIMITS), [(0, 3, 4)], "throttled: nothing new");
    assert_eq!(Fetch::by("c").run(&mut sp, &log(&[(8, 9)]), &LIMITS), [(4, 7, 4)]);
    sp.release_member("b", &LIMITS);
    sp.release_member("c", &LIMITS);
    assert_eq!(Fetch::by("d").run(&mut sp, &[], &LIMITS), [(0, 0, 5)]);
    assert_eq!(Fetch::by("e").run(&mut sp, &[], &LIMITS), [(1, 1, 5)]);
}

/// Kafka stops a fetch at a throttled batch that does not come first.
#[test]
fn a_throttled_batch_ends_a_fetch_that_took_something() {
    let mut sp = released_twice_over(4);
    Fetch::by("b").max(1).run(&mut sp, &[], &LIMITS);
    for _ in 0..2 {
        assert_eq!(Fetch::by("c").run(&mut sp, &[], &LIMITS).len(), 1);
        sp.release_member("c", &LIMITS);
    }
    sp.release_member("b", &LIMITS);
    assert_eq!(view(&sp), [(0, 4, Available, 2, ""), (5, 9, Available, 3, "")]);
    assert_eq!(Fetch::by("d").run(&mut sp, &log(&[(10, 14)]), &LIMITS), [(0, 4, 3)]);
    assert_eq!(Fetch::by("e").run(&mut sp, &log(&[(10, 14)]), &LIMITS), [(5, 6, 4)]);
    assert_eq!(sp.next_offset, 10);
}

/// read_committed (`maybeFilterAbortedTransactionalAcquiredRecords`): an aborted batch is
/// archived and cut out of what is reported; at the head, the start offset moves past it.
#[test]
fn aborted_batches_are_archived_not_handed_out() {
    let mut batches = log(&[(0, 4), (5, 9), (10, 14)]);
    batches[1].aborted = true;
    let mut sp = SharePartition::new(0);
    assert_eq!(Fetch::by("a").run(&mut sp, &batches, &LIMITS), [(0, 4, 1), (10, 14, 1)]);
    assert_eq!(view(&sp), [(0, 4, Held, 1, "a"), (5, 9, Archived, 0, ""), (10, 14, Held, 1, "a")]);
    assert_eq!(sp.totals.acquired, 10);

    batches[0].aborted = true;
    let mut sp = SharePartition::new(0);
    assert_eq!(Fetch::by("a").run(&mut sp, &batches, &LIMITS), [(10, 14, 1)]);
    assert_eq!((sp.start_offset, sp.next_offset), (10, 15));
}

/// The leader's read may start below `next_offset`: what is in flight is skipped, a batch
/// straddling it is taken from it on.
#[test]
fn batches_already_in_flight_are_skipped() {
    let mut sp = SharePartition::new(0);
    Fetch::by("a").run(&mut sp, &log(&[(0, 9)]), &LIMITS);
    assert_eq!(Fetch::by("b").run(&mut sp, &log(&[(0, 9), (10, 19)]), &LIMITS), [(10, 19, 1)]);
    assert_eq!(Fetch::by("c").run(&mut sp, &log(&[(15, 24)]), &LIMITS), [(20, 24, 1)]);
    assert_eq!(sp.held_by("a"), [(0, 9)]);
}

/// Batches are used only as given: the first gap ends what is acquired.
#[test]
fn a_gap_in_the_batches_ends_what_is_acquired() {
    let mut sp = SharePartition::new(10);
    assert_eq!(Fetch::by("a").run(&mut sp, &log(&[(12, 19)]), &LIMITS), []);
    assert_eq!(sp, SharePartition::new(10));
    assert_eq!(Fetch::by("a").run(&mut sp, &log(&[(10, 14), (16, 19)]), &LIMITS), [(10, 14, 1)]);
    assert_eq!(sp.next_offset, 15);
}

/// Records below the log start offset are gone (Kafka's `updateCacheAndOffsets`).
#[test]
fn a_log_start_past_the_window_moves_it() {
    let mut sp = SharePartition::new(0);
    Fetch::by("a").run(&mut sp, &log(&[(0, 9)]), &LIMITS);
    let fetch = Fetch { log_start: 15, ..Fetch::by("b") };
    assert_eq!(fetch.run(&mut sp, &log(&[(15, 19)]), &LIMITS), [(15, 19, 1)]);
    assert_eq!((sp.start_offset, sp.next_offset), (15, 20));
    assert_eq!(sp.held_by("a"), []);
}

#[test]
fn no_record_budget_acquires_nothing() {
    let mut sp = SharePartition::new(0);
    assert_eq!(Fetch::by("a").max(0).run(&mut sp, &log(&[(0, 9)]), &LIMITS), []);
    assert_eq!(sp, SharePartition::new(0));
}

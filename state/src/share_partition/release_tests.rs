//! Records leaving their holder without an acknowledgement, against Kafka 4.4.0's
//! `releaseAcquiredRecords` and acquisition lock timeout, and the window moving under the
//! group (`updateCacheAndOffsets`, an offset reset); plus ranges joining again once their
//! records agree.

use super::test_support::{ack, log, view, Fetch, LIMITS};
use super::*;
use RecordState::{Acquired as Held, Available};

/// [0, 4] held by "a" until 1 000, [5, 9] by "b" until 2 000.
fn two_holders() -> SharePartition {
    let mut sp = SharePartition::new(0);
    Fetch { deadline_ms: 1_000, ..Fetch::by("a") }.run(&mut sp, &log(&[(0, 4)]), &LIMITS);
    Fetch { deadline_ms: 2_000, ..Fetch::by("b") }.run(&mut sp, &log(&[(5, 9)]), &LIMITS);
    sp
}

#[test]
fn release_member_frees_only_its_records_keeping_counts() {
    let mut sp = two_holders();
    assert_eq!(sp.release_member("a", &LIMITS), 5);
    assert_eq!(view(&sp), [(0, 4, Available, 1, ""), (5, 9, Held, 1, "b")]);
    assert_eq!(Fetch::by("c").run(&mut sp, &[], &LIMITS), [(0, 4, 2)]);
    assert_eq!(sp.release_member("nobody", &LIMITS), 0);
}

#[test]
fn release_member_archives_at_the_delivery_limit() {
    let limits = Limits { delivery_count_limit: 2, ..LIMITS };
    let mut sp = two_holders();
    sp.release_member("a", &limits);
    Fetch::by("a").run(&mut sp, &[], &limits);
    assert_eq!(sp.release_member("a", &limits), 5);
    assert_eq!((sp.start_offset, sp.totals.archived_by_limit), (5, 5));
}

/// The lock timeout fires at the deadline, not before.
#[test]
fn expire_frees_records_whose_deadline_passed() {
    let mut sp = two_holders();
    assert_eq!(sp.next_deadline(), Some(1_000));
    assert_eq!(sp.expire(999, &LIMITS), 0);
    assert_eq!(sp.expire(1_000, &LIMITS), 5);
    assert_eq!(view(&sp)[0], (0, 4, Available, 1, ""));
    assert_eq!(sp.next_deadline(), Some(2_000));
}

#[test]
fn expire_archives_at_the_delivery_limit_and_moves_the_start() {
    let limits = Limits { delivery_count_limit: 2, ..LIMITS };
    let mut sp = two_holders();
    sp.expire(1_000, &limits);
    Fetch { deadline_ms: 3_000, ..Fetch::by("c") }.run(&mut sp, &[], &limits);
    assert_eq!(sp.expire(3_000, &limits), 10);
    assert_eq!(view(&sp), [(5, 9, Available, 1, "")]);
    assert_eq!(sp.start_offset, 5);
}

#[test]
fn log_start_moved_forgets_records_below_it() {
    let mut sp = two_holders();
    sp.log_start_moved(3);
    assert_eq!(view(&sp), [(3, 4, Held, 1, "a"), (5, 9, Held, 1, "b")]);
    let before = sp.clone();
    sp.log_start_moved(2);
    assert_eq!(sp, before, "a log start at or below the start offset changes nothing");
    sp.log_start_moved(20);
    assert_eq!((sp.start_offset, sp.next_offset, sp.records.len()), (20, 20, 0));
}

#[test]
fn reset_starts_over_keeping_totals() {
    let mut sp = two_holders();
    sp.reset(100);
    assert_eq!((sp.start_offset, sp.next_offset, sp.records.len()), (100, 100, 0));
    assert_eq!(sp.totals.acquired, 10);
}

/// Pieces of one batch that agree again join; pieces of two batches never do.
#[test]
fn ranges_join_again_within_their_batch_only() {
    let mut sp = SharePartition::new(0);
    Fetch::by("a").run(&mut sp, &log(&[(0, 9)]), &LIMITS);
    sp.acknowledge("a", &[AckBatch { first_offset: 3, last_offset: 5, types: vec![4] }], 500, 1_000, &LIMITS)
        .unwrap();
    assert_eq!(sp.records.len(), 3);
    sp.release_member("a", &LIMITS);
    assert_eq!(view(&sp), [(0, 9, Available, 1, "")]);
    let mut sp = two_holders();
    ack(&mut sp, "a", 0, 4, &[4]).unwrap();
    sp.release_member("a", &LIMITS);
    sp.release_member("b", &LIMITS);
    assert_eq!(view(&sp), [(0, 4, Available, 1, ""), (5, 9, Available, 1, "")]);
}

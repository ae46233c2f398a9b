//! Acknowledgement against Kafka 4.4.0's `SharePartition.acknowledge`: each type's
//! transition, per-offset acknowledgements splitting a batch, the start offset moving,
//! Kafka's INVALID_RECORD_STATE and INVALID_REQUEST refusals with their messages, and the
//! partition left exactly as it was when any batch fails.

use kafka_compat::error_code::{INVALID_RECORD_STATE, INVALID_REQUEST};

use super::test_support::{ack, log, view, Fetch, LIMITS};
use super::*;
use RecordState::{Acknowledged, Acquired as Held, Archived, Available};

/// [0, 9] acquired by "a" in one in-flight batch.
fn held_by_a() -> SharePartition {
    let mut sp = SharePartition::new(0);
    Fetch::by("a").run(&mut sp, &log(&[(0, 9)]), &LIMITS);
    sp
}

/// Acknowledges and expects a refusal that leaves the partition as it was.
fn refused(sp: &mut SharePartition, member: &str, batches: &[AckBatch], limits: &Limits) -> AckError {
    let before = sp.clone();
    let err = sp.acknowledge(member, batches, 0, 30_000, limits).unwrap_err();
    assert_eq!(*sp, before, "a refused acknowledgement changes nothing");
    err
}

fn batch(first_offset: i64, last_offset: i64, types: &[u8]) -> AckBatch {
    AckBatch { first_offset, last_offset, types: types.to_vec() }
}

fn error(code: i16, message: &str) -> AckError {
    AckError { code, message: message.to_string() }
}

#[test]
fn accept_finishes_records_and_moves_the_start() {
    let mut sp = held_by_a();
    ack(&mut sp, "a", 0, 9, &[1]).unwrap();
    assert_eq!((sp.start_offset, sp.next_offset, sp.records.len()), (10, 10, 0));
    assert_eq!(sp.totals.accepted, 10);
}

#[test]
fn a_partial_ack_leaves_the_rest_acquired() {
    let mut sp = held_by_a();
    ack(&mut sp, "a", 0, 2, &[1]).unwrap();
    assert_eq!(sp.start_offset, 3);
    assert_eq!(view(&sp), [(3, 9, Held, 1, "a")]);
}

/// One type per offset: the in-flight batch is tracked per offset (Kafka's offsetState);
/// here the range splits where the types differ.
#[test]
fn per_offset_acks_split_the_range() {
    let mut sp = held_by_a();
    ack(&mut sp, "a", 0, 4, &[1, 2, 3, 0, 1]).unwrap();
    assert_eq!(sp.start_offset, 1);
    assert_eq!(
        view(&sp),
        [
            (1, 1, Available, 1, ""),
            (2, 3, Archived, 1, ""),
            (4, 4, Acknowledged, 1, ""),
            (5, 9, Held, 1, "a")
        ]
    );
    assert_eq!((sp.totals.accepted, sp.totals.released, sp.totals.rejected), (2, 1, 1));
}

/// `tryUpdateState(AVAILABLE)`: a release at the delivery limit archives instead.
#[test]
fn release_at_the_delivery_limit_archives() {
    let limits = Limits { delivery_count_limit: 2, ..LIMITS };
    let mut sp = SharePartition::new(0);
    Fetch::by("a").run(&mut sp, &log(&[(0, 9)]), &limits);
    sp.acknowledge("a", &[batch(0, 9, &[2])], 0, 30_000, &limits).unwrap();
    assert_eq!(view(&sp), [(0, 9, Available, 1, "")]);
    Fetch::by("a").run(&mut sp, &[], &limits);
    sp.acknowledge("a", &[batch(0, 9, &[2])], 0, 30_000, &limits).unwrap();
    assert_eq!((sp.start_offset, sp.records.len(), sp.totals.archived_by_limit), (10, 0, 10));
}

#[test]
fn gap_archives() {
    let mut sp = held_by_a();
    ack(&mut sp, "a", 0, 9, &[0]).unwrap();
    assert_eq!((sp.start_offset, sp.records.len()), (10, 0));
}

/// Renew (4) keeps the records acquired and restarts the lock from now.
#[test]
fn renew_extends_the_lock() {
    let mut sp = held_by_a();
    sp.acknowledge("a", &[batch(0, 9, &[4])], 20_000, 30_000, &LIMITS).unwrap();
    assert_eq!(sp.next_deadline(), Some(50_000));
    assert_eq!(sp.expire(40_000, &LIMITS), 0);
    assert_eq!(view(&sp), [(0, 9, Held, 1, "a")]);
}

#[test]
fn renew_when_the_group_disallows_it_is_refused() {
    let limits = Limits { renew_enabled: false, ..LIMITS };
    let err = refused(&mut held_by_a(), "a", &[batch(0, 9, &[4])], &limits);
    assert_eq!(err, error(INVALID_RECORD_STATE, "Renewing acquisition locks is not enabled for the group."));
}

#[test]
fn ack_by_a_non_owner_is_refused() {
    let err = refused(&mut held_by_a(), "b", &[batch(0, 9, &[1])], &LIMITS);
    assert_eq!(err, error(INVALID_RECORD_STATE, "Member is not the owner of batch record"));
    let mut sp = held_by_a();
    ack(&mut sp, "a", 5, 5, &[1]).unwrap();
    let err = refused(&mut sp, "b", &[batch(7, 7, &[1])], &LIMITS);
    assert_eq!(err, error(INVALID_RECORD_STATE, "Member is not the owner of offset"));
}

#[test]
fn ack_of_records_not_acquired_is_refused() {
    let mut sp = held_by_a();
    ack(&mut sp, "a", 0, 9, &[2]).unwrap();
    let err = refused(&mut sp, "a", &[batch(0, 9, &[1])], &LIMITS);
    assert_eq!(
        err,
        error(
            INVALID_RECORD_STATE,
            "The batch cannot be acknowledged. The batch is not in the acquired state."
        )
    );
    let mut sp = held_by_a();
    ack(&mut sp, "a", 5, 5, &[1]).unwrap();
    let err = refused(&mut sp, "a", &[batch(5, 6, &[1])], &LIMITS);
    assert_eq!(
        err,
        error(INVALID_RECORD_STATE, "The offset cannot be acknowledged. The offset is not acquired.")
    );
}

/// `fetchSubMapForAcknowledgementBatch`'s refusals of offsets outside the window.
#[test]
fn ack_outside_the_window_is_refused() {
    let err = refused(&mut held_by_a(), "a", &[batch(10, 12, &[1])], &LIMITS);
    assert_eq!(
        err,
        error(
            INVALID_REQUEST,
            "Batch record not found. The first offset in request is past acquired records."
        )
    );
    let err = refused(&mut held_by_a(), "a", &[batch(8, 12, &[1])], &LIMITS);
    assert_eq!(
        err,
        error(
            INVALID_REQUEST,
            "Batch record not found. The last offset in request is past acquired records."
        )
    );
    let err = refused(&mut SharePartition::new(0), "a", &[batch(0, 0, &[1])], &LIMITS);
    assert_eq!(
        err,
        error(
            INVALID_RECORD_STATE,
            "Batch record not found. The request batch offsets are not found in the cache."
        )
    );
}

/// Kafka skips what is already below the start offset.
#[test]
fn ack_below_the_start_offset_is_skipped() {
    let mut sp = held_by_a();
    ack(&mut sp, "a", 0, 4, &[1]).unwrap();
    let before = sp.clone();
    ack(&mut sp, "a", 0, 4, &[1]).unwrap();
    assert_eq!(sp, before);
    ack(&mut sp, "a", 3, 6, &[1]).unwrap();
    assert_eq!(sp.start_offset, 7);
}

/// Kafka rolls back the partition's earlier batches when a later one fails.
#[test]
fn a_failing_batch_rolls_back_the_earlier_ones() {
    let mut sp = held_by_a();
    let err = refused(&mut sp, "a", &[batch(0, 4, &[1]), batch(5, 12, &[1])], &LIMITS);
    assert_eq!(err.code, INVALID_REQUEST);
    let err = refused(&mut sp, "a", &[batch(0, 4, &[1]), batch(4, 6, &[1])], &LIMITS);
    assert_eq!(
        err,
        error(INVALID_RECORD_STATE, "The offset cannot be acknowledged. The offset is not acquired.")
    );
}

/// KafkaApis' request checks and `fetchAckTypeMapForBatch`'s type check.
#[test]
fn malformed_batches_are_invalid_requests() {
    let err = refused(&mut held_by_a(), "a", &[batch(0, 1, &[1, 9])], &LIMITS);
    assert_eq!(err, error(INVALID_REQUEST, "Invalid acknowledge type: [1, 9]"));
    for batches in [vec![batch(0, 2, &[1, 1])], vec![batch(0, 2, &[])], vec![batch(3, 2, &[1])]] {
        assert_eq!(refused(&mut held_by_a(), "a", &batches, &LIMITS).code, INVALID_REQUEST);
    }
    let descending = [batch(5, 6, &[1]), batch(0, 1, &[1])];
    assert_eq!(refused(&mut held_by_a(), "a", &descending, &LIMITS).code, INVALID_REQUEST);
}

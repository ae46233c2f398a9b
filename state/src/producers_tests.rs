//! Tests of the sequence rules (Kafka's ProducerAppendInfo, KIP-98) and of the live
//! producer id registry: allocation, eviction at the limit, expiry.

use super::*;

fn seq(epoch: i16, first_seq: i32, records: i32) -> BatchSeq {
    BatchSeq { producer_id: 7, epoch, first_seq, last_seq: increment_sequence(first_seq, records - 1) }
}

fn meta(batch: &BatchSeq, base_offset: i64) -> BatchMeta {
    let records = i64::from(batch.last_seq.wrapping_sub(batch.first_seq)) + 1;
    BatchMeta {
        first_seq: batch.first_seq,
        last_seq: batch.last_seq,
        base_offset,
        last_offset: base_offset + records - 1,
        append_time_ms: base_offset,
    }
}

/// A partition state that appended `batches` back to back from offset 0.
fn state_after(batches: &[BatchSeq]) -> ProducerPartition {
    let mut state = ProducerPartition::default();
    let mut offset = 0;
    for b in batches {
        assert_eq!(check(Some(&state), b), Verdict::Append, "{b:?}");
        let m = meta(b, offset);
        offset = m.last_offset + 1;
        state.record(b, m);
    }
    state
}

fn code(verdict: Verdict) -> i16 {
    match verdict {
        Verdict::Reject { error_code, .. } => error_code,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn unknown_producer_accepts_any_sequence() {
    // No state (first write, or expired): accepted, as Kafka ≥ 2.5 does; not UNKNOWN_PRODUCER_ID.
    assert_eq!(check(None, &seq(0, 0, 1)), Verdict::Append);
    assert_eq!(check(None, &seq(3, 12_345, 1)), Verdict::Append);
}

#[test]
fn duplicate_returns_the_original_batch() {
    let state = state_after(&[seq(0, 0, 3), seq(0, 3, 2)]);
    assert_eq!(check(Some(&state), &seq(0, 0, 3)), Verdict::Duplicate(meta(&seq(0, 0, 3), 0)));
    assert_eq!(check(Some(&state), &seq(0, 3, 2)), Verdict::Duplicate(meta(&seq(0, 3, 2), 3)));
    // Same first sequence, other length: not a duplicate, and not in sequence either.
    assert_eq!(code(check(Some(&state), &seq(0, 3, 1))), error_code::OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_eq!(check(Some(&state), &seq(0, 5, 1)), Verdict::Append);
}

#[test]
fn gap_and_stale_epoch_are_refused_and_new_epoch_starts_at_zero() {
    let state = state_after(&[seq(2, 0, 3)]);
    assert_eq!(code(check(Some(&state), &seq(2, 4, 1))), error_code::OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_eq!(code(check(Some(&state), &seq(1, 3, 1))), error_code::INVALID_PRODUCER_EPOCH);
    // A duplicate from an older epoch is fenced, not answered.
    assert_eq!(code(check(Some(&state), &seq(1, 0, 3))), error_code::INVALID_PRODUCER_EPOCH);
    assert_eq!(check(Some(&state), &seq(3, 0, 1)), Verdict::Append);
    assert_eq!(code(check(Some(&state), &seq(3, 3, 1))), error_code::OUT_OF_ORDER_SEQUENCE_NUMBER);
}

#[test]
fn sequences_wrap_after_i32_max_as_in_kafka() {
    assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
    assert_eq!(increment_sequence(i32::MAX, 1), 0);
    let state = state_after(&[seq(0, i32::MAX - 2, 3)]);
    assert_eq!(state.batches[0].last_seq, i32::MAX);
    assert_eq!(check(Some(&state), &seq(0, 0, 2)), Verdict::Append);
    let wrapped = state_after(&[seq(0, i32::MAX - 1, 4)]);
    assert_eq!(wrapped.batches[0].last_seq, 1);
    assert_eq!(check(Some(&wrapped), &seq(0, 2, 1)), Verdict::Append);
}

#[test]
fn only_the_last_five_batches_are_remembered() {
    let batches: Vec<BatchSeq> = (0..6).map(|i| seq(0, i, 1)).collect();
    let state = state_after(&batches);
    assert_eq!(state.batches.len(), limits::PRODUCER_BATCHES_KEPT);
    assert!(matches!(check(Some(&state), &seq(0, 1, 1)), Verdict::Duplicate(_)));
    // The sixth-newest fell out: its retry is out of order, as in Kafka.
    assert_eq!(code(check(Some(&state), &seq(0, 0, 1))), error_code::OUT_OF_ORDER_SEQUENCE_NUMBER);
}

#[test]
fn pending_sees_earlier_appends_of_the_same_entry() {
    let producers = Producers::default();
    let mut pending = Pending::default();
    let original = seq(0, 0, 2);
    assert_eq!(pending.check(&producers, "t", 0, &original), Verdict::Append);
    assert!(pending.is_new(&producers, 7));
    pending.record(&producers, "t", 0, &original, meta(&original, 10));
    // The retry queued behind it is a duplicate; the next batch follows; other partitions
    // are independent.
    assert_eq!(pending.check(&producers, "t", 0, &original), Verdict::Duplicate(meta(&original, 10)));
    assert_eq!(pending.check(&producers, "t", 0, &seq(0, 2, 1)), Verdict::Append);
    assert_eq!(pending.check(&producers, "t", 1, &seq(0, 9, 1)), Verdict::Append);
    assert_eq!((pending.new_producer_ids(), pending.is_new(&producers, 7)), (1, false));
    let mut committed = producers.clone();
    committed.record_pending(pending, 55);
    assert_eq!(committed.live[&7].last_active_ms, 55);
    assert_eq!(committed.idle_order.iter().copied().collect::<Vec<_>>(), vec![(55, 7)]);
    assert_eq!(committed.partition(7, "t", 0).unwrap().batches.len(), 1);
}

fn init_op(now_ms: i64, live_max: u64) -> Allocation {
    Allocation { now_ms, producer_ids_live_max: live_max, eviction_idle_ms_min: 1_000 }
}

#[test]
fn a_full_registry_evicts_the_least_recently_used_idle_producer_or_refuses() {
    let mut producers = Producers::default();
    assert_eq!(producers.allocate(&init_op(0, 2)), Ok(0));
    assert_eq!(producers.allocate(&init_op(500, 2)), Ok(1));
    // Full, and nobody idle for 1 s yet: refused, nothing changes.
    assert!(producers.allocate(&init_op(900, 2)).is_err());
    assert_eq!(producers.next_producer_id, 2);
    // Producer 0 has been idle for 1 s: it makes room; ids are never reused.
    assert_eq!(producers.allocate(&init_op(1_000, 2)), Ok(2));
    assert_eq!(producers.live.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(producers.idle_order.len(), producers.live.len());
}

#[test]
fn expiry_counts_and_removes_the_same_producers() {
    let mut producers = Producers::default();
    for now in [0, 10, 20, 30] {
        producers.allocate(&init_op(now, 100)).unwrap();
    }
    assert_eq!(producers.expirable(40, 20), 3);
    let (now_ms, expiration_ms) = (40, 20);
    assert_eq!(producers.expire(now_ms, expiration_ms), 3);
    assert_eq!(producers.live.keys().copied().collect::<Vec<_>>(), vec![3]);
    assert_eq!(producers.expire(now_ms, expiration_ms), 0);
}

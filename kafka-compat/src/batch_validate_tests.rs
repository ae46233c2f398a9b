//! Tests for [`validate`] (the leader's `LogValidator`) and [`find_record`] on batches of every
//! codec built by an independent encoder (`kafka-protocol`'s), and on hostile ones built from
//! them: bodies that do not decompress, record counts that lie, misframed records, bombs.

use super::*;
use bytes::BytesMut;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions};

const CODECS: [Compression; 5] =
    [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

const BUDGET: Budget = Budget { batch_bytes_max: 1 << 20, inflated_bytes_max: 1 << 20 };

fn record(offset: i64, timestamp: i64, key: Option<&str>, value: &[u8]) -> Record {
    crate::testing::record(offset, timestamp, key.map(str::as_bytes), value)
}

fn encode(records: &[Record], compression: Compression) -> Bytes {
    let mut buf = BytesMut::new();
    let opts = RecordEncodeOptions { version: 2, compression };
    RecordBatchEncoder::encode(&mut buf, records, &opts).expect("encode");
    buf.freeze()
}

/// Four records; the highest timestamp (30) first at offset delta 1, a keyless one at 2.
fn four(compression: Compression) -> Bytes {
    encode(
        &[
            record(0, 10, Some("a"), b"v0"),
            record(1, 30, Some("b"), b"v1"),
            record(2, 20, None, b"v2"),
            record(3, 30, Some("d"), b"v3"),
        ],
        compression,
    )
}

/// `batch` with its header field at `at` set to `value` and the CRC recomputed.
fn with_i32(batch: &[u8], at: usize, value: i32) -> Bytes {
    let mut b = BytesMut::from(batch);
    b[at..at + 4].copy_from_slice(&value.to_be_bytes());
    recrc(b)
}

fn recrc(mut b: BytesMut) -> Bytes {
    let crc = compute_crc(&b);
    b[OFFSET_CRC..OFFSET_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    b.freeze()
}

/// `batch` with its records section replaced by `body` (lengths and CRC fixed up).
fn with_body(batch: &[u8], body: &[u8]) -> Bytes {
    let mut b = BytesMut::from(&batch[..BATCH_HEADER_BYTES]);
    b.extend_from_slice(body);
    let len = (b.len() - BATCH_LOG_OVERHEAD_BYTES) as i32;
    b[OFFSET_BATCH_LENGTH..OFFSET_BATCH_LENGTH + 4].copy_from_slice(&len.to_be_bytes());
    recrc(b)
}

#[test]
fn every_codec_validates_and_finds_the_max_timestamp_and_keyless_records() {
    for codec in CODECS {
        let bytes = four(codec);
        let v = validate(&bytes, BUDGET).unwrap_or_else(|e| panic!("{codec:?}: {e}"));
        assert_eq!(v.batches.len(), 1);
        let batch = &v.batches[0];
        assert_eq!(batch.max_timestamp_offset_delta, 1, "{codec:?}: the first record of the max");
        assert_eq!(batch.keyless_records, vec![2], "{codec:?}");
        assert_eq!(v.inflated_bytes > 0, codec != Compression::None, "{codec:?}");
    }
}

#[test]
fn a_compressed_body_that_does_not_decompress_is_corrupt_message() {
    for codec in &CODECS[1..] {
        let garbage = with_body(&four(*codec), &[0x5a; 64]);
        let err = validate(&garbage, BUDGET).unwrap_err();
        assert_eq!(err.error_code(), error_code::CORRUPT_MESSAGE, "{codec:?}: {err}");
    }
}

#[test]
fn a_truncated_compressed_body_is_corrupt_message() {
    for codec in &CODECS[1..] {
        let good = four(*codec);
        let cut = with_body(&good, &good[BATCH_HEADER_BYTES..good.len() - 3]);
        let err = validate(&cut, BUDGET).unwrap_err();
        assert_eq!(err.error_code(), error_code::CORRUPT_MESSAGE, "{codec:?}: {err}");
    }
}

#[test]
fn a_record_count_that_lies_is_corrupt_message() {
    for codec in CODECS {
        for count in [3, 5, 1_000_000, i32::MAX] {
            let lying = with_i32(&four(codec), OFFSET_RECORD_COUNT, count);
            let lying = with_i32(&lying, OFFSET_LAST_OFFSET_DELTA, count - 1);
            let err = validate(&lying, BUDGET).unwrap_err();
            assert_eq!(err.error_code(), error_code::CORRUPT_MESSAGE, "{codec:?} count {count}: {err}");
        }
    }
}

#[test]
fn a_misframed_record_is_refused() {
    let good = four(Compression::None);
    let mut body = BytesMut::from(&good[BATCH_HEADER_BYTES..]);
    body[0] = body[0].wrapping_add(2); // the first record's length, one larger (zigzag)
    let err = validate(&with_body(&good, &body), BUDGET).unwrap_err();
    assert_eq!(err.error_code(), error_code::CORRUPT_MESSAGE, "{err}");
    let mut body = BytesMut::from(&good[BATCH_HEADER_BYTES..]);
    body[3] = 4; // the first record's offset delta: 2 instead of 0
    let err = validate(&with_body(&good, &body), BUDGET).unwrap_err();
    assert_eq!(err.error_code(), error_code::INVALID_RECORD, "{err}");
}

#[test]
fn a_decompression_bomb_is_refused_past_the_budget() {
    let zeros = vec![0u8; 4 << 20];
    for codec in &CODECS[1..] {
        let bomb = encode(&[record(0, 1, Some("k"), &zeros)], *codec);
        assert!(bomb.len() < 1 << 20, "{codec:?} compresses 4 MiB of zeros to {} bytes", bomb.len());
        let err = validate(&bomb, BUDGET).unwrap_err();
        assert_eq!(err, BatchError::InflatedTooLarge, "{codec:?}");
        assert_eq!(err.error_code(), error_code::MESSAGE_TOO_LARGE);
        let roomy = Budget { inflated_bytes_max: 5 << 20, ..BUDGET };
        assert!(validate(&bomb, roomy).is_ok(), "{codec:?} fits a larger budget");
    }
}

#[test]
fn the_inflation_budget_is_shared_by_the_batches_of_a_record_set() {
    let value = vec![7u8; 600 << 10];
    let one = encode(&[record(0, 1, Some("k"), &value)], Compression::Gzip);
    let mut two = BytesMut::from(&one[..]);
    two.extend_from_slice(&one);
    assert!(validate(&one, BUDGET).is_ok());
    assert_eq!(validate(&two.freeze(), BUDGET).unwrap_err(), BatchError::InflatedTooLarge);
}

#[test]
fn find_record_stops_at_the_first_match_in_every_codec() {
    for codec in CODECS {
        let bytes = four(codec);
        let mut left = 1 << 20;
        let hit = find_record(&bytes, &mut left, |r| r.timestamp >= 20).expect("walks");
        assert_eq!(hit.map(|r| r.offset_delta), Some(1), "{codec:?}");
        let none = find_record(&bytes, &mut left, |r| r.timestamp > 30).expect("walks");
        assert!(none.is_none(), "{codec:?}");
        // What compressed lookups inflate comes off the one budget they share.
        assert_eq!(left < 1 << 20, codec != Compression::None, "{codec:?}: {left}");
    }
    let zeros = vec![0u8; 4 << 20];
    let bomb = encode(&[record(0, 1, Some("k"), &zeros)], Compression::Gzip);
    let mut left = 1 << 20;
    assert_eq!(find_record(&bomb, &mut left, |_| false).unwrap_err(), BatchError::InflatedTooLarge);
    assert_eq!(left, 0, "a lookup past the budget spends all of it");
}

proptest::proptest! {
    /// Any byte flipped in a compressed body (CRC fixed up, so the walker sees it) is refused
    /// or accepted, never a panic; and arbitrary bytes never panic the validator.
    #[test]
    fn flipped_compressed_bodies_never_panic(codec in 1usize..5, pos in 0usize..60, bit in 0u8..8) {
        let good = four(CODECS[codec]);
        let mut body = BytesMut::from(&good[BATCH_HEADER_BYTES..]);
        let at = pos % body.len();
        body[at] ^= 1 << bit;
        let _ = validate(&with_body(&good, &body), BUDGET);
    }
}

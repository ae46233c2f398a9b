//! Tests for record-batch validation and stamping, on batches built by an independent encoder
//! (the `kafka-protocol` crate's), so these do not merely check the parser against itself.

use super::*;
use bytes::BytesMut;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
};

fn record(offset: i64, key: &str, value: &str) -> Record {
    crate::testing::record(offset, 1_700_000_000_000 + offset, Some(key.as_bytes()), value.as_bytes())
}

fn encode(records: &[Record]) -> Bytes {
    let mut buf = BytesMut::new();
    let opts = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, records, &opts).expect("encode");
    buf.freeze()
}

fn three_records() -> Bytes {
    encode(&[record(0, "k0", "v0"), record(1, "k1", "v1"), record(2, "k2", "v2")])
}

#[test]
fn parses_and_validates_a_client_batch() {
    let bytes = three_records();
    let batches = validate_record_set(&bytes, 1 << 20).expect("valid");
    assert_eq!(batches.len(), 1);
    let h = batches[0].header;
    assert_eq!(h.record_count, 3);
    assert_eq!(h.last_offset_delta, 2);
    assert_eq!(h.size_bytes, bytes.len());
    assert_eq!(h.max_timestamp, 1_700_000_000_002);
    assert!(!h.is_transactional() && !h.is_control());
}

#[test]
fn two_concatenated_batches_split() {
    let mut both = BytesMut::from(&three_records()[..]);
    both.extend_from_slice(&encode(&[record(0, "a", "b")]));
    let batches = validate_record_set(&both.freeze(), 1 << 20).expect("valid");
    assert_eq!(batches.len(), 2);
    assert_eq!(batches[1].header.record_count, 1);
}

#[test]
fn flipped_byte_is_a_crc_mismatch() {
    let mut bytes = BytesMut::from(&three_records()[..]);
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    let err = validate_record_set(&bytes.freeze(), 1 << 20).unwrap_err();
    assert!(matches!(err, BatchError::CrcMismatch { .. }), "{err}");
    assert_eq!(err.error_code(), error_code::CORRUPT_MESSAGE);
}

#[test]
fn truncated_batch_is_corrupt() {
    let bytes = three_records();
    for cut in [5, 40, 61, bytes.len() - 1] {
        let err = validate_record_set(&bytes.slice(..cut), 1 << 20).unwrap_err();
        assert_eq!(err.error_code(), error_code::CORRUPT_MESSAGE, "cut at {cut}: {err}");
    }
}

#[test]
fn oversized_batch_is_message_too_large() {
    let bytes = three_records();
    let err = validate_record_set(&bytes, bytes.len() - 1).unwrap_err();
    assert_eq!(err.error_code(), error_code::MESSAGE_TOO_LARGE);
}

#[test]
fn wrong_magic_is_refused() {
    let mut bytes = BytesMut::from(&three_records()[..]);
    bytes[16] = 1;
    let err = validate_record_set(&bytes.freeze(), 1 << 20).unwrap_err();
    assert_eq!(err, BatchError::UnsupportedMagic(1));
}

#[test]
fn stamping_patches_offset_and_epoch_and_keeps_crc_valid() {
    let bytes = three_records();
    let stamped = stamp_batch(
        &bytes,
        BatchStamp { base_offset: 42, partition_leader_epoch: 7, log_append_time_ms: None },
    );
    let h = parse_header(&stamped).expect("header");
    assert_eq!((h.base_offset, h.partition_leader_epoch, h.last_offset()), (42, 7, 44));
    validate_record_set(&stamped, 1 << 20).expect("CRC still valid");
    let mut buf = stamped.clone();
    let set = RecordBatchDecoder::decode(&mut buf).expect("decodes");
    let offsets: Vec<i64> = set.records.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, vec![42, 43, 44]);
}

#[test]
fn log_append_time_rewrites_max_timestamp_and_crc() {
    let stamped = stamp_batch(
        &three_records(),
        BatchStamp { base_offset: 0, partition_leader_epoch: 1, log_append_time_ms: Some(99) },
    );
    let h = parse_header(&stamped).expect("header");
    assert!(h.is_log_append_time());
    assert_eq!(h.max_timestamp, 99);
    validate_record_set(&stamped, 1 << 20).expect("CRC recomputed");
}

proptest::proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
        let _ = validate_record_set(&Bytes::from(data), 1 << 20);
    }

    #[test]
    fn any_single_byte_flip_after_crc_is_detected(pos in 21usize..100, bit in 0u8..8) {
        let bytes = three_records();
        let pos = pos % bytes.len();
        proptest::prop_assume!(pos >= 21);
        let mut bad = BytesMut::from(&bytes[..]);
        bad[pos] ^= 1 << bit;
        proptest::prop_assert!(validate_record_set(&bad.freeze(), 1 << 20).is_err());
    }
}

//! Transaction control batches (KIP-98): the commit or abort marker that ends a transaction in
//! each partition it wrote.
//!
//! Kafka's `EndTransactionMarker` inside a `DefaultRecordBatch`: the batch has the
//! transactional and control attribute bits, base sequence -1 and one record whose key is
//! (version i16 = 0, type i16: 0 abort / 1 commit) and whose value is (version i16 = 0,
//! coordinator epoch i32). Consumers skip these records; read_committed consumers use them to
//! drop aborted data. Building one is pure, so every replica's apply writes identical bytes.

use bytes::{BufMut, Bytes, BytesMut};

use crate::batch::{compute_crc, BATCH_HEADER_BYTES, BATCH_LOG_OVERHEAD_BYTES};

const ATTRIBUTES: i16 = 0x10 | 0x20; // transactional | control
const CONTROL_TYPE_ABORT: i16 = 0;
const CONTROL_TYPE_COMMIT: i16 = 1;

/// Everything a marker records; all of it comes from the log entry that ends the transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub timestamp_ms: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
}

/// The marker's record batch, ready to append.
pub fn control_batch(marker: &Marker) -> Bytes {
    let mut record = BytesMut::with_capacity(32);
    record.put_i8(0); // record attributes
    put_varint(&mut record, 0); // timestamp delta
    put_varint(&mut record, 0); // offset delta
    put_varint(&mut record, 4); // key length
    record.put_i16(0); // key version
    record.put_i16(if marker.commit { CONTROL_TYPE_COMMIT } else { CONTROL_TYPE_ABORT });
    put_varint(&mut record, 6); // value length
    record.put_i16(0); // value version
    record.put_i32(marker.coordinator_epoch);
    put_varint(&mut record, 0); // header count

    let mut out = BytesMut::with_capacity(BATCH_HEADER_BYTES + record.len() + 1);
    out.put_i64(marker.base_offset);
    let length = BATCH_HEADER_BYTES - BATCH_LOG_OVERHEAD_BYTES + varint_len(record.len()) + record.len();
    out.put_i32(length as i32);
    out.put_i32(marker.partition_leader_epoch);
    out.put_i8(2); // magic
    out.put_u32(0); // crc, filled in below
    out.put_i16(ATTRIBUTES);
    out.put_i32(0); // last offset delta
    out.put_i64(marker.timestamp_ms); // base timestamp
    out.put_i64(marker.timestamp_ms); // max timestamp
    out.put_i64(marker.producer_id);
    out.put_i16(marker.producer_epoch);
    out.put_i32(-1); // base sequence
    out.put_i32(1); // record count
    put_varint(&mut out, record.len() as i64);
    out.put_slice(&record);
    let crc = compute_crc(&out);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

/// Reads the control type of a control batch's first record: Some(true) commit, Some(false)
/// abort, None if it is not a well-formed marker.
pub fn marker_is_commit(batch: &[u8]) -> Option<bool> {
    let record = batch.get(BATCH_HEADER_BYTES..)?;
    // length varint, attributes, timestamp delta, offset delta, key length: all one byte here.
    let key = record.get(5..9)?;
    match i16::from_be_bytes([key[2], key[3]]) {
        CONTROL_TYPE_COMMIT => Some(true),
        CONTROL_TYPE_ABORT => Some(false),
        _ => None,
    }
}

fn put_varint(out: &mut BytesMut, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64; // zigzag
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

fn varint_len(value: usize) -> usize {
    let mut v = (value as u64) << 1;
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{parse_header, validate_record_set};

    fn marker(commit: bool) -> Marker {
        Marker {
            base_offset: 42,
            partition_leader_epoch: 3,
            timestamp_ms: 1_700_000_000_000,
            producer_id: 7,
            producer_epoch: 2,
            commit,
            coordinator_epoch: 3,
        }
    }

    #[test]
    fn marker_header_says_control_and_transactional() {
        let batch = control_batch(&marker(true));
        let header = parse_header(&batch).unwrap();
        assert!(header.is_control() && header.is_transactional());
        assert_eq!(header.base_offset, 42);
        assert_eq!(header.last_offset(), 42);
        assert_eq!(header.producer_id, 7);
        assert_eq!(header.producer_epoch, 2);
        assert_eq!(header.base_sequence, -1);
        assert_eq!(header.size_bytes, batch.len());
        assert_eq!(marker_is_commit(&batch), Some(true));
        assert_eq!(marker_is_commit(&control_batch(&marker(false))), Some(false));
    }

    #[test]
    fn marker_crc_verifies() {
        let batch = control_batch(&marker(false));
        let stored = u32::from_be_bytes(batch[17..21].try_into().unwrap());
        assert_eq!(stored, compute_crc(&batch));
        // The validator refuses control batches from clients, by design; it must say so, not
        // report a CRC or framing error.
        let err = validate_record_set(&batch, 1 << 20).unwrap_err();
        assert!(err.to_string().contains("control"), "{err}");
    }

    #[test]
    fn kafka_protocol_decodes_the_marker_as_a_control_record() {
        let batch = control_batch(&marker(true));
        let mut buf = batch.clone();
        let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut buf).expect("decodes");
        assert_eq!(set.records.len(), 1);
        let record = &set.records[0];
        assert!(record.control && record.transactional);
        assert_eq!(record.offset, 42);
        assert_eq!(record.producer_id, 7);
        assert_eq!(record.key.as_deref(), Some(&[0u8, 0, 0, 1][..]));
        assert_eq!(record.value.as_deref(), Some(&[0u8, 0, 0, 0, 0, 3][..]));
    }
}

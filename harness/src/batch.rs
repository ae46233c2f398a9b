//! Record batches built and read by the harness without a real client.
//!
//! The raw client sends batches that a test shapes byte by byte (a flipped CRC, a cut-off tail,
//! an oversized body), so it needs its own encoder: kafka-protocol's v2 `RecordBatchEncoder`,
//! never compressed, non-idempotent (producer id −1, base sequence −1).

use anyhow::{bail, Context, Result};
use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
};

/// Byte position of the CRC field in a v2 batch: baseOffset(8) + batchLength(4) +
/// partitionLeaderEpoch(4) + magic(1).
pub const CRC_POSITION: usize = 17;

/// One record as a test writes it and later expects to read it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRecord {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Bytes)>,
    pub timestamp_ms: i64,
}

impl TestRecord {
    /// A record with a key and a value, no headers.
    pub fn new(key: impl Into<Bytes>, value: impl Into<Bytes>, timestamp_ms: i64) -> Self {
        Self { key: Some(key.into()), value: Some(value.into()), headers: Vec::new(), timestamp_ms }
    }

    fn to_record(&self, offset_delta: i64) -> Record {
        let headers: IndexMap<StrBytes, Option<Bytes>> =
            self.headers.iter().map(|(k, v)| (StrBytes::from_string(k.clone()), Some(v.clone()))).collect();
        Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            timestamp_type: TimestampType::Creation,
            offset: offset_delta,
            // The encoder keeps records in one batch while `offset - sequence` is constant and
            // derives the base sequence from the first record; this yields base sequence −1.
            sequence: offset_delta as i32 - 1,
            timestamp: self.timestamp_ms,
            key: self.key.clone(),
            value: self.value.clone(),
            headers,
        }
    }

    fn from_record(record: &Record) -> Self {
        Self {
            key: record.key.clone(),
            value: record.value.clone(),
            headers: record
                .headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone().unwrap_or_default()))
                .collect(),
            timestamp_ms: record.timestamp,
        }
    }
}

/// Encodes `records` as ONE uncompressed v2 record batch with base offset 0.
pub fn encode_batch(records: &[TestRecord]) -> Result<Bytes> {
    if records.is_empty() {
        bail!("a record batch needs at least one record");
    }
    let records: Vec<Record> = records.iter().enumerate().map(|(i, r)| r.to_record(i as i64)).collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options)?;
    Ok(buf.freeze())
}

/// A record read back from the broker, with the offset the broker assigned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    pub offset: i64,
    pub record: TestRecord,
}

/// Decodes every batch in a fetched `records` blob (CRC checked by the decoder).
pub fn decode_batches(mut bytes: Bytes) -> Result<Vec<StoredRecord>> {
    let sets = RecordBatchDecoder::decode_all(&mut bytes).context("decoding fetched batches")?;
    Ok(sets
        .iter()
        .flat_map(|set| set.records.iter())
        .map(|r| StoredRecord { offset: r.offset, record: TestRecord::from_record(r) })
        .collect())
}

/// Returns `batch` with one bit of its stored CRC flipped.
pub fn with_flipped_crc(batch: &[u8]) -> Bytes {
    flip_byte(batch, CRC_POSITION)
}

/// Returns `batch` with one bit flipped `from_end` bytes before its end (inside the last record,
/// so only the CRC can tell).
pub fn with_flipped_tail_byte(batch: &[u8], from_end: usize) -> Bytes {
    flip_byte(batch, batch.len() - from_end)
}

fn flip_byte(batch: &[u8], position: usize) -> Bytes {
    let mut bytes = batch.to_vec();
    bytes[position] ^= 0x01;
    Bytes::from(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<TestRecord> {
        let mut with_headers = TestRecord::new("k2", "v2", 1_700_000_000_002);
        with_headers.headers = vec![("h".into(), Bytes::from_static(b"x"))];
        vec![TestRecord::new("k1", "v1", 1_700_000_000_001), with_headers]
    }

    #[test]
    fn batch_round_trips_as_one_non_idempotent_batch() {
        let bytes = encode_batch(&sample()).unwrap();
        let info = RecordBatchDecoder::decode_batch_info(&mut bytes.clone()).unwrap();
        assert_eq!(info.len(), 1, "one batch");
        assert_eq!(info[0].record_count, 2);
        assert_eq!(info[0].base_sequence, -1);
        assert_eq!(info[0].producer_id, -1);
        let stored = decode_batches(bytes).unwrap();
        let offsets: Vec<i64> = stored.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, vec![0, 1]);
        let records: Vec<TestRecord> = stored.into_iter().map(|r| r.record).collect();
        assert_eq!(records, sample());
    }

    #[test]
    fn flipped_bytes_fail_the_crc() {
        let bytes = encode_batch(&sample()).unwrap();
        assert!(decode_batches(with_flipped_crc(&bytes)).is_err());
        assert!(decode_batches(with_flipped_tail_byte(&bytes, 3)).is_err());
    }
}

//! Kafka v2 record batches: header parsing, validation and in-place patching.
//!
//! onelog stores batches exactly as the client sent them (DESIGN §3). The broker only ever
//! rewrites header fields: `baseOffset` and `partitionLeaderEpoch`, which the CRC does not cover,
//! and — for `LogAppendTime` topics — the timestamp-type bit and `maxTimestamp`, after which the
//! CRC is recomputed as Kafka does.
//!
//! [`validate`] is the leader's `LogValidator`: besides the header and CRC it walks every
//! record (`records`), through a bounded inflating stream for compressed batches (`inflate`),
//! so a batch whose body does not decompress, whose record count lies or whose records are
//! misframed is refused before it reaches the log. It also finds what the index keeps: the
//! offset of the record with the highest timestamp (KIP-734).
//!
//! Layout (KIP-98, `DefaultRecordBatch`):
//! ```text
//! baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
//! attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
//! producerId i64 | producerEpoch i16 | baseSequence i32 | recordCount i32 | records...
//! ```

use bytes::{Bytes, BytesMut};
use thiserror::Error;

use crate::error_code;
use crate::inflate;
use crate::records::{self, RecordInfo};

/// Size of the fixed batch header, up to and including the record count.
pub const BATCH_HEADER_BYTES: usize = 61;
/// `baseOffset` + `batchLength`: the bytes not counted by `batchLength`.
pub const BATCH_LOG_OVERHEAD_BYTES: usize = 12;

const OFFSET_BASE_OFFSET: usize = 0;
const OFFSET_BATCH_LENGTH: usize = 8;
const OFFSET_LEADER_EPOCH: usize = 12;
const OFFSET_MAGIC: usize = 16;
const OFFSET_CRC: usize = 17;
const OFFSET_ATTRIBUTES: usize = 21;
const OFFSET_LAST_OFFSET_DELTA: usize = 23;
const OFFSET_BASE_TIMESTAMP: usize = 27;
const OFFSET_MAX_TIMESTAMP: usize = 35;
const OFFSET_PRODUCER_ID: usize = 43;
const OFFSET_PRODUCER_EPOCH: usize = 51;
const OFFSET_BASE_SEQUENCE: usize = 53;
const OFFSET_RECORD_COUNT: usize = 57;

const ATTR_COMPRESSION_MASK: i16 = 0x07;
const ATTR_LOG_APPEND_TIME: i16 = 0x08;
const ATTR_TRANSACTIONAL: i16 = 0x10;
const ATTR_CONTROL: i16 = 0x20;

/// Why a batch was refused; each maps to the Kafka error code a producer expects.
#[derive(Debug, Error, PartialEq, Eq, Clone)]
pub enum BatchError {
    #[error("record batch is truncated: {0}")]
    Truncated(&'static str),
    #[error("record batch magic {0} is not 2")]
    UnsupportedMagic(i8),
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("record batch compression codec {0} is unknown")]
    UnknownCompression(i16),
    #[error("record batch is invalid: {0}")]
    Invalid(&'static str),
    #[error("record batch of {size} bytes exceeds the limit of {max} bytes")]
    TooLarge { size: usize, max: usize },
    /// The records are misframed, or a compressed body does not decompress.
    #[error("record batch is corrupt: {0}")]
    Corrupt(&'static str),
    /// A compressed body inflates past the budget the caller allowed.
    #[error("record batch inflates past the limit of the request")]
    InflatedTooLarge,
}

impl BatchError {
    /// The Kafka error code for a produce partition response.
    pub fn error_code(&self) -> i16 {
        match self {
            BatchError::Truncated(_) => error_code::CORRUPT_MESSAGE,
            BatchError::UnsupportedMagic(_) => error_code::UNSUPPORTED_FOR_MESSAGE_FORMAT,
            BatchError::CrcMismatch { .. } => error_code::CORRUPT_MESSAGE,
            BatchError::UnknownCompression(_) => error_code::UNSUPPORTED_COMPRESSION_TYPE,
            BatchError::Invalid(_) => error_code::INVALID_RECORD,
            BatchError::TooLarge { .. } => error_code::MESSAGE_TOO_LARGE,
            BatchError::Corrupt(_) => error_code::CORRUPT_MESSAGE,
            // A Java producer splits a batch refused with MESSAGE_TOO_LARGE and retries the
            // halves, which is what a genuinely very compressible batch needs.
            BatchError::InflatedTooLarge => error_code::MESSAGE_TOO_LARGE,
        }
    }
}

/// The fields of a batch header that the broker reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    /// Whole batch size in bytes, including the 12-byte log overhead.
    pub size_bytes: usize,
    pub partition_leader_epoch: i32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl BatchHeader {
    pub fn compression(&self) -> i16 {
        self.attributes & ATTR_COMPRESSION_MASK
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & ATTR_LOG_APPEND_TIME != 0
    }
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }
}

fn i16_at(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn i64_at(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Parses the header of the batch at the start of `bytes` without validating its CRC.
/// Only the 61 header bytes and the declared length are checked.
pub fn parse_header(bytes: &[u8]) -> Result<BatchHeader, BatchError> {
    if bytes.len() < BATCH_HEADER_BYTES {
        return Err(BatchError::Truncated("shorter than the batch header"));
    }
    let magic = bytes[OFFSET_MAGIC] as i8;
    if magic != 2 {
        return Err(BatchError::UnsupportedMagic(magic));
    }
    let batch_length = i32_at(bytes, OFFSET_BATCH_LENGTH);
    if batch_length < (BATCH_HEADER_BYTES - BATCH_LOG_OVERHEAD_BYTES) as i32 {
        return Err(BatchError::Truncated("batchLength smaller than the header"));
    }
    Ok(BatchHeader {
        base_offset: i64_at(bytes, OFFSET_BASE_OFFSET),
        size_bytes: batch_length as usize + BATCH_LOG_OVERHEAD_BYTES,
        partition_leader_epoch: i32_at(bytes, OFFSET_LEADER_EPOCH),
        attributes: i16_at(bytes, OFFSET_ATTRIBUTES),
        last_offset_delta: i32_at(bytes, OFFSET_LAST_OFFSET_DELTA),
        base_timestamp: i64_at(bytes, OFFSET_BASE_TIMESTAMP),
        max_timestamp: i64_at(bytes, OFFSET_MAX_TIMESTAMP),
        producer_id: i64_at(bytes, OFFSET_PRODUCER_ID),
        producer_epoch: i16_at(bytes, OFFSET_PRODUCER_EPOCH),
        base_sequence: i32_at(bytes, OFFSET_BASE_SEQUENCE),
        record_count: i32_at(bytes, OFFSET_RECORD_COUNT),
    })
}

/// CRC32C over everything from `attributes` to the end of the batch.
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[OFFSET_ATTRIBUTES..])
}

/// What validating a record set may cost, set by the caller (the broker's `limits.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Largest batch, header included (`max.message.bytes`): MESSAGE_TOO_LARGE beyond.
    pub batch_bytes_max: usize,
    /// Bytes the compressed batches of the record set may inflate to, together.
    pub inflated_bytes_max: usize,
}

/// A validated client batch, split off the produce request's record set.
#[derive(Debug, Clone)]
pub struct ValidBatch {
    pub header: BatchHeader,
    pub bytes: Bytes,
    /// Offset delta of the first record with the highest timestamp (CreateTime).
    pub max_timestamp_offset_delta: i32,
    /// Indexes of the records without a key (refused on compacted topics).
    pub keyless_records: Vec<i32>,
}

/// A validated record set: its batches in order, and what inflating them cost.
#[derive(Debug, Clone)]
pub struct Validated {
    pub batches: Vec<ValidBatch>,
    /// Bytes the compressed batches inflated to, together.
    pub inflated_bytes: usize,
}

/// Splits a produce request's record set into batches and validates each one as Kafka's
/// `LogValidator` does on the leader: framing, magic, CRC, codec, record count and offset
/// deltas, every record's framing (inflating compressed batches within
/// `budget.inflated_bytes_max`), and the size limit. Control batches are refused: only the
/// broker writes those (KIP-98). Never panics and never allocates from a length in `records`.
pub fn validate(records: &Bytes, budget: Budget) -> Result<Validated, BatchError> {
    let mut batches = Vec::new();
    let mut at = 0usize;
    let mut inflated_bytes = 0usize;
    if records.is_empty() {
        return Err(BatchError::Invalid("empty record set"));
    }
    while at < records.len() {
        let rest = &records[at..];
        let header = parse_header(rest)?;
        if header.size_bytes > budget.batch_bytes_max {
            return Err(BatchError::TooLarge { size: header.size_bytes, max: budget.batch_bytes_max });
        }
        if header.size_bytes > rest.len() {
            return Err(BatchError::Truncated("batchLength runs past the end of the record set"));
        }
        let bytes = records.slice(at..at + header.size_bytes);
        let inflated_budget = budget.inflated_bytes_max - inflated_bytes;
        let (batch, inflated) = validate_batch(header, bytes, inflated_budget)?;
        inflated_bytes += inflated;
        batches.push(batch);
        at += header.size_bytes;
    }
    Ok(Validated { batches, inflated_bytes })
}

/// [`validate`] with a fixed inflation budget of `batch_bytes_max` × 64, for callers that
/// hold trusted or test input.
pub fn validate_record_set(records: &Bytes, batch_bytes_max: usize) -> Result<Vec<ValidBatch>, BatchError> {
    let budget = Budget { batch_bytes_max, inflated_bytes_max: batch_bytes_max.saturating_mul(64) };
    validate(records, budget).map(|v| v.batches)
}

fn validate_batch(
    header: BatchHeader,
    bytes: Bytes,
    inflated_budget: usize,
) -> Result<(ValidBatch, usize), BatchError> {
    let stored = i32_at(&bytes, OFFSET_CRC) as u32;
    let computed = compute_crc(&bytes);
    if stored != computed {
        return Err(BatchError::CrcMismatch { stored, computed });
    }
    if header.compression() > 4 {
        return Err(BatchError::UnknownCompression(header.compression()));
    }
    if header.is_control() {
        return Err(BatchError::Invalid("clients may not produce control batches"));
    }
    if header.record_count <= 0 {
        return Err(BatchError::Invalid("record count must be positive"));
    }
    if header.last_offset_delta != header.record_count - 1 {
        return Err(BatchError::Invalid("lastOffsetDelta does not match the record count"));
    }
    let mut batch = ValidBatch { header, bytes, max_timestamp_offset_delta: 0, keyless_records: Vec::new() };
    let mut max_timestamp = i64::MIN;
    let inflated = walk_records(&batch.header, &batch.bytes, inflated_budget, |record| {
        if record.timestamp > max_timestamp {
            max_timestamp = record.timestamp;
            batch.max_timestamp_offset_delta = record.offset_delta;
        }
        if !record.has_key {
            batch.keyless_records.push(record.offset_delta);
        }
        false
    })?
    .1;
    Ok((batch, inflated))
}

/// Walks the records of `batch` (whose header is `header`), inflating at most
/// `inflated_budget` bytes; returns whether `visit` stopped the walk, and the bytes inflated.
fn walk_records(
    header: &BatchHeader,
    batch: &[u8],
    inflated_budget: usize,
    visit: impl FnMut(&RecordInfo) -> bool,
) -> Result<(bool, usize), BatchError> {
    let body = &batch[BATCH_HEADER_BYTES..];
    if header.compression() == inflate::COMPRESSION_NONE {
        return Ok((records::walk(body, header.record_count, header.base_timestamp, visit)?, 0));
    }
    let mut stream = inflate::inflating_reader(header.compression(), body, inflated_budget)
        .map_err(|_| BatchError::Corrupt("compressed records have an invalid header"))?
        .ok_or(BatchError::UnknownCompression(header.compression()))?;
    let stopped = records::walk(&mut stream, header.record_count, header.base_timestamp, visit)?;
    Ok((stopped, stream.get_ref().produced))
}

/// The first record of a stored `batch` for which `matches` holds (a lookup by timestamp,
/// KIP-79 / KIP-734), inflating at most `inflated_bytes_left` bytes, which it counts down by
/// what it inflated (a caller shares one budget across a request's lookups; past it, every
/// compressed batch is InflatedTooLarge). `Ok(None)` when no record matches.
pub fn find_record(
    batch: &[u8],
    inflated_bytes_left: &mut usize,
    mut matches: impl FnMut(&RecordInfo) -> bool,
) -> Result<Option<RecordInfo>, BatchError> {
    let header = parse_header(batch)?;
    if header.size_bytes > batch.len() {
        return Err(BatchError::Truncated("batchLength runs past the end of the batch"));
    }
    let mut found = None;
    let walked = walk_records(&header, &batch[..header.size_bytes], *inflated_bytes_left, |record| {
        let hit = matches(record);
        if hit {
            found = Some(*record);
        }
        hit
    });
    match walked {
        Ok((_, inflated)) => *inflated_bytes_left = inflated_bytes_left.saturating_sub(inflated),
        Err(BatchError::InflatedTooLarge) => *inflated_bytes_left = 0,
        Err(_) => {}
    }
    walked?;
    Ok(found)
}

/// What the leader stamps into a batch before proposing it.
#[derive(Debug, Clone, Copy)]
pub struct BatchStamp {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    /// `Some(now_ms)` for `LogAppendTime` topics.
    pub log_append_time_ms: Option<i64>,
}

/// Returns a copy of `batch` with the stamp applied. Only header fields change; for
/// `LogAppendTime` the CRC is recomputed because it covers attributes and `maxTimestamp`.
pub fn stamp_batch(batch: &[u8], stamp: BatchStamp) -> Bytes {
    let mut out = BytesMut::from(batch);
    out[OFFSET_BASE_OFFSET..OFFSET_BASE_OFFSET + 8].copy_from_slice(&stamp.base_offset.to_be_bytes());
    out[OFFSET_LEADER_EPOCH..OFFSET_LEADER_EPOCH + 4]
        .copy_from_slice(&stamp.partition_leader_epoch.to_be_bytes());
    if let Some(now) = stamp.log_append_time_ms {
        let attributes = i16_at(&out, OFFSET_ATTRIBUTES) | ATTR_LOG_APPEND_TIME;
        out[OFFSET_ATTRIBUTES..OFFSET_ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
        out[OFFSET_MAX_TIMESTAMP..OFFSET_MAX_TIMESTAMP + 8].copy_from_slice(&now.to_be_bytes());
        let crc = compute_crc(&out);
        out[OFFSET_CRC..OFFSET_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    }
    out.freeze()
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "batch_validate_tests.rs"]
mod validate_tests;

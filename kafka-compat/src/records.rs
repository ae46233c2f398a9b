//! The records inside a v2 batch, read as a stream (`DefaultRecord`, KIP-98):
//!
//! ```text
//! length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
//! keyLength varint | key | valueLength varint | value | headerCount varint |
//! (headerKeyLength varint | headerKey | headerValueLength varint | headerValue)*
//! ```
//!
//! One walker serves the leader's validation (every record framed exactly, offset deltas
//! 0..n-1 in order, nothing after the last one: Kafka's `LogValidator` and `DefaultRecord`
//! checks) and lookups by timestamp, which stop at the first match. It reads through
//! `BufRead` and skips keys and values without copying them, so an uncompressed batch is
//! walked in place and a compressed one through a bounded stream (`inflate`).

use std::io::{self, BufRead};

use crate::batch::BatchError;
use crate::inflate::{is_budget_exceeded, skip};

/// What one record says that the broker keeps.
#[derive(Debug, Clone, Copy)]
pub struct RecordInfo {
    pub offset_delta: i32,
    /// `baseTimestamp + timestampDelta` (CreateTime; under LogAppendTime the batch's time counts).
    pub timestamp: i64,
    pub has_key: bool,
}

/// A `BufRead` with a count of the bytes consumed, so each record's length can be checked.
struct Counted<R> {
    r: R,
    consumed: u64,
}

impl<R: BufRead> Counted<R> {
    fn byte(&mut self) -> Result<u8, BatchError> {
        let b = *self.r.fill_buf().map_err(io_error)?.first().ok_or(TRUNCATED)?;
        self.r.consume(1);
        self.consumed += 1;
        Ok(b)
    }

    fn skip(&mut self, n: usize) -> Result<(), BatchError> {
        if !skip(&mut self.r, n).map_err(io_error)? {
            return Err(TRUNCATED);
        }
        self.consumed += n as u64;
        Ok(())
    }

    fn varlong(&mut self) -> Result<i64, BatchError> {
        let mut raw = 0u64;
        for i in 0..10 {
            let b = self.byte()?;
            raw |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        Err(BatchError::Corrupt("varint longer than 10 bytes"))
    }

    fn varint(&mut self) -> Result<i32, BatchError> {
        i32::try_from(self.varlong()?).map_err(|_| BatchError::Corrupt("varint out of i32 range"))
    }

    /// A length-prefixed field: -1 is null (when `nullable`), below that is corrupt.
    fn skip_field(&mut self, nullable: bool) -> Result<bool, BatchError> {
        let len = self.varint()?;
        if len == -1 && nullable {
            return Ok(false);
        }
        let len = usize::try_from(len).map_err(|_| BatchError::Corrupt("negative field length"))?;
        self.skip(len)?;
        Ok(true)
    }

    fn at_end(&mut self) -> Result<bool, BatchError> {
        Ok(self.r.fill_buf().map_err(io_error)?.is_empty())
    }
}

const TRUNCATED: BatchError = BatchError::Corrupt("records end before the record count is reached");

/// A stream error: the inflation budget, or a body that does not decompress.
fn io_error(e: io::Error) -> BatchError {
    if is_budget_exceeded(&e) {
        BatchError::InflatedTooLarge
    } else {
        BatchError::Corrupt("records do not decompress")
    }
}

/// Reads the next record of the stream, which must carry `expected_delta`.
fn next_record<R: BufRead>(
    c: &mut Counted<R>,
    base_timestamp: i64,
    expected_delta: i32,
) -> Result<RecordInfo, BatchError> {
    let len = c.varint()?;
    let len = u64::try_from(len).map_err(|_| BatchError::Corrupt("negative record length"))?;
    let start = c.consumed;
    c.byte()?; // attributes: unused in v2
    let timestamp_delta = c.varlong()?;
    let offset_delta = c.varint()?;
    if offset_delta != expected_delta {
        return Err(BatchError::Invalid("record offset deltas are not consecutive"));
    }
    let has_key = c.skip_field(true)?;
    c.skip_field(true)?; // value
    let headers = c.varint()?;
    if headers < 0 {
        return Err(BatchError::Corrupt("negative header count"));
    }
    for _ in 0..headers {
        // Kafka: a header key is never null.
        c.skip_field(false)?;
        c.skip_field(true)?;
        if c.consumed - start > len {
            break;
        }
    }
    if c.consumed - start != len {
        return Err(BatchError::Corrupt("record length does not match its fields"));
    }
    Ok(RecordInfo { offset_delta, timestamp: base_timestamp.wrapping_add(timestamp_delta), has_key })
}

/// Walks all `count` records of `stream` (the records section of a batch), calling `visit` on
/// each; the stream must end right after the last one. `visit` returning true stops the walk
/// early (a lookup found its record) and the walk returns true.
pub fn walk<R: BufRead>(
    stream: R,
    count: i32,
    base_timestamp: i64,
    mut visit: impl FnMut(&RecordInfo) -> bool,
) -> Result<bool, BatchError> {
    let mut c = Counted { r: stream, consumed: 0 };
    for expected_delta in 0..count {
        let record = next_record(&mut c, base_timestamp, expected_delta)?;
        if visit(&record) {
            return Ok(true);
        }
    }
    if !c.at_end()? {
        return Err(BatchError::Corrupt("bytes after the last record"));
    }
    Ok(false)
}

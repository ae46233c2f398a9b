//! One segment file as the writer sees it, and reading a single record back with a `pread`.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::LogStoreError;
use crate::format::{check_header, check_record, Invalid, RecordHeader, RECORD_HEADER_BYTES};
use crate::index::Loc;

/// A segment file holding records `[base, next_index)` in `[0, write_pos)`; after them zeros,
/// or in a recycled file records of its earlier life, all below `base` (`prealloc.rs`).
#[derive(Debug)]
pub(crate) struct Segment {
    /// Log index of the first record; also the file name.
    pub base: u64,
    pub path: PathBuf,
    pub file: Arc<File>,
    /// End of the written records: where the next record goes.
    pub write_pos: u64,
    /// Index the next record in this segment must carry.
    pub next_index: u64,
    /// File length. Only a record bigger than a whole segment makes a file grow past its
    /// preallocated size.
    pub capacity: u64,
}

impl Segment {
    /// Whether a record of `bytes` goes into this segment. An empty segment takes any record,
    /// so an entry larger than `segment_bytes` still has a home (its file simply grows).
    pub fn accepts(&self, bytes: u64) -> bool {
        self.write_pos == 0 || self.write_pos + bytes <= self.capacity
    }
}

/// Why a record could not be read back.
#[derive(Debug)]
pub(crate) enum ReadFailure {
    Io(io::Error),
    Invalid(Invalid),
}

impl ReadFailure {
    pub fn into_error(self, index: u64, loc: Loc) -> LogStoreError {
        match self {
            ReadFailure::Io(e) => {
                LogStoreError::io(format!("reading log index {index} at byte {}", loc.pos), e)
            }
            ReadFailure::Invalid(why) => {
                LogStoreError::Corrupt(format!("record of log index {index} at byte {}: {why:?}", loc.pos))
            }
        }
    }
}

/// Reads and verifies the record of log `index` at `loc`; returns the whole record (header
/// included; the payload starts at `RECORD_HEADER_BYTES`). The length is checked against
/// `entry_bytes_max` before the buffer is allocated.
pub(crate) fn read_record(
    file: &File,
    loc: Loc,
    index: u64,
    entry_bytes_max: u32,
) -> Result<Vec<u8>, ReadFailure> {
    let payload_len =
        loc.len.checked_sub(RECORD_HEADER_BYTES as u32).ok_or(ReadFailure::Invalid(Invalid::End))?;
    let indexed = RecordHeader { payload_len, version: 0, crc: 0, index, term: 0 };
    check_header(&indexed, entry_bytes_max).map_err(ReadFailure::Invalid)?;
    let mut record = vec![0u8; loc.len as usize];
    file.read_exact_at(&mut record, loc.pos).map_err(ReadFailure::Io)?;
    let header: [u8; RECORD_HEADER_BYTES] = record[..RECORD_HEADER_BYTES].try_into().expect("24 bytes");
    let stored = RecordHeader::parse(&header);
    if stored.record_bytes() != u64::from(loc.len) {
        let bytes_left = u64::from(loc.len);
        return Err(ReadFailure::Invalid(Invalid::Truncated {
            record_bytes: stored.record_bytes(),
            bytes_left,
        }));
    }
    check_record(&header, &record[RECORD_HEADER_BYTES..], index).map_err(ReadFailure::Invalid)?;
    Ok(record)
}

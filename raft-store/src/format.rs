//! The on-disk record format and segment file names. Pure functions, no I/O, so the format is
//! defined (and pinned by the golden test) in one place.
//!
//! A segment file `<first index, 20 digits>.seg` is a sequence of records followed by zeros:
//!
//! ```text
//! offset  size  field
//!      0     4  payload_len  u32 LE: low 28 bits, bytes of bincode payload (0 = end of written
//!                             data); high 4 bits, the record's format version (below)
//!      4     4  crc          u32 LE, CRC32C of bytes 8..24+payload_len (index, term, payload)
//!      8     8  index        u64 LE, Raft log index
//!     16     8  term         u64 LE, Raft term of the entry's leader
//!     24     n  payload      bincode 1.3 (default options) of `openraft::Entry<C>`
//! ```
//!
//! The CRC covers the index and term, so a record that was written at one place can never be
//! mistaken for a different entry; index contiguity is checked on scan as well.
//!
//! Format versions: 0 is onelog 0.1.0's (no payload reaches 2^28 bytes, so its high bits were
//! always 0), and the only one so far. A record with a valid CRC and a higher version was
//! written by a newer build: the store refuses to open rather than misread or truncate it.

use std::path::Path;

/// Bytes of the fixed record header.
pub const RECORD_HEADER_BYTES: usize = 24;

/// The record format version this build writes, and the newest it reads.
pub const RECORD_FORMAT_VERSION: u8 = 0;
/// Where the version sits in the length word, and the bits left for the payload length.
const VERSION_SHIFT: u32 = 28;
pub const PAYLOAD_LEN_MAX: u32 = (1 << VERSION_SHIFT) - 1;

/// Extension of segment files.
pub(crate) const SEGMENT_SUFFIX: &str = ".seg";

/// Digits of the zero-padded first index in a segment file name (u64::MAX has 20).
const SEGMENT_NAME_DIGITS: usize = 20;

/// A decoded record header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordHeader {
    pub payload_len: u32,
    pub version: u8,
    pub crc: u32,
    pub index: u64,
    pub term: u64,
}

impl RecordHeader {
    pub fn parse(bytes: &[u8; RECORD_HEADER_BYTES]) -> Self {
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
        let word = u32_at(0);
        RecordHeader {
            payload_len: word & PAYLOAD_LEN_MAX,
            version: (word >> VERSION_SHIFT) as u8,
            crc: u32_at(4),
            index: u64_at(8),
            term: u64_at(16),
        }
    }

    /// Total bytes of the record this header starts.
    pub fn record_bytes(&self) -> u64 {
        RECORD_HEADER_BYTES as u64 + u64::from(self.payload_len)
    }
}

/// Why a record is not valid; scanning stops at the first one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Invalid {
    /// Zero length: the end of written data (or a header that never reached the disk).
    End,
    TooLong {
        payload_len: u32,
        max: u32,
    },
    /// The record would run past the end of the file (or the indexed length).
    Truncated {
        record_bytes: u64,
        bytes_left: u64,
    },
    CrcMismatch {
        stored: u32,
        computed: u32,
    },
    WrongIndex {
        expected: u64,
        found: u64,
    },
    /// A whole record (its CRC holds) in a format newer than this build reads.
    NewerFormat {
        version: u8,
    },
}

/// Appends the header placeholder for a record to `buf`; the caller then appends the payload
/// and calls `seal_record` with the returned start offset.
pub(crate) fn begin_record(buf: &mut Vec<u8>) -> usize {
    let start = buf.len();
    buf.resize(start + RECORD_HEADER_BYTES, 0);
    start
}

/// Fills in the header of the record that starts at `start` and runs to the end of `buf`.
/// Returns the payload length.
pub(crate) fn seal_record(buf: &mut [u8], start: usize, index: u64, term: u64) -> u32 {
    let payload_len =
        u32::try_from(buf.len() - start - RECORD_HEADER_BYTES).expect("payload checked by caller");
    assert!(payload_len <= PAYLOAD_LEN_MAX, "entry_bytes_max keeps payloads below the version bits");
    buf[start + 8..start + 16].copy_from_slice(&index.to_le_bytes());
    buf[start + 16..start + 24].copy_from_slice(&term.to_le_bytes());
    let crc = crc32c::crc32c(&buf[start + 8..]);
    let word = payload_len | (u32::from(RECORD_FORMAT_VERSION) << VERSION_SHIFT);
    buf[start..start + 4].copy_from_slice(&word.to_le_bytes());
    buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    payload_len
}

/// Checks a header before its payload is read: the length must be non-zero and within `max`.
pub(crate) fn check_header(header: &RecordHeader, max: u32) -> Result<(), Invalid> {
    if header.payload_len == 0 {
        return Err(Invalid::End);
    }
    if header.payload_len > max {
        return Err(Invalid::TooLong { payload_len: header.payload_len, max });
    }
    Ok(())
}

/// Checks a complete record (`header_bytes` and its payload) against the CRC and expected index.
pub(crate) fn check_record(
    header_bytes: &[u8; RECORD_HEADER_BYTES],
    payload: &[u8],
    expected_index: u64,
) -> Result<RecordHeader, Invalid> {
    let header = RecordHeader::parse(header_bytes);
    let computed = crc32c::crc32c_append(crc32c::crc32c(&header_bytes[8..]), payload);
    if computed != header.crc {
        return Err(Invalid::CrcMismatch { stored: header.crc, computed });
    }
    if header.index != expected_index {
        return Err(Invalid::WrongIndex { expected: expected_index, found: header.index });
    }
    if header.version > RECORD_FORMAT_VERSION {
        return Err(Invalid::NewerFormat { version: header.version });
    }
    Ok(header)
}

/// File name of the segment whose first record has log index `base`.
pub(crate) fn segment_name(base: u64) -> String {
    format!("{base:0width$}{SEGMENT_SUFFIX}", width = SEGMENT_NAME_DIGITS)
}

/// The first log index encoded in a segment file name, or `None` for any other file.
pub(crate) fn parse_segment_name(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let digits = name.strip_suffix(SEGMENT_SUFFIX)?;
    if digits.len() != SEGMENT_NAME_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(index: u64, term: u64, payload: &[u8]) -> Vec<u8> {
        let mut buf = Vec::new();
        let start = begin_record(&mut buf);
        buf.extend_from_slice(payload);
        seal_record(&mut buf, start, index, term);
        buf
    }

    #[test]
    fn record_round_trips_and_detects_damage() {
        let rec = record(7, 3, b"hello");
        let header: [u8; RECORD_HEADER_BYTES] = rec[..RECORD_HEADER_BYTES].try_into().unwrap();
        let parsed = check_record(&header, &rec[RECORD_HEADER_BYTES..], 7).unwrap();
        assert_eq!((parsed.payload_len, parsed.index, parsed.term), (5, 7, 3));
        assert!(matches!(check_record(&header, b"hellO", 7), Err(Invalid::CrcMismatch { .. })));
        assert_eq!(
            check_record(&header, &rec[RECORD_HEADER_BYTES..], 8),
            Err(Invalid::WrongIndex { expected: 8, found: 7 })
        );
    }

    #[test]
    fn header_checks_length_before_allocation() {
        let zero = RecordHeader::parse(&[0; RECORD_HEADER_BYTES]);
        assert_eq!(check_header(&zero, 10), Err(Invalid::End));
        let long = RecordHeader { payload_len: 11, version: 0, crc: 0, index: 0, term: 0 };
        assert_eq!(check_header(&long, 10), Err(Invalid::TooLong { payload_len: 11, max: 10 }));
    }

    #[test]
    fn records_are_0_1_0_s_format_and_a_newer_version_is_refused_only_when_intact() {
        let mut rec = record(7, 3, b"hello");
        // 0.1.0's bytes: the length word holds the payload length alone.
        assert_eq!(rec[..4], 5u32.to_le_bytes());
        rec[3] |= 0x10; // version 1, CRC still valid (it does not cover the length word)
        let header: [u8; RECORD_HEADER_BYTES] = rec[..RECORD_HEADER_BYTES].try_into().unwrap();
        assert_eq!(RecordHeader::parse(&header).payload_len, 5);
        assert_eq!(
            check_record(&header, &rec[RECORD_HEADER_BYTES..], 7),
            Err(Invalid::NewerFormat { version: 1 })
        );
        // Damage that happens to set those bits is a torn record, as before.
        assert!(matches!(check_record(&header, b"hellO", 7), Err(Invalid::CrcMismatch { .. })));
    }

    #[test]
    fn segment_names_round_trip() {
        assert_eq!(segment_name(1), "00000000000000000001.seg");
        assert_eq!(parse_segment_name(Path::new("/x/00000000000000000042.seg")), Some(42));
        assert_eq!(parse_segment_name(Path::new(&segment_name(u64::MAX))), Some(u64::MAX));
        assert_eq!(parse_segment_name(Path::new("42.seg")), None);
        assert_eq!(parse_segment_name(Path::new("00000000000000000042.seg.tmp")), None);
    }
}

//! A journaled segment's index (`<base>.refs`): one fixed-size, CRC-protected entry per batch,
//! appended as the batch is applied (issue 31, step 2 of docs/PERFORMANCE.md's
//! write-amplification design).
//!
//! In a journaled segment most batches are not in the segment's own file: they stay where the
//! Raft log wrote them, and the journal says where (Raft segment, position). The batches apply
//! makes itself (transaction markers) go into the own file, as in any segment. Since the own
//! file no longer holds every batch, the index cannot be rebuilt by scanning it: the journal
//! is the index. Like the own file it is not fsynced on the apply path (the Raft log is the
//! write-ahead log); a checkpoint flushes it, and open keeps its valid, contiguous prefix below
//! the checkpoint's end offset and cuts the rest (the Raft log applies it again).
//!
//! ```text
//! header   "OLPJ" | format version u32 BE (1)
//! entry    base_offset i64 | last_offset i64 | max_timestamp i64 | size u32 |
//!          source u8 (0: own file, 1: Raft log) | log segment u64 (0 for the own file) |
//!          position u64 | crc32c u32 of the 45 bytes before it          (all big-endian)
//! ```

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::segment::IndexEntry;
use crate::upgrade::TooNew;

const MAGIC: &[u8; 4] = b"OLPJ";
/// The journal format this build writes and the newest it reads.
const FORMAT_VERSION: u32 = 1;
pub const HEADER_BYTES: u64 = 8;
pub const ENTRY_BYTES: usize = 49;
const CRC_AT: usize = ENTRY_BYTES - 4;

/// The path of the journal beside a segment's own file.
pub fn journal_path(segment: &Path) -> PathBuf {
    segment.with_extension("refs")
}

pub fn encode(entry: &IndexEntry) -> [u8; ENTRY_BYTES] {
    let mut out = [0u8; ENTRY_BYTES];
    out[0..8].copy_from_slice(&entry.base_offset.to_be_bytes());
    out[8..16].copy_from_slice(&entry.last_offset.to_be_bytes());
    out[16..24].copy_from_slice(&entry.max_timestamp.to_be_bytes());
    out[24..28].copy_from_slice(&entry.size.to_be_bytes());
    out[28] = u8::from(entry.log_segment.is_some());
    out[29..37].copy_from_slice(&entry.log_segment.unwrap_or(0).to_be_bytes());
    out[37..45].copy_from_slice(&entry.position.to_be_bytes());
    let crc = crc32c::crc32c(&out[..CRC_AT]);
    out[CRC_AT..].copy_from_slice(&crc.to_be_bytes());
    out
}

/// The entry in `bytes`, or `None` if its CRC or source byte is not valid (a torn or never
/// written entry).
pub fn decode(bytes: &[u8; ENTRY_BYTES]) -> Option<IndexEntry> {
    let crc = u32::from_be_bytes(bytes[CRC_AT..].try_into().expect("4 bytes"));
    if crc32c::crc32c(&bytes[..CRC_AT]) != crc {
        return None;
    }
    let i64_at = |at: usize| i64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let u64_at = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let log_segment = match bytes[28] {
        0 => None,
        1 => Some(u64_at(29)),
        _ => return None,
    };
    Some(IndexEntry {
        base_offset: i64_at(0),
        last_offset: i64_at(8),
        max_timestamp: i64_at(16),
        size: u32::from_be_bytes(bytes[24..28].try_into().expect("4 bytes")),
        log_segment,
        position: u64_at(37),
    })
}

/// An open journal, appended at its end.
#[derive(Debug)]
pub struct Journal {
    file: File,
    len: u64,
    dirty: bool,
}

impl Journal {
    /// Creates an empty journal (its header only).
    pub fn create(path: &Path) -> io::Result<Journal> {
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(path)?;
        file.write_all_at(&header(), 0)?;
        Ok(Journal { file, len: HEADER_BYTES, dirty: true })
    }

    /// Opens a journal and returns its entries: those of a valid, contiguous prefix from
    /// `base_offset` whose batches end below `end_offset`. Whatever follows is cut off.
    pub fn open(path: &Path, base_offset: i64, end_offset: i64) -> io::Result<(Journal, Vec<IndexEntry>)> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let bytes = std::fs::read(path)?;
        if bytes.len() < HEADER_BYTES as usize {
            // Created, its header not yet on disk: it holds nothing.
            file.set_len(0)?;
            file.write_all_at(&header(), 0)?;
            return Ok((Journal { file, len: HEADER_BYTES, dirty: true }, Vec::new()));
        }
        check_header(path, &bytes)?;
        let mut entries: Vec<IndexEntry> = Vec::new();
        for chunk in bytes[HEADER_BYTES as usize..].chunks_exact(ENTRY_BYTES) {
            let Some(entry) = decode(chunk.try_into().expect("an entry's bytes")) else { break };
            let expected = entries.last().map_or(base_offset, |e| e.last_offset + 1);
            if entry.base_offset != expected
                || entry.last_offset < entry.base_offset
                || entry.last_offset >= end_offset
            {
                break;
            }
            entries.push(entry);
        }
        let len = HEADER_BYTES + (entries.len() * ENTRY_BYTES) as u64;
        if len < bytes.len() as u64 {
            file.set_len(len)?;
        }
        Ok((Journal { file, len, dirty: false }, entries))
    }

    pub fn append(&mut self, entry: &IndexEntry) -> io::Result<()> {
        self.file.write_all_at(&encode(entry), self.len)?;
        self.len += ENTRY_BYTES as u64;
        self.dirty = true;
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        if self.dirty {
            self.file.sync_data()?;
            self.dirty = false;
        }
        Ok(())
    }
}

pub fn header() -> [u8; HEADER_BYTES as usize] {
    let mut header = [0u8; HEADER_BYTES as usize];
    header[..4].copy_from_slice(MAGIC);
    header[4..].copy_from_slice(&FORMAT_VERSION.to_be_bytes());
    header
}

/// Refuses what is not a journal, and a newer format by name.
fn check_header(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let invalid =
        |why: String| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {why}", path.display()));
    if &bytes[..4] != MAGIC {
        return Err(invalid("not a partition journal".into()));
    }
    let version = u32::from_be_bytes(bytes[4..8].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        let too_new =
            TooNew { what: "partition journal", found: version, read: FORMAT_VERSION..=FORMAT_VERSION };
        return Err(invalid(too_new.to_string()));
    }
    Ok(())
}

#[cfg(test)]
#[path = "journal_tests.rs"]
mod tests;

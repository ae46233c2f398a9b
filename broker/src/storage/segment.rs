//! One partition segment file, holding record batches back to back, exactly as stamped by the
//! leader, plus its in-memory offset/time index.
//!
//! A file is created sparse at its full `segment.bytes` length, so its size never changes and
//! the bytes after the last batch read as zeros, which is how a scan finds the end after a
//! crash. Disk blocks are reserved (fallocate) in steps just ahead of the write position, so
//! an empty or one-record partition costs one small step, not a whole segment (DESIGN §3;
//! Kafka's `log.preallocate` is off by default too), and a full disk shows as ENOSPC from
//! fallocate at append rather than as a failed write-back of dirty pages later.
//! `log.preallocate=true` (the topic's `preallocate`) reserves the whole segment at creation,
//! as before. A sealed segment's index is written next to it (`.index`, CRC-protected) so
//! start-up loads it instead of scanning the segment.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use kafka_compat::batch::{parse_header, BATCH_HEADER_BYTES};

use crate::limits::{SEGMENT_ALLOCATION_STEP_BYTES_MAX, SEGMENT_ALLOCATION_STEP_BYTES_MIN};

/// One batch in a segment: the offset index and the time index in one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    pub base_offset: i64,
    pub last_offset: i64,
    pub position: u64,
    pub size: u32,
    pub max_timestamp: i64,
}

const INDEX_ENTRY_BYTES: usize = 36;

impl IndexEntry {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.base_offset.to_be_bytes());
        out.extend_from_slice(&self.last_offset.to_be_bytes());
        out.extend_from_slice(&self.position.to_be_bytes());
        out.extend_from_slice(&self.size.to_be_bytes());
        out.extend_from_slice(&self.max_timestamp.to_be_bytes());
    }

    fn decode(b: &[u8]) -> Self {
        let i64_at = |at: usize| i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        IndexEntry {
            base_offset: i64_at(0),
            last_offset: i64_at(8),
            position: i64_at(16) as u64,
            size: u32::from_be_bytes(b[24..28].try_into().expect("4 bytes")),
            max_timestamp: i64_at(28),
        }
    }
}

pub struct Segment {
    pub base_offset: i64,
    pub path: PathBuf,
    file: File,
    pub written_bytes: u64,
    pub capacity_bytes: u64,
    /// Bytes from the start of the file whose blocks are known to be reserved.
    allocated_bytes: u64,
    pub index: Vec<IndexEntry>,
    dirty: bool,
}

pub fn segment_path(dir: &Path, base_offset: i64) -> PathBuf {
    dir.join(format!("{base_offset:020}.log"))
}

fn index_path(segment: &Path) -> PathBuf {
    segment.with_extension("index")
}

/// Reserves the blocks of `[from, to)` without changing the file's size. Where fallocate is
/// unsupported the range simply stays sparse (blocks are then taken at write-back).
fn reserve(file: &File, from: u64, to: u64) -> io::Result<()> {
    if to <= from {
        return Ok(());
    }
    // SAFETY: plain syscall on a valid, owned fd.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, from as libc::off_t, (to - from) as libc::off_t) };
    if rc != 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EOPNOTSUPP) {
            return Err(err);
        }
    }
    Ok(())
}

/// How far to reserve when a write must end at `end`: the next step doubles what is already
/// reserved (between the step limits), so a busy segment needs few fallocate calls and an idle
/// one holds little.
fn next_allocation(allocated: u64, end: u64, capacity: u64) -> u64 {
    let step = allocated.clamp(SEGMENT_ALLOCATION_STEP_BYTES_MIN, SEGMENT_ALLOCATION_STEP_BYTES_MAX);
    end.max(allocated + step).min(capacity.max(end))
}

/// Makes `[from, to)` read as zeros again by punching a hole, which also frees its blocks
/// (the next appends reserve them again, step by step). Unlike raft-store's zero fill, which
/// must keep its pre-written blocks written for cheap fdatasync, partition segments are never
/// fsynced on the write path, so a hole is fine and free.
fn punch_zeros(file: &File, from: u64, to: u64) -> io::Result<()> {
    if to <= from {
        return Ok(());
    }
    let fd = file.as_raw_fd();
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    // SAFETY: plain syscall on a valid, owned fd.
    let punched = unsafe { libc::fallocate(fd, mode, from as libc::off_t, (to - from) as libc::off_t) } == 0;
    if punched {
        return Ok(());
    }
    let zeros = vec![0u8; 1 << 20];
    let mut at = from;
    while at < to {
        let n = (to - at).min(zeros.len() as u64) as usize;
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

impl Segment {
    /// Creates a segment of `capacity_bytes`, reserving all of it when `preallocate`, else
    /// none until the first append.
    pub fn create(
        dir: &Path,
        base_offset: i64,
        capacity_bytes: u64,
        preallocate: bool,
    ) -> io::Result<Segment> {
        let path = segment_path(dir, base_offset);
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
        file.set_len(capacity_bytes)?;
        let allocated_bytes = if preallocate { capacity_bytes } else { 0 };
        reserve(&file, 0, allocated_bytes)?;
        raft_store::fsync_dir(dir)?;
        Ok(Segment {
            base_offset,
            path,
            file,
            written_bytes: 0,
            capacity_bytes,
            allocated_bytes,
            index: Vec::new(),
            dirty: true,
        })
    }

    /// Opens an existing segment, keeping only batches whose last offset is below
    /// `end_offset`; anything after is zeroed so it can never be read back.
    pub fn open(path: PathBuf, base_offset: i64, end_offset: i64, sealed: bool) -> io::Result<Segment> {
        let file = OpenOptions::new().read(true).write(true).open(&path)?;
        let capacity_bytes = file.metadata()?.len();
        let mut segment = Segment {
            base_offset,
            path,
            file,
            written_bytes: 0,
            capacity_bytes,
            allocated_bytes: 0,
            index: Vec::new(),
            dirty: false,
        };
        let loaded = sealed && segment.load_index_file(end_offset)?;
        if !loaded {
            segment.scan(end_offset)?;
        }
        // Whatever lies past the written end may be a hole: the next append reserves from
        // there (reserving blocks already held costs nothing), so reopening allocates nothing.
        segment.allocated_bytes = segment.written_bytes;
        Ok(segment)
    }

    fn load_index_file(&mut self, end_offset: i64) -> io::Result<bool> {
        let Ok(bytes) = std::fs::read(index_path(&self.path)) else { return Ok(false) };
        if bytes.len() < 4 || (bytes.len() - 4) % INDEX_ENTRY_BYTES != 0 {
            return Ok(false);
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().expect("4 bytes")) {
            return Ok(false);
        }
        let index: Vec<IndexEntry> = body.chunks_exact(INDEX_ENTRY_BYTES).map(IndexEntry::decode).collect();
        if index.last().is_some_and(|e| e.last_offset >= end_offset) {
            return Ok(false); // the checkpoint ends inside this segment: scan and truncate.
        }
        self.written_bytes = index.last().map_or(0, |e| e.position + u64::from(e.size));
        self.index = index;
        Ok(true)
    }

    /// Rebuilds the index by reading batch headers from the start of the file.
    fn scan(&mut self, end_offset: i64) -> io::Result<()> {
        let mut header = [0u8; BATCH_HEADER_BYTES];
        let mut position = 0u64;
        while position + BATCH_HEADER_BYTES as u64 <= self.capacity_bytes {
            self.file.read_exact_at(&mut header, position)?;
            let Ok(h) = parse_header(&header) else { break };
            let end = position + h.size_bytes as u64;
            let expected = self.index.last().map_or(self.base_offset, |e| e.last_offset + 1);
            if end > self.capacity_bytes || h.base_offset != expected || h.last_offset() >= end_offset {
                break;
            }
            self.index.push(IndexEntry {
                base_offset: h.base_offset,
                last_offset: h.last_offset(),
                position,
                size: h.size_bytes as u32,
                max_timestamp: h.max_timestamp,
            });
            position = end;
        }
        self.written_bytes = position;
        // Whatever follows is either zeros or batches beyond the checkpoint that the Raft log
        // will apply again; zero it so a later scan cannot mistake it for data.
        let stale_end = self.find_stale_end(position)?;
        punch_zeros(&self.file, position, stale_end)
    }

    /// End of non-zero bytes after `from`, probed by headers: a cheap upper bound for zeroing.
    fn find_stale_end(&self, from: u64) -> io::Result<u64> {
        let mut header = [0u8; BATCH_HEADER_BYTES];
        let mut position = from;
        while position + BATCH_HEADER_BYTES as u64 <= self.capacity_bytes {
            self.file.read_exact_at(&mut header, position)?;
            match parse_header(&header) {
                Ok(h) => position += h.size_bytes as u64,
                Err(_) if header.iter().all(|b| *b == 0) => return Ok(position.min(self.capacity_bytes)),
                Err(_) => return Ok(self.capacity_bytes),
            }
        }
        Ok(self.capacity_bytes)
    }

    pub fn has_room(&self, size: usize) -> bool {
        self.written_bytes + size as u64 <= self.capacity_bytes
    }

    pub fn append(&mut self, batch: &[u8], entry: IndexEntry) -> io::Result<()> {
        let end = self.written_bytes + batch.len() as u64;
        if end > self.allocated_bytes {
            let to = next_allocation(self.allocated_bytes, end, self.capacity_bytes);
            reserve(&self.file, self.allocated_bytes, to)?;
            self.allocated_bytes = to;
        }
        self.file.write_all_at(batch, self.written_bytes)?;
        self.index.push(IndexEntry { position: self.written_bytes, ..entry });
        self.written_bytes += batch.len() as u64;
        self.dirty = true;
        Ok(())
    }

    pub fn read_at(&self, position: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, position)?;
        Ok(buf)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        if self.dirty {
            self.file.sync_data()?;
            self.dirty = false;
        }
        Ok(())
    }

    /// Called when the segment stops being the active one: persist its index.
    pub fn seal(&mut self) -> io::Result<()> {
        self.flush()?;
        let mut body = Vec::with_capacity(self.index.len() * INDEX_ENTRY_BYTES + 4);
        for entry in &self.index {
            entry.encode(&mut body);
        }
        let crc = crc32c::crc32c(&body);
        body.extend_from_slice(&crc.to_be_bytes());
        raft_store::write_file_atomic(&index_path(&self.path), &body)
    }

    pub fn delete(self) -> io::Result<()> {
        let _ = std::fs::remove_file(index_path(&self.path));
        std::fs::remove_file(&self.path)
    }

    pub fn last_offset(&self) -> Option<i64> {
        self.index.last().map(|e| e.last_offset)
    }
}

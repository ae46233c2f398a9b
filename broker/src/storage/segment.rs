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
//!
//! A *journaled* segment (issue 31) leaves most of its batches where the Raft log wrote them:
//! its index entries say where (`IndexEntry::log_segment`), and its own file holds only the
//! batches apply makes itself (transaction markers). Its index is kept in a journal beside it
//! (`journal.rs`), appended at apply, which open reads instead of scanning the own file.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use kafka_compat::batch::{parse_header, BATCH_HEADER_BYTES};

use super::journal::{journal_path, Journal};
use super::reads::LogFiles;

use crate::limits::{SEGMENT_ALLOCATION_STEP_BYTES_MAX, SEGMENT_ALLOCATION_STEP_BYTES_MIN};

/// One batch in a segment: the offset index and the time index in one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    pub base_offset: i64,
    pub last_offset: i64,
    /// Where the batch starts: in the segment's own file, or in the Raft log segment
    /// `log_segment` names (by its first index).
    pub position: u64,
    pub size: u32,
    pub max_timestamp: i64,
    pub log_segment: Option<u64>,
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
            log_segment: None,
        }
    }
}

pub struct Segment {
    pub base_offset: i64,
    pub path: PathBuf,
    file: File,
    /// End of the batches in the own file.
    pub written_bytes: u64,
    /// Bytes of all its batches, wherever they lie: what `segment.bytes` and retention count.
    pub batch_bytes: u64,
    pub capacity_bytes: u64,
    /// Bytes from the start of the file whose blocks are known to be reserved.
    allocated_bytes: u64,
    pub index: Vec<IndexEntry>,
    dirty: bool,
    /// The index's journal, in a journaled segment.
    journal: Option<Journal>,
    /// Bytes of its batches per Raft log segment they lie in.
    pub log_bytes: BTreeMap<u64, u64>,
    /// Takes no more batches: the next append rolls (`PartitionLog::close_active`).
    closed: bool,
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
    /// none until the first append. A journaled one reserves nothing ahead: its own file holds
    /// only markers.
    pub fn create(
        dir: &Path,
        base_offset: i64,
        capacity_bytes: u64,
        preallocate: bool,
        journaled: bool,
    ) -> io::Result<Segment> {
        let path = segment_path(dir, base_offset);
        let journal = if journaled { Some(Journal::create(&journal_path(&path))?) } else { None };
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
        file.set_len(capacity_bytes)?;
        let allocated_bytes = if preallocate && !journaled { capacity_bytes } else { 0 };
        reserve(&file, 0, allocated_bytes)?;
        raft_store::fsync_dir(dir)?;
        let mut segment = Segment::empty(base_offset, path, file, capacity_bytes, journal);
        (segment.allocated_bytes, segment.dirty) = (allocated_bytes, true);
        Ok(segment)
    }

    fn empty(
        base_offset: i64,
        path: PathBuf,
        file: File,
        capacity_bytes: u64,
        journal: Option<Journal>,
    ) -> Segment {
        Segment {
            base_offset,
            path,
            file,
            written_bytes: 0,
            batch_bytes: 0,
            capacity_bytes,
            allocated_bytes: 0,
            index: Vec::new(),
            dirty: false,
            journal,
            log_bytes: BTreeMap::new(),
            closed: false,
        }
    }

    /// Opens an existing segment, keeping only batches whose last offset is below
    /// `end_offset`; anything after is zeroed (cut from a journal) so it can never be read
    /// back.
    pub fn open(path: PathBuf, base_offset: i64, end_offset: i64, sealed: bool) -> io::Result<Segment> {
        let file = OpenOptions::new().read(true).write(true).open(&path)?;
        let capacity_bytes = file.metadata()?.len();
        let journal_at = journal_path(&path);
        let mut segment = Segment::empty(base_offset, path, file, capacity_bytes, None);
        if journal_at.exists() {
            let (journal, index) = Journal::open(&journal_at, base_offset, end_offset)?;
            segment.journal = Some(journal);
            index.iter().for_each(|e| segment.count(e));
        } else {
            let loaded = sealed && segment.load_index_file(end_offset)?;
            if !loaded {
                segment.scan(end_offset)?;
            }
            segment.batch_bytes = segment.written_bytes;
        }
        // Whatever lies past the written end may be a hole: the next append reserves from
        // there (reserving blocks already held costs nothing), so reopening allocates nothing.
        segment.allocated_bytes = segment.written_bytes;
        Ok(segment)
    }

    /// Whether its index is journaled (most batches in the Raft log).
    pub fn is_journaled(&self) -> bool {
        self.journal.is_some()
    }

    /// Adds an entry read from a journal to the in-memory index and the byte counts.
    fn count(&mut self, entry: &IndexEntry) {
        let end = entry.position + u64::from(entry.size);
        match entry.log_segment {
            Some(log) => *self.log_bytes.entry(log).or_default() += u64::from(entry.size),
            None => self.written_bytes = self.written_bytes.max(end),
        }
        self.batch_bytes += u64::from(entry.size);
        self.index.push(*entry);
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
                log_segment: None,
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

    /// Whether a batch of `size` bytes still fits. Its own file never holds more than all its
    /// batches, so counting every batch bounds both.
    pub fn has_room(&self, size: usize) -> bool {
        !self.closed && self.batch_bytes + size as u64 <= self.capacity_bytes
    }

    /// Seals it and takes no more batches.
    pub fn close(&mut self) -> io::Result<()> {
        self.closed = true;
        self.seal()
    }

    /// Stops counting the batches that end below `log_start` in the Raft log segments they
    /// lie in: they are deleted, and nothing reads them (`PartitionLog::index_entries`).
    pub fn forget_below(&mut self, log_start: i64) {
        if self.index.first().is_none_or(|e| e.last_offset >= log_start) {
            return;
        }
        self.log_bytes.clear();
        for entry in self.index.iter().filter(|e| e.last_offset >= log_start) {
            if let Some(segment) = entry.log_segment {
                *self.log_bytes.entry(segment).or_default() += u64::from(entry.size);
            }
        }
    }

    /// Appends `batch` to the own file (and its entry to the journal, if journaled).
    pub fn append(&mut self, batch: &[u8], entry: IndexEntry) -> io::Result<()> {
        let end = self.written_bytes + batch.len() as u64;
        if end > self.allocated_bytes {
            let to = next_allocation(self.allocated_bytes, end, self.capacity_bytes);
            reserve(&self.file, self.allocated_bytes, to)?;
            self.allocated_bytes = to;
        }
        self.file.write_all_at(batch, self.written_bytes)?;
        let entry = IndexEntry { position: self.written_bytes, log_segment: None, ..entry };
        self.written_bytes += batch.len() as u64;
        self.batch_bytes += batch.len() as u64;
        self.dirty = true;
        self.index.push(entry);
        match &mut self.journal {
            Some(journal) => journal.append(&entry),
            None => Ok(()),
        }
    }

    /// Indexes a batch that stays where the Raft log wrote it (`entry.log_segment`); only a
    /// journaled segment can.
    pub fn append_located(&mut self, entry: IndexEntry) -> io::Result<()> {
        let Some(journal) = &mut self.journal else {
            return Err(io::Error::other("a located batch in a segment without a journal"));
        };
        journal.append(&entry)?;
        self.count(&entry);
        Ok(())
    }

    /// The batches of `entries` (consecutive entries of this segment), back to back, from
    /// its own file or the Raft log's.
    pub fn read_entries(&self, entries: &[IndexEntry], log: &LogFiles) -> io::Result<Vec<u8>> {
        super::reads::read_entries(&self.file, entries, log)
    }

    pub fn read_at(&self, position: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, position)?;
        Ok(buf)
    }

    /// Makes its own file durable, then its journal: an entry never outlives its batch.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.dirty {
            self.file.sync_data()?;
            self.dirty = false;
        }
        match &mut self.journal {
            Some(journal) => journal.flush(),
            None => Ok(()),
        }
    }

    /// Called when the segment stops being the active one: persist its index (a journaled
    /// segment's index is its journal).
    pub fn seal(&mut self) -> io::Result<()> {
        self.flush()?;
        if self.journal.is_some() {
            return Ok(());
        }
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
        // The own file goes first: a journal left without it is removed at open
        // (`PartitionLog::open`), while an own file left without its journal would be taken
        // for a segment of its own and scanned.
        std::fs::remove_file(&self.path)?;
        remove_if_present(&journal_path(&self.path))
    }

    pub fn last_offset(&self) -> Option<i64> {
        self.index.last().map(|e| e.last_offset)
    }
}

/// Removes a file that may not exist.
pub(super) fn remove_if_present(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[path = "segment_copy.rs"]
mod copy;
pub use copy::{Copied, CopyPlan};

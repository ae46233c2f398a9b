//! Copying a journaled segment's batches out of Raft log segments about to be freed, into its
//! own file (`storage::copier`, issue 31): the plan taken under the partition's lock, the copy
//! made without it, and the switch to the copy under it again.

use std::collections::BTreeSet;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use super::super::journal::{self, journal_path, Journal};
use super::super::reads::LogFiles;
use super::{IndexEntry, Segment};

/// A sealed journaled segment's batches that lie in Raft log segments about to be freed, to
/// be copied into its own file (`storage::copier`) without the partition's lock: no append
/// races a sealed segment, and the copy changes nothing it serves until `switch_to`.
pub struct CopyPlan {
    base_offset: i64,
    /// Batches that end below it are deleted: not copied.
    log_start: i64,
    file: File,
    index: Vec<IndexEntry>,
    written_bytes: u64,
    log: LogFiles,
}

impl CopyPlan {
    /// Copies the batches in `doomed` after the own file's written end and makes them durable;
    /// returns the index and journal that point at the copies.
    pub fn run(self, doomed: &BTreeSet<u64>) -> io::Result<Copied> {
        let (mut entries, mut at, mut journal) = (self.index, self.written_bytes, Vec::new());
        for entry in entries.iter_mut() {
            if entry.log_segment.is_some_and(|s| doomed.contains(&s)) && entry.last_offset >= self.log_start {
                let batch =
                    super::super::reads::read_entries(&self.file, std::slice::from_ref(entry), &self.log)?;
                self.file.write_all_at(&batch, at)?;
                (entry.log_segment, entry.position) = (None, at);
                at += batch.len() as u64;
            }
            journal.extend_from_slice(&journal::encode(entry));
        }
        self.file.sync_data()?;
        let copied_bytes = at - self.written_bytes;
        let (base_offset, log_start) = (self.base_offset, self.log_start);
        Ok(Copied { base_offset, log_start, entries, journal, written_bytes: at, copied_bytes })
    }
}

/// The index and journal of a segment whose batches in doomed Raft log segments were copied.
pub struct Copied {
    pub base_offset: i64,
    log_start: i64,
    entries: Vec<IndexEntry>,
    journal: Vec<u8>,
    written_bytes: u64,
    pub copied_bytes: u64,
}

impl Segment {
    /// What copying the batches that lie in `doomed` Raft log segments needs, taken under
    /// the partition's lock; `None` if it has none.
    pub fn copy_plan(
        &self,
        doomed: &BTreeSet<u64>,
        log_start: i64,
        log: &LogFiles,
    ) -> io::Result<Option<CopyPlan>> {
        if !self.log_bytes.keys().any(|s| doomed.contains(s)) {
            return Ok(None);
        }
        Ok(Some(CopyPlan {
            base_offset: self.base_offset,
            log_start,
            file: self.file.try_clone()?,
            index: self.index.clone(),
            written_bytes: self.written_bytes,
            log: log.clone(),
        }))
    }

    /// Makes a copy's journal the segment's: written beside it and renamed over it (the copied
    /// batches are durable already), then the in-memory index follows. A crash before the
    /// rename keeps the old journal, whose Raft log segments are still kept: they are released
    /// only after a checkpoint taken once no partition points into them.
    pub fn switch_to(&mut self, copied: Copied) -> io::Result<()> {
        let journal_at = journal_path(&self.path);
        let mut bytes = journal::header().to_vec();
        bytes.extend_from_slice(&copied.journal);
        raft_store::write_file_atomic(&journal_at, &bytes)?;
        let (journal, _) = Journal::open(&journal_at, self.base_offset, i64::MAX)?;
        self.journal = Some(journal);
        self.index.clear();
        (self.written_bytes, self.batch_bytes) = (0, 0);
        self.log_bytes.clear();
        let log_start = copied.log_start;
        copied.entries.iter().for_each(|e| self.count(e));
        self.written_bytes = self.written_bytes.max(copied.written_bytes);
        self.forget_below(log_start);
        Ok(())
    }
}

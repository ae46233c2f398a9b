//! The bytes of one partition: an ordered list of segments, the materialized view of every
//! `Append` the Raft log applied to this partition.
//!
//! Nothing here is fsynced on the apply path: the Raft log is the write-ahead log. A checkpoint
//! flushes partition files first, and start-up truncates each partition to its checkpointed
//! end before the Raft log is re-applied (DESIGN §3).

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use kafka_compat::batch::parse_header;

use super::locate::LogLocation;
use super::reads::LogFiles;
use super::segment::{remove_if_present, Copied, CopyPlan, IndexEntry, Segment};

/// How a partition's new segments are made: `segment.bytes` and `preallocate` of its topic,
/// and whether they are journaled (their batches left in the Raft log, issue 31).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentPolicy {
    pub segment_bytes: u64,
    /// Reserve the whole segment at creation (`log.preallocate`), not step by step.
    pub preallocate: bool,
    pub journaled: bool,
}

pub struct PartitionLog {
    dir: PathBuf,
    segments: Vec<Segment>,
    /// The log start offset: batches that end below it are deleted though their segment
    /// stays (Kafka deletes whole segments); nothing reads them, and they keep no Raft log
    /// segment (`Segment::forget_below`).
    log_start: i64,
    /// Where the batches of journaled segments are read.
    log_files: LogFiles,
}

/// Batches read for a fetch: whole batches, starting with the one holding the fetch offset.
pub struct ReadBatches {
    pub bytes: Bytes,
}

impl PartitionLog {
    /// Opens (or creates) the partition directory and truncates it to `end_offset`.
    pub fn open(
        dir: &Path,
        log_start_offset: i64,
        end_offset: i64,
        log_files: LogFiles,
    ) -> io::Result<PartitionLog> {
        std::fs::create_dir_all(dir)?;
        let bases = list_segments(dir)?;
        let mut segments = Vec::new();
        let count = bases.len();
        for (i, (base, path)) in bases.into_iter().enumerate() {
            let next_base = segments_next_base(&segments);
            let doomed = base > end_offset || (base == end_offset && !segments.is_empty());
            if doomed || next_base.is_some_and(|n| base != n) {
                // Beyond the checkpoint (the Raft log rewrites it) or not contiguous.
                let _ = std::fs::remove_file(path.with_extension("index"));
                std::fs::remove_file(&path)?;
                remove_if_present(&super::journal::journal_path(&path))?;
                continue;
            }
            segments.push(Segment::open(path, base, end_offset, i + 1 < count)?);
        }
        let mut log = PartitionLog { dir: dir.to_path_buf(), segments, log_start: 0, log_files };
        log.trim(log_start_offset)?;
        Ok(log)
    }

    pub fn log_end_offset(&self) -> Option<i64> {
        self.segments.iter().rev().find_map(|s| s.last_offset()).map(|o| o + 1)
    }

    /// Appends one stamped batch, rolling to a new segment when the active one is full or of
    /// the other kind. In a journaled segment a batch the Raft log holds (`located`) is only
    /// indexed; anything else is written to the segment's own file.
    pub fn append(
        &mut self,
        batch: &[u8],
        policy: SegmentPolicy,
        located: Option<LogLocation>,
    ) -> io::Result<()> {
        let header = parse_header(batch).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let need_roll = self
            .segments
            .last()
            .is_none_or(|s| !s.has_room(batch.len()) || s.is_journaled() != policy.journaled);
        if need_roll {
            if let Some(active) = self.segments.last_mut() {
                active.seal()?;
                // Sealed, its successor not yet created: recovery must find the end anyway.
                crate::fault::point("crash-mid-segment-roll");
            }
            let capacity = policy.segment_bytes.max(batch.len() as u64);
            let (preallocate, journaled) = (policy.preallocate, policy.journaled);
            self.segments.push(Segment::create(
                &self.dir,
                header.base_offset,
                capacity,
                preallocate,
                journaled,
            )?);
        }
        let entry = IndexEntry {
            base_offset: header.base_offset,
            last_offset: header.last_offset(),
            position: 0,
            size: batch.len() as u32,
            max_timestamp: header.max_timestamp,
            log_segment: None,
        };
        let active = self.segments.last_mut().expect("rolled above");
        match located.filter(|_| active.is_journaled()) {
            Some(at) => active.append_located(IndexEntry {
                position: at.position,
                log_segment: Some(at.segment),
                ..entry
            }),
            None => active.append(batch, entry),
        }
    }

    /// Reads whole batches from the one containing `offset`, stopping before `upper_offset`
    /// (high watermark or last stable offset) and at `max_bytes` — but always returning the
    /// first batch whole, as Kafka does (KIP-74), so a large batch cannot stall a consumer.
    pub fn read(&self, offset: i64, max_bytes: usize, upper_offset: i64) -> io::Result<Option<ReadBatches>> {
        let seg_index = self.segments.partition_point(|s| s.base_offset <= offset).saturating_sub(1);
        for segment in &self.segments[seg_index..] {
            let first = segment.index.partition_point(|e| e.last_offset < offset);
            let candidates = &segment.index[first..];
            let mut take = 0usize;
            let mut bytes = 0usize;
            for entry in candidates {
                if entry.last_offset >= upper_offset || (take > 0 && bytes + entry.size as usize > max_bytes)
                {
                    break;
                }
                bytes += entry.size as usize;
                take += 1;
            }
            if take == 0 {
                if candidates.is_empty() {
                    continue;
                }
                return Ok(None);
            }
            let data = segment.read_entries(&candidates[..take], &self.log_files)?;
            debug_assert_eq!(data.len(), bytes);
            return Ok(Some(ReadBatches { bytes: Bytes::from(data) }));
        }
        Ok(None)
    }

    /// The first offset of the batches below `end_offset` (`end_offset` when there are none)
    /// and their bytes: what a snapshot archive holds of this partition
    /// ([`PartitionLog::visit_stored_bytes`] from that offset feeds them).
    pub fn export_extent(&self, end_offset: i64) -> (i64, u64) {
        let below = self.index_entries().take_while(|e| e.last_offset < end_offset);
        let (first, bytes) = below.fold((None, 0u64), |(first, bytes), e| {
            (first.or(Some(e.base_offset)), bytes + u64::from(e.size))
        });
        (first.unwrap_or(end_offset), bytes)
    }

    /// Writes `len` bytes of batches starting at `first_offset` as the partition's only
    /// segment (a snapshot install); the segment is scanned like any other when opened.
    pub fn import(dir: &Path, first_offset: i64, data: &mut dyn io::Read, len: u64) -> io::Result<()> {
        std::fs::create_dir_all(dir)?;
        if len == 0 {
            return Ok(());
        }
        let path = super::segment::segment_path(dir, first_offset);
        let mut file = std::fs::File::create(&path)?;
        let copied = io::copy(data, &mut file)?;
        if copied != len {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "snapshot partition data truncated"));
        }
        file.sync_all()?;
        raft_store::fsync_dir(dir)
    }

    /// Index entries of all segments from the log start offset on, oldest first (time index
    /// scans, retention, snapshot archives).
    pub fn index_entries(&self) -> impl Iterator<Item = &IndexEntry> {
        let start = self.log_start;
        self.segments.iter().flat_map(|s| s.index.iter()).skip_while(move |e| e.last_offset < start)
    }

    /// Reads the batch described by `entry`.
    pub fn read_batch(&self, entry: &IndexEntry) -> io::Result<Vec<u8>> {
        let seg_index =
            self.segments.partition_point(|s| s.base_offset <= entry.base_offset).saturating_sub(1);
        self.segments[seg_index].read_entries(std::slice::from_ref(entry), &self.log_files)
    }

    /// Per sealed segment: (first offset of the next segment, bytes, newest timestamp).
    /// Retention only ever removes whole sealed segments, like Kafka.
    pub fn sealed_segments(&self) -> Vec<(i64, u64, i64)> {
        let n = self.segments.len();
        (0..n.saturating_sub(1))
            .map(|i| {
                let s = &self.segments[i];
                let max_ts = s.index.iter().map(|e| e.max_timestamp).max().unwrap_or(-1);
                (self.segments[i + 1].base_offset, s.batch_bytes, max_ts)
            })
            .collect()
    }

    /// Bytes of all its batches, wherever they lie.
    pub fn total_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.batch_bytes).sum()
    }

    /// Stops the active segment from taking batches if it points into a `doomed` Raft log
    /// segment, so that it can be copied out like a sealed one; the next append rolls.
    pub fn close_active_if_in(&mut self, doomed: &BTreeSet<u64>) -> io::Result<()> {
        match self.segments.last_mut() {
            Some(active) if active.log_bytes.keys().any(|s| doomed.contains(s)) => active.close(),
            _ => Ok(()),
        }
    }

    /// Its sealed segments that point into a `doomed` Raft log segment, by base offset.
    pub fn segments_in(&self, doomed: &BTreeSet<u64>) -> Vec<i64> {
        let n = self.segments.len();
        let active_open = self.segments.last().is_some_and(|s| s.has_room(0));
        let sealed = &self.segments[..if active_open { n - 1 } else { n }];
        sealed
            .iter()
            .filter(|s| s.log_bytes.keys().any(|k| doomed.contains(k)))
            .map(|s| s.base_offset)
            .collect()
    }

    /// What copying segment `base_offset`'s batches in `doomed` needs (`CopyPlan`), or `None`
    /// if it has none or is gone.
    pub fn copy_plan(&self, base_offset: i64, doomed: &BTreeSet<u64>) -> io::Result<Option<CopyPlan>> {
        match self.segments.iter().find(|s| s.base_offset == base_offset) {
            Some(segment) => segment.copy_plan(doomed, self.log_start, &self.log_files),
            None => Ok(None),
        }
    }

    /// Switches a segment to its copy (`Segment::switch_to`); a segment trimmed meanwhile is
    /// left alone. Returns whether it switched.
    pub fn switch_to(&mut self, copied: Copied) -> io::Result<bool> {
        let base_offset = copied.base_offset;
        match self.segments.iter_mut().find(|s| s.base_offset == base_offset) {
            Some(segment) => segment.switch_to(copied).map(|()| true),
            None => Ok(false),
        }
    }

    /// Bytes of its batches per Raft log segment (by first index) they lie in.
    pub fn log_bytes(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.segments.iter().flat_map(|s| s.log_bytes.iter().map(|(k, v)| (*k, *v)))
    }

    /// Deletes sealed segments that lie wholly below `log_start_offset`; the batches below it
    /// in the segment that remains stop keeping their Raft log segments.
    pub fn trim(&mut self, log_start_offset: i64) -> io::Result<()> {
        while self.segments.len() > 1 && self.segments[1].base_offset <= log_start_offset {
            self.segments.remove(0).delete()?;
        }
        self.log_start = self.log_start.max(log_start_offset);
        if let Some(first) = self.segments.first_mut() {
            first.forget_below(self.log_start);
        }
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.segments.iter_mut().try_for_each(Segment::flush)
    }

    /// Feeds `visit` the stored bytes of every batch holding an offset in
    /// `[from_offset, end_offset)`, oldest first, in reads of at most `chunk_bytes`; returns
    /// (batches, bytes) visited. Starting at the batch that holds `from_offset`, not at the
    /// first segment, makes the bytes independent of how segments were rolled or trimmed, so
    /// replicas with different `segment.bytes` visit the same bytes (the admin `/digest`).
    pub fn visit_stored_bytes(
        &self,
        from_offset: i64,
        end_offset: i64,
        chunk_bytes: usize,
        visit: &mut dyn FnMut(&[u8]),
    ) -> io::Result<(u64, u64)> {
        let (mut batches, mut bytes) = (0u64, 0u64);
        for segment in &self.segments {
            let first = segment.index.partition_point(|e| e.last_offset < from_offset);
            let wanted = &segment.index[first..];
            let mut rest = &wanted[..wanted.partition_point(|e| e.base_offset < end_offset)];
            while !rest.is_empty() {
                // Whole batches, at most `chunk_bytes` of them (at least one) per read.
                let mut take = 1;
                let mut chunk = u64::from(rest[0].size);
                while take < rest.len() && chunk + u64::from(rest[take].size) <= chunk_bytes as u64 {
                    chunk += u64::from(rest[take].size);
                    take += 1;
                }
                visit(&segment.read_entries(&rest[..take], &self.log_files)?);
                (batches, bytes, rest) = (batches + take as u64, bytes + chunk, &rest[take..]);
            }
        }
        Ok((batches, bytes))
    }
}

/// The segments of a partition directory by base offset (their own `.log` files), after
/// removing journals left without their own file (a crash while a segment was created or
/// deleted, `Segment::delete`).
fn list_segments(dir: &Path) -> io::Result<Vec<(i64, PathBuf)>> {
    let mut bases: Vec<(i64, PathBuf)> = Vec::new();
    let mut journals = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let base = path.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse::<i64>().ok());
        match (path.extension().and_then(|e| e.to_str()), base) {
            (Some("log"), Some(base)) => bases.push((base, path)),
            (Some("refs"), Some(_)) => journals.push(path),
            // A journal being replaced when the node stopped (`Segment::switch_to`).
            (Some("tmp"), _) => std::fs::remove_file(&path)?,
            _ => {}
        }
    }
    for journal in journals.iter().filter(|j| !j.with_extension("log").exists()) {
        tracing::info!(journal = %journal.display(), "removing a partition journal without its segment");
        std::fs::remove_file(journal)?;
    }
    bases.sort();
    Ok(bases)
}

fn segments_next_base(segments: &[Segment]) -> Option<i64> {
    segments.last().map(|s| s.last_offset().map_or(s.base_offset, |o| o + 1))
}

#[cfg(test)]
#[path = "partition_log_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "partition_log_journal_tests.rs"]
mod journal_tests;

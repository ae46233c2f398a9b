//! The bytes of one partition: an ordered list of segments, the materialized view of every
//! `Append` the Raft log applied to this partition.
//!
//! Nothing here is fsynced on the apply path: the Raft log is the write-ahead log. A checkpoint
//! flushes partition files first, and start-up truncates each partition to its checkpointed
//! end before the Raft log is re-applied (DESIGN §3).

use std::io;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use kafka_compat::batch::parse_header;

use super::segment::{IndexEntry, Segment};

/// How a partition's new segments are made: `segment.bytes` and `preallocate` of its topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentPolicy {
    pub segment_bytes: u64,
    /// Reserve the whole segment at creation (`log.preallocate`), not step by step.
    pub preallocate: bool,
}

pub struct PartitionLog {
    dir: PathBuf,
    segments: Vec<Segment>,
}

/// Batches read for a fetch: whole batches, starting with the one holding the fetch offset.
pub struct ReadBatches {
    pub bytes: Bytes,
}

impl PartitionLog {
    /// Opens (or creates) the partition directory and truncates it to `end_offset`.
    pub fn open(dir: &Path, log_start_offset: i64, end_offset: i64) -> io::Result<PartitionLog> {
        std::fs::create_dir_all(dir)?;
        let mut bases: Vec<(i64, PathBuf)> = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "log") {
                if let Some(base) = path.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse().ok()) {
                    bases.push((base, path));
                }
            }
        }
        bases.sort();
        let mut segments = Vec::new();
        let count = bases.len();
        for (i, (base, path)) in bases.into_iter().enumerate() {
            let next_base = segments_next_base(&segments);
            let doomed = base > end_offset || (base == end_offset && !segments.is_empty());
            if doomed || next_base.is_some_and(|n| base != n) {
                // Beyond the checkpoint (the Raft log rewrites it) or not contiguous.
                let _ = std::fs::remove_file(path.with_extension("index"));
                std::fs::remove_file(&path)?;
                continue;
            }
            segments.push(Segment::open(path, base, end_offset, i + 1 < count)?);
        }
        let mut log = PartitionLog { dir: dir.to_path_buf(), segments };
        log.trim(log_start_offset)?;
        Ok(log)
    }

    pub fn log_end_offset(&self) -> Option<i64> {
        self.segments.iter().rev().find_map(|s| s.last_offset()).map(|o| o + 1)
    }

    /// Appends one stamped batch, rolling to a new segment when the active one is full.
    pub fn append(&mut self, batch: &[u8], policy: SegmentPolicy) -> io::Result<()> {
        let header = parse_header(batch).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let need_roll = self.segments.last().is_none_or(|s| !s.has_room(batch.len()));
        if need_roll {
            if let Some(active) = self.segments.last_mut() {
                active.seal()?;
                // Sealed, its successor not yet created: recovery must find the end anyway.
                crate::fault::point("crash-mid-segment-roll");
            }
            let capacity = policy.segment_bytes.max(batch.len() as u64);
            self.segments.push(Segment::create(&self.dir, header.base_offset, capacity, policy.preallocate)?);
        }
        let entry = IndexEntry {
            base_offset: header.base_offset,
            last_offset: header.last_offset(),
            position: 0,
            size: batch.len() as u32,
            max_timestamp: header.max_timestamp,
        };
        self.segments.last_mut().expect("rolled above").append(batch, entry)
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
            let start = candidates[0].position;
            let data = segment.read_at(start, bytes)?;
            return Ok(Some(ReadBatches { bytes: Bytes::from(data) }));
        }
        Ok(None)
    }

    /// File ranges holding every batch below `end_offset`, oldest first, and the first
    /// offset they cover (`end_offset` when there are none). Used to build snapshot archives.
    pub fn export_ranges(&self, end_offset: i64) -> (i64, Vec<(PathBuf, u64, u64)>) {
        let mut first = None;
        let mut ranges = Vec::new();
        for segment in &self.segments {
            let entries: Vec<_> = segment.index.iter().take_while(|e| e.last_offset < end_offset).collect();
            if let (Some(a), Some(b)) = (entries.first(), entries.last()) {
                first.get_or_insert(a.base_offset);
                ranges.push((segment.path.clone(), a.position, b.position + u64::from(b.size) - a.position));
            }
        }
        (first.unwrap_or(end_offset), ranges)
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

    /// Index entries of all segments, oldest first (time index scans, retention).
    pub fn index_entries(&self) -> impl Iterator<Item = &IndexEntry> {
        self.segments.iter().flat_map(|s| s.index.iter())
    }

    /// Reads the batch described by `entry`.
    pub fn read_batch(&self, entry: &IndexEntry) -> io::Result<Vec<u8>> {
        let seg_index =
            self.segments.partition_point(|s| s.base_offset <= entry.base_offset).saturating_sub(1);
        self.segments[seg_index].read_at(entry.position, entry.size as usize)
    }

    /// Per sealed segment: (first offset of the next segment, bytes, newest timestamp).
    /// Retention only ever removes whole sealed segments, like Kafka.
    pub fn sealed_segments(&self) -> Vec<(i64, u64, i64)> {
        let n = self.segments.len();
        (0..n.saturating_sub(1))
            .map(|i| {
                let s = &self.segments[i];
                let max_ts = s.index.iter().map(|e| e.max_timestamp).max().unwrap_or(-1);
                (self.segments[i + 1].base_offset, s.written_bytes, max_ts)
            })
            .collect()
    }

    pub fn total_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.written_bytes).sum()
    }

    /// Deletes sealed segments that lie wholly below `log_start_offset`.
    pub fn trim(&mut self, log_start_offset: i64) -> io::Result<()> {
        while self.segments.len() > 1 && self.segments[1].base_offset <= log_start_offset {
            self.segments.remove(0).delete()?;
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
            let taken = wanted.partition_point(|e| e.base_offset < end_offset);
            let (Some(a), Some(b)) = (wanted.first(), wanted[..taken].last()) else { continue };
            // Batches of a segment lie back to back, so the range is one contiguous read.
            let (mut at, end) = (a.position, b.position + u64::from(b.size));
            while at < end {
                let n = (end - at).min(chunk_bytes.max(1) as u64) as usize;
                visit(&segment.read_at(at, n)?);
                at += n as u64;
            }
            batches += taken as u64;
            bytes += end - a.position;
        }
        Ok((batches, bytes))
    }
}

fn segments_next_base(segments: &[Segment]) -> Option<i64> {
    segments.last().map(|s| s.last_offset().map_or(s.base_offset, |o| o + 1))
}

#[cfg(test)]
#[path = "partition_log_tests.rs"]
mod tests;

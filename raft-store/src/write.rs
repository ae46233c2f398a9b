//! The write path of `LogStore`: append (encode, pwrite into prepared segments, index),
//! segment rollover, truncate, purge (recycling segments) and the vote. Every I/O failure here poisons the store.

use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use openraft::{Entry, LogId, RaftTypeConfig, Vote};

use crate::error::LogStoreError;
use crate::format::{begin_record, seal_record, segment_name, RECORD_HEADER_BYTES};
use crate::fsutil::{fsync_dir, zero_range};
use crate::index::Loc;
use crate::limits::ENCODE_BUFFER_KEEP_BYTES;
use crate::meta::{write_meta, PURGED_FILE, VOTE_FILE};
use crate::retention::{Parked, Parking};
use crate::segment::Segment;
use crate::store::LogStore;

/// One encoded record inside the append buffer.
#[derive(Debug, Clone, Copy)]
struct Encoded {
    index: u64,
    start: usize,
    len: usize,
}

/// An encoded append: its records, and the log id of the last one (`None` if all were skipped).
type EncodedBatch<NID> = (Vec<Encoded>, Option<LogId<NID>>);

impl Encoded {
    fn end(&self) -> usize {
        self.start + self.len
    }
}

impl<C> LogStore<C>
where
    C: RaftTypeConfig<Entry = Entry<C>>,
{
    /// Writes `entries` and makes them readable. Returns the segment files written, which must
    /// be synced before the append is acknowledged.
    pub(crate) fn append_entries<I>(&mut self, entries: I) -> Result<Vec<Arc<File>>, LogStoreError>
    where
        I: IntoIterator<Item = Entry<C>>,
    {
        self.shared.poison.check()?;
        let mut buf = std::mem::take(&mut self.encode_buf);
        let result = self.encode(entries, &mut buf).and_then(|(records, last)| {
            let files = self.write_records(&buf, &records)?;
            if last.is_some() {
                self.last_log_id = last;
            }
            Ok(files)
        });
        buf.clear();
        if buf.capacity() <= ENCODE_BUFFER_KEEP_BYTES {
            self.encode_buf = buf;
        }
        self.poison_on_io(result)
    }

    /// Encodes all records before writing any, so a rejected entry leaves the log untouched.
    fn encode<I>(&self, entries: I, buf: &mut Vec<u8>) -> Result<EncodedBatch<C::NodeId>, LogStoreError>
    where
        I: IntoIterator<Item = Entry<C>>,
    {
        let mut expected = self.expected_next_index();
        let (mut records, mut last) = (Vec::new(), None);
        let purged = self.last_purged.as_ref().map(|p| p.index);
        for entry in entries {
            let index = entry.log_id.index;
            // An entry at or below the purge point is committed and already covered by the
            // state machine's snapshot; it carries nothing the log still needs (openraft's
            // conformance suite appends such entries after a purge).
            if purged.is_some_and(|p| index <= p) {
                continue;
            }
            if let Some(expected) = expected.filter(|&e| e != index) {
                return Err(LogStoreError::NotContiguous { expected, got: index });
            }
            let start = begin_record(buf);
            bincode::serialize_into(&mut *buf, &entry)?;
            let bytes = (buf.len() - start - RECORD_HEADER_BYTES) as u64;
            if bytes > u64::from(self.opts.entry_bytes_max) {
                return Err(LogStoreError::EntryTooLarge { index, bytes, max: self.opts.entry_bytes_max });
            }
            seal_record(buf, start, index, entry.log_id.leader_id.get_term());
            records.push(Encoded { index, start, len: buf.len() - start });
            expected = Some(index + 1);
            last = Some(entry.log_id);
        }
        Ok((records, last))
    }

    /// The index the next append must carry; `None` for a log that has never held or purged an
    /// entry (or was truncated to nothing), which may start anywhere.
    fn expected_next_index(&self) -> Option<u64> {
        let view = self.shared.view();
        if view.index.is_empty() && self.last_purged.is_none() {
            return None;
        }
        Some(view.index.end())
    }

    /// pwrites the records, as few calls as segment boundaries allow.
    fn write_records(&mut self, buf: &[u8], records: &[Encoded]) -> Result<Vec<Arc<File>>, LogStoreError> {
        let mut touched: Vec<Arc<File>> = Vec::new();
        let mut rest = records;
        while let Some(first) = rest.first() {
            self.ensure_segment(first.index, first.len as u64)?;
            let segment = self.segments.back_mut().expect("ensure_segment leaves an active segment");
            let (run, tail) = rest.split_at(run_length(segment, rest));
            write_run(segment, buf, run, &self.shared)?;
            if !touched.iter().any(|f| Arc::ptr_eq(f, &segment.file)) {
                touched.push(Arc::clone(&segment.file));
            }
            rest = tail;
        }
        Ok(touched)
    }

    /// Makes the last segment one that continues at `index` and accepts `bytes` more.
    fn ensure_segment(&mut self, index: u64, bytes: u64) -> Result<(), LogStoreError> {
        match self.segments.back() {
            Some(seg) if seg.next_index == index && seg.accepts(bytes) => Ok(()),
            Some(seg) if seg.next_index == index => self.start_segment(index),
            // No segment, or the log restarts elsewhere (after a purge past its end).
            _ => {
                self.reset_segments(index)?;
                self.start_segment(index)
            }
        }
    }

    /// Renames the preallocated file into place as the segment starting at `base`. The
    /// directory fsync makes the name durable before any record in it can be acknowledged.
    fn start_segment(&mut self, base: u64) -> Result<(), LogStoreError> {
        let prepared =
            self.prealloc.take().map_err(|e| LogStoreError::io("preallocating a log segment", e))?;
        let path = self.dir.join(segment_name(base));
        fs::rename(&prepared.path, &path)
            .map_err(|e| LogStoreError::io_at("renaming into place", &path, e))?;
        fsync_dir(&self.dir).map_err(|e| LogStoreError::io_at("syncing", &self.dir, e))?;
        if prepared.recycled {
            // In place, nothing of this life written yet: recovery must open it as empty.
            crate::crash_point(crate::crash_points::IN_RECYCLED_SEGMENT);
        }
        let file = Arc::new(prepared.file);
        self.shared.view().files.insert(base, Arc::clone(&file));
        let capacity = self.opts.segment_bytes;
        self.segments.push_back(Segment { base, path, file, write_pos: 0, next_index: base, capacity });
        tracing::debug!(base, "started raft log segment");
        Ok(())
    }

    /// Recycles every segment; the log continues at `index`. Only legal without live entries:
    /// what the segments hold is purged (or there is nothing).
    fn reset_segments(&mut self, index: u64) -> Result<(), LogStoreError> {
        let removed: Vec<Segment> = {
            let mut view = self.shared.view();
            if !view.index.is_empty() {
                let why = format!("append at {index} would discard live entries from {}", view.index.first());
                return Err(LogStoreError::Corrupt(why));
            }
            view.generation += 1;
            view.files.clear();
            view.index.reset(index);
            park_wanted(&mut view.parking, self.segments.drain(..).collect())
        };
        if !removed.is_empty() {
            tracing::info!(
                next_index = index,
                segments = removed.len(),
                "raft log restarts past its end; recycling purged segments"
            );
        }
        self.recycle_segments(removed)
    }

    /// Removes entries `>= log_id.index` (Raft §5.3: a follower drops a conflicting suffix).
    pub(crate) async fn truncate_since(&mut self, log_id: &LogId<C::NodeId>) -> Result<(), LogStoreError> {
        self.shared.poison.check()?;
        let (first, end, empty) = {
            let view = self.shared.view();
            (view.index.first(), view.index.end(), view.index.is_empty())
        };
        if empty || log_id.index >= end {
            return Ok(());
        }
        if let Some(purged) = self.last_purged.as_ref().filter(|p| log_id.index <= p.index) {
            return Err(LogStoreError::TruncatePurged { index: log_id.index, purged: purged.index });
        }
        // RaftLogStorage: all write I/O is serialized, so earlier appends become durable first.
        self.flusher.barrier().await?;
        let result = self.truncate_live(log_id.index.max(first), first);
        self.poison_on_io(result)
    }

    /// Truncates at live index `at`: zero the records from `at` on and fsync, so a stale record
    /// can never be read back as a continuation of a shorter rewrite; delete later segments.
    fn truncate_live(&mut self, at: u64, first: u64) -> Result<(), LogStoreError> {
        let last_kept = if at > first { Some(self.read_log_id(at - 1)?) } else { None };
        let corrupt = || LogStoreError::Corrupt(format!("no segment holds live log index {at}"));
        let loc = self.shared.view().index.get(at).ok_or_else(corrupt)?;
        let keep = self.segments.iter().rposition(|s| s.base <= at).ok_or_else(corrupt)?;
        let removed: Vec<Segment> = self.segments.drain(keep + 1..).collect();
        {
            let mut view = self.shared.view();
            view.generation += 1;
            view.index.truncate_from(at);
            for seg in &removed {
                view.files.remove(&seg.base);
            }
        }
        let seg = &mut self.segments[keep];
        let io_err = |e| LogStoreError::io_at("truncating", &seg.path, e);
        zero_range(&seg.file, loc.pos, seg.write_pos).map_err(io_err)?;
        seg.file.sync_data().map_err(io_err)?;
        tracing::info!(at, segment = %seg.path.display(), bytes_zeroed = seg.write_pos - loc.pos,
            segments_removed = removed.len(), "truncated raft log");
        (seg.write_pos, seg.next_index) = (loc.pos, at);
        self.last_log_id = last_kept;
        delete_segments(&self.dir, &removed)
    }

    /// Forgets entries `<= log_id.index`. The purge point is made durable first, then whole
    /// segments below it are deleted; a crash in between leaves files the next open removes.
    pub(crate) fn purge_upto(&mut self, log_id: &LogId<C::NodeId>) -> Result<(), LogStoreError> {
        self.shared.poison.check()?;
        if self.last_purged.as_ref().is_some_and(|p| p.index >= log_id.index) {
            return Ok(());
        }
        let result = self.purge_inner(log_id);
        self.poison_on_io(result)
    }

    fn purge_inner(&mut self, log_id: &LogId<C::NodeId>) -> Result<(), LogStoreError> {
        write_meta(&self.dir.join(PURGED_FILE), log_id)?;
        self.last_purged = Some(log_id.clone());
        let removed = self.take_purged_segments(log_id.index);
        let mut view = self.shared.view();
        view.generation += 1;
        view.index.purge_upto(log_id.index);
        for seg in &removed {
            view.files.remove(&seg.base);
        }
        // Under the same lock: a parked segment's file is never missing to a reader.
        let removed = park_wanted(&mut view.parking, removed);
        if view.index.is_empty() {
            self.last_log_id = None;
        }
        drop(view);
        tracing::debug!(upto = %log_id, segments_removed = removed.len(), "purged raft log");
        self.recycle_segments(removed)
    }

    /// Hands purged segments (those not parked) to the preallocator for reuse, deleting those
    /// it does not keep. Only purged ones: every record they hold is at or below the durable
    /// purge point, so below any index written into them later (`prealloc.rs`). A truncated
    /// suffix holds indices the log writes again and is always deleted.
    fn recycle_segments(&mut self, purged: Vec<Segment>) -> Result<(), LogStoreError> {
        if purged.is_empty() {
            return Ok(());
        }
        let purge_end = self.last_purged.as_ref().map_or(0, |p| p.index.saturating_add(1));
        for seg in &purged {
            let recyclable = seg.next_index <= purge_end;
            let kept = recyclable
                && self
                    .prealloc
                    .recycle(&seg.path)
                    .map_err(|e| LogStoreError::io_at("recycling", &seg.path, e))?;
            if !kept {
                fs::remove_file(&seg.path).map_err(|e| LogStoreError::io_at("removing", &seg.path, e))?;
            }
            // Renamed or removed, the directory not yet synced: recovery finishes the purge.
            crate::crash_point(crate::crash_points::MID_SEGMENT_RECYCLE);
        }
        fsync_dir(&self.dir).map_err(|e| LogStoreError::io_at("syncing", &self.dir, e))
    }

    /// Pops the leading segments whose entries are all `<= upto`. The last segment stays when
    /// the log continues right after it (`next_index == upto + 1`); appends keep filling it.
    fn take_purged_segments(&mut self, upto: u64) -> Vec<Segment> {
        let mut removed = Vec::new();
        while let Some(seg) = self.segments.front() {
            let all_purged = seg.next_index <= upto.saturating_add(1);
            let continues = self.segments.len() == 1 && seg.next_index == upto.saturating_add(1);
            if !all_purged || continues {
                break;
            }
            removed.extend(self.segments.pop_front());
        }
        removed
    }

    /// Saves the vote durably, after every earlier append is durable.
    pub(crate) async fn persist_vote(&mut self, vote: &Vote<C::NodeId>) -> Result<(), LogStoreError> {
        self.shared.poison.check()?;
        self.flusher.barrier().await?;
        let result = write_meta(&self.dir.join(VOTE_FILE), vote);
        self.poison_on_io(result)?;
        self.vote = Some(vote.clone());
        Ok(())
    }

    /// Stores the committed log id without fsync; see `meta::CommittedFile` for why that is safe.
    pub(crate) fn store_committed(
        &mut self,
        committed: Option<LogId<C::NodeId>>,
    ) -> Result<(), LogStoreError> {
        self.shared.poison.check()?;
        self.committed_file.write(&committed)?;
        self.committed = committed;
        Ok(())
    }

    fn read_log_id(&self, index: u64) -> Result<LogId<C::NodeId>, LogStoreError> {
        let entry = self.reader().read_one(index)?;
        entry
            .map(|e| e.log_id)
            .ok_or_else(|| LogStoreError::Corrupt(format!("live log index {index} unreadable")))
    }

    /// Latches the poison on an I/O failure: the write path never continues past one.
    fn poison_on_io<T>(&self, result: Result<T, LogStoreError>) -> Result<T, LogStoreError> {
        if let Err(e) = &result {
            if e.is_io() {
                self.shared.poison.set(&e.to_string());
            }
        }
        result
    }
}

/// How many of `records` go into `segment` in one run: as many as fit, at least one (the caller
/// made sure the segment accepts the first).
fn run_length(segment: &Segment, records: &[Encoded]) -> usize {
    let mut end = segment.write_pos;
    let mut n = 0;
    for record in records {
        if n > 0 && end + record.len as u64 > segment.capacity {
            break;
        }
        end += record.len as u64;
        n += 1;
    }
    n
}

/// One pwrite of consecutive records into the pre-written segment, then index them.
fn write_run(
    segment: &mut Segment,
    buf: &[u8],
    run: &[Encoded],
    shared: &crate::reader::Shared,
) -> Result<(), LogStoreError> {
    let (first, last) = (run[0], run[run.len() - 1]);
    let bytes = &buf[first.start..last.end()];
    segment
        .file
        .write_all_at(bytes, segment.write_pos)
        .map_err(|e| LogStoreError::io_at("writing", &segment.path, e))?;
    let mut view = shared.view();
    for record in run {
        assert_eq!(view.index.end(), record.index, "raft log index must stay contiguous");
        let pos = segment.write_pos + (record.start - first.start) as u64;
        view.index.push(Loc { pos, len: record.len as u32 });
    }
    drop(view);
    segment.write_pos += bytes.len() as u64;
    segment.capacity = segment.capacity.max(segment.write_pos);
    segment.next_index = last.index + 1;
    Ok(())
}

/// Parks the purged segments the owner may still read (`retention.rs`); returns the others.
fn park_wanted(parking: &mut Parking, purged: Vec<Segment>) -> Vec<Segment> {
    let (park, rest): (Vec<Segment>, Vec<Segment>) =
        purged.into_iter().partition(|seg| parking.wants(seg.base));
    for seg in park {
        tracing::debug!(segment = %seg.path.display(), "parked purged raft log segment");
        let bytes = seg.capacity;
        parking.parked.insert(seg.base, Parked { path: seg.path, bytes });
    }
    rest
}

/// Unlinks segment files and makes that durable.
fn delete_segments(dir: &Path, segments: &[Segment]) -> Result<(), LogStoreError> {
    if segments.is_empty() {
        return Ok(());
    }
    for seg in segments {
        fs::remove_file(&seg.path).map_err(|e| LogStoreError::io_at("removing", &seg.path, e))?;
    }
    fsync_dir(dir).map_err(|e| LogStoreError::io_at("syncing", dir, e))
}

//! `LogReader`: the cheap, cloneable read handle openraft gives to replication tasks. It shares
//! the store's in-memory index and open segment files, so readers run concurrently with appends.
//!
//! A read takes the lock only to copy out the locations it needs, then `pread`s without it. A
//! concurrent `truncate` or `purge` bumps `View::generation`; a record that fails to verify
//! after that is treated as "no longer in the log" (openraft allows missing entries), while one
//! that fails with the generation unchanged is real corruption.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::File;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use openraft::{Entry, ErrorSubject, ErrorVerb, OptionalSend, RaftLogReader, RaftTypeConfig, StorageError};

use crate::error::LogStoreError;
use crate::format::RECORD_HEADER_BYTES;
use crate::index::{EntryIndex, Loc};
use crate::limits::READ_BATCH_BYTES_MAX;
use crate::poison::Poison;
use crate::retention::Parking;
use crate::segment::read_record;

/// What readers need to find a record, guarded by `Shared::view`.
#[derive(Debug, Default)]
pub(crate) struct View {
    /// Bumped by every operation that removes entries (truncate, purge, reset).
    pub generation: u64,
    /// Segment files by first index. A record of index `i` is in the last file with base `<= i`.
    pub files: BTreeMap<u64, Arc<File>>,
    pub index: EntryIndex,
    /// Purged segments kept for the owner's reads (`retention.rs`).
    pub parking: Parking,
}

/// State shared by the store and all its readers.
#[derive(Debug)]
pub(crate) struct Shared {
    pub poison: Arc<Poison>,
    pub entry_bytes_max: u32,
    pub view: Mutex<View>,
}

/// One record to read: its index, file and location.
type Planned = (u64, Arc<File>, Loc);

impl Shared {
    pub fn view(&self) -> MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Copies out the locations of the live entries in `[start, end)`, stopping once more than
    /// `bytes_max` are planned (at least one entry is always planned).
    fn plan(&self, start: u64, end: u64, bytes_max: u64) -> (u64, Vec<Planned>) {
        let view = self.view();
        let (start, end) = (start.max(view.index.first()), end.min(view.index.end()));
        let mut plan = Vec::with_capacity(end.saturating_sub(start).min(1024) as usize);
        let mut bytes = 0u64;
        for index in start..end {
            let (Some(loc), Some((_, file))) =
                (view.index.get(index), view.files.range(..=index).next_back())
            else {
                break;
            };
            if !plan.is_empty() && bytes + u64::from(loc.len) > bytes_max {
                break;
            }
            bytes += u64::from(loc.len);
            plan.push((index, Arc::clone(file), loc));
        }
        (view.generation, plan)
    }
}

/// Read handle on the log; clones share everything.
pub struct LogReader<C> {
    shared: Arc<Shared>,
    _config: PhantomData<fn() -> C>,
}

impl<C> Clone for LogReader<C> {
    fn clone(&self) -> Self {
        LogReader { shared: Arc::clone(&self.shared), _config: PhantomData }
    }
}

impl<C> LogReader<C>
where
    C: RaftTypeConfig<Entry = Entry<C>>,
{
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        LogReader { shared, _config: PhantomData }
    }

    /// Reads the live entries in `[start, end)`, at most about `bytes_max` of them.
    pub(crate) fn read_range(
        &self,
        start: u64,
        end: u64,
        bytes_max: u64,
    ) -> Result<Vec<Entry<C>>, LogStoreError> {
        self.shared.poison.check()?;
        let (generation, plan) = self.shared.plan(start, end, bytes_max);
        let mut entries = Vec::with_capacity(plan.len());
        for (index, file, loc) in plan {
            match read_record(&file, loc, index, self.shared.entry_bytes_max) {
                Ok(record) => entries.push(bincode::deserialize(&record[RECORD_HEADER_BYTES..])?),
                // Truncated or purged while we read: the rest is simply no longer in the log.
                Err(_) if self.shared.view().generation != generation => break,
                Err(failure) => return Err(failure.into_error(index, loc)),
            }
        }
        Ok(entries)
    }

    /// The entry at `index`, if it is live.
    pub(crate) fn read_one(&self, index: u64) -> Result<Option<Entry<C>>, LogStoreError> {
        Ok(self.read_range(index, index.saturating_add(1), u64::MAX)?.pop())
    }

    /// Where the record of live entry `index` is: its segment's first index and its byte range
    /// in that file. Its payload (the entry's bincode) starts `RECORD_HEADER_BYTES` in.
    pub fn location(&self, index: u64) -> Option<RecordLocation> {
        let view = self.shared.view();
        let loc = view.index.get(index)?;
        let (&segment, _) = view.files.range(..=index).next_back()?;
        Some(RecordLocation { segment, position: loc.pos, len: loc.len })
    }

    /// The file of segment `segment` (its first index), live (already open) or parked (opened
    /// now, `retention.rs`); `None` once it is neither. Reads of it are the caller's: a record
    /// location stays valid as long as the segment is live or parked, and a file handed out
    /// stays readable after the segment is released.
    pub fn segment_file(&self, segment: u64) -> Option<Arc<File>> {
        let parked = {
            let view = self.shared.view();
            if let Some(live) = view.files.get(&segment) {
                return Some(Arc::clone(live));
            }
            view.parking.parked.get(&segment)?.path.clone()
        };
        // A release between the lookup and the open shows as the segment being gone.
        File::open(parked).ok().map(Arc::new)
    }
}

/// Where one record lies: the segment (by first index) and the record's bytes in its file,
/// header included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordLocation {
    pub segment: u64,
    pub position: u64,
    pub len: u32,
}

impl RecordLocation {
    /// Where the record's payload starts in the file.
    pub fn payload_position(&self) -> u64 {
        self.position + RECORD_HEADER_BYTES as u64
    }
}

/// `[start, end)` of any `RangeBounds<u64>`.
pub(crate) fn bounds(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

pub(crate) fn read_error<C: RaftTypeConfig>(e: LogStoreError) -> StorageError<C::NodeId> {
    e.into_storage_error(ErrorSubject::Logs, ErrorVerb::Read)
}

impl<C> RaftLogReader<C> for LogReader<C>
where
    C: RaftTypeConfig<Entry = Entry<C>>,
{
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<C>>, StorageError<C::NodeId>> {
        let (start, end) = bounds(&range);
        self.read_range(start, end, u64::MAX).map_err(read_error::<C>)
    }

    async fn limited_get_log_entries(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Vec<Entry<C>>, StorageError<C::NodeId>> {
        self.read_range(start, end, READ_BATCH_BYTES_MAX).map_err(read_error::<C>)
    }
}

//! `LogStore`: the openraft log storage of onelog. This file owns its construction (`open`:
//! lock, read metadata, recover segments, start the background threads) and its options; the
//! write path is in `write.rs`, the openraft trait glue in `raft_impl.rs`.
//!
//! Threads: one flusher (`flusher.rs`) for the life of the store, and one short-lived thread at
//! a time preparing the next segment (`prealloc.rs`). Dropping the store completes every
//! pending append callback (after syncing it) and joins both.

use std::collections::VecDeque;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use openraft::{Entry, LogId, RaftTypeConfig, Vote};

use crate::error::LogStoreError;
use crate::flusher::Flusher;
use crate::format::PAYLOAD_LEN_MAX;
use crate::fsutil::{fsync_dir, lock_dir, parent_dir};
use crate::limits::{
    ENTRY_BYTES_MAX_DEFAULT, RECYCLE_BYTES_MAX_DEFAULT, SEGMENT_BYTES_DEFAULT, SEGMENT_BYTES_MIN,
};
use crate::meta::{read_meta, CommittedFile, COMMITTED_FILE, PURGED_FILE, VOTE_FILE};
use crate::poison::Poison;
use crate::prealloc::{Preallocator, Recycling};
use crate::reader::{LogReader, Shared, View};
use crate::recovery::recover;
use crate::retention::{Parking, Retention};
use crate::segment::Segment;

/// Tuning of a `LogStore`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogStoreOptions {
    /// Size every segment file is pre-written to (default 64 MiB).
    pub segment_bytes: u64,
    /// Largest accepted encoded entry payload, on write and on read (default 64 MiB).
    pub entry_bytes_max: u32,
    /// Disk space purged segments keep for reuse as later ones instead of being deleted
    /// (`prealloc.rs`; default 512 MiB). As much log as is written between two purges
    /// recycles every segment; less gives space back sooner and makes new files.
    pub recycle_bytes_max: u64,
    /// Keep purged segments the owner may still read, until it releases them
    /// (`retention.rs`; default off: a purged segment is recycled or deleted at once).
    pub park_purged_segments: bool,
}

impl Default for LogStoreOptions {
    fn default() -> Self {
        LogStoreOptions {
            segment_bytes: SEGMENT_BYTES_DEFAULT,
            entry_bytes_max: ENTRY_BYTES_MAX_DEFAULT,
            recycle_bytes_max: RECYCLE_BYTES_MAX_DEFAULT,
            park_purged_segments: false,
        }
    }
}

impl LogStoreOptions {
    fn validate(&self) -> Result<(), LogStoreError> {
        if self.segment_bytes < SEGMENT_BYTES_MIN {
            let why =
                format!("segment_bytes {} is below the minimum {SEGMENT_BYTES_MIN}", self.segment_bytes);
            return Err(LogStoreError::InvalidOptions(why));
        }
        // A record's length (header included) must fit the u32 of the in-memory index.
        // A payload's length must also leave the length word's version bits free.
        if self.entry_bytes_max == 0 || self.entry_bytes_max > PAYLOAD_LEN_MAX {
            let why = format!("entry_bytes_max {} must be in 1..={PAYLOAD_LEN_MAX}", self.entry_bytes_max);
            return Err(LogStoreError::InvalidOptions(why));
        }
        Ok(())
    }
}

/// A segmented, preallocated, CRC-checked Raft log with group fsync. See the crate docs.
pub struct LogStore<C: RaftTypeConfig> {
    pub(crate) dir: PathBuf,
    pub(crate) opts: LogStoreOptions,
    /// Index, segment files and poison latch, shared with every `LogReader`.
    pub(crate) shared: Arc<Shared>,
    /// Segments in index order; appends go to the last one.
    pub(crate) segments: VecDeque<Segment>,
    /// Log id of the last live entry; `None` when there is none.
    pub(crate) last_log_id: Option<LogId<C::NodeId>>,
    pub(crate) last_purged: Option<LogId<C::NodeId>>,
    pub(crate) vote: Option<Vote<C::NodeId>>,
    pub(crate) committed: Option<LogId<C::NodeId>>,
    pub(crate) committed_file: CommittedFile,
    pub(crate) flusher: Flusher<C>,
    pub(crate) prealloc: Preallocator,
    /// Reused buffer for encoding an append's records.
    pub(crate) encode_buf: Vec<u8>,
    /// Held for the life of the store: the `flock` on `<dir>/LOCK`.
    _dir_lock: File,
}

impl<C> LogStore<C>
where
    C: RaftTypeConfig<Entry = Entry<C>>,
{
    /// Opens (creating if needed) the log in `dir`, recovering from any crash: a torn tail is
    /// wiped, a half-done purge is finished. Blocking; call it before starting openraft.
    pub fn open(dir: &Path, opts: LogStoreOptions) -> Result<Self, LogStoreError> {
        opts.validate()?;
        create_dir_durably(dir)?;
        let dir_lock = lock_dir(dir)
            .map_err(|e| LogStoreError::io_at("locking", dir, e))?
            .ok_or_else(|| LogStoreError::Locked(dir.display().to_string()))?;
        let vote = read_meta(&dir.join(VOTE_FILE))?;
        let last_purged: Option<LogId<C::NodeId>> = read_meta(&dir.join(PURGED_FILE))?;
        let purged_index = last_purged.as_ref().map(|p| p.index);
        let recovered = recover(dir, opts.entry_bytes_max, purged_index, opts.park_purged_segments)?;

        let poison = Arc::new(Poison::default());
        let files = recovered.segments.iter().map(|s| (s.base, Arc::clone(&s.file))).collect();
        let parking =
            Parking { enabled: opts.park_purged_segments, parked: recovered.parked, referenced: None };
        let view = View { generation: 0, files, index: recovered.index, parking };
        let shared = Arc::new(Shared {
            poison: Arc::clone(&poison),
            entry_bytes_max: opts.entry_bytes_max,
            view: Mutex::new(view),
        });
        let reader = LogReader::<C>::new(Arc::clone(&shared));
        let last_log_id = last_live_log_id(&reader, &shared)?;
        let committed_file = CommittedFile::open(&dir.join(COMMITTED_FILE))?;
        let committed = checked_committed(&reader, committed_file.read()?, last_purged.as_ref())?;

        let flusher =
            Flusher::start(poison).map_err(|e| LogStoreError::io("starting the flusher thread", e))?;
        let mut prealloc = Preallocator::new(dir, opts.segment_bytes, opts.recycle_bytes_max);
        prealloc.start().map_err(|e| LogStoreError::io("starting segment preallocation", e))?;
        tracing::info!(dir = %dir.display(), segments = recovered.segments.len(), last_purged = ?last_purged,
            last_log_id = ?last_log_id, vote = ?vote, "opened raft log");
        Ok(LogStore {
            dir: dir.to_path_buf(),
            opts,
            shared,
            segments: recovered.segments,
            last_log_id,
            last_purged,
            vote,
            committed,
            committed_file,
            flusher,
            prealloc,
            encode_buf: Vec::new(),
            _dir_lock: dir_lock,
        })
    }

    /// A read handle sharing this store's state (what `get_log_reader` returns).
    pub fn reader(&self) -> LogReader<C> {
        LogReader::new(Arc::clone(&self.shared))
    }

    /// The directory this log lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The switch of the recycling of purged segments (on when opened): see `Recycling`.
    pub fn recycling(&self) -> Recycling {
        self.prealloc.recycling()
    }

    /// The owner's handle on purged segments kept for its reads (`retention.rs`).
    pub fn retention(&self) -> Retention {
        Retention { dir: self.dir.clone(), shared: Arc::clone(&self.shared) }
    }

    /// The options this store was opened with.
    pub fn options(&self) -> &LogStoreOptions {
        &self.opts
    }
}

/// Creates `dir` and makes its creation durable (fsync of the parent), if it does not exist.
fn create_dir_durably(dir: &Path) -> Result<(), LogStoreError> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::create_dir_all(dir).map_err(|e| LogStoreError::io_at("creating", dir, e))?;
    let parent = parent_dir(dir);
    fsync_dir(parent).map_err(|e| LogStoreError::io_at("syncing", parent, e))
}

/// The log id of the last live entry, decoded from disk (the record header has no node id).
fn last_live_log_id<C>(
    reader: &LogReader<C>,
    shared: &Shared,
) -> Result<Option<LogId<C::NodeId>>, LogStoreError>
where
    C: RaftTypeConfig<Entry = Entry<C>>,
{
    let (empty, end) = {
        let view = shared.view();
        (view.index.is_empty(), view.index.end())
    };
    if empty {
        return Ok(None);
    }
    let entry = reader.read_one(end - 1)?;
    let entry =
        entry.ok_or_else(|| LogStoreError::Corrupt(format!("last log entry {} unreadable", end - 1)))?;
    Ok(Some(entry.log_id))
}

/// The saved committed log id, if it is still backed by the durable log. It is written without
/// fsync, so after a crash it can name an entry that never reached the disk; openraft would then
/// fail to re-apply up to it, so such a value is dropped and openraft re-derives it.
fn checked_committed<C>(
    reader: &LogReader<C>,
    saved: Option<LogId<C::NodeId>>,
    last_purged: Option<&LogId<C::NodeId>>,
) -> Result<Option<LogId<C::NodeId>>, LogStoreError>
where
    C: RaftTypeConfig<Entry = Entry<C>>,
{
    let Some(saved) = saved else { return Ok(None) };
    if last_purged.is_some_and(|p| saved.index <= p.index) {
        return Ok(Some(saved));
    }
    match reader.read_one(saved.index)? {
        Some(entry) if entry.log_id == saved => Ok(Some(saved)),
        _ => {
            tracing::warn!(committed = %saved, "saved committed log id is not in the durable log; dropping it");
            Ok(None)
        }
    }
}

//! Segments kept past the purge point because their owner still reads them (issue 31, step 2
//! of docs/PERFORMANCE.md's "A design that writes each byte once per node").
//!
//! Raft needs an entry only until a checkpoint covers it, but the bytes of a produced batch
//! inside that entry are the bytes a Fetch returns. A broker whose partition indexes point
//! into the log's segments (so each byte is written once per node) needs those segments as
//! long as any partition retains a batch in them. With `LogStoreOptions::park_purged_segments`
//! a purged segment the owner may still read is *parked*: out of the live log (no entry of it
//! is served to Raft; its file is never written again) but kept on disk, readable through
//! [`crate::LogReader::segment_file`], until the owner says it no longer needs it. A parked
//! segment is opened when read, not held open: a long retention parks thousands of them, and
//! a file descriptor each would run into the process's limit.
//!
//! The owner says what it needs with [`Retention::keep_only`]: the set of segments its last
//! durable checkpoint references. That set, not its in-memory view, is what must survive a
//! crash: a restart loads that checkpoint and reads through it. Until the owner has said
//! anything since the store opened, every purged segment is kept (at open, the purged
//! segments found on disk are parked, not deleted).
//!
//! Parked files keep their names (`<first index>.seg`); their bases are all at or below the
//! purge point, so below every live segment's, and their records are complete and synced (a
//! purge only ever covers committed entries a checkpoint holds). A released segment is deleted,
//! not recycled: new segments are fallocated, which costs no write (`prealloc.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::LogStoreError;
use crate::fsutil::fsync_dir;
use crate::reader::Shared;

/// One parked segment: purged from the log, kept for its owner's reads.
#[derive(Debug)]
pub(crate) struct Parked {
    pub path: PathBuf,
    /// File length, for accounting.
    pub bytes: u64,
}

/// The parked segments and what the owner references, guarded with the reader's view.
#[derive(Debug, Default)]
pub(crate) struct Parking {
    /// Whether purged segments are parked at all (`LogStoreOptions::park_purged_segments`).
    pub enabled: bool,
    pub parked: BTreeMap<u64, Parked>,
    /// The segments the owner's last durable checkpoint references; `None` until it says.
    pub referenced: Option<BTreeSet<u64>>,
}

impl Parking {
    /// Whether a segment with first index `base`, now purged, must be parked.
    pub fn wants(&self, base: u64) -> bool {
        self.enabled && self.referenced.as_ref().map_or(true, |r| r.contains(&base))
    }
}

/// What is parked: how many segments, and their bytes on disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParkedTotals {
    pub segments: u64,
    pub bytes: u64,
}

/// The owner's handle on parked segments; clones share everything.
#[derive(Clone)]
pub struct Retention {
    pub(crate) dir: PathBuf,
    pub(crate) shared: Arc<Shared>,
}

impl Retention {
    /// Declares the segments (by first index) the owner's last durable checkpoint
    /// references, and deletes every parked segment outside that set. Segments purged from
    /// now on are parked only if in the set. Live segments are unaffected. Returns how many
    /// parked segments were deleted.
    pub fn keep_only(&self, referenced: BTreeSet<u64>) -> Result<usize, LogStoreError> {
        let released: Vec<Parked> = {
            let mut view = self.shared.view();
            let gone: Vec<u64> =
                view.parking.parked.keys().filter(|b| !referenced.contains(b)).copied().collect();
            let released = gone.iter().filter_map(|b| view.parking.parked.remove(b)).collect();
            view.parking.referenced = Some(referenced);
            released
        };
        delete_parked(&self.dir, &released)?;
        Ok(released.len())
    }

    /// The first indexes of the parked segments, oldest first.
    pub fn parked(&self) -> Vec<u64> {
        self.shared.view().parking.parked.keys().copied().collect()
    }

    /// The parked segments, oldest first: (first index, bytes on disk).
    pub fn parked_bytes(&self) -> Vec<(u64, u64)> {
        self.shared.view().parking.parked.iter().map(|(base, p)| (*base, p.bytes)).collect()
    }

    /// How many segments are parked and the disk space they take.
    pub fn totals(&self) -> ParkedTotals {
        let view = self.shared.view();
        let parked = &view.parking.parked;
        ParkedTotals { segments: parked.len() as u64, bytes: parked.values().map(|p| p.bytes).sum() }
    }
}

/// Unlinks released segments and makes that durable. A reader still holding one's file keeps
/// reading it: the inode lives until the last handle closes.
pub(crate) fn delete_parked(dir: &Path, released: &[Parked]) -> Result<(), LogStoreError> {
    if released.is_empty() {
        return Ok(());
    }
    for segment in released {
        std::fs::remove_file(&segment.path)
            .map_err(|e| LogStoreError::io_at("removing", &segment.path, e))?;
        tracing::debug!(segment = %segment.path.display(), "released parked raft log segment");
    }
    fsync_dir(dir).map_err(|e| LogStoreError::io_at("syncing", dir, e))
}

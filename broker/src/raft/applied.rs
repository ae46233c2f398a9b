//! The applied-state view: the only way outside `raft` to read what the state machine has
//! applied, and the only holder of its locks.
//!
//! Readers get closures over the state as of one whole entry (apply holds the write lock for
//! one entry at a time, so no reader ever sees half of a multi-partition produce). Nothing
//! here can write: only `raft::sm_store` applies entries, and the fields it writes are private
//! to `raft`. A poisoned lock (a panic while it was held) is a broken invariant and stops the
//! node through `fatal`, never a panic in every later handler.

use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use onelog_state::BrokerState;
use tokio::sync::watch;

use super::sm_store::{Applied, SmShared};
use crate::fatal;
use crate::storage::partitions::Partitions;

#[derive(Clone)]
pub struct AppliedView {
    shared: Arc<SmShared>,
}

pub(super) fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|_| fatal::invariant("the applied state's lock is poisoned"))
}

/// For `sm_store`, the one writer.
pub(super) fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|_| fatal::invariant("the applied state's lock is poisoned"))
}

impl AppliedView {
    pub(super) fn new(shared: Arc<SmShared>) -> Self {
        AppliedView { shared }
    }

    /// Reads the applied state with its log position and membership.
    pub fn read<R>(&self, f: impl FnOnce(&Applied) -> R) -> R {
        f(&read(&self.shared.applied))
    }

    /// Reads the applied broker state.
    pub fn state<R>(&self, f: impl FnOnce(&BrokerState) -> R) -> R {
        f(&read(&self.shared.applied).state)
    }

    /// Reads the applied state and the partition files it describes, at one applied entry
    /// (Fetch, retention, the digest).
    pub fn with_partitions<R>(&self, f: impl FnOnce(&Applied, &Partitions) -> R) -> R {
        let applied = read(&self.shared.applied);
        let partitions = read(&self.shared.partitions);
        f(&applied, &partitions)
    }

    /// Judges the partitions whose files ended before the checkpoint at open
    /// (`Partitions::report_short_logs`); called once the log above the checkpoint is applied.
    pub fn report_short_partition_logs(&self) {
        self.with_partitions(|applied, partitions| partitions.report_short_logs(&applied.state));
    }

    /// Raft log segments kept past their purge because partitions point into them
    /// (`raft::sm_log`), and whether new partition segments are journaled.
    pub fn parked_log_segments(&self) -> (raft_store::ParkedTotals, bool) {
        let journaled = self.shared.log.may_journal(&read(&self.shared.applied).state);
        (self.shared.log.parked(), journaled)
    }

    /// The index of the last applied entry, as a watch (Fetch long-polls on it).
    pub fn applied_index(&self) -> watch::Receiver<u64> {
        self.shared.applied_index.subscribe()
    }

    /// Whether at least `at_least` client bytes were applied since the last checkpoint; if so,
    /// the count starts again from zero (the caller triggers the checkpoint).
    pub fn take_bytes_since_checkpoint_if(&self, at_least: u64) -> bool {
        let bytes = &self.shared.bytes_since_checkpoint;
        bytes.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| (b >= at_least).then_some(0)).is_ok()
    }
}

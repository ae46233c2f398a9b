//! A hook through which the broker times this crate's fdatasyncs (its Prometheus histogram),
//! so the log store needs no metrics library of its own.

use std::sync::OnceLock;
use std::time::Duration;

static FSYNC_OBSERVER: OnceLock<fn(Duration)> = OnceLock::new();

/// Calls `observer` with the duration of every successful fdatasync of a log segment, from
/// the flusher thread. The first call wins: a process runs one node.
pub fn set_fsync_observer(observer: fn(Duration)) {
    let _ = FSYNC_OBSERVER.set(observer);
}

pub(crate) fn fsync_done(took: Duration) {
    if let Some(observer) = FSYNC_OBSERVER.get() {
        observer(took);
    }
}

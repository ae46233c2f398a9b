//! raft-store: the one Raft log of onelog, as openraft (0.9, storage-v2) log storage.
//!
//! Every write of the broker is an entry in this log, so its fsync is on every client's path.
//! The design (DESIGN §3) therefore optimizes that fsync:
//!
//! - **Full-size segments, recycled.** Log files (`<first index>.seg`) have their full size
//!   before any record goes in, so an fdatasync never has to persist a size change: a segment
//!   purged below a checkpoint is renamed and reused (its blocks are written: the cheapest
//!   fdatasync), else a new file is fallocated and fsynced on a background thread
//!   (`prealloc.rs`). Recovery tells a recycled file's old records from new ones by index.
//! - **Group fsync.** `append` pwrites its records and returns; a flusher thread syncs once for
//!   every append queued meanwhile and only then completes their callbacks.
//! - **CRC32C per record, torn tail cut at open.** See `format.rs` for the layout and
//!   `recovery.rs` for what counts as the end of the log.
//! - **Fatal fsync.** One failed write or fsync poisons the store for good (`poison.rs`).
//! - **Parked segments.** With `park_purged_segments`, a purged segment its owner still reads
//!   (the broker's partition indexes point into it) stays on disk, readable by record
//!   location, until the owner releases it (`retention.rs`).
//!
//! Use: `LogStore::<C>::open(dir, LogStoreOptions::default())`, pass it to `openraft::Raft::new`
//! as the log store. Dropping it (openraft does on shutdown) completes pending callbacks and
//! joins its threads.

mod error;
#[cfg(feature = "fault-injection")]
pub mod fault;
mod flusher;
mod format;
mod fsutil;
mod index;
pub mod limits;
mod meta;
mod observe;
mod poison;
pub(crate) mod prealloc;
mod raft_impl;
mod reader;
mod recovery;
mod retention;
mod segment;
mod store;
mod write;

pub use error::LogStoreError;
pub use format::RECORD_HEADER_BYTES;
pub use fsutil::{fsync_dir, lock_dir, write_file_atomic};
pub use observe::set_fsync_observer;
pub use prealloc::Recycling;
pub use reader::{LogReader, RecordLocation};
pub use retention::{ParkedTotals, Retention};
pub use store::{LogStore, LogStoreOptions};

/// The log store's crash points (`ONELOG_FAULT=<name>` aborts the process there, as a kill -9
/// would, in a `fault-injection` build).
pub mod crash_points {
    /// While purged segments are recycled: some renamed (or removed), the directory not synced.
    pub const MID_SEGMENT_RECYCLE: &str = "crash-mid-segment-recycle";
    /// A recycled segment renamed into place and synced, nothing of its new life written.
    pub const IN_RECYCLED_SEGMENT: &str = "crash-in-recycled-segment";
}

/// A crash point of the log store (`fault.rs`); nothing without the `fault-injection` feature.
#[cfg(feature = "fault-injection")]
pub(crate) fn crash_point(name: &str) {
    fault::crash_point(name);
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub(crate) fn crash_point(_name: &str) {}

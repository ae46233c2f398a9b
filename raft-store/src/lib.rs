//! raft-store: the one Raft log of onelog, as openraft (0.9, storage-v2) log storage.
//!
//! Every write of the broker is an entry in this log, so its fsync is on every client's path.
//! The design (DESIGN §3) therefore optimizes that fsync:
//!
//! - **Pre-written segments.** Log files (`<first index>.seg`) are filled with zeros to their
//!   full size and fsynced once when created, on a background thread, before any record goes in.
//!   An fdatasync then never has to persist a size change (~0.17 ms instead of ~4 ms here).
//! - **Group fsync.** `append` pwrites its records and returns; a flusher thread syncs once for
//!   every append queued meanwhile and only then completes their callbacks.
//! - **CRC32C per record, torn tail cut at open.** See `format.rs` for the layout and
//!   `recovery.rs` for what counts as the end of the log.
//! - **Fatal fsync.** One failed write or fsync poisons the store for good (`poison.rs`).
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
mod prealloc;
mod raft_impl;
mod reader;
mod recovery;
mod segment;
mod store;
mod write;

pub use error::LogStoreError;
pub use format::RECORD_HEADER_BYTES;
pub use fsutil::{fsync_dir, lock_dir, write_file_atomic};
pub use observe::set_fsync_observer;
pub use reader::LogReader;
pub use store::{LogStore, LogStoreOptions};

//! Named limits and defaults of the Raft log store, units in the names (STYLE: one `limits.rs`).
//!
//! Anything that bounds memory or I/O size lives here so it can be reviewed in one place.

/// Default size of one log segment file. Segments have this size before they are used
/// (recycled, or fallocated: `prealloc.rs`), so an fdatasync after an append never has to
/// persist a file-size change (DESIGN §3).
pub const SEGMENT_BYTES_DEFAULT: u64 = 64 * 1024 * 1024;

/// Smallest accepted segment size. Tests use tiny segments to exercise rollover; below this the
/// per-segment overhead (a file, a rename, an fsync of the directory) dominates everything.
pub const SEGMENT_BYTES_MIN: u64 = 4096;

/// Default cap on one entry's encoded payload. Checked when writing and, on reading, before any
/// buffer is allocated, so a corrupt length field can never make us allocate gigabytes.
pub const ENTRY_BYTES_MAX_DEFAULT: u32 = 64 * 1024 * 1024;

/// Default disk space kept in purged segments for reuse (`LogStoreOptions::recycle_bytes_max`):
/// the broker checkpoints, and so purges, about every 512 MiB of log, so this much recycles
/// every segment in steady state.
pub const RECYCLE_BYTES_MAX_DEFAULT: u64 = 512 * 1024 * 1024;

/// Size of the zero buffer used to fill new segments where fallocate is unsupported and to
/// wipe torn tails.
pub const ZERO_FILL_CHUNK_BYTES: usize = 1024 * 1024;

/// Read buffer used when scanning segments at open.
pub const SCAN_BUFFER_BYTES: usize = 1024 * 1024;

/// Largest metadata file (vote, purged log id, committed log id) we are willing to read.
pub const META_FILE_BYTES_MAX: u64 = 4096;

/// `limited_get_log_entries` stops adding entries once this many payload bytes are collected (it
/// always returns at least one entry), so one replication read cannot pin unbounded memory.
pub const READ_BATCH_BYTES_MAX: u64 = 16 * 1024 * 1024;

/// The append encode buffer is kept between calls to avoid reallocating, unless a large batch
/// grew it past this; then it is released so one big batch does not pin memory forever.
pub const ENCODE_BUFFER_KEEP_BYTES: usize = 4 * 1024 * 1024;

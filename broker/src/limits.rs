//! Every bound the broker enforces, in one place, with its unit in its name.
//!
//! Limits that Kafka exposes as configs (`socket.request.max.bytes`, `message.max.bytes`) are
//! read from the broker config; these are the ones Kafka hard-codes or onelog adds.

/// Requests a connection may have in flight before the reader stops reading (responses are
/// still written in order). Kafka clients default to 5 in flight per connection.
pub const INFLIGHT_REQUESTS_PER_CONNECTION_MAX: usize = 64;

/// Concurrent client connections; further accepts wait.
pub const CONNECTIONS_MAX: usize = 10_000;

/// Bytes of client data the leader puts into one Raft entry (leader-side aggregation).
pub const PROPOSAL_BYTES_MAX: usize = 8 * 1024 * 1024;

/// Ops the leader puts into one Raft entry.
pub const PROPOSAL_OPS_MAX: usize = 4096;

/// Queued proposals waiting for the next entry; producers wait when it is full.
pub const PROPOSAL_QUEUE_OPS_MAX: usize = 8192;

/// Longest a Fetch may wait for data, whatever the client asks (ms).
pub const FETCH_WAIT_MS_MAX: i64 = 30_000;

/// Bytes one Fetch response may carry, whatever the client asks.
pub const FETCH_RESPONSE_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Partitions one CreateTopics/CreatePartitions request may create per topic.
pub const TOPIC_PARTITIONS_MAX: i32 = 10_000;

/// Raft entries applied between checkpoints (openraft snapshot policy). Each checkpoint
/// flushes partition files, so this trades recovery replay length against fsync load.
pub const CHECKPOINT_INTERVAL_ENTRIES: u64 = 20_000;

/// Raft entries kept below the last checkpoint, so a briefly lagging follower catches up
/// from the log instead of a snapshot.
pub const LOG_ENTRIES_KEPT_BELOW_CHECKPOINT: u64 = 2_000;

/// Allocations at or above this size are backed by reserve-only memory (see alloc_guard).
pub const ALLOCATION_RESERVE_ONLY_BYTES_MIN: usize = 1 << 30;

/// Bytes of request frames being read or handled at once, over all connections (Kafka's
/// `queued.max.request.bytes`); readers wait for room before allocating a frame.
pub const REQUEST_MEMORY_BYTES_MAX: usize = 512 * 1024 * 1024;

/// Client bytes applied between checkpoints; past this a checkpoint is triggered even if the
/// entry-count policy has not fired, bounding Raft log size and restart replay.
pub const CHECKPOINT_INTERVAL_BYTES: u64 = 512 * 1024 * 1024;

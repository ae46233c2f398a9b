//! Limits the replicas must agree on: they decide what apply does, so every replica uses the
//! leader's (see `command::ReplicatedLimits`, the replicated copy a leader proposes), never
//! its own. Node-local limits (connections, buffers, timeouts) are in `broker::limits`.

/// Producer ids with idempotence state kept at once (KIP-98), so a flood of producers (each
/// InitProducerId, or produce with an unknown id) cannot exhaust memory; the state is also in
/// every checkpoint. Each (producer, partition) holds ~0.3 KiB. When full, InitProducerId
/// evicts the least recently used producer idle for `PRODUCER_ID_EVICTION_IDLE_MS_MIN`, or is
/// refused retriably; a produce that would add an id is refused retriably.
pub const PRODUCER_IDS_LIVE_MAX: u64 = 50_000;

/// Idle time after which a producer may be evicted to make room for a new one: longer than any
/// client's retry window (librdkafka message.timeout.ms 300 s, Java delivery.timeout.ms 120 s
/// by default), so no retry of an already appended batch can arrive after the eviction and be
/// appended again (ms).
pub const PRODUCER_ID_EVICTION_IDLE_MS_MIN: i64 = 15 * 60 * 1000;

/// Batches remembered per (producer, partition) for duplicate detection: Kafka's five, which
/// is why idempotent clients keep at most five requests in flight per connection (KIP-98).
pub const PRODUCER_BATCHES_KEPT: usize = 5;

/// Bytes of the metadata string committed with one offset (Kafka's
/// `offset.metadata.max.bytes`, default 4096); longer gets OFFSET_METADATA_TOO_LARGE.
pub const OFFSET_METADATA_BYTES_MAX: usize = 4096;

/// Bytes of the JoinGroup protocols (names and embedded subscriptions) one classic member
/// inside a consumer group keeps in the replicated state (online migration). Kafka writes them
/// in the member's record, which `__consumer_offsets`' 1 MiB message limit bounds; a larger
/// JoinGroup is INVALID_REQUEST, and a classic group holding one does not upgrade.
pub const CLASSIC_MEMBER_PROTOCOLS_BYTES_MAX: usize = 1 << 20;

/// Transactional ids kept in the replicated state (each with its open transaction, if any).
/// A producer id can be evicted when idle; a transactional id is kept until
/// `transactional.id.expiration.ms`, so a flood of new ids is refused at this bound
/// (COORDINATOR_LOAD_IN_PROGRESS, retriable) instead of growing every checkpoint.
pub const TRANSACTIONAL_IDS_MAX: usize = 100_000;

/// Kafka's defaults for the replicated broker settings: `transaction.max.timeout.ms`,
/// `producer.id.expiration.ms` and `transactional.id.expiration.ms`.
pub const TXN_TIMEOUT_MS_MAX_DEFAULT: i32 = 900_000;
pub const PRODUCER_ID_EXPIRATION_MS_DEFAULT: i64 = 86_400_000;
pub const TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT: i64 = 604_800_000;

/// Users with SCRAM credentials kept at once: every node holds the table in memory and in
/// every checkpoint, so it is bounded; a new user beyond it is refused UNACCEPTABLE_CREDENTIAL
/// (Kafka has no bound).
pub const SCRAM_USERS_MAX: usize = 10_000;
/// Bytes of a SCRAM user name (Kafka has no bound; a certificate subject fits).
pub const SCRAM_USER_NAME_BYTES_MAX: usize = 1024;
/// Bytes of a SCRAM salt (Kafka's clients send 20 to 32 bytes).
pub const SCRAM_SALT_BYTES_MAX: usize = 256;

/// Largest value of `max.message.bytes` (topic) and `message.max.bytes` (broker), in bytes:
/// one batch is stamped into one Raft entry, which raft-store caps at 64 MiB
/// (`entry_bytes_max`), together with its op's framing and whatever else the entry holds. A
/// larger value is refused with INVALID_CONFIG (Kafka's own bound is `i32::MAX`); the broker
/// refuses to start with one, and checks the relation to the entry limit at compile time.
pub const MESSAGE_BYTES_MAX: i32 = 48 * 1024 * 1024;

/// ACL bindings the cluster holds, at most: every node keeps the whole table in memory and in
/// each checkpoint (a binding is ~100 bytes). A creation past it gets POLICY_VIOLATION.
pub const ACL_BINDINGS_MAX: usize = 100_000;

/// Bytes of an ACL's resource name (Kafka has no bound; topic names stop at 249, group and
/// transactional ids have none, so this is generous).
pub const ACL_RESOURCE_NAME_BYTES_MAX: usize = 4096;

/// Bytes of an ACL's principal (`type:name`; a certificate subject may be long).
pub const ACL_PRINCIPAL_BYTES_MAX: usize = 1024;

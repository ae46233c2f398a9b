//! Every bound the broker enforces, in one place, with its unit in its name.
//!
//! Limits that Kafka exposes as configs (`socket.request.max.bytes`, `message.max.bytes`,
//! `queued.max.request.bytes`, `max.connections`, `connections.max.idle.ms`) are read from the
//! broker config, with their defaults in `config.rs`; these are the ones Kafka hard-codes or
//! onelog adds.

/// Requests a connection may have in flight before the reader stops reading (responses are
/// still written in order). Kafka has no broker property: its broker reads one request per
/// connection at a time; clients send up to `max.in.flight.requests.per.connection` (5).
pub const INFLIGHT_REQUESTS_PER_CONNECTION_MAX: usize = 64;

/// Replies of one connection that are ready together leave in one write up to this many
/// bytes (`net::responses`): enough for a burst of Produce, EndTxn or heartbeat answers, and
/// small enough that a large Fetch response is never copied to join one.
pub const RESPONSE_COALESCE_BYTES_MAX: usize = 64 * 1024;

/// Share of the open files limit (RLIMIT_NOFILE) kept from Kafka clients, and its floor (never
/// more than half the limit):
/// partition segments, the Raft log, peer and admin connections need descriptors, and a node
/// that cannot open a segment stops. Client connections beyond the rest are closed at once
/// (`net/connections.rs`), whatever `max.connections` says.
pub const OPEN_FILES_RESERVED_FRACTION: usize = 4;
pub const OPEN_FILES_RESERVED_MIN: usize = 64;

/// Pause after a failed accept on the Kafka listener (ms): out of file descriptors the
/// pending connection stays queued, so an immediate retry would spin.
pub const ACCEPT_ERROR_BACKOFF_MS: u64 = 100;

/// First buffer of a request frame, allocated (and reserved from `queued.max.request.bytes`)
/// once its body bytes are readable; the buffer then at most doubles as bytes arrive, so a
/// frame holds at most twice what it received plus this (`net/framing.rs`).
pub const REQUEST_READ_BYTES_MIN: usize = 16 * 1024;

/// At most one log line per kind of client incident (malformed frame, read timeout, refused
/// connection, failed accept) per this interval (ms); the line counts the ones not logged.
pub const INCIDENT_LOG_INTERVAL_MS: u64 = 10_000;

/// Bytes of client data the leader gathers into one Raft entry from concurrent requests
/// (leader-side aggregation): once the queue taken holds this much, the entry is closed. A
/// single request may be larger, up to `ENTRY_BYTES_MAX`.
pub const PROPOSAL_BYTES_MAX: usize = 8 * 1024 * 1024;

/// Bytes of openraft's envelope around one entry's `Command` (log id, payload tag, stamp) that
/// the proposer leaves free below raft-store's entry limit; the real envelope is under 100.
const ENTRY_ENVELOPE_BYTES: usize = 64 * 1024;

/// Bytes of ops the proposer puts into one Raft entry, as `Proposal::size_bytes` counts them
/// (at least their bincode size): raft-store refuses to write a larger entry
/// (`entry_bytes_max`, 64 MiB by default) and a refused log write stops the node (issue 13,
/// reproduction 1). A produce request larger than this is split across entries, by partition,
/// when it is not transactional; a transactional one, or one partition's records, larger than
/// this gets RECORD_LIST_TOO_LARGE.
pub const ENTRY_BYTES_MAX: usize =
    raft_store::limits::ENTRY_BYTES_MAX_DEFAULT as usize - ENTRY_ENVELOPE_BYTES;
const _: () = assert!(PROPOSAL_BYTES_MAX <= ENTRY_BYTES_MAX);
// One batch of the largest allowed `message.max.bytes` / `max.message.bytes`, with its
// partition's framing (a topic name of at most 249 bytes), fits one entry.
const _: () = assert!(
    onelog_state::limits::MESSAGE_BYTES_MAX as usize + kafka_compat::topic_name::TOPIC_NAME_LEN_MAX + 1024
        <= ENTRY_BYTES_MAX
);
// The takeover entry aborts every open transaction in one op: one (transactional id, producer
// id and epoch) each. (EndTxn's entry carries no markers: apply writes them from the state, so
// `TXN_PARTITIONS_MAX` does not bound an entry.)
const _: () = assert!(
    onelog_state::limits::TRANSACTIONAL_IDS_MAX * (TRANSACTIONAL_ID_BYTES_MAX + 64) <= ENTRY_BYTES_MAX
);
// A Raft RPC frame carries one entry as large as raft-store accepts.
const _: () =
    assert!(raft_store::limits::ENTRY_BYTES_MAX_DEFAULT as usize + 1024 * 1024 <= RAFT_FRAME_BYTES_MAX);

/// Bytes the compressed batches of one Produce request may inflate to while the leader
/// validates them (Kafka's `LogValidator` inflates every compressed batch, without a bound).
/// Inflation streams through a small buffer, so this bounds CPU, not memory: a request past it
/// gets MESSAGE_TOO_LARGE for the partition that crossed it (a Java producer then splits the
/// batch and retries). Real batches inflate 2-10×; a 1 MB gzip batch of zeros inflates 1000×.
pub const PRODUCE_INFLATED_BYTES_MAX: usize = 256 * 1024 * 1024;

/// Bytes of records up to which a Produce request is validated on the async worker that read
/// it; a larger one is validated in `block_in_place`, so inflating it (up to
/// `PRODUCE_INFLATED_BYTES_MAX`, about a second of CPU for gzip) does not stall the other
/// connections on that worker. Validating 256 KiB costs about 0.1 ms uncompressed and 1-8 ms
/// compressed (kafka-compat's `validate_bench`).
pub const PRODUCE_VALIDATE_ON_WORKER_BYTES_MAX: usize = 256 * 1024;

/// Bytes one ListOffsets request may inflate, over all its partitions, to find the records
/// inside the batches the time index points at (Kafka inflates without a bound): as much as one
/// produce request may inflate, so a lookup into any one validated batch is exact. Past it, a
/// compressed batch is answered from the index alone (its first offset and maximum timestamp,
/// never after the exact answer), so a request naming many partitions costs bounded CPU.
pub const LIST_OFFSETS_INFLATED_BYTES_MAX: usize = PRODUCE_INFLATED_BYTES_MAX;

/// Ops the leader puts into one Raft entry.
pub const PROPOSAL_OPS_MAX: usize = 4096;

/// Most entries `onelog.raft.entries.in.flight` lets the proposer hand to Raft before the
/// first of them is applied (pipelined proposals, issue 31; `onelog_state::in_flight`): while
/// they replicate and fsync, the next requests are stamped into the next entry instead of
/// waiting for the last one's apply. The config's default is 1 (no pipelining).
pub const ENTRIES_IN_FLIGHT_MAX: usize = 16;

/// The most worker threads `onelog.runtime.worker.threads` may ask for: well past any CPU
/// count a node runs on, and low enough that a typo cannot start thousands of threads.
pub const RUNTIME_WORKER_THREADS_MAX: usize = 256;

/// Bytes of entries in flight past which the proposer builds no more until one applies: so
/// pipelining holds at most about this much client data besides one entry (up to
/// `ENTRY_BYTES_MAX`) in the leader's memory.
pub const ENTRIES_IN_FLIGHT_BYTES_MAX: usize = 32 * 1024 * 1024;

/// Queued proposals waiting for the next entry; producers wait when it is full.
pub const PROPOSAL_QUEUE_OPS_MAX: usize = 8192;

/// Longest a Fetch may wait for data, whatever the client asks (ms): the client's
/// `fetch.max.wait.ms` (default 500) is capped here; Kafka has no cap.
pub const FETCH_WAIT_MS_MAX: i64 = 30_000;

/// Bytes one Fetch response may carry, whatever the client asks (Kafka's broker
/// `fetch.max.bytes`, default 55 MiB, caps the client's ask the same way).
pub const FETCH_RESPONSE_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Partitions one CreateTopics/CreatePartitions request may create per topic (Kafka has no
/// such bound): each partition is state on every replica and a file on first write.
pub const TOPIC_PARTITIONS_MAX: i32 = 10_000;

/// Raft entries applied between checkpoints (openraft snapshot policy). Each checkpoint
/// flushes partition files, so this trades recovery replay length against fsync load.
pub const CHECKPOINT_INTERVAL_ENTRIES: u64 = 20_000;

/// Raft entries kept below the last checkpoint, so a briefly lagging follower catches up
/// from the log instead of a snapshot.
pub const LOG_ENTRIES_KEPT_BELOW_CHECKPOINT: u64 = 2_000;

/// Allocations at or above this size are backed by reserve-only memory (see alloc_guard).
pub const ALLOCATION_RESERVE_ONLY_BYTES_MIN: usize = 1 << 30;

/// Client bytes applied between checkpoints; past this a checkpoint is triggered even if the
/// entry-count policy has not fired, bounding Raft log size and restart replay.
pub const CHECKPOINT_INTERVAL_BYTES: u64 = 512 * 1024 * 1024;

/// Bytes of one Raft RPC frame after its 8-byte length+CRC header, checked before the frame is
/// allocated. Must hold one log entry as large as raft-store accepts (64 MiB, its default
/// `entry_bytes_max`) plus the AppendEntries envelope, or that entry could never replicate.
pub const RAFT_FRAME_BYTES_MAX: usize = 72 * 1024 * 1024;

/// Bytes of one AppendEntries request. A larger request with more than one entry is refused
/// locally with openraft's `PayloadTooLarge`, so openraft resends fewer entries: one RPC's send
/// plus the follower's fsync must fit in the heartbeat-interval RPC timeout.
pub const RAFT_APPEND_ENTRIES_BYTES_MAX: usize = 16 * 1024 * 1024;

/// Raft RPCs one inbound peer connection may have being handled at once; the server stops
/// reading the connection until one finishes.
pub const RAFT_INFLIGHT_RPCS_PER_CONNECTION_MAX: usize = 32;

/// Encoded Raft RPC frames queued for one peer connection's writer; callers wait when full
/// (inside their RPC timeout).
pub const RAFT_OUTBOUND_FRAMES_PER_PEER_MAX: usize = 64;

/// Read and write buffer of a Raft peer connection (bytes). Larger frames bypass it.
pub const RAFT_SOCKET_BUFFER_BYTES: usize = 64 * 1024;

/// Longest a TCP connect plus handshake to a Raft peer may take (ms); capped further at half
/// the RPC's own timeout so a black-holed peer is reported unreachable, not timed out.
pub const RAFT_CONNECT_TIMEOUT_MS: u64 = 1_000;

/// First and largest wait before reconnecting to a Raft peer after a failed connect (ms); the
/// wait doubles per consecutive failure. RPCs inside the wait fail at once as unreachable.
pub const RAFT_RECONNECT_BACKOFF_MS_MIN: u64 = 20;
pub const RAFT_RECONNECT_BACKOFF_MS_MAX: u64 = 1_000;

/// Longest an accepted Raft connection may take to send its handshake (ms).
pub const RAFT_HANDSHAKE_TIMEOUT_MS: u64 = 5_000;

/// Pause after a failed accept on the Raft listener (ms), e.g. out of file descriptors.
pub const RAFT_ACCEPT_ERROR_BACKOFF_MS: u64 = 100;

/// Consecutive timed-out Raft RPCs, with no response of any kind in between, after which the
/// connection to that peer is dropped and made afresh (a peer gone without FIN or RST), once
/// the silence has also lasted `RAFT_SILENCE_BEFORE_RECONNECT_MS`.
pub const RAFT_SILENT_TIMEOUTS_BEFORE_RECONNECT: u32 = 5;

/// How long a Raft peer must have been silent (ms, from its first timed-out call) before its
/// connection is replaced. A peer that answers late is slow, not gone: a new connection drops
/// the answers on their way, needs a handshake the slow peer may not finish within half an
/// RPC's budget, and on that failure openraft stops sending to the peer for 500 ms, heartbeats
/// included, so the followers stand for election. Regression (issue 31, `slow_quorum.rs`):
/// followers answering 1.2 s late, after five 100 ms timeouts, caused exactly that. As long as
/// check-quorum: a leader whose quorum is silent longer is cut off anyway.
pub const RAFT_SILENCE_BEFORE_RECONNECT_MS: u64 = CHECK_QUORUM_MS;

/// Raft heartbeat interval (ms); openraft also uses it as the AppendEntries timeout. (KRaft's
/// counterparts, for the metadata quorum only, are `controller.quorum.fetch.timeout.ms` and
/// `controller.quorum.election.timeout.ms`; here one log carries every write, so they are
/// short.)
pub const RAFT_HEARTBEAT_MS: u64 = 100;

/// How long the leader holds back a new commit index from a follower it has nothing else to
/// send (issue 31; the `vendor/openraft` patch, `Config::commit_notify_delay_us`). Under load the
/// next AppendEntries carries it and the empty one a commit used to cost per follower is
/// saved; when idle, followers apply this much later. Far below the heartbeat, lease and
/// election times, which it does not touch.
pub const RAFT_COMMIT_NOTIFY_DELAY_US: u64 = 3_000;

/// Raft election timeout range (ms): a follower that hears nothing for this long stands.
pub const RAFT_ELECTION_TIMEOUT_MIN_MS: u64 = 300;
pub const RAFT_ELECTION_TIMEOUT_MAX_MS: u64 = 600;

/// Longest one InstallSnapshot RPC may take (ms), openraft's `install_snapshot_timeout`: the
/// last chunk's answer waits for the follower to import every partition of the archive and
/// fsync it. openraft's default (200 ms) is far less than that takes for any real archive, or
/// for a 2 MB one on two busy cores (seen in `crash_points.rs`: the leader gave up and re-sent
/// the snapshot from the start for 35 s).
pub const RAFT_INSTALL_SNAPSHOT_TIMEOUT_MS: u64 = 60_000;

/// How long after its last quorum acknowledgement a leader still serves reads: shorter than
/// the minimum election timeout, so no other leader can have been elected meanwhile.
pub const LEADER_LEASE_MS: u64 = 250;
const _: () = assert!(LEADER_LEASE_MS < RAFT_ELECTION_TIMEOUT_MIN_MS);

/// How long a read waits for the quorum round that confirms a leader whose lease lapsed
/// without an election (`Leadership::serves_reads`) before it is refused NOT_LEADER_OR_FOLLOWER
/// (ms): a few heartbeats.
pub const READ_CONFIRM_TIMEOUT_MS: u64 = 1_000;

/// Longest a statvfs reading of the data directory is reused by the free-space guard (ms,
/// `storage::free_space`): refusals start, and lift, at most this long after the file system
/// crosses `log.dir.free.bytes.min`.
pub const FREE_SPACE_READING_MAX_AGE_MS: u64 = 100;

/// Check-quorum (ms): a leader that has seen no quorum acknowledgement arrive for this long
/// stops naming itself leader, controller or coordinator and is cut off
/// (`Leadership::leader_id`, `is_cut_off`). A majority that lost this leader elects another
/// within an election timeout and a vote round, so a quorum silent for three maximum election
/// timeouts is lost, not slow; a slow one (followers answering late on a starved machine or a
/// stalled shared disk, seen at over 600 ms) keeps its leader, as Kafka keeps a slow partition
/// leader (it fences a broker only after `broker.session.timeout.ms`, 9 s). Regression (issue
/// 31): with the bound at one election timeout, a starved leader took itself for cut off with
/// the term unchanged, answered its waiting produce requests with an error and closed the
/// producer's connections, and a non-idempotent producer stored 66 records twice.
pub const CHECK_QUORUM_MS: u64 = 3 * RAFT_ELECTION_TIMEOUT_MAX_MS;
const _: () = assert!(CHECK_QUORUM_MS > LEADER_LEASE_MS);

/// Longest a follower waits for a request it forwards to the leader (auto-created topics,
/// InitProducerId, controller requests; KIP-590), and then for its own state to show the
/// change (ms).
pub const FORWARD_TIMEOUT_MS: u64 = 5_000;

/// How often a node asks the voters of each Raft group it does not run who leads it, for its
/// Metadata (`raft::remote_leaders`), and how long it waits for one voter's answer (ms).
pub const REMOTE_LEADER_CHECK_INTERVAL_MS: u64 = 1_000;
pub const REMOTE_LEADER_ASK_TIMEOUT_MS: u64 = 500;
/// How soon a node asks again about a group none of whose voters has named a leader yet (a
/// group still electing its first), so its Metadata names the leader soon after (ms).
pub const REMOTE_LEADER_UNKNOWN_RETRY_MS: u64 = 100;
/// Longest start-up waits, before the Kafka listener opens, to have heard who leads each group
/// the node does not run (ms). A partition whose leader Metadata names as -1 is retried by
/// clients, but librdkafka's offset queries keep that answer for `metadata.max.age.ms` (the
/// chaos run's start, a 5-node cluster); past this wait the node serves anyway, naming no
/// leader for that group's partitions until it hears.
pub const REMOTE_LEADER_STARTUP_WAIT_MS: u64 = 10_000;

/// Shortest time between two passes of a Raft group's leader over group 0's topics and levels
/// (`leader::groups::follow_group0`): what a new topic may wait beyond its entry before its
/// group holds it (ms).
pub const FOLLOW_GROUP0_INTERVAL_MS_MIN: u64 = 50;

/// Longest a Raft group's leader keeps asking another group's leader for a message of a
/// transaction across groups (JoinTxn, a registration, a decision's delivery), across leader
/// changes of that group (docs/SCALING.md §3, ms). A client's write then gets
/// NOT_ENOUGH_REPLICAS, which it retries.
pub const XGROUP_ASK_PATIENCE_MS: u64 = 5_000;

/// Longest one such message waits for its answer before it is asked again (ms): a
/// registration is one commit in the coordinator's group.
pub const XGROUP_CALL_TTL_MS: u64 = 2_000;

/// Pause between two tries of such a message while the other group has no leader (ms).
pub const XGROUP_RETRY_BACKOFF_MS: u64 = 50;

/// How long a coordinator's leader waits for a participant to confirm a decision before it
/// sends it again (§3.2 step 5, ms).
pub const XGROUP_DECISION_RESEND_MS: u64 = 1_000;

/// How long a coordinator's leader gathers participants' confirmations before it proposes them
/// as one entry (ms): at most that much longer it remembers a decision already applied
/// everywhere.
pub const XGROUP_CONFIRMATIONS_BATCH_MS: u64 = 50;

/// Age of an instance a participant holds open with no decision after which its leader asks
/// the coordinator what became of it (§3.3, ms): bounds how long data nobody will decide for,
/// or a lost delivery, holds a partition's last stable offset back.
pub const XGROUP_DECISION_PULL_MS: u64 = 3_000;

/// Most producer ids a participant's leader asks one coordinator about, and forgets, in one
/// pass (`coord::xgroup::forget`): 8 bytes each in the message and the entry.
pub const XGROUP_FORGET_BATCH_MAX: usize = 1_000;

/// Longest CreateTopics waits, once group 0 applied a topic placed in another Raft group, for
/// that group to hold it too (issue 32: its leader puts it in its log within a pass of
/// `leader::mirror`). A topic not there by then is answered created anyway: it is, and Produce
/// gets UNKNOWN_TOPIC_OR_PARTITION, which clients retry, until the group holds it.
pub const TOPIC_PLACED_WAIT_MS: u64 = 5_000;

/// Largest response a forwarded request may return.
pub const FORWARD_RESPONSE_BYTES_MAX: usize = 1024 * 1024;

/// Bytes hyper buffers for one admin API request head (request line and headers; hyper's
/// minimum is 8 KiB); a longer head gets 431. Admin requests carry their parameters in the
/// query string and have no body.
pub const ADMIN_REQUEST_HEAD_BYTES_MAX: usize = 8 * 1024;

/// Header lines one admin API request may carry; more get 431.
pub const ADMIN_REQUEST_HEADERS_MAX: usize = 64;

/// Longest an admin client may take to send a request head, or stay idle between requests on
/// a kept-alive connection (ms); then the connection is closed (hyper answers 408 to a head
/// cut off mid-way).
pub const ADMIN_REQUEST_READ_TIMEOUT_MS: u64 = 5_000;

/// Longest one admin API connection may stay open (ms): bounds a client that stops reading
/// its responses, which would otherwise hold a connection slot for ever. Longer than the
/// slowest request (a membership change, below); scrapers reconnect.
pub const ADMIN_CONNECTION_MS_MAX: u64 = 300_000;

/// Longest a node stopping on SIGTERM waits for its checkpoint (ms), after handing over
/// leadership; then it stops without one and the next start replays more of the log.
pub const SHUTDOWN_CHECKPOINT_MS_MAX: u64 = 10_000;

/// How long a stopping node waits to apply the entries its log holds before its checkpoint
/// at shutdown: a follower hears that its last entries committed with the leader's next
/// AppendEntries, at most `RAFT_COMMIT_NOTIFY_DELAY_US` or a heartbeat later. Two heartbeats;
/// entries that are still not committed then (no leader) are replayed at the next start.
pub const SHUTDOWN_APPLY_WAIT_MS: u64 = 2 * RAFT_HEARTBEAT_MS;

/// A leadership transfer (`raft::transport::transfer`): how long the target may take to
/// match the leader's log once writes are paused (ms), and how long the election may take
/// after `TimeoutNow` (ms: the lease, then an election, with room for a busy machine).
pub const LEADER_TRANSFER_CATCH_UP_MS: u64 = 2_000;
pub const LEADER_TRANSFER_ELECTION_MS: u64 = 5_000;

/// How far behind the leader's last log index a group's preferred leader may be for the
/// rebalance duty (`leader::rebalance`) to hand it the group: a transfer pauses the group's
/// writes until the target has matched the log, so only a target that is nearly there is worth
/// it (a busy group's followers are always a few entries behind).
pub const REBALANCE_CAUGHT_UP_ENTRIES: u64 = 256;

/// Leader changes the status page lists (`admin_api::leader_changes`).
pub const LEADER_CHANGES_KEPT: usize = 20;

/// Admin API connections served at once; further accepts wait.
pub const ADMIN_CONNECTIONS_MAX: usize = 16;

/// Longest an admin membership change may take, including a new learner catching up (ms);
/// then 504, and the change may still complete.
pub const ADMIN_MEMBERSHIP_CHANGE_TIMEOUT_MS: u64 = 120_000;

/// Bytes read from a partition file at once while hashing it for the admin `/digest`.
pub const ADMIN_DIGEST_READ_CHUNK_BYTES: usize = 1024 * 1024;

/// How often the pause watcher wakes (ms), and how late a wake-up must be to count as a
/// pause of the process (ms), after which the leader lease is suspect.
pub const PAUSE_CHECK_INTERVAL_MS: u64 = 20;
pub const PAUSE_GAP_MS: u64 = 100;

/// Bytes of a consumer group id. Kafka sets no bound; onelog keeps every group id in the
/// replicated state and in every checkpoint, so a longer one is refused: INVALID_GROUP_ID in
/// every group API that names one (see `handlers::util::group_id_invalid`), INVALID_REQUEST in
/// FindCoordinator.
pub const GROUP_ID_BYTES_MAX: usize = 255;

/// How long the leader keeps telling a node it removed that it was removed (ms), and how
/// long each attempt waits for an answer before the next (ms): the removed node is no
/// longer replicated to and may never see its removal otherwise (`raft::transport::removal`).
/// A minute covers a restart of the removed node; longer, it is the operator's to stop.
pub const REMOVAL_NOTICE_MS_MAX: u64 = 60_000;
pub const REMOVAL_NOTICE_RETRY_MS: u64 = 500;

/// A node that starts with an empty log asks its peers how much log they hold
/// (`raft::rejoin`): how long one answer may take (ms), the pause between rounds (ms), and
/// every how many rounds it logs that it is still waiting (about every 10 s).
pub const REJOIN_QUERY_TIMEOUT_MS: u64 = 1_000;

/// How long the leader waits for each member to say which feature levels its build supports
/// before an UpdateFeatures (ms): a member that does not answer in time refuses the update.
pub const FEATURES_QUERY_TIMEOUT_MS: u64 = 5_000;
/// How often the leader asks every member which feature levels its build supports, once the
/// cluster recorded levels (`leader::duties::watch_member_builds`), in ms.
pub const MEMBER_BUILDS_CHECK_MS: u64 = 30_000;

/// A peer request whose term is beyond this node's by more than this is refused before openraft
/// sees it (`raft::transport::guard`): six days of a cut-off node campaigning alone.
pub const RAFT_TERM_JUMP_MAX: u64 = 1_000_000;

/// Bytes of one Raft handshake frame, read before the peer has proved the cluster secret: an
/// unauthenticated peer gets nothing larger allocated.
pub const RAFT_HANDSHAKE_FRAME_BYTES_MAX: usize = 1024;
pub const REJOIN_QUERY_RETRY_MS: u64 = 300;
pub const REJOIN_LOG_EVERY_ROUNDS: u64 = 30;

/// How long a node removed from the membership keeps running before it exits (ms), so that
/// responses already in flight reach their clients.
pub const REMOVED_NODE_EXIT_DELAY_MS: u64 = 1_000;

/// How long the orderly exit of a node stopped on a fault (`fatal.rs`: one log line, then
/// `exit`) may take before a watchdog thread ends the process with `_exit` (ms). The orderly
/// path has been seen to hang; meanwhile the node already refuses every Kafka request, so
/// this only bounds how long its sockets stay open. Well under a second: a supervisor or a
/// test should see the exit as soon as the fault.
pub const FATAL_EXIT_WATCHDOG_MS: u64 = 500;

/// A voter whose matched log index trails the leader's last index by more than this many
/// entries is left out of every partition's ISR in Metadata.
pub const ISR_LAG_ENTRIES_MAX: u64 = 1_000;

/// Member ids handed out with MEMBER_ID_REQUIRED (KIP-394) and not yet used, per group; a
/// client that keeps asking for ids without joining gets GROUP_MAX_SIZE_REACHED.
pub const GROUP_PENDING_MEMBERS_MAX: usize = 1_000;

/// How often the leader looks for group members whose session passed without a heartbeat
/// (ms); a session therefore ends at most this much after `session.timeout.ms`.
pub const GROUP_SESSION_CHECK_INTERVAL_MS: u64 = 250;

/// How stale the log's record of when a KIP-848 member was last heard from may grow before the
/// leader writes a `RecordConsumerLiveness` entry (ms): at most one such entry per this
/// interval, for all groups. A new leader arms each session from that record
/// (`coord::consumer`), so it is at most this much shorter than a full session.
pub const CONSUMER_LIVENESS_RECORD_MS: i64 = 5_000;
/// The least of a member's session a new leader gives it, in its group's heartbeat intervals:
/// the time a live member needs to find the new leader and heartbeat there.
pub const CONSUMER_TAKEOVER_GRACE_HEARTBEATS: i64 = 2;

/// Bytes of a transactional id: kept in the replicated state and every checkpoint, like a
/// group id; a longer one gets INVALID_REQUEST from InitProducerId.
pub const TRANSACTIONAL_ID_BYTES_MAX: usize = 255;

/// Partitions one transaction may add (Kafka has no bound): each is kept in the open
/// transaction's replicated state, and apply writes a marker to each at EndTxn (the entry
/// itself carries none), so this bounds the work of applying one EndTxn.
pub const TXN_PARTITIONS_MAX: usize = 10_000;

/// Most partitions one DescribeTopicPartitions response carries (Kafka's default
/// `max.request.partition.size.limit`); a client asking more gets a cursor to continue.
pub const DESCRIBE_TOPIC_PARTITIONS_LIMIT_MAX: i32 = 2_000;

/// Disk blocks a partition segment reserves (fallocate) at a time ahead of its write position:
/// the first step, and the largest. Each step doubles what the segment already holds, so a
/// one-record partition costs the first step (plus its directories) and a busy one makes a
/// fallocate call every few MiB. Partition files are not fsynced on the write path (DESIGN §3),
/// so growing them costs no fdatasync time; the Raft log keeps its full preallocation.
pub const SEGMENT_ALLOCATION_STEP_BYTES_MIN: u64 = 64 * 1024;
pub const SEGMENT_ALLOCATION_STEP_BYTES_MAX: u64 = 8 * 1024 * 1024;
const _: () = assert!(SEGMENT_ALLOCATION_STEP_BYTES_MIN <= SEGMENT_ALLOCATION_STEP_BYTES_MAX);

/// A read of a partition's batches that lie in the Raft log (journaled segments, issue 31)
/// takes two batches of one file in one `pread` when at most this many bytes of other data
/// lie between them: a partition's consecutive batches are separated there by the records of
/// other partitions and by each entry's framing (about 100 bytes), and one read of a few KiB
/// more costs less than a system call per batch.
pub const READ_COALESCE_GAP_BYTES_MAX: u64 = 8 * 1024;

/// A Raft log segment that journaled partitions keep (parked past its purge) is freed by
/// copying its live batches into their partitions' own files once they are less than this
/// share of it (`storage::copier`): a topic that retains a little of many segments (a long
/// retention, a slow partition whose segment never fills) would otherwise keep all of them
/// with everything else's bytes in them. Below half, the disk a parked segment takes is at
/// most twice what it holds live, and each byte copied frees at least as much.
pub const COPY_LIVE_PERCENT_MAX: u64 = 50;
/// At most this many live bytes are copied out of parked segments after one checkpoint; the
/// rest waits for the next.
pub const COPY_BYTES_PER_CHECKPOINT_MAX: u64 = 256 * 1024 * 1024;

/// Bytes of one SCRAM client message (RFC 5802 client-first or client-final): a user name of
/// `onelog_state::limits::SCRAM_USER_NAME_BYTES_MAX` escaped, nonces, a SHA-512 proof and
/// extensions fit many times over; a longer token fails the exchange before it is parsed.
pub const SCRAM_MESSAGE_BYTES_MAX: usize = 8 * 1024;

/// How often an SSL listener looks at its keystore and truststore for a change (ms): a rotated
/// certificate is in use for new connections at most this long after it is written.
pub const TLS_RELOAD_POLL_MS: u64 = 2_000;

/// SASL authentication attempts one client address may make at once, and per second after
/// that (`security::sasl::throttle`): generous for clients that open a connection per broker and
/// re-authenticate (KIP-152), far below what guessing passwords needs.
pub const SASL_ATTEMPTS_BURST: u32 = 100;
pub const SASL_ATTEMPTS_PER_SECOND: u32 = 20;
/// Bytes of one frame from a SASL connection that has not authenticated yet (Kafka's
/// `sasl.server.max.receive.size` default): a SaslHandshake or token is small.
pub const SASL_UNAUTHENTICATED_FRAME_BYTES_MAX: usize = 524_288;
/// Client addresses the SASL throttle remembers at once.
pub const SASL_THROTTLED_ADDRESSES_MAX: usize = 10_000;

/// Client addresses whose failed TLS handshakes or SASL logins are remembered for the
/// once-per-address-per-interval log line (`net::incidents`).
pub const INCIDENT_ADDRESSES_MAX: usize = 4_096;
/// At most one such line per client address in this interval (ms).
pub const ADDRESS_INCIDENT_LOG_INTERVAL_MS: u64 = 60_000;

//! The commands carried by Raft log entries, and what applying them returns.
//!
//! One log entry holds one [`Command`]: every operation the leader aggregated from concurrent
//! requests while the previous entry was in flight (DESIGN §2). Each [`Op`] applies
//! all-or-nothing; ops in one entry are independent of each other. Everything an op needs —
//! offsets, timestamps, topic ids — is decided by the leader and carried in the op, so apply
//! stays a pure function.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::groups::CommitResult;
use super::txns::{BrokerAbort, ProducerIdEpoch, TxnError};

/// The payload of one Raft log entry (openraft's `D`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Command {
    pub ops: Vec<Op>,
}

/// One client-visible operation; applies all-or-nothing.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Op {
    /// First leader of a fresh cluster names it.
    InitCluster {
        cluster_id: String,
    },
    /// One produce request: every partition it wrote, applied together (DRMQ's atomic write).
    Produce(ProduceOp),
    CreateTopics(Vec<NewTopic>),
    DeleteTopics(Vec<String>),
    CreatePartitions(Vec<NewPartitions>),
    /// Retention, decided by the leader: move a partition's log start offset forward.
    TrimLog(Vec<TrimLog>),
    /// InitProducerId of an idempotent producer (KIP-98): apply allocates the next id.
    InitProducerId(InitProducerIdOp),
    /// The leader's `producer.id.expiration.ms` duty: forget producers idle that long.
    ExpireProducers(ExpireProducersOp),
    /// One OffsetCommit request: every partition's committed offset for one group.
    OffsetCommit(OffsetCommitOp),
    /// A consumer group's rebalance completed (the leader member's SyncGroup): its generation
    /// and members, so that after a failover the new leader still fences a zombie's commits.
    CompleteGeneration(GenerationOp),
    /// InitProducerId with a transactional id: allocate or bump, fencing the previous
    /// instance (its open transaction is aborted in the same op).
    InitTxnProducer(InitTxnProducerOp),
    /// TxnOffsetCommit: offsets held by the open transaction until it ends.
    TxnOffsetCommit(TxnOffsetCommitOp),
    /// EndTxn: the one durable round of a transaction (DESIGN §1).
    EndTxn(EndTxnOp),
    /// The leader aborts open transactions: timed out, or open when it took over (DESIGN §4).
    AbortTxns(AbortTxnsOp),
    /// The leader's `transactional.id.expiration.ms` duty.
    ExpireTransactionalIds(ExpireProducersOp),
    /// DeleteGroups: groups the leader's coordinator found empty, with their committed offsets
    /// and recorded generation; apply answers `OpResult::PerItem`, one per group.
    DeleteGroups(Vec<GroupDeletion>),
    /// OffsetDelete (KIP-496): committed offsets of partitions no live member subscribes to.
    OffsetDelete(OffsetDeleteOp),
}

impl Op {
    /// Whether applying the op may append transaction markers (control batches) to
    /// partitions, taking offsets the proposer does not stamp (see `proposer::stamp_entry`).
    pub fn writes_markers(&self) -> bool {
        matches!(self, Op::EndTxn(_) | Op::InitTxnProducer(_) | Op::AbortTxns(_))
    }
}

/// Everything the transaction ops need from the leader besides the request: its clock and
/// term (the marker batches' leader epoch).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct LeaderStamp {
    pub now_ms: i64,
    pub term: i32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InitTxnProducerOp {
    pub transactional_id: String,
    pub timeout_ms: i32,
    /// `transaction.max.timeout.ms` on the leader.
    pub timeout_ms_max: i32,
    /// KIP-360: the producer's current id and epoch, when it sends them.
    pub expected: Option<ProducerIdEpoch>,
    pub now_ms: i64,
    pub term: i32,
    pub producer_ids_live_max: u64,
    pub eviction_idle_ms_min: i64,
    /// `limits::TRANSACTIONAL_IDS_MAX` on the leader.
    pub transactional_ids_max: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TxnOffsetCommitOp {
    pub transactional_id: String,
    pub producer: ProducerIdEpoch,
    pub group_id: String,
    /// KIP-447: the consumer's generation and member, or -1 / "" from older clients.
    pub generation_id: i32,
    pub member_id: String,
    pub commit_time_ms: i64,
    pub metadata_bytes_max: usize,
    pub commits: Vec<OffsetCommitEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EndTxnOp {
    pub transactional_id: String,
    pub producer: ProducerIdEpoch,
    pub commit: bool,
    /// KIP-890 part 2 (EndTxn v5): bump the epoch and return it.
    pub bump_epoch: bool,
    pub stamp: LeaderStamp,
    /// For a new producer id when the epoch is exhausted (as in `InitTxnProducerOp`).
    pub producer_ids_live_max: u64,
    pub eviction_idle_ms_min: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AbortTxnsOp {
    pub reason: BrokerAbort,
    /// Each transaction as the leader saw it open; one that has moved on since is left alone.
    pub transactions: Vec<(String, ProducerIdEpoch)>,
    pub stamp: LeaderStamp,
}

/// One group of a DeleteGroups request, as the leader's coordinator saw it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct GroupDeletion {
    pub group_id: String,
    /// The coordinator's generation of the empty group: a recorded generation with members at
    /// or above it means the coordinator's view was older than the log (NON_EMPTY_GROUP).
    pub generation_id: i32,
}

/// The partitions of one OffsetDelete request whose offsets the leader found deletable;
/// apply answers `Done`, or `Refused` with GROUP_ID_NOT_FOUND.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct OffsetDeleteOp {
    pub group_id: String,
    /// (topic, partition); a partition without a committed offset is simply not there.
    pub partitions: Vec<(String, i32)>,
}

/// One completed generation of a classic consumer group (see `groups`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct GenerationOp {
    pub group_id: String,
    pub generation_id: i32,
    pub protocol_type: String,
    pub protocol_name: String,
    pub members: Vec<GenerationMember>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct GenerationMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
}

/// The commits of one OffsetCommit request; apply answers `OpResult::PerItem`, one per commit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OffsetCommitOp {
    pub group_id: String,
    /// -1 for consumers that manage assignment themselves (and admin clients).
    pub generation_id: i32,
    pub member_id: String,
    /// Leader wall clock when proposing.
    pub commit_time_ms: i64,
    /// `limits::OFFSET_METADATA_BYTES_MAX` on the leader, so replicas decide alike.
    pub metadata_bytes_max: usize,
    pub commits: Vec<OffsetCommitEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OffsetCommitEntry {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// Everything allocation depends on travels in the op, so replicas running with other limits
/// or clocks still decide alike.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InitProducerIdOp {
    /// Leader wall clock: the new producer's last activity, and the clock eviction reads.
    pub now_ms: i64,
    /// `limits::PRODUCER_IDS_LIVE_MAX` on the leader.
    pub producer_ids_live_max: u64,
    /// `limits::PRODUCER_ID_EVICTION_IDLE_MS_MIN` on the leader.
    pub eviction_idle_ms_min: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExpireProducersOp {
    /// Leader wall clock when the duty ran.
    pub now_ms: i64,
    /// The leader's `producer.id.expiration.ms`.
    pub expiration_ms: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProduceOp {
    /// Leader wall clock when stamping; used for LogAppendTime and retention bookkeeping.
    pub append_time_ms: i64,
    pub partitions: Vec<PartitionAppend>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartitionAppend {
    pub topic: String,
    pub partition: i32,
    /// Batches exactly as the client sent them, with baseOffset/partitionLeaderEpoch stamped.
    pub batches: Vec<Bytes>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewTopic {
    pub name: String,
    pub topic_id: [u8; 16],
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewPartitions {
    pub topic: String,
    pub count: i32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrimLog {
    pub topic: String,
    pub partition: i32,
    pub log_start_offset: i64,
}

/// What applying one entry returns (openraft's `R`): one result per op, in order.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CommandResponse {
    pub results: Vec<OpResult>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum OpResult {
    Done,
    /// Per partition of the produce op (or, from the proposer, of the produce request), in
    /// order.
    Produced(Vec<PartitionProduced>),
    /// InitProducerId: the new id, epoch 0.
    ProducerIdAllocated {
        producer_id: i64,
        producer_epoch: i16,
    },
    /// The op as a whole was refused; Kafka error code and a message.
    Refused {
        error_code: i16,
        message: String,
    },
    /// Per-item error codes (topics created, deleted, partitions added), in request order.
    PerItem(Vec<(i16, Option<String>)>),
    /// InitProducerId (transactional) and EndTxn: the id and epoch the client uses next.
    Txn(Result<ProducerIdEpoch, TxnError>),
    /// TxnOffsetCommit: one result per commit, or the transaction-level refusal.
    TxnOffsets(Result<Vec<CommitResult>, TxnError>),
}

/// One partition's produce outcome. A duplicate batch (KIP-98) gets NONE and the offsets and
/// append time of the batch it repeats.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PartitionProduced {
    pub error_code: i16,
    pub message: Option<String>,
    pub base_offset: i64,
    pub log_start_offset: i64,
    /// Leader clock of the op that appended the batch (the LogAppendTime of such topics).
    pub append_time_ms: i64,
}

impl PartitionProduced {
    pub fn error(error_code: i16, message: impl Into<String>) -> Self {
        PartitionProduced {
            error_code,
            message: Some(message.into()),
            base_offset: -1,
            log_start_offset: -1,
            append_time_ms: -1,
        }
    }
}

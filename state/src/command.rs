//! The commands carried by Raft log entries, and what applying them returns.
//!
//! One log entry holds one [`Command`]: every operation the leader aggregated from concurrent
//! requests while the previous entry was in flight (DESIGN §2). Each [`Op`] applies
//! all-or-nothing; ops in one entry are independent of each other. Everything an op needs —
//! offsets, topic ids — is decided by the leader and carried in the op; time and term come
//! once per entry ([`LeaderStamp`]) and limits from the replicated state
//! ([`ReplicatedLimits`]), so apply stays a pure function.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::configs::ResourceAlteration;
use super::groups::CommitResult;
use super::txns::{BrokerAbort, ProducerIdEpoch, TxnError};
use crate::consumer_group as cg;
use crate::share_group as shg;
use crate::share_partition as sp;
use crate::streams_group as sg;

/// The payload of one Raft log entry (openraft's `D`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Command {
    /// The leader's clock and term when it built the entry: the one source of time and
    /// leader epoch for every op in it (apply reads no clock).
    pub stamp: LeaderStamp,
    pub ops: Vec<Op>,
}

/// One client-visible operation; applies all-or-nothing.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Op {
    /// First leader of a fresh cluster names it.
    InitCluster(InitClusterOp),
    /// A new leader's limits, when they differ from the replicated ones (see [`ReplicatedLimits`]).
    SetLimits(ReplicatedLimits),
    /// One produce request: every partition it wrote, applied together (DRMQ's atomic write).
    Produce(ProduceOp),
    CreateTopics(CreateTopicsOp),
    DeleteTopics(DeleteTopicsOp),
    CreatePartitions(CreatePartitionsOp),
    /// Retention, decided by the leader: move a partition's log start offset forward.
    TrimLog(TrimLogOp),
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
    /// The leader aborts open transactions: timed out, or by an operator. (Before issue 17 also
    /// those open when it took over; logs written then still hold such entries.)
    AbortTxns(AbortTxnsOp),
    /// The leader's `transactional.id.expiration.ms` duty.
    ExpireTransactionalIds(ExpireTransactionalIdsOp),
    /// DeleteGroups: groups the leader's coordinator found empty, with their committed offsets
    /// and recorded generation; one result per group.
    DeleteGroups(DeleteGroupsOp),
    /// OffsetDelete (KIP-496): committed offsets of partitions no live member subscribes to.
    OffsetDelete(OffsetDeleteOp),
    /// AlterClientQuotas (KIP-546): validated changes to the client quota table.
    AlterClientQuotas(AlterClientQuotasOp),
    /// AlterConfigs / IncrementalAlterConfigs: one request's resources; one result each.
    AlterConfigs(AlterConfigsOp),
    /// DeleteRecords: move log start offsets forward as a client asked (up to the high
    /// watermark; held at the last stable offset while a transaction is open, as retention is).
    DeleteRecords(DeleteRecordsOp),
    /// CreateAcls: bindings to add; one result each (validated again in apply).
    CreateAcls(CreateAclsOp),
    /// DeleteAcls: filters evaluated in apply, so every replica deletes the same bindings.
    DeleteAcls(DeleteAclsOp),
    /// AlterUserScramCredentials (KIP-554): validated credential changes, one result per user.
    AlterScramCredentials(AlterScramCredentialsOp),
    /// UpdateFeatures (KIP-584): finalized feature levels every member supports. New in
    /// onelog 0.2.0: a 0.1.0 node cannot decode it, so the leader proposes it only once every
    /// member answered that it supports the levels (`broker::upgrade`). New variants go last:
    /// the variant index is how a log entry says which op it holds.
    UpdateFeatures(crate::features::UpdateFeaturesOp),
    /// ConsumerGroupHeartbeat (KIP-848) that changes the group: a join, a leave, a new
    /// subscription or a step of reconciliation. Steady heartbeats write nothing.
    /// `onelog.version` 3.
    ConsumerGroupHeartbeat(Box<ConsumerGroupHeartbeatOp>),
    /// A consumer-protocol member's session or revocation deadline passed on the leader.
    /// `onelog.version` 3.
    FenceConsumerGroupMember(FenceMemberOp),
    /// When the leader last heard from consumer-protocol members whose steady heartbeats wrote
    /// nothing: what a next leader arms their sessions from. `onelog.version` 3.
    RecordConsumerLiveness(LivenessOp),
    /// A classic member's JoinGroup into a consumer group with members (online migration):
    /// the same update as a heartbeat, from the embedded subscription. `onelog.version` 3.
    ConsumerGroupClassicJoin(Box<ClassicJoinOp>),
    /// A classic member's LeaveGroup from a consumer group. `onelog.version` 3.
    ConsumerGroupClassicLeave(ClassicLeaveOp),
    /// StreamsGroupHeartbeat (KIP-1071) that changes the group. `onelog.version` 4.
    StreamsGroupHeartbeat(Box<StreamsGroupHeartbeatOp>),
    /// A Streams member's session or revocation deadline passed on the leader.
    /// `onelog.version` 4.
    FenceStreamsGroupMember(FenceStreamsMemberOp),
    /// A Streams group's target assignment came due on the leader (the initial rebalance
    /// delay or the assignment interval ran out). `onelog.version` 4.
    StreamsGroupAssign(StreamsAssignOp),
    /// When the leader last heard from Streams members whose steady heartbeats wrote
    /// nothing. `onelog.version` 4.
    RecordStreamsLiveness(StreamsLivenessOp),
    /// ShareGroupHeartbeat (KIP-932) that changes the group; a leave releases the member's
    /// records. `onelog.version` 5.
    ShareGroupHeartbeat(Box<ShareGroupHeartbeatOp>),
    /// A share member's session deadline passed on the leader: it leaves and its records are
    /// released. `onelog.version` 5.
    FenceShareGroupMember(FenceShareMemberOp),
    /// ShareFetch's acquisition: records locked to a member, delivery counts raised, before
    /// any of them is handed out. `onelog.version` 5.
    ShareAcquire(Box<ShareAcquireOp>),
    /// ShareAcknowledge, or the acknowledgements piggybacked on a ShareFetch. `onelog.version` 5.
    ShareAcknowledge(Box<ShareAcknowledgeOp>),
    /// A share session closed (epoch -1, the connection, a new leader): what it held is
    /// released. `onelog.version` 5.
    ShareRelease(ShareReleaseOp),
    /// Acquisition locks whose deadline passed on the leader's clock. `onelog.version` 5.
    ShareExpireLocks(ShareExpireOp),
    /// When the leader last heard from share members whose steady heartbeats wrote nothing.
    /// `onelog.version` 5.
    RecordShareLiveness(ShareLivenessOp),
    /// AlterShareGroupOffsets: an empty share group's partitions start over at the given
    /// offsets. `onelog.version` 5.
    ShareResetOffsets(ShareResetOffsetsOp),
    /// DeleteShareGroupOffsets: an empty share group forgets its state of the given topics.
    /// `onelog.version` 5.
    ShareDeleteOffsets(ShareDeleteOffsetsOp),
    /// One step of a transaction across Raft groups (docs/SCALING.md §3): a participant's
    /// registration or confirmations in the coordinator group; a tagged write, offsets or
    /// decisions in a participant group. `onelog.version` 7.
    CrossGroup(Box<crate::xgroup::XOp>),
}

impl Op {
    /// The `onelog.version` level that brought this kind of op (`features::ONELOG_VERSION`): a
    /// node of a build before it cannot decode the op, so the proposer refuses it until the
    /// cluster finalized that level. Every kind onelog 0.1.0 knew is level 1; a new kind names
    /// the level of the release that adds it (and the CHANGELOG says so).
    pub fn onelog_version(&self) -> i16 {
        match self {
            Op::InitCluster(_)
            | Op::SetLimits(_)
            | Op::Produce(_)
            | Op::CreateTopics(_)
            | Op::DeleteTopics(_)
            | Op::CreatePartitions(_)
            | Op::TrimLog(_)
            | Op::InitProducerId(_)
            | Op::ExpireProducers(_)
            | Op::OffsetCommit(_)
            | Op::CompleteGeneration(_)
            | Op::InitTxnProducer(_)
            | Op::TxnOffsetCommit(_)
            | Op::EndTxn(_)
            | Op::AbortTxns(_)
            | Op::ExpireTransactionalIds(_)
            | Op::DeleteGroups(_)
            | Op::OffsetDelete(_)
            | Op::AlterClientQuotas(_)
            | Op::AlterConfigs(_)
            | Op::DeleteRecords(_)
            | Op::CreateAcls(_)
            | Op::DeleteAcls(_)
            | Op::AlterScramCredentials(_) => 1,
            // New in 0.2.0, yet proposable at level 1: it is how the level rises. The leader
            // proposes it only once every member answered that it supports the new levels,
            // which a 0.1.0 node cannot (`broker::handlers::update_features`).
            Op::UpdateFeatures(_) => 1,
            Op::ConsumerGroupHeartbeat(_)
            | Op::FenceConsumerGroupMember(_)
            | Op::RecordConsumerLiveness(_)
            | Op::ConsumerGroupClassicJoin(_)
            | Op::ConsumerGroupClassicLeave(_) => crate::features::ONELOG_VERSION_CONSUMER_GROUPS,
            Op::StreamsGroupHeartbeat(_)
            | Op::FenceStreamsGroupMember(_)
            | Op::StreamsGroupAssign(_)
            | Op::RecordStreamsLiveness(_) => crate::features::ONELOG_VERSION_STREAMS_GROUPS,
            Op::ShareGroupHeartbeat(_)
            | Op::FenceShareGroupMember(_)
            | Op::ShareAcquire(_)
            | Op::ShareAcknowledge(_)
            | Op::ShareRelease(_)
            | Op::ShareExpireLocks(_)
            | Op::RecordShareLiveness(_)
            | Op::ShareResetOffsets(_)
            | Op::ShareDeleteOffsets(_) => crate::features::ONELOG_VERSION_SHARE_GROUPS,
            Op::CrossGroup(op) => op.onelog_version(),
        }
    }

    /// Whether applying the op may append transaction markers (control batches) to
    /// partitions, taking offsets the entry builder does not stamp (see `entry`).
    pub fn writes_markers(&self) -> bool {
        match self {
            Op::EndTxn(_) | Op::InitTxnProducer(_) | Op::AbortTxns(_) => true,
            Op::CrossGroup(op) => op.writes_markers(),
            _ => false,
        }
    }

    /// Whether applying the op may change what a produce op later in the same entry is checked
    /// against: the offsets it was stamped with (markers), the topic it writes (deletion), or
    /// the transactional id and epoch of its batches (fencing, aborts, expiry). The entry
    /// builder puts such ops after every produce op of the entry, so that a produce op it
    /// stamped applies as stamped.
    pub fn changes_produce_checks(&self) -> bool {
        self.writes_markers()
            || matches!(self, Op::DeleteTopics(_) | Op::ExpireTransactionalIds(_))
            || matches!(self, Op::CrossGroup(op) if op.takes_offsets())
    }

    /// Whether applying the op may change how a produce op of a *later* entry is stamped or
    /// checked in a way the leader's overlay of entries in flight does not follow
    /// (`in_flight::InFlight`): everything `changes_produce_checks` names, producer epochs and
    /// eviction (InitProducerId, expiry), the replicated limits, configs (a topic's timestamp
    /// type) and feature levels. The leader builds nothing behind such an op until it is
    /// applied, so that every entry still applies as stamped.
    pub fn is_pipeline_barrier(&self) -> bool {
        self.changes_produce_checks()
            || matches!(
                self,
                Op::InitCluster(_)
                    | Op::SetLimits(_)
                    | Op::InitProducerId(_)
                    | Op::ExpireProducers(_)
                    | Op::AlterConfigs(_)
                    | Op::UpdateFeatures(_)
            )
            || matches!(self, Op::CrossGroup(op) if op.takes_offsets())
    }
}

/// The leader's clock and term, taken once per entry by the proposer and handed to apply:
/// the LogAppendTime of batches, commit times, transaction start and end times, and the
/// leader epoch of the markers an entry writes.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct LeaderStamp {
    pub now_ms: i64,
    pub term: i32,
}

/// Limits every replica must apply alike. They are replicated state (`BrokerState::limits`),
/// set by a leader whose own differ before its first other entry of a term, so a replica
/// started with other settings still decides every op as the leader did.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReplicatedLimits {
    /// Live idempotent and transactional producer ids, at most.
    pub producer_ids_live_max: u64,
    /// How long a producer must have been idle before allocation may evict it.
    pub producer_id_eviction_idle_ms_min: i64,
    /// Transactional ids, at most.
    pub transactional_ids_max: usize,
    /// Committed offset metadata, in bytes.
    pub offset_metadata_bytes_max: usize,
    /// Kafka's `transaction.max.timeout.ms`.
    pub txn_timeout_ms_max: i32,
    /// Kafka's `producer.id.expiration.ms`.
    pub producer_id_expiration_ms: i64,
    /// Kafka's `transactional.id.expiration.ms`.
    pub transactional_id_expiration_ms: i64,
}

impl Default for ReplicatedLimits {
    fn default() -> Self {
        use crate::limits;
        ReplicatedLimits {
            producer_ids_live_max: limits::PRODUCER_IDS_LIVE_MAX,
            producer_id_eviction_idle_ms_min: limits::PRODUCER_ID_EVICTION_IDLE_MS_MIN,
            transactional_ids_max: limits::TRANSACTIONAL_IDS_MAX,
            offset_metadata_bytes_max: limits::OFFSET_METADATA_BYTES_MAX,
            txn_timeout_ms_max: limits::TXN_TIMEOUT_MS_MAX_DEFAULT,
            producer_id_expiration_ms: limits::PRODUCER_ID_EXPIRATION_MS_DEFAULT,
            transactional_id_expiration_ms: limits::TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT,
        }
    }
}

/// Quota changes the handler validated (`quotas::validate_alteration`), one per entity.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AlterClientQuotasOp {
    pub alterations: Vec<crate::quotas::QuotaAlteration>,
}

/// Credential changes the handler validated and derived (`scram::validate_upsertion`), one
/// entry per user.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AlterScramCredentialsOp {
    pub users: Vec<crate::scram::UserScramAlteration>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InitClusterOp {
    pub cluster_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InitTxnProducerOp {
    pub transactional_id: String,
    pub timeout_ms: i32,
    /// KIP-360: the producer's current id and epoch, when it sends them.
    pub expected: Option<ProducerIdEpoch>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TxnOffsetCommitOp {
    pub transactional_id: String,
    pub producer: ProducerIdEpoch,
    pub group_id: String,
    /// KIP-447: the consumer's generation and member, or -1 / "" from older clients.
    pub generation_id: i32,
    pub member_id: String,
    pub commits: Vec<OffsetCommitEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EndTxnOp {
    pub transactional_id: String,
    pub producer: ProducerIdEpoch,
    pub txn_commit: bool,
    /// KIP-890 part 2 (EndTxn v5): bump the epoch and return it.
    pub bump_epoch: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AbortTxnsOp {
    pub reason: BrokerAbort,
    /// Each transaction as the leader saw it open; one that has moved on since is left alone.
    pub transactions: Vec<(String, ProducerIdEpoch)>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeleteGroupsOp {
    pub groups: Vec<GroupDeletion>,
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
/// apply answers `Ok`, or a refusal with GROUP_ID_NOT_FOUND.
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

/// The commits of one OffsetCommit request; one result per commit. The commit time is the
/// entry's stamp.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OffsetCommitOp {
    pub group_id: String,
    /// -1 for consumers that manage assignment themselves (and admin clients).
    pub generation_id: i32,
    pub member_id: String,
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

/// InitProducerId of an idempotent producer: everything allocation depends on is the entry's
/// stamp and the replicated limits, so replicas running with other settings decide alike.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct InitProducerIdOp {}

/// Forget producers idle for `ReplicatedLimits::producer_id_expiration_ms` at the stamp.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ExpireProducersOp {}

/// Forget transactional ids idle for `ReplicatedLimits::transactional_id_expiration_ms`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ExpireTransactionalIdsOp {}

/// One produce request's partitions; their LogAppendTime is the entry's stamp.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProduceOp {
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
pub struct CreateTopicsOp {
    pub topics: Vec<NewTopic>,
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
pub struct DeleteTopicsOp {
    pub names: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreatePartitionsOp {
    pub topics: Vec<NewPartitions>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewPartitions {
    pub topic: String,
    pub count: i32,
    /// The replicas of each new partition as the client assigned them (broker ids), or empty:
    /// every voter. Checked by `assignment::problem`, brokers by the controller.
    #[serde(default)]
    pub assignments: Vec<Vec<i32>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AlterConfigsOp {
    pub resources: Vec<ResourceAlteration>,
}

/// One DeleteRecords request; `log_start_offset` -1 means the high watermark.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeleteRecordsOp {
    pub partitions: Vec<TrimLog>,
}

/// One partition's DeleteRecords outcome: a Kafka error code and the new low watermark
/// (the log start offset), -1 on error.
pub type LowWatermark = (i16, i64);

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrimLogOp {
    pub trims: Vec<TrimLog>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TrimLog {
    pub topic: String,
    pub partition: i32,
    pub log_start_offset: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CreateAclsOp {
    pub bindings: Vec<crate::acls::AclBinding>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeleteAclsOp {
    pub filters: Vec<crate::acls::AclFilter>,
}

/// What applying one entry returns (openraft's `R`): one result per op, in order.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CommandResponse {
    pub results: Vec<OpResult>,
}

/// A Kafka error code and message for a request as a whole.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Refusal {
    pub error_code: i16,
    pub message: String,
}

/// One item's outcome (a topic created, a commit stored, a group deleted): Kafka error code
/// and, for errors, a message.
pub type ItemResult = (i16, Option<String>);

/// What applying one op returns. Each op has exactly one shape of result; [`TypedOp`] names
/// it, so a proposer hands every caller its own op's result type.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum OpResult {
    /// Ops that answer nothing but success.
    Done,
    /// Produce: per partition of the op, in order, or the op as a whole refused.
    Produced(Result<Vec<PartitionProduced>, Refusal>),
    /// Per-item error codes (topics created, deleted, partitions added, offsets committed,
    /// groups deleted), in request order.
    Items(Vec<ItemResult>),
    /// InitProducerId: the new id, epoch 0.
    ProducerId(Result<ProducerIdEpoch, Refusal>),
    /// InitProducerId (transactional) and EndTxn: the id and epoch the client uses next.
    Txn(Result<ProducerIdEpoch, TxnError>),
    /// TxnOffsetCommit: one result per commit, or the transaction-level refusal.
    TxnOffsets(Result<Vec<CommitResult>, TxnError>),
    /// OffsetDelete.
    Deleted(Result<(), Refusal>),
    /// DeleteRecords: per partition, in request order.
    LowWatermarks(Vec<LowWatermark>),
    /// DeleteAcls: per filter, the bindings it deleted.
    AclsDeleted(Vec<crate::acls::FilterDeleted>),
    /// UpdateFeatures: applied, or refused as a whole.
    FeaturesUpdated(Result<(), Refusal>),
    /// ConsumerGroupHeartbeat: the answer, or Kafka's refusal with the group unchanged.
    Heartbeat(Result<cg::HeartbeatAnswer, cg::Refusal>),
    /// FenceConsumerGroupMember: whether the member was still there to fence.
    MemberFenced(bool),
    /// ConsumerGroupClassicJoin: the JoinGroup answer, or Kafka's refusal.
    ClassicJoin(Result<cg::ClassicJoinAnswer, cg::Refusal>),
    /// ConsumerGroupClassicLeave: per member of the request, in order.
    ClassicLeave(Vec<cg::ClassicLeft>),
    /// StreamsGroupHeartbeat: the answer, or Kafka's refusal with the group unchanged.
    StreamsHeartbeat(Box<Result<sg::HeartbeatAnswer, cg::Refusal>>),
    /// ShareGroupHeartbeat: the answer, or Kafka's refusal with the group unchanged.
    ShareHeartbeat(Box<Result<shg::HeartbeatAnswer, cg::Refusal>>),
    /// ShareAcquire: per partition of the op, in order, the records acquired.
    ShareAcquired(Vec<Vec<sp::Acquired>>),
    /// ShareAcknowledge: per partition of the op, in order, applied or refused as a whole.
    ShareAcknowledged(Vec<Result<(), sp::AckError>>),
    /// ShareDeleteOffsets: per topic of the op, whether the group had state of it; or the
    /// group's refusal.
    ShareOffsetsDeleted(Result<Vec<bool>, cg::Refusal>),
    /// ShareResetOffsets: done, or the group's refusal.
    ShareOffsetsReset(Result<(), cg::Refusal>),
    /// CrossGroup: the step's own result.
    CrossGroup(crate::xgroup::XResult),
}

/// A ShareGroupHeartbeat as the leader proposes it: the request, the group's effective
/// settings, the limits a leaving member's records are released with, and the leader's clock.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShareGroupHeartbeatOp {
    pub heartbeat: shg::Heartbeat,
    pub settings: shg::ShareSettings,
    pub limits: sp::Limits,
    pub now_ms: i64,
}

/// Fences one share member whose session passed; its records are released with `limits`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FenceShareMemberOp {
    pub group_id: String,
    pub member_id: String,
    pub limits: sp::Limits,
}

/// One ShareFetch's acquisition for one member, as the leader read the partitions: apply
/// acquires from what it meets, so two fetches in one entry never take the same record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShareAcquireOp {
    pub group_id: String,
    pub member_id: String,
    /// The leader's clock plus the group's record lock duration.
    pub deadline_ms: i64,
    /// ShareFetch's MaxRecords, shared by the partitions in order.
    pub max_records: i32,
    pub batch_size: i32,
    /// ShareFetch v2's ShareAcquireMode 1 (record limit): never past max_records.
    pub record_limit_mode: bool,
    pub limits: sp::Limits,
    pub partitions: Vec<AcquirePartition>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AcquirePartition {
    pub topic_id: cg::TopicId,
    pub partition: i32,
    /// Where the partition's share state starts if the group never read it
    /// (`share.auto.offset.reset`, resolved by the leader).
    pub start_offset: i64,
    /// The batches the leader read from the share partition's next offset on, capped at the
    /// high watermark or the last stable offset.
    pub batches: Vec<sp::LogBatch>,
}

/// Acknowledgements of one member, per partition; each partition applies all-or-nothing.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShareAcknowledgeOp {
    pub group_id: String,
    pub member_id: String,
    pub now_ms: i64,
    /// A RENEW extends a lock to `now_ms` plus this.
    pub lock_ms: i64,
    pub limits: sp::Limits,
    pub partitions: Vec<AcknowledgePartition>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AcknowledgePartition {
    pub topic_id: cg::TopicId,
    pub partition: i32,
    pub batches: Vec<sp::AckBatch>,
}

/// Releases what a member (every member with `None`) holds in the named partitions (all of
/// the group's with `None`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShareReleaseOp {
    pub group_id: String,
    pub member_id: Option<String>,
    pub partitions: Option<Vec<(cg::TopicId, i32)>>,
    pub limits: sp::Limits,
}

/// Ends the locks that passed `now_ms` in each named group, with that group's limits.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShareExpireOp {
    pub now_ms: i64,
    pub groups: Vec<(String, sp::Limits)>,
}

/// Resets an empty share group's partitions (created empty if no group holds the id, as Kafka's
/// `alterShareGroupOffsets`): (topic id, partition, new start offset).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShareResetOffsetsOp {
    pub group_id: String,
    pub partitions: Vec<(cg::TopicId, i32, i64)>,
}

/// Deletes an empty share group's state of the named topics.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShareDeleteOffsetsOp {
    pub group_id: String,
    pub topics: Vec<cg::TopicId>,
}

/// Share members the leader heard from (its clock, ms), each later than the log knew.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShareLivenessOp {
    pub members: Vec<SeenMember>,
}

/// A ConsumerGroupHeartbeat as the leader proposes it: the request with its member id filled
/// in, the leader's group settings and clock, so that every replica computes the same answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ConsumerGroupHeartbeatOp {
    pub heartbeat: cg::Heartbeat,
    pub settings: cg::GroupSettings,
    pub now_ms: i64,
    /// A join (epoch 0) onto a classic group with members: the leader's snapshot of it, which
    /// apply converts to a consumer group first (online upgrade, `consumer_group::upgrade`).
    pub upgrade: Option<cg::ClassicGroupSnapshot>,
}

/// A StreamsGroupHeartbeat as the leader proposes it: the request, the group's effective
/// settings and the leader's clock, so that every replica computes the same answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StreamsGroupHeartbeatOp {
    pub heartbeat: sg::Heartbeat,
    pub settings: sg::StreamsSettings,
    pub now_ms: i64,
}

/// Fences one Streams member: on session expiry (`expected_epoch` None) or when its
/// revocation deadline passed while it was still at `expected_epoch`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FenceStreamsMemberOp {
    pub group_id: String,
    pub member_id: String,
    pub expected_epoch: Option<i32>,
}

/// Computes a Streams group's owed target assignment with the group's settings at the
/// leader's clock; nothing if it is no longer owed or still held back.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StreamsAssignOp {
    pub group_id: String,
    pub settings: sg::StreamsSettings,
    pub now_ms: i64,
}

/// A classic member's JoinGroup into a consumer group, with the leader's settings and clock.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClassicJoinOp {
    pub join: cg::ClassicJoin,
    pub settings: cg::GroupSettings,
    pub now_ms: i64,
}

/// A LeaveGroup's members (member id, instance id) leaving a consumer group.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClassicLeaveOp {
    pub group_id: String,
    pub members: Vec<(String, Option<String>)>,
}

/// Fences one member: on session expiry (`expected_epoch` None) or when its revocation
/// deadline passed while it was still at `expected_epoch`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FenceMemberOp {
    pub group_id: String,
    pub member_id: String,
    pub expected_epoch: Option<i32>,
    /// Decides whether fencing the last consumer-protocol member downgrades the group.
    pub migration: cg::Migration,
}

/// Streams members the leader heard from (its clock, ms), each later than the log knew.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StreamsLivenessOp {
    pub members: Vec<SeenMember>,
}

/// Members the leader heard from (its clock, ms), each later than the log knew.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LivenessOp {
    pub members: Vec<SeenMember>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SeenMember {
    pub group_id: String,
    pub member_id: String,
    pub seen_ms: i64,
}

/// An op with its own result type: what a caller of the proposer gets back for it.
pub trait TypedOp: Into<Op> {
    type Output;
    /// The op's result out of the entry's; `Err` returns a result of another shape, which
    /// only a broken apply could produce.
    fn output(result: OpResult) -> Result<Self::Output, OpResult>;
}

macro_rules! typed_op {
    ($op:ty, $variant:ident, $output:ty, |$r:ident| $pattern:pat => $value:expr) => {
        impl From<$op> for Op {
            fn from(op: $op) -> Op {
                Op::$variant(op)
            }
        }
        impl TypedOp for $op {
            type Output = $output;
            fn output($r: OpResult) -> Result<$output, OpResult> {
                match $r {
                    $pattern => Ok($value),
                    other => Err(other),
                }
            }
        }
    };
}

typed_op!(InitClusterOp, InitCluster, (), |r| OpResult::Done => ());
typed_op!(ReplicatedLimits, SetLimits, (), |r| OpResult::Done => ());
typed_op!(CreateTopicsOp, CreateTopics, Vec<ItemResult>, |r| OpResult::Items(items) => items);
typed_op!(DeleteTopicsOp, DeleteTopics, Vec<ItemResult>, |r| OpResult::Items(items) => items);
typed_op!(CreatePartitionsOp, CreatePartitions, Vec<ItemResult>, |r| OpResult::Items(items) => items);
typed_op!(TrimLogOp, TrimLog, (), |r| OpResult::Done => ());
typed_op!(InitProducerIdOp, InitProducerId, Result<ProducerIdEpoch, Refusal>, |r| OpResult::ProducerId(id) => id);
typed_op!(ExpireProducersOp, ExpireProducers, (), |r| OpResult::Done => ());
typed_op!(OffsetCommitOp, OffsetCommit, Vec<ItemResult>, |r| OpResult::Items(items) => items);
typed_op!(GenerationOp, CompleteGeneration, (), |r| OpResult::Done => ());
typed_op!(InitTxnProducerOp, InitTxnProducer, Result<ProducerIdEpoch, TxnError>, |r| OpResult::Txn(id) => id);
typed_op!(TxnOffsetCommitOp, TxnOffsetCommit, Result<Vec<CommitResult>, TxnError>, |r| OpResult::TxnOffsets(o) => o);
typed_op!(EndTxnOp, EndTxn, Result<ProducerIdEpoch, TxnError>, |r| OpResult::Txn(id) => id);
typed_op!(AbortTxnsOp, AbortTxns, (), |r| OpResult::Done => ());
typed_op!(ExpireTransactionalIdsOp, ExpireTransactionalIds, (), |r| OpResult::Done => ());
typed_op!(DeleteGroupsOp, DeleteGroups, Vec<ItemResult>, |r| OpResult::Items(items) => items);
typed_op!(AlterClientQuotasOp, AlterClientQuotas, (), |r| OpResult::Done => ());
typed_op!(OffsetDeleteOp, OffsetDelete, Result<(), Refusal>, |r| OpResult::Deleted(d) => d);
typed_op!(AlterConfigsOp, AlterConfigs, Vec<ItemResult>, |r| OpResult::Items(items) => items);
typed_op!(DeleteRecordsOp, DeleteRecords, Vec<LowWatermark>, |r| OpResult::LowWatermarks(w) => w);
typed_op!(CreateAclsOp, CreateAcls, Vec<ItemResult>, |r| OpResult::Items(items) => items);
typed_op!(DeleteAclsOp, DeleteAcls, Vec<crate::acls::FilterDeleted>, |r| OpResult::AclsDeleted(d) => d);
typed_op!(AlterScramCredentialsOp, AlterScramCredentials, Vec<ItemResult>, |r| OpResult::Items(items) => items);
typed_op!(crate::features::UpdateFeaturesOp, UpdateFeatures, Result<(), Refusal>, |r| OpResult::FeaturesUpdated(u) => u);
typed_op!(Box<ConsumerGroupHeartbeatOp>, ConsumerGroupHeartbeat, Result<cg::HeartbeatAnswer, cg::Refusal>, |r| OpResult::Heartbeat(a) => a);
typed_op!(FenceMemberOp, FenceConsumerGroupMember, bool, |r| OpResult::MemberFenced(f) => f);
typed_op!(LivenessOp, RecordConsumerLiveness, (), |r| OpResult::Done => ());
typed_op!(Box<ClassicJoinOp>, ConsumerGroupClassicJoin, Result<cg::ClassicJoinAnswer, cg::Refusal>, |r| OpResult::ClassicJoin(a) => a);
typed_op!(ClassicLeaveOp, ConsumerGroupClassicLeave, Vec<cg::ClassicLeft>, |r| OpResult::ClassicLeave(l) => l);
typed_op!(Box<StreamsGroupHeartbeatOp>, StreamsGroupHeartbeat, Result<sg::HeartbeatAnswer, cg::Refusal>, |r| OpResult::StreamsHeartbeat(a) => *a);
typed_op!(FenceStreamsMemberOp, FenceStreamsGroupMember, bool, |r| OpResult::MemberFenced(f) => f);
typed_op!(StreamsAssignOp, StreamsGroupAssign, (), |r| OpResult::Done => ());
typed_op!(StreamsLivenessOp, RecordStreamsLiveness, (), |r| OpResult::Done => ());
typed_op!(Box<ShareGroupHeartbeatOp>, ShareGroupHeartbeat, Result<shg::HeartbeatAnswer, cg::Refusal>, |r| OpResult::ShareHeartbeat(a) => *a);
typed_op!(FenceShareMemberOp, FenceShareGroupMember, bool, |r| OpResult::MemberFenced(f) => f);
typed_op!(Box<ShareAcquireOp>, ShareAcquire, Vec<Vec<sp::Acquired>>, |r| OpResult::ShareAcquired(a) => a);
typed_op!(Box<ShareAcknowledgeOp>, ShareAcknowledge, Vec<Result<(), sp::AckError>>, |r| OpResult::ShareAcknowledged(a) => a);
typed_op!(ShareReleaseOp, ShareRelease, (), |r| OpResult::Done => ());
typed_op!(ShareExpireOp, ShareExpireLocks, (), |r| OpResult::Done => ());
typed_op!(ShareLivenessOp, RecordShareLiveness, (), |r| OpResult::Done => ());
typed_op!(ShareResetOffsetsOp, ShareResetOffsets, Result<(), cg::Refusal>, |r| OpResult::ShareOffsetsReset(d) => d);
typed_op!(ShareDeleteOffsetsOp, ShareDeleteOffsets, Result<Vec<bool>, cg::Refusal>, |r| OpResult::ShareOffsetsDeleted(d) => d);
typed_op!(Box<crate::xgroup::XOp>, CrossGroup, crate::xgroup::XResult, |r| OpResult::CrossGroup(x) => x);

impl From<ProduceOp> for Op {
    fn from(op: ProduceOp) -> Op {
        Op::Produce(op)
    }
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

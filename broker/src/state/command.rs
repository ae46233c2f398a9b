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
    /// Per partition of the produce op, in order: base offset of its first batch.
    Produced {
        base_offsets: Vec<i64>,
        log_start_offsets: Vec<i64>,
        append_time_ms: i64,
    },
    /// The op as a whole was refused; Kafka error code and a message.
    Refused {
        error_code: i16,
        message: String,
    },
    /// Per-item error codes (topics created, deleted, partitions added), in request order.
    PerItem(Vec<(i16, Option<String>)>),
}

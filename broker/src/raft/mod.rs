//! The one Raft group: openraft type configuration, the state machine store and the network.

pub mod applied;
pub mod checkpoint;
pub mod network;
pub mod sm_store;
pub mod snapshot_archive;
pub mod transport;

use std::fmt;

use serde::{Deserialize, Serialize};

use onelog_state::command::{Command, CommandResponse};

openraft::declare_raft_types!(
    /// onelog's openraft types: a log entry carries one aggregated [`Command`].
    pub TypeConfig:
        D = Command,
        R = CommandResponse,
        NodeId = u64,
        Node = NodeAddr,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = tokio::fs::File,
        AsyncRuntime = openraft::TokioRuntime,
);

pub type Raft = openraft::Raft<TypeConfig>;
pub type LogId = openraft::LogId<u64>;
pub type StoredMembership = openraft::StoredMembership<u64, NodeAddr>;

/// What the membership records about a node: where its Raft peers and Kafka clients reach it.
/// Kept in the replicated membership so every node can list every broker in Metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAddr {
    pub raft: String,
    pub kafka: String,
}

impl fmt::Display for NodeAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "raft={} kafka={}", self.raft, self.kafka)
    }
}

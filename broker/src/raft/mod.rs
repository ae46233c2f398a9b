//! The one Raft group: openraft type configuration, the state machine store and the network.

pub mod applied;
pub mod checkpoint;
pub mod groups;
pub mod network;
pub mod open;
pub mod rejoin;
pub mod remote_leaders;
pub mod sm_log;
pub mod sm_store;
pub mod snapshot_archive;
pub mod stop;
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
pub type Metrics = openraft::RaftMetrics<u64, NodeAddr>;

/// Raft §8: a new leader knows which entries of earlier terms are committed only once an
/// entry of its own term (openraft's blank entry) is committed; until it has also applied that
/// entry its state may lag what the previous leader already served. Whether the node whose
/// `metrics` these are leads and has got that far: the point from which it takes writes
/// (`Leadership::may_propose`) and `/status` says `serving`.
pub fn leads_with_own_term_applied(metrics: &Metrics) -> bool {
    metrics.state == openraft::ServerState::Leader
        && metrics.last_applied.is_some_and(|applied| applied.leader_id.term == metrics.current_term)
}

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

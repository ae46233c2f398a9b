//! What goes into and comes out of a StreamsGroupHeartbeat (API key 88, v0-v1) as the pure
//! state machine sees it: the request's fields plus the client's id and address, the group's
//! effective settings, and the answer the handler encodes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::tasks::{Tasks, TasksTuple};
use super::topology::Topology;
/// The leave epochs are the consumer protocol's: -1 leaves, -2 is a static member's
/// temporary leave (its tasks stay reserved).
pub use crate::consumer_group::{
    Refusal, RevocationDeadline, RevocationTimer, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};

/// One StreamsGroupHeartbeat request. `None` (and -1 for the rebalance timeout) means
/// "unchanged since the last heartbeat".
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Heartbeat {
    /// The request's API version: v1 may be answered MISSING_CLIENT_TAGS.
    pub version: i16,
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub endpoint_information_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    /// Only on a join (epoch 0).
    pub topology: Option<Topology>,
    /// The tasks the member runs now; all three or none.
    pub active_tasks: Option<Tasks>,
    pub standby_tasks: Option<Tasks>,
    pub warmup_tasks: Option<Tasks>,
    pub process_id: Option<String>,
    pub user_endpoint: Option<(String, u16)>,
    pub client_tags: Option<BTreeMap<String, String>>,
    /// Offset sums of the member's local task state: (subtopology, partition, offset).
    pub task_offsets: Option<Vec<(String, i32, i64)>>,
    pub shutdown_application: bool,
    /// From the request header and the connection: overwritten on every heartbeat.
    pub client_id: String,
    pub client_host: String,
}

impl Heartbeat {
    /// The tasks the member says it owns, if it sent all three lists.
    pub fn owned(&self) -> Option<TasksTuple> {
        let (a, s, w) =
            (self.active_tasks.as_ref()?, self.standby_tasks.as_ref()?, self.warmup_tasks.as_ref()?);
        Some(TasksTuple { active: a.clone(), standby: s.clone(), warmup: w.clone() })
    }
}

/// A group's effective Streams settings: the broker's `group.streams.*` configs with the
/// group's own `streams.*` overrides applied (Kafka 4.4's names and defaults).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StreamsSettings {
    pub max_size: i32,
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub num_standby_replicas: i32,
    pub initial_rebalance_delay_ms: i32,
    pub assignment_interval_ms: i32,
    pub task_offset_interval_ms: i32,
    pub acceptable_recovery_lag: i64,
    pub num_warmup_replicas: i32,
}

impl Default for StreamsSettings {
    fn default() -> Self {
        StreamsSettings {
            max_size: i32::MAX,
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            num_standby_replicas: 0,
            initial_rebalance_delay_ms: 3_000,
            assignment_interval_ms: 1_000,
            task_offset_interval_ms: 60_000,
            acceptable_recovery_lag: 10_000,
            num_warmup_replicas: 2,
        }
    }
}

impl StreamsSettings {
    /// What the target was computed with (stored on the group: a change re-assigns). Kafka
    /// keys these by their group-config names.
    pub fn assignment_configs(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("acceptable.recovery.lag".to_string(), self.acceptable_recovery_lag.to_string()),
            ("num.standby.replicas".to_string(), self.num_standby_replicas.to_string()),
            ("num.warmup.replicas".to_string(), self.num_warmup_replicas.to_string()),
        ])
    }
}

/// One entry of the heartbeat response's status list.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StatusEntry {
    pub code: i8,
    pub detail: String,
}

/// The partitions behind one member's interactive-query endpoint.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct EndpointPartitions {
    pub host: String,
    pub port: u16,
    /// Topic name → partitions.
    pub active: BTreeMap<String, Vec<i32>>,
    pub standby: BTreeMap<String, Vec<i32>>,
}

/// A successful heartbeat's response fields, and what the leader does with the member's
/// revocation timer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    pub acceptable_recovery_lag: i64,
    pub task_offset_interval_ms: i32,
    pub status: Vec<StatusEntry>,
    /// `Some` on a join or when the member's tasks changed: every task it may run now.
    pub tasks: Option<TasksTuple>,
    pub endpoint_information_epoch: i32,
    /// `Some` when the member's endpoint epoch is behind the group's.
    pub endpoints: Option<Vec<EndpointPartitions>>,
    pub revocation_timer: RevocationTimer,
}

//! What goes into and comes out of a ShareGroupHeartbeat (API key 76, v1) as the pure state
//! machine sees it: the request's fields plus the client's id and address, the group's
//! settings, and the answer the handler encodes (a refusal is `consumer_group::Refusal`).
//!
//! The caller fills in everything timed: the leader's clock (`now_ms`). v1 clients generate
//! their own member id (KIP-932), so nothing here is random.

use serde::{Deserialize, Serialize};

use crate::consumer_group::Assignment;

/// MemberEpoch of a leave (KIP-932). Share groups have no static members, so no -2.
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;

/// One ShareGroupHeartbeat request. `None` means "unchanged since the last heartbeat".
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Heartbeat {
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    pub subscribed_topic_names: Option<Vec<String>>,
    /// From the request header and the connection: Kafka overwrites both on every heartbeat.
    pub client_id: String,
    pub client_host: String,
}

/// A group's share settings: the broker's `group.share.*`, overlaid by the group's own
/// `share.*` configs where Kafka allows one.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShareSettings {
    /// `group.share.max.size` (default 200): only newcomers are refused when it is reached.
    pub max_size: i32,
    /// `share.session.timeout.ms`: what the leader arms for each member (onelog's caller).
    pub session_timeout_ms: i32,
    /// `share.heartbeat.interval.ms`, sent in every answer but a leave's.
    pub heartbeat_interval_ms: i32,
    /// `share.assignment.interval.ms` (KIP-1263, in Kafka 4.4.0): the least time between two
    /// target computations; 0 computes on every heartbeat that owes one.
    pub assignment_interval_ms: i64,
}

impl Default for ShareSettings {
    /// Kafka 4.4.0's defaults.
    fn default() -> Self {
        ShareSettings {
            max_size: 200,
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            assignment_interval_ms: 1_000,
        }
    }
}

/// A successful heartbeat's response fields.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub member_id: String,
    /// -1 on a leave: the member is gone, and whatever it had acquired must be released.
    pub member_epoch: i32,
    /// 0 on a leave.
    pub heartbeat_interval_ms: i32,
    /// `None`: "keep what you have". `Some`: every partition the member may fetch from now;
    /// sent on a join, when the request carried its subscription, or when it changed.
    pub assignment: Option<Assignment>,
}

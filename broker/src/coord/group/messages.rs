//! The group coordinator's vocabulary with the rest of the broker: the JoinGroup request as
//! the coordinator needs it, the JoinGroup and SyncGroup answers, the DescribeGroups views and
//! the broker settings it runs with.
//!
//! These are plain data, shared by the pure state machine (`state`, `join`, `rebalance`,
//! `sync`) and the async shell (`mod.rs`), and re-exported from `coord::group` for the
//! handlers; keeping them apart from both says that neither owns them.

use bytes::Bytes;

use super::state::GroupState;

/// A JoinGroup request as the coordinator needs it.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    /// (name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// KIP-394: v4+ clients get MEMBER_ID_REQUIRED on their first join.
    pub require_known_member_id: bool,
}

/// A JoinGroup answer.
#[derive(Debug, Clone, Default)]
pub struct JoinResult {
    pub error_code: i16,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Only for the leader: (member id, instance id, metadata of the chosen protocol).
    pub members: Vec<(String, Option<String>, Bytes)>,
}

impl JoinResult {
    pub(super) fn error(code: i16, member_id: &str) -> Self {
        JoinResult {
            error_code: code,
            generation_id: -1,
            member_id: member_id.to_string(),
            ..Default::default()
        }
    }
}

/// A SyncGroup answer.
#[derive(Debug, Clone, Default)]
pub struct SyncResult {
    pub error_code: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncResult {
    pub(super) fn error(code: i16) -> Self {
        SyncResult { error_code: code, ..Default::default() }
    }
}

/// A member as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct MemberView {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// A group as DescribeGroups and ListGroups show it.
#[derive(Debug, Clone)]
pub struct GroupView {
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol_name: String,
    pub members: Vec<MemberView>,
}

/// Settings from broker configs (`group.*`), parsed at start-up.
pub use crate::config::GroupSettings as CoordinatorConfig;

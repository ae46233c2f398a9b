//! Which protocol holds a group id: the classic coordinator's (JoinGroup, in the leader's
//! memory and `Op::CompleteGeneration`), KIP-848's (`BrokerState::consumer_groups`),
//! KIP-1071's (`BrokerState::streams_groups`) or KIP-932's (`BrokerState::share_groups`).
//!
//! One id is one group of one type, as in Kafka. The log keeps them apart (see
//! `onelog_state::apply_consumer`, `apply_streams` and `apply_share`: a consumer or Streams
//! group takes over only an emptied classic group, a classic generation only an empty
//! consumer or Streams group, and a share group's id no other type ever takes), but between a
//! JoinGroup and its generation reaching the log the classic group lives only in the
//! coordinator's memory, so the admin APIs ask here: a classic group with members or a
//! rebalance under way wins, then a consumer group, then a Streams group, then a share group,
//! then whatever classic record (committed offsets, an emptied generation) the log has.

use onelog_state::apply_share::is_share_group;
use onelog_state::consumer_group::ConsumerGroup;
use onelog_state::streams_group::StreamsGroup;
use onelog_state::BrokerState;

use crate::ctx::Lane;

/// Kafka's names for the group types (ListGroups v5 `GroupType` and its filter).
pub const TYPE_CLASSIC: &str = "classic";
pub const TYPE_CONSUMER: &str = "consumer";
pub const TYPE_STREAMS: &str = "streams";
pub const TYPE_SHARE: &str = "share";

/// The group an id names.
pub enum GroupKind<'a> {
    Classic,
    Consumer(&'a ConsumerGroup),
    Streams(&'a StreamsGroup),
    /// A KIP-932 share group; no API here reads more of it than its type yet.
    Share,
}

/// The group `group_id` names in `state` (the applied state of `lane`, the group's Raft
/// group) as this node's coordinator of it sees it, None if no protocol knows it.
pub fn kind<'a>(lane: Lane, state: &'a BrokerState, group_id: &str) -> Option<GroupKind<'a>> {
    let classic = &lane.coordinators.classic;
    if classic.holds(group_id) {
        return Some(GroupKind::Classic);
    }
    if let Some(group) = state.consumer_groups.groups.get(group_id) {
        return Some(GroupKind::Consumer(group));
    }
    if let Some(group) = state.streams_groups.groups.get(group_id) {
        return Some(GroupKind::Streams(group));
    }
    if is_share_group(state, group_id) {
        return Some(GroupKind::Share);
    }
    let known = state.groups.groups.contains_key(group_id) || classic.knows(group_id);
    known.then_some(GroupKind::Classic)
}

/// Whether a consumer group with members holds the id: a classic JoinGroup is refused.
pub fn consumer_group_has_members(lane: Lane, group_id: &str) -> bool {
    lane.applied.state(|s| s.consumer_groups.groups.get(group_id).is_some_and(|g| !g.members.is_empty()))
}

/// Whether a Streams group with members holds the id: Kafka answers a classic JoinGroup
/// INCONSISTENT_GROUP_PROTOCOL (an empty one the join converts to a classic group).
pub fn streams_group_has_members(lane: Lane, group_id: &str) -> bool {
    lane.applied.state(|s| s.streams_groups.groups.get(group_id).is_some_and(|g| !g.members.is_empty()))
}

/// Whether a share group holds the id, empty or not: Kafka's `classicGroupJoin` answers a
/// classic JoinGroup INCONSISTENT_GROUP_PROTOCOL (it converts no share group).
pub fn share_group_holds(lane: Lane, group_id: &str) -> bool {
    lane.applied.state(|s| is_share_group(s, group_id))
}

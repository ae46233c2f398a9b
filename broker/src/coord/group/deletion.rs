//! The coordinator's part of the group admin APIs: DeleteGroups and OffsetDelete (KIP-496).
//!
//! Both are decided here, on the leader, because only the coordinator knows live membership;
//! the log then records what was decided (`Op::DeleteGroups`, `Op::OffsetDelete`). A group
//! being deleted is `Dead` until its deletion is applied, so a member cannot join it between
//! the decision and the log entry (Kafka's coordinator marks the group Dead under its lock for
//! the same reason). OffsetDelete reads the members' consumer-protocol subscriptions; metadata
//! that does not parse counts as a subscription to every topic, as in Kafka.
//!
//! These are pure transitions of the group state machine (no lock, no clock); the shell's
//! `Coordinator::begin_delete`, `finish_delete` and `offset_delete_check` call them.

use std::collections::BTreeSet;

use kafka_compat::consumer_protocol::subscribed_topics;
use kafka_compat::error_code;

use super::state::{Group, GroupState, Groups};

/// Kafka's consumer protocol type, the only one whose subscriptions are understood.
const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// The topics a group's live members subscribe to, as OffsetDelete needs them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subscriptions {
    Topics(BTreeSet<String>),
    /// Some member's metadata did not parse, or no protocol was chosen yet: every topic counts
    /// as subscribed (Kafka's `isSubscribedToTopic` without computed subscriptions).
    Unknown,
}

impl Subscriptions {
    pub fn includes(&self, topic: &str) -> bool {
        match self {
            Subscriptions::Topics(topics) => topics.contains(topic),
            Subscriptions::Unknown => true,
        }
    }
}

impl Groups {
    /// Whether a classic group holds the id: it has members or a rebalance under way. A
    /// consumer group may take over an id whose classic group is only Empty (see
    /// `handlers::group_kind`).
    pub(super) fn holds(&self, group_id: &str) -> bool {
        self.groups.get(group_id).is_some_and(|g| {
            !g.members.is_empty() || !matches!(g.state, GroupState::Empty | GroupState::Dead)
        })
    }

    /// Whether this coordinator knows the group at all (in any state).
    pub(super) fn knows(&self, group_id: &str) -> bool {
        self.groups.contains_key(group_id)
    }

    /// Forgets an Empty group whose id a consumer group took over, so that neither the
    /// coordinator's memory nor its empty-generation record brings the classic group back.
    pub(super) fn forget_empty(&mut self, group_id: &str) {
        if self.groups.get(group_id).is_some_and(|g| g.members.is_empty() && g.state == GroupState::Empty) {
            self.groups.remove(group_id);
        }
    }

    /// DeleteGroups, first step (Kafka's `ClassicGroup.validateDeleteGroup`): a group with
    /// members is NON_EMPTY_GROUP, one already being deleted GROUP_ID_NOT_FOUND; otherwise it
    /// is marked Dead and its generation returned for the log op. A group only the log knows
    /// (`in_log`, committed offsets without a generation) gets a Dead placeholder; a group
    /// neither knows is GROUP_ID_NOT_FOUND.
    pub(super) fn begin_delete(&mut self, group_id: &str, in_log: bool) -> Result<i32, i16> {
        let group = match self.groups.get_mut(group_id) {
            Some(group) => group,
            None if in_log => self.groups.entry(group_id.to_string()).or_insert_with(Group::new),
            None => return Err(error_code::GROUP_ID_NOT_FOUND),
        };
        match group.state {
            GroupState::Dead => Err(error_code::GROUP_ID_NOT_FOUND),
            GroupState::Empty if group.members.is_empty() => {
                group.state = GroupState::Dead;
                Ok(group.generation_id)
            }
            _ => Err(error_code::NON_EMPTY_GROUP),
        }
    }

    /// DeleteGroups, last step: a deleted group is forgotten; one whose deletion failed is
    /// Empty again.
    pub(super) fn finish_delete(&mut self, group_id: &str, deleted: bool) {
        let Some(group) = self.groups.get_mut(group_id) else { return };
        if group.state != GroupState::Dead {
            return;
        }
        if deleted {
            self.groups.remove(group_id);
        } else {
            group.state = GroupState::Empty;
        }
    }

    /// OffsetDelete (Kafka's `ClassicGroup.validateDeleteOffsets`): None when the coordinator
    /// does not know the group (it has no members; the applied state decides); a Dead group
    /// is GROUP_ID_NOT_FOUND, a non-consumer group with members NON_EMPTY_GROUP; otherwise the
    /// topics its members subscribe to, none for an Empty group.
    pub(super) fn offset_delete_check(&self, group_id: &str) -> Option<Result<Subscriptions, i16>> {
        let group = self.groups.get(group_id)?;
        Some(match group.state {
            GroupState::Dead => Err(error_code::GROUP_ID_NOT_FOUND),
            GroupState::Empty => Ok(Subscriptions::Topics(BTreeSet::new())),
            _ if !group.members.values().all(|m| m.protocol_type == CONSUMER_PROTOCOL_TYPE) => {
                Err(error_code::NON_EMPTY_GROUP)
            }
            _ => Ok(subscriptions(group)),
        })
    }
}

/// Kafka's `computeSubscribedTopics`: the union of every member's subscription in the chosen
/// protocol's metadata, or Unknown if any of it does not parse.
fn subscriptions(group: &Group) -> Subscriptions {
    let Some(protocol) = group.protocol_name.as_deref() else { return Subscriptions::Unknown };
    let mut topics = BTreeSet::new();
    for member in group.members.values() {
        match subscribed_topics(&member.metadata(protocol)) {
            Ok(subscribed) => topics.extend(subscribed),
            Err(_) => return Subscriptions::Unknown,
        }
    }
    Subscriptions::Topics(topics)
}

#[cfg(test)]
#[path = "deletion_tests.rs"]
mod tests;

//! What ConsumerGroupDescribe and ListGroups report of a consumer group (spec §7): the
//! derived group state, the preferred assignor, and per member its current and target
//! assignment. All derived from the stored state on demand; nothing here is stored.

use std::collections::{BTreeMap, BTreeSet};

use super::model::{Assignment, ConsumerGroup, Member};
use super::request::{Assignor, GroupSettings};
use super::subscription::{preferred_assignor, regex_matches};
use crate::Topic;

/// A consumer group's state as Kafka derives it (first match wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// No members.
    Empty,
    /// The group epoch moved past the assignment epoch: a target is owed.
    Assigning,
    /// Some member is not STABLE at the assignment epoch.
    Reconciling,
    Stable,
}

impl GroupState {
    /// The string Kafka reports (ListGroups filters compare it case-insensitively).
    pub fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::Assigning => "Assigning",
            GroupState::Reconciling => "Reconciling",
            GroupState::Stable => "Stable",
        }
    }
}

/// One member as ConsumerGroupDescribe reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription<'a> {
    pub member_id: &'a str,
    /// Identity, subscription, epochs and state.
    pub member: &'a Member,
    /// The partitions it may own now (assigned, without those pending revocation).
    pub assignment: Assignment,
    pub target: Assignment,
}

impl ConsumerGroup {
    pub fn state(&self) -> GroupState {
        if self.members.is_empty() {
            GroupState::Empty
        } else if self.group_epoch > self.assignment_epoch {
            GroupState::Assigning
        } else if self.members.values().any(|m| !m.is_reconciled_to(self.assignment_epoch)) {
            GroupState::Reconciling
        } else {
            GroupState::Stable
        }
    }

    /// The assignor the group's next target will be computed with (spec §6.3).
    pub fn preferred_assignor(&self, settings: &GroupSettings) -> Assignor {
        preferred_assignor(self.members.values(), settings)
    }

    /// Members in member id order.
    pub fn describe_members(&self) -> Vec<MemberDescription<'_>> {
        self.members
            .iter()
            .map(|(id, member)| MemberDescription {
                member_id: id,
                member,
                assignment: member.assigned_partitions(),
                target: self.targets.get(id).cloned().unwrap_or_default(),
            })
            .collect()
    }

    /// The topic names the group subscribes to, by name (existing or not) or through a
    /// regex (existing topics): what OffsetDelete refuses with GROUP_SUBSCRIBED_TO_TOPIC and
    /// what keeps committed offsets from expiring (around-spec §3.5).
    pub fn subscribed_topic_names(&self, topics: &BTreeMap<String, Topic>) -> BTreeSet<String> {
        let mut names: BTreeSet<String> =
            self.members.values().flat_map(|m| m.subscribed_topic_names.iter().cloned()).collect();
        names.extend(regex_matches(&self.members, topics).into_values().flatten().map(str::to_string));
        names
    }
}

//! What ShareGroupDescribe and ListGroups report of a share group, and what ShareFetch asks
//! of it: the derived group state, each member with its assignment by topic name, and
//! whether a partition is assigned to a member. All derived on demand; nothing stored.

use std::collections::{BTreeMap, BTreeSet};

use super::lookup::group_not_found;
use super::model::{ShareGroup, ShareGroups, ShareMember};
use super::simple::ASSIGNOR_NAME;
use crate::consumer_group::{Refusal, TopicId};
use crate::Topic;

/// ListGroups' protocol type of a share group.
pub const PROTOCOL_TYPE: &str = "share";

/// Kafka's `ShareGroupState` as a live group can be: Empty or Stable, nothing else (a share
/// group never rebalances in steps; Dead is a deleted group, which is simply absent here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareGroupState {
    Empty,
    Stable,
}

impl ShareGroupState {
    /// The string Kafka reports (ListGroups filters compare it case-insensitively).
    pub fn as_str(self) -> &'static str {
        match self {
            ShareGroupState::Empty => "Empty",
            ShareGroupState::Stable => "Stable",
        }
    }
}

/// A ShareGroupDescribe group entry (the caller adds the authorized operations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description<'a> {
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub state: ShareGroupState,
    pub assignor_name: &'static str,
    /// In member id order.
    pub members: Vec<MemberDescription<'a>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription<'a> {
    pub member_id: &'a str,
    /// Epoch, rack, client id and host, subscribed topic names.
    pub member: &'a ShareMember,
    /// The member's assignment; as Kafka, a topic that no longer exists is left out.
    pub assignment: Vec<NamedPartitions>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedPartitions {
    pub topic_id: TopicId,
    pub topic_name: String,
    pub partitions: Vec<i32>,
}

impl ShareGroup {
    pub fn state(&self) -> ShareGroupState {
        if self.members.is_empty() {
            ShareGroupState::Empty
        } else {
            ShareGroupState::Stable
        }
    }

    /// Every (topic id, partition) some member is assigned: the share partitions the group
    /// consumes now.
    pub fn assigned_partitions(&self) -> BTreeSet<(TopicId, i32)> {
        let all = self.members.values().flat_map(|m| m.assignment.iter());
        all.flat_map(|(topic, ps)| ps.iter().map(|p| (*topic, *p))).collect()
    }
}

impl ShareGroups {
    /// One ShareGroupDescribe entry. The caller answers "Group X is not a share group." for
    /// an id a group of another type holds.
    pub fn describe(
        &self,
        group_id: &str,
        topics: &BTreeMap<String, Topic>,
    ) -> Result<Description<'_>, Refusal> {
        let group = self.groups.get(group_id).ok_or_else(|| group_not_found(group_id))?;
        let names: BTreeMap<TopicId, &str> =
            topics.iter().map(|(name, t)| (t.topic_id, name.as_str())).collect();
        let members = group
            .members
            .iter()
            .map(|(id, member)| MemberDescription {
                member_id: id,
                member,
                assignment: named(member, &names),
            })
            .collect();
        Ok(Description {
            group_epoch: group.group_epoch,
            assignment_epoch: group.assignment_epoch,
            state: group.state(),
            assignor_name: ASSIGNOR_NAME,
            members,
        })
    }

    /// Whether `member_id` of `group_id` is assigned the partition now: ShareFetch refuses
    /// the partitions a member is not assigned.
    pub fn is_assigned(&self, group_id: &str, member_id: &str, topic_id: &TopicId, partition: i32) -> bool {
        let member = self.groups.get(group_id).and_then(|g| g.members.get(member_id));
        member.and_then(|m| m.assignment.get(topic_id)).is_some_and(|ps| ps.contains(&partition))
    }
}

fn named(member: &ShareMember, names: &BTreeMap<TopicId, &str>) -> Vec<NamedPartitions> {
    let existing = member.assignment.iter().filter_map(|(id, ps)| Some((id, names.get(id)?, ps)));
    existing
        .map(|(id, name, ps)| NamedPartitions {
            topic_id: *id,
            topic_name: (*name).to_string(),
            partitions: ps.iter().copied().collect(),
        })
        .collect()
}

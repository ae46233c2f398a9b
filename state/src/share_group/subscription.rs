//! What a share group subscribes to, resolved against the topics that exist now: per member
//! the ids of its subscribed topics, the partition count of every subscribed topic, the
//! group's metadata (what moves the group epoch when a topic is created, deleted or grows)
//! and the subscription type, which picks the SimpleAssignor's builder.
//!
//! Names resolve against real topics only, not the virtual `__consumer_offsets` consumer
//! groups see (`crate::internal_topic`): it holds no records in onelog, so a share
//! consumer assigned to it could never be delivered anything.

use std::collections::{BTreeMap, BTreeSet};

use super::model::ShareMember;
use crate::consumer_group::TopicId;
use crate::Topic;

/// A group's subscriptions resolved against the current topics.
#[derive(Debug, Default)]
pub(crate) struct Subscriptions {
    /// Member id → ids of the existing topics it subscribes to.
    pub by_member: BTreeMap<String, BTreeSet<TopicId>>,
    /// Partition count of every existing topic some member subscribes to.
    pub partitions: BTreeMap<TopicId, i32>,
    /// The same topics by name, as `ShareGroup::subscribed_topics` stores them.
    pub metadata: BTreeMap<String, (TopicId, i32)>,
    /// Kafka's HOMOGENEOUS: every member subscribes to the same names (existing or not).
    pub homogeneous: bool,
}

impl Subscriptions {
    pub fn of(&self, member_id: &str) -> &BTreeSet<TopicId> {
        static NONE: BTreeSet<TopicId> = BTreeSet::new();
        self.by_member.get(member_id).unwrap_or(&NONE)
    }
}

/// A topic's id and partition count, if it exists.
pub(crate) fn lookup(topics: &BTreeMap<String, Topic>, name: &str) -> Option<(TopicId, i32)> {
    let topic = topics.get(name)?;
    Some((topic.topic_id, i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX)))
}

pub(crate) fn resolve(
    members: &BTreeMap<String, ShareMember>,
    topics: &BTreeMap<String, Topic>,
) -> Subscriptions {
    let mut subs = Subscriptions::default();
    for (member_id, member) in members {
        let mut ids = BTreeSet::new();
        for name in &member.subscribed_topic_names {
            let Some((id, count)) = lookup(topics, name) else { continue };
            ids.insert(id);
            subs.partitions.insert(id, count);
            subs.metadata.insert(name.clone(), (id, count));
        }
        subs.by_member.insert(member_id.clone(), ids);
    }
    subs.homogeneous = is_homogeneous(members);
    subs
}

/// Kafka's `ModernGroup.subscriptionType`: every subscribed name counted by every member.
fn is_homogeneous(members: &BTreeMap<String, ShareMember>) -> bool {
    let mut names = members.values().map(|m| &m.subscribed_topic_names);
    let Some(first) = names.next() else { return true };
    names.all(|n| n == first)
}

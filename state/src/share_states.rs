//! Every share group's share-partition states (KIP-932), by group, topic id and partition: what
//! Kafka keeps in `__share_group_state` through its share coordinator, here replicated state
//! changed only by ops of the one log (DESIGN §9). Keyed by topic id, as Kafka keys them, so a
//! topic deleted and created again under the same name starts with no share state.
//!
//! The record-level rules are `share_partition`'s; this is the container and what spans its
//! partitions: releasing a member's records everywhere, lock expiry across groups, dropping a
//! deleted topic's or group's states.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::consumer_group::TopicId;
use crate::share_partition::{Limits, SharePartition};

/// One share group's partitions: topic id → partition → state.
pub type GroupPartitions = BTreeMap<TopicId, BTreeMap<i32, SharePartition>>;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShareStates {
    pub groups: BTreeMap<String, GroupPartitions>,
}

impl ShareStates {
    pub fn get(&self, group_id: &str, topic_id: &TopicId, partition: i32) -> Option<&SharePartition> {
        self.groups.get(group_id)?.get(topic_id)?.get(&partition)
    }

    /// The partition's state, started at `start_offset` if the group never read it.
    pub fn get_or_start(
        &mut self,
        group_id: &str,
        topic_id: TopicId,
        partition: i32,
        start_offset: i64,
    ) -> &mut SharePartition {
        let group = self.groups.entry(group_id.to_string()).or_default();
        group
            .entry(topic_id)
            .or_default()
            .entry(partition)
            .or_insert_with(|| SharePartition::new(start_offset))
    }

    pub fn get_mut(
        &mut self,
        group_id: &str,
        topic_id: &TopicId,
        partition: i32,
    ) -> Option<&mut SharePartition> {
        self.groups.get_mut(group_id)?.get_mut(topic_id)?.get_mut(&partition)
    }

    /// Releases what `member_id` holds (every member's with `None`) in the named partitions
    /// (all of the group's with `None`): the records are available again, delivery counts kept.
    pub fn release(
        &mut self,
        group_id: &str,
        member_id: Option<&str>,
        only: Option<&[(TopicId, i32)]>,
        limits: &Limits,
    ) -> usize {
        let Some(group) = self.groups.get_mut(group_id) else { return 0 };
        let mut released = 0;
        for (topic_id, partitions) in group.iter_mut() {
            for (partition, state) in partitions.iter_mut() {
                if only.is_some_and(|only| !only.contains(&(*topic_id, *partition))) {
                    continue;
                }
                released += match member_id {
                    Some(member) => state.release_member(member, limits),
                    // Every lock ends now: the same transition as an expiry.
                    None => state.expire(i64::MAX, limits),
                };
            }
        }
        released
    }

    /// Lock expiry in the named groups at the leader's `now_ms`, each with its own limits.
    pub fn expire(&mut self, now_ms: i64, groups: &[(String, Limits)]) -> usize {
        let mut expired = 0;
        for (group_id, limits) in groups {
            let Some(group) = self.groups.get_mut(group_id) else { continue };
            for state in group.values_mut().flat_map(|p| p.values_mut()) {
                expired += state.expire(now_ms, limits);
            }
        }
        expired
    }

    /// The earliest lock deadline of each group holding acquired records.
    pub fn deadlines(&self) -> BTreeMap<&str, i64> {
        let mut out = BTreeMap::new();
        for (group_id, group) in &self.groups {
            let next =
                group.values().flat_map(|p| p.values()).filter_map(SharePartition::next_deadline).min();
            if let Some(next) = next {
                out.insert(group_id.as_str(), next);
            }
        }
        out
    }

    /// A deleted topic's states go with it, in every group.
    pub fn drop_topic(&mut self, topic_id: &TopicId) {
        for group in self.groups.values_mut() {
            group.remove(topic_id);
        }
        self.groups.retain(|_, group| !group.is_empty());
    }

    pub fn drop_group(&mut self, group_id: &str) {
        self.groups.remove(group_id);
    }
}

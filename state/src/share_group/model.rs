//! The replicated state of KIP-932 share groups: what a new leader needs to carry on where the
//! old one stopped, and nothing it can derive.
//!
//! Stored: per group the group epoch, the subscribed topics the epoch was last moved for, the
//! target assignment with its epoch and time, and per member its identity, subscription,
//! epochs and assigned partitions. Derived on every use: the group state, the subscription
//! type, which partitions the group consumes, all timers. A share member has no
//! reconciliation state: partitions are shared, nothing is revoked first, so Kafka's member
//! is always STABLE and onelog does not store that constant.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::consumer_group::{Assignment, TopicId};

/// Every share group, by group id.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShareGroups {
    pub groups: BTreeMap<String, ShareGroup>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShareGroup {
    /// Bumped by one whenever who is in the group, what it subscribes to, or those topics
    /// change.
    pub group_epoch: i32,
    /// The group epoch the target assignment was computed for; never above `group_epoch`.
    pub assignment_epoch: i32,
    /// Leader time of that computation (KIP-1263 interval); 0 = never, or the group emptied.
    pub assignment_time_ms: i64,
    /// The subscribed topics that existed when the group epoch last moved, by name, with
    /// their id and partition count: onelog's stand-in for Kafka's metadata hash (KIP-1101),
    /// compared whole rather than hashed. Kept whole (not as a hash) because a fence has no
    /// topic map to hash again, and Kafka's fence does recompute it without the member.
    pub subscribed_topics: BTreeMap<String, (TopicId, i32)>,
    /// Members by member id.
    pub members: BTreeMap<String, ShareMember>,
    /// Target assignment by member id; a member without an entry has an empty target.
    pub targets: BTreeMap<String, Assignment>,
}

impl Default for ShareGroup {
    fn default() -> Self {
        Self::new()
    }
}

impl ShareGroup {
    /// Kafka's `ModernGroup`: a new group is at epoch 1 with an empty target at epoch 1, so
    /// its first computed assignment has epoch 2.
    pub fn new() -> Self {
        ShareGroup {
            group_epoch: 1,
            assignment_epoch: 1,
            assignment_time_ms: 0,
            subscribed_topics: BTreeMap::new(),
            members: BTreeMap::new(),
            targets: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShareMember {
    /// 0 before the first heartbeat is answered; then the assignment epoch it last took.
    pub member_epoch: i32,
    /// The epoch before the last move, which a heartbeat may still carry (lost response).
    pub previous_member_epoch: i32,
    pub rack_id: Option<String>,
    /// From the request header and the connection: Kafka overwrites both on every heartbeat.
    pub client_id: String,
    pub client_host: String,
    /// A set, as Kafka stores them (duplicates in a request collapse).
    pub subscribed_topic_names: BTreeSet<String>,
    /// The partitions the member may fetch from now: its target, limited to the existing
    /// topics it subscribes to.
    pub assignment: Assignment,
    /// The leader's clock (ms) when the log last heard from the member (`ShareGroups::seen`):
    /// a new leader arms the session from it.
    pub last_seen_ms: i64,
}

impl Default for ShareMember {
    fn default() -> Self {
        Self::new()
    }
}

impl ShareMember {
    /// Kafka's `ShareGroupMember.Builder(memberId)`: epoch 0, previous epoch -1.
    pub fn new() -> Self {
        ShareMember {
            member_epoch: 0,
            previous_member_epoch: -1,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            subscribed_topic_names: BTreeSet::new(),
            assignment: Assignment::new(),
            last_seen_ms: 0,
        }
    }
}

impl ShareGroups {
    /// Runs `f` on a copy holding only the group `group_id` (if any): the leader's dry run of
    /// a request, answered without a log entry when it changes nothing. Returns `f`'s result
    /// and whether the group changed.
    pub fn trial<T>(&self, group_id: &str, f: impl FnOnce(&mut ShareGroups) -> T) -> (T, bool) {
        let before = self.groups.get(group_id);
        let mut copy = ShareGroups::default();
        if let Some(group) = before {
            copy.groups.insert(group_id.to_string(), group.clone());
        }
        let result = f(&mut copy);
        (result, copy.groups.get(group_id) != before)
    }
}

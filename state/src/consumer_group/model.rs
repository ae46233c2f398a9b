//! The replicated state of KIP-848 consumer groups: exactly what a new leader needs to carry on
//! where the old one stopped (spec §9), and nothing it can derive.
//!
//! Stored: per group the group epoch, the fingerprint of the subscribed topics, the target
//! assignment with its epoch and time, and per member its identity, subscription, epochs,
//! reconciliation state and current partitions (with each partition's assignment epoch,
//! KIP-1251). Derived on every use, never stored: which member owns which partition (Kafka's
//! `currentPartitionEpoch`), the group state, the instance id → member map, the subscription
//! type, the preferred assignor and all timers. Keeping derived data out of the state is what
//! makes it impossible for the two to disagree after a replay.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// A Kafka topic id (UUID bytes), as `crate::Topic::topic_id`.
pub type TopicId = [u8; 16];

/// Partitions by topic id: a target assignment, or what a response or a describe reports.
pub type Assignment = BTreeMap<TopicId, BTreeSet<i32>>;

/// Partitions by topic id, each with the epoch at which it was assigned to the member
/// (KIP-1251, used by the offset-commit check).
pub type EpochAssignment = BTreeMap<TopicId, BTreeMap<i32, i32>>;

/// Every consumer-protocol group, by group id.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ConsumerGroups {
    pub groups: BTreeMap<String, ConsumerGroup>,
    /// Classic groups a downgrade made (around-spec §4.5) whose first classic rebalance has
    /// not completed: the leader's classic coordinator adopts such a group rebalancing, so that
    /// the partitions of the consumer-protocol member that left are handed out again.
    pub downgraded: BTreeSet<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ConsumerGroup {
    /// Bumped by one whenever who is in the group or what it subscribes to changes (§3.5).
    pub group_epoch: i32,
    /// Deterministic fingerprint of the subscribed topics (id, name, partition count); it
    /// stands in for Kafka's XXH3 metadata hash (KIP-1101): a difference bumps the epoch.
    pub subscription_fingerprint: u64,
    /// The group epoch the target assignment was computed for; never above `group_epoch`.
    pub assignment_epoch: i32,
    /// Leader time of that computation (KIP-1263 batching); 0 = never, or the group emptied.
    pub assignment_time_ms: i64,
    /// Target assignment by member id; a member without an entry has an empty target.
    pub targets: BTreeMap<String, Assignment>,
    /// Members by member id.
    pub members: BTreeMap<String, Member>,
}

impl ConsumerGroups {
    /// Runs `f` on a copy holding only the group `group_id` (if any): the leader's dry run of
    /// a request, answered without a log entry when it changes nothing. Returns `f`'s result
    /// and whether the group changed.
    pub fn trial<T>(&self, group_id: &str, f: impl FnOnce(&mut ConsumerGroups) -> T) -> (T, bool) {
        let before = self.groups.get(group_id);
        let mut copy = ConsumerGroups::default();
        if let Some(group) = before {
            copy.groups.insert(group_id.to_string(), group.clone());
        }
        let result = f(&mut copy);
        (result, copy.groups.get(group_id) != before)
    }
}

impl Default for ConsumerGroup {
    fn default() -> Self {
        Self::new()
    }
}

impl ConsumerGroup {
    /// KAFKA-20268 (4.3+): a new group starts at epoch 1 with an empty target at epoch 1, so
    /// its first computed assignment has epoch 2. onelog stores these values from the start
    /// rather than relying on an unpersisted default (spec §3.1, "Unsure").
    pub fn new() -> Self {
        ConsumerGroup {
            group_epoch: 1,
            subscription_fingerprint: 0,
            assignment_epoch: 1,
            assignment_time_ms: 0,
            targets: BTreeMap::new(),
            members: BTreeMap::new(),
        }
    }

    /// The member holding a static instance id, if any (derived: Kafka's `staticMembers`).
    pub fn member_by_instance(&self, instance_id: &str) -> Option<(&String, &Member)> {
        self.members.iter().find(|(_, m)| m.instance_id.as_deref() == Some(instance_id))
    }
}

/// Where a member is on its way to its target (spec §4.1). Kafka's UNKNOWN (a state written
/// by a newer version) is not modelled: no onelog version writes one.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum MemberState {
    /// Owns exactly what it was told; reconciled if its epoch is the assignment epoch.
    Stable,
    /// Waiting for the member to stop owning `pending_revocation`, at its old epoch.
    UnrevokedPartitions,
    /// At the new epoch, waiting for partitions other members still hold.
    UnreleasedPartitions,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Member {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    /// Subscribed topic names, a set as Kafka stores them (duplicates in a request collapse).
    pub subscribed_topic_names: BTreeSet<String>,
    /// `None` = no regex (a request's `""` clears it).
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// 0 before the first reconcile, -2 while a static member is temporarily away.
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub assigned: EpochAssignment,
    pub pending_revocation: EpochAssignment,
    /// `Some` for a member that speaks the classic protocol (JoinGroup, SyncGroup, Heartbeat)
    /// inside this consumer group: online migration, around-spec §4.
    pub classic: Option<ClassicMember>,
    /// The leader's clock (ms) when the log last heard from the member: its last heartbeat
    /// that changed the group, or the leader's `RecordConsumerLiveness`. A new leader arms the
    /// session from it rather than giving every member a full session (`MemberTimers`).
    pub last_seen_ms: i64,
}

impl Default for Member {
    fn default() -> Self {
        Self::new()
    }
}

impl Member {
    /// A member as Kafka creates it on a first join: epoch 0, previous epoch -1, STABLE,
    /// nothing assigned, subscribed to nothing (spec §3.3).
    pub fn new() -> Self {
        Member {
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: -1,
            subscribed_topic_names: BTreeSet::new(),
            subscribed_topic_regex: None,
            server_assignor: None,
            member_epoch: 0,
            previous_member_epoch: -1,
            state: MemberState::Stable,
            assigned: EpochAssignment::new(),
            pending_revocation: EpochAssignment::new(),
            classic: None,
            last_seen_ms: 0,
        }
    }

    /// Kafka's `isReconciledTo`: STABLE at exactly that epoch.
    pub fn is_reconciled_to(&self, epoch: i32) -> bool {
        self.state == MemberState::Stable && self.member_epoch == epoch
    }

    /// The assigned partitions without their epochs (what a response carries).
    pub fn assigned_partitions(&self) -> Assignment {
        without_epochs(&self.assigned)
    }

    /// The epoch a partition was assigned at, searching assigned then pending revocation.
    pub fn partition_epoch(&self, topic_id: &TopicId, partition: i32) -> Option<i32> {
        let find = |a: &EpochAssignment| a.get(topic_id).and_then(|ps| ps.get(&partition)).copied();
        find(&self.assigned).or_else(|| find(&self.pending_revocation))
    }
}

/// What a classic member needs beyond a consumer-protocol member (Kafka's
/// `ClassicMemberMetadata`): the session timeout of its JoinGroup, which its session runs on,
/// and the protocols it offered, in its order of preference, with their metadata (the first
/// is the one its JoinGroup and SyncGroup name; all of them go back to a classic group on a
/// downgrade).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClassicMember {
    pub session_timeout_ms: i32,
    pub protocols: Vec<ClassicProtocol>,
}

/// One JoinGroup protocol: an assignor's name and the member's embedded subscription.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClassicProtocol {
    pub name: String,
    pub metadata: Vec<u8>,
}

impl ClassicMember {
    /// The protocol its JoinGroup answer names (Kafka takes the first).
    pub fn protocol_name(&self) -> &str {
        self.protocols.first().map_or("", |p| p.name.as_str())
    }
}

/// Drops the per-partition epochs.
pub fn without_epochs(assignment: &EpochAssignment) -> Assignment {
    assignment.iter().map(|(t, ps)| (*t, ps.keys().copied().collect())).collect()
}

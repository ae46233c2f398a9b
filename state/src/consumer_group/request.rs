//! What goes into and comes out of a ConsumerGroupHeartbeat (API key 68, v0-v1) as the pure
//! state machine sees it: the request's fields plus the client's id and address, the broker's
//! group settings, and the answer (or refusal) the handler encodes.
//!
//! The caller fills in everything random or timed: the member id of a v0 join (the leader
//! generates a UUID before proposing) and the leader's clock (`now_ms`).

use serde::{Deserialize, Serialize};

use super::model::{Assignment, TopicId};

/// MemberEpoch of a leave (KIP-848).
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;
/// MemberEpoch of a static member's temporary leave: its partitions stay reserved.
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;

/// One ConsumerGroupHeartbeat request. `None` (and -1 for the rebalance timeout) means
/// "unchanged since the last heartbeat", never "clear" (spec §1.1).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Heartbeat {
    /// The request's API version (0 or 1): v0 allows an empty member id on a static leave.
    pub version: i16,
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    /// v1+: `Some("")` clears the regex.
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// The partitions the member owns right now.
    pub topic_partitions: Option<Vec<TopicPartitions>>,
    /// From the request header and the connection: Kafka overwrites both on every heartbeat.
    pub client_id: String,
    pub client_host: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct TopicPartitions {
    pub topic_id: TopicId,
    pub partitions: Vec<i32>,
}

impl Heartbeat {
    /// What the Java client sends on a join, a rejoin and after any error (spec §1.1): the
    /// coordinator then echoes the whole assignment.
    pub fn is_full(&self) -> bool {
        self.rebalance_timeout_ms != -1
            && (self.subscribed_topic_names.is_some() || self.subscribed_topic_regex.is_some())
            && self.topic_partitions.is_some()
    }

    /// The owned partitions as a set (duplicates collapse), if the request carries them.
    pub fn owned(&self) -> Option<Assignment> {
        let owned = self.topic_partitions.as_ref()?;
        let mut set = Assignment::new();
        for tp in owned {
            set.entry(tp.topic_id).or_default().extend(tp.partitions.iter().copied());
        }
        Some(set)
    }
}

/// The server-side assignors onelog has (Kafka's `group.consumer.assignors` classes).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub enum Assignor {
    Uniform,
    Range,
}

impl Assignor {
    pub fn name(self) -> &'static str {
        match self {
            Assignor::Uniform => "uniform",
            Assignor::Range => "range",
        }
    }

    pub fn from_name(name: &str) -> Option<Assignor> {
        [Assignor::Uniform, Assignor::Range].into_iter().find(|a| a.name() == name)
    }
}

/// The broker's consumer-group configs, as Kafka 4.4 names and defaults them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct GroupSettings {
    /// `group.consumer.assignors`; the first is the default. Empty means `[uniform]`.
    pub assignors: Vec<Assignor>,
    /// `group.consumer.max.size`.
    pub max_size: i32,
    /// `group.consumer.session.timeout.ms`.
    pub session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: i32,
    /// `group.consumer.assignment.interval.ms` (KIP-1263): the least time between two
    /// target computations; 0 computes on every heartbeat that owes one.
    pub assignment_interval_ms: i64,
    /// What online migration between classic and consumer groups may do.
    pub migration: Migration,
}

/// `group.consumer.migration.policy` (around-spec §4.1): which way a group with members may be
/// converted. An empty group converts either way whatever the policy.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum MigrationPolicy {
    Bidirectional,
    Upgrade,
    Downgrade,
    Disabled,
}

impl MigrationPolicy {
    /// Kafka's parse: case-insensitive, and a value it does not know is `disabled`.
    pub fn parse(value: &str) -> MigrationPolicy {
        match value.trim().to_ascii_lowercase().as_str() {
            "bidirectional" => MigrationPolicy::Bidirectional,
            "upgrade" => MigrationPolicy::Upgrade,
            "downgrade" => MigrationPolicy::Downgrade,
            _ => MigrationPolicy::Disabled,
        }
    }

    pub fn upgrades(self) -> bool {
        matches!(self, MigrationPolicy::Bidirectional | MigrationPolicy::Upgrade)
    }

    pub fn downgrades(self) -> bool {
        matches!(self, MigrationPolicy::Bidirectional | MigrationPolicy::Downgrade)
    }
}

/// The broker configs a conversion is decided by; carried in the ops that may convert.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Migration {
    pub policy: MigrationPolicy,
    /// `group.max.size`: a downgrade must leave a classic group within it.
    pub classic_max_size: i32,
}

impl Default for Migration {
    fn default() -> Self {
        Migration { policy: MigrationPolicy::Bidirectional, classic_max_size: i32::MAX }
    }
}

impl Default for GroupSettings {
    fn default() -> Self {
        GroupSettings {
            assignors: vec![Assignor::Uniform, Assignor::Range],
            max_size: i32::MAX,
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            assignment_interval_ms: 1_000,
            migration: Migration::default(),
        }
    }
}

impl GroupSettings {
    pub fn default_assignor(&self) -> Assignor {
        self.assignors.first().copied().unwrap_or(Assignor::Uniform)
    }
}

/// A refused heartbeat: Kafka's error code and message. The state is left unchanged.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Refusal {
    pub code: i16,
    pub message: Option<String>,
}

impl Refusal {
    pub fn new(code: i16, message: impl Into<String>) -> Self {
        Refusal { code, message: Some(message.into()) }
    }
}

/// A successful heartbeat's response fields, and what the leader must do with the member's
/// revocation timer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub member_id: String,
    pub member_epoch: i32,
    /// 0 on a leave.
    pub heartbeat_interval_ms: i32,
    /// `None`: "keep what you have". `Some`: every partition the member may own now.
    pub assignment: Option<Assignment>,
    pub revocation_timer: RevocationTimer,
}

/// The rebalance timeout (spec §5.2): armed when a reconcile moves the member into
/// UNREVOKED_PARTITIONS, cancelled when it moves it anywhere else, untouched otherwise.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum RevocationTimer {
    Keep,
    Cancel,
    /// Fence the member after `rebalance_timeout_ms` if it is still at `member_epoch` then.
    Arm(RevocationDeadline),
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct RevocationDeadline {
    pub rebalance_timeout_ms: i32,
    pub member_epoch: i32,
}

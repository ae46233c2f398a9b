//! Group configs (ConfigResource type GROUP = 32): the keys Kafka 4.4 lists for a group, how
//! each value is checked, and the settings a KIP-848 consumer group's or a KIP-1071 Streams
//! group's heartbeats run with once its overrides are layered over the broker's
//! `group.consumer.*` or `group.streams.*` configs (docs/kafka/kip848-around.md §6,
//! "around-spec" below).
//!
//! The checks come in two kinds, split as Kafka 4.4's `GroupConfig` splits them:
//! - a value's type (`atLeast(1)`, a boolean, one of a few strings) depends on no broker
//!   config, so apply runs it ([`value_problem`], through `configs::altered`);
//! - the bounds (`group.consumer.min/max.*`, `group.streams.min/max.*`) and the session >
//!   heartbeat rule depend on the broker's configs, so only the leader checks them, before it
//!   proposes ([`leader_problem`], which also checks the two string keys 0.1.0 stored
//!   unchecked): apply must decide alike on nodes started with other configs.
//!
//! A stored override that falls outside the bounds of the broker using it (they changed
//! since, or another leader accepted it) is capped when used ([`consumer_settings`],
//! [`streams_settings`]; the broker's `config::share_group` for the `share.*` keys, bounded by
//! `group.share.min/max.*` through [`ShareGroupBounds`]), as Kafka 4.4 caps it. The
//! dead-letter-queue keys are stored and described and used by nothing; so are the streams
//! keys no [`StreamsSettings`] field takes (`streams.assignor.offload.enable`).

use crate::configs::{AlterKind, ConfigAlteration, Overrides};
use crate::consumer_group::GroupSettings;
use crate::share_group::ShareSettings;
use crate::streams_group::StreamsSettings;
use crate::topic_config::ConfigType;

pub const CONSUMER_SESSION_TIMEOUT_MS: &str = "consumer.session.timeout.ms";
pub const CONSUMER_HEARTBEAT_INTERVAL_MS: &str = "consumer.heartbeat.interval.ms";
pub const CONSUMER_ASSIGNMENT_INTERVAL_MS: &str = "consumer.assignment.interval.ms";
pub const SHARE_SESSION_TIMEOUT_MS: &str = "share.session.timeout.ms";
pub const SHARE_HEARTBEAT_INTERVAL_MS: &str = "share.heartbeat.interval.ms";
pub const SHARE_ASSIGNMENT_INTERVAL_MS: &str = "share.assignment.interval.ms";
pub const SHARE_RECORD_LOCK_DURATION_MS: &str = "share.record.lock.duration.ms";
pub const SHARE_DELIVERY_COUNT_LIMIT: &str = "share.delivery.count.limit";
pub const SHARE_PARTITION_MAX_RECORD_LOCKS: &str = "share.partition.max.record.locks";
pub const STREAMS_SESSION_TIMEOUT_MS: &str = "streams.session.timeout.ms";
pub const STREAMS_HEARTBEAT_INTERVAL_MS: &str = "streams.heartbeat.interval.ms";
pub const STREAMS_NUM_STANDBY_REPLICAS: &str = "streams.num.standby.replicas";
pub const STREAMS_INITIAL_REBALANCE_DELAY_MS: &str = "streams.initial.rebalance.delay.ms";
pub const STREAMS_ASSIGNMENT_INTERVAL_MS: &str = "streams.assignment.interval.ms";
pub const STREAMS_TASK_OFFSET_INTERVAL_MS: &str = "streams.task.offset.interval.ms";
pub const STREAMS_NUM_WARMUP_REPLICAS: &str = "streams.num.warmup.replicas";
pub const STREAMS_ACCEPTABLE_RECOVERY_LAG: &str = "streams.acceptable.recovery.lag";

/// What a value must be, whatever the broker's configs (Kafka's `ConfigDef` validators).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueCheck {
    /// An Int or Long at least this.
    AtLeast(i64),
    Boolean,
    OneOf(&'static [&'static str]),
    /// `latest`, `earliest` or `by_duration:<ISO-8601 duration>` (KIP-1106).
    AutoOffsetReset,
    /// Any string.
    Text,
}

/// One group config: its name, the broker config that supplies its default (Kafka's
/// `GroupConfig.ALL_GROUP_CONFIG_SYNONYMS`; none for a few share and DLQ keys), Kafka's
/// default, its type and its check.
#[derive(Debug, Clone, Copy)]
pub struct GroupConfigDef {
    pub name: &'static str,
    pub broker_name: Option<&'static str>,
    pub default: &'static str,
    pub config_type: ConfigType,
    pub check: ValueCheck,
}

const fn int(name: &'static str, broker: &'static str, default: &'static str, min: i64) -> GroupConfigDef {
    GroupConfigDef {
        name,
        broker_name: Some(broker),
        default,
        config_type: ConfigType::Int,
        check: ValueCheck::AtLeast(min),
    }
}

const fn other(
    name: &'static str,
    broker_name: Option<&'static str>,
    default: &'static str,
    config_type: ConfigType,
    check: ValueCheck,
) -> GroupConfigDef {
    GroupConfigDef { name, broker_name, default, config_type, check }
}

use ConfigType::{Boolean, Long, String as Text};
use ValueCheck::{AtLeast, AutoOffsetReset, OneOf};

/// Every key Kafka 4.4 describes for a group resource, whatever the group's type
/// (around-spec §6.2), but two Kafka 4.4.0 added for Streams groups that onelog has not taken
/// up: `streams.rack.aware.assignment.tags` and `streams.assignor.name`. The defaults are
/// Kafka's broker defaults; the broker's own value of a `group.consumer.*` or
/// `group.streams.*` synonym replaces its default when described and used.
pub const GROUP_CONFIGS: &[GroupConfigDef] = &[
    other(
        "consumer.assignor.offload.enable",
        Some("group.consumer.assignor.offload.enable"),
        "true",
        Boolean,
        ValueCheck::Boolean,
    ),
    int(CONSUMER_ASSIGNMENT_INTERVAL_MS, "group.consumer.assignment.interval.ms", "1000", 0),
    int(CONSUMER_HEARTBEAT_INTERVAL_MS, "group.consumer.heartbeat.interval.ms", "5000", 1),
    int(CONSUMER_SESSION_TIMEOUT_MS, "group.consumer.session.timeout.ms", "45000", 1),
    other("errors.deadletterqueue.copy.record.enable", None, "false", Boolean, ValueCheck::Boolean),
    other("errors.deadletterqueue.topic.name", None, "", Text, ValueCheck::Text),
    int("share.assignment.interval.ms", "group.share.assignment.interval.ms", "1000", 0),
    other(
        "share.assignor.offload.enable",
        Some("group.share.assignor.offload.enable"),
        "true",
        Boolean,
        ValueCheck::Boolean,
    ),
    other("share.auto.offset.reset", None, "latest", Text, AutoOffsetReset),
    int("share.delivery.count.limit", "group.share.delivery.count.limit", "5", 2),
    int("share.heartbeat.interval.ms", "group.share.heartbeat.interval.ms", "5000", 1),
    other(
        "share.isolation.level",
        None,
        "read_uncommitted",
        Text,
        OneOf(&["read_committed", "read_uncommitted"]),
    ),
    int("share.partition.max.record.locks", "group.share.partition.max.record.locks", "2000", 100),
    int("share.record.lock.duration.ms", "group.share.record.lock.duration.ms", "30000", 1000),
    other("share.renew.acknowledge.enable", None, "true", Boolean, ValueCheck::Boolean),
    int("share.session.timeout.ms", "group.share.session.timeout.ms", "45000", 1),
    other(
        STREAMS_ACCEPTABLE_RECOVERY_LAG,
        Some("group.streams.acceptable.recovery.lag"),
        "10000",
        Long,
        AtLeast(0),
    ),
    int(STREAMS_ASSIGNMENT_INTERVAL_MS, "group.streams.assignment.interval.ms", "1000", 0),
    other(
        "streams.assignor.offload.enable",
        Some("group.streams.assignor.offload.enable"),
        "true",
        Boolean,
        ValueCheck::Boolean,
    ),
    int(STREAMS_HEARTBEAT_INTERVAL_MS, "group.streams.heartbeat.interval.ms", "5000", 1),
    int(STREAMS_INITIAL_REBALANCE_DELAY_MS, "group.streams.initial.rebalance.delay.ms", "3000", 0),
    int(STREAMS_NUM_STANDBY_REPLICAS, "group.streams.num.standby.replicas", "0", 0),
    int(STREAMS_NUM_WARMUP_REPLICAS, "group.streams.num.warmup.replicas", "2", 0),
    int(STREAMS_SESSION_TIMEOUT_MS, "group.streams.session.timeout.ms", "45000", 1),
    int(STREAMS_TASK_OFFSET_INTERVAL_MS, "group.streams.task.offset.interval.ms", "60000", 1),
];

/// The keys Kafka 4.4 defines as internal (`defineInternal`): described only when the group
/// sets one or the broker sets its synonym (Kafka's `extractGroupConfigMap` skips them
/// otherwise), still accepted and stored like the rest.
const INTERNAL: &[&str] = &[
    "consumer.assignor.offload.enable",
    "share.assignor.offload.enable",
    "streams.assignor.offload.enable",
    STREAMS_TASK_OFFSET_INTERVAL_MS,
    STREAMS_NUM_WARMUP_REPLICAS,
    STREAMS_ACCEPTABLE_RECOVERY_LAG,
];

pub fn is_internal(name: &str) -> bool {
    INTERNAL.contains(&name)
}

pub fn group_config_def(name: &str) -> Option<&'static GroupConfigDef> {
    GROUP_CONFIGS.iter().find(|d| d.name == name)
}

/// Why `value` is not a value of `def` at all, in Kafka's `ConfigException` words; apply
/// runs this, so it must never depend on a broker config. The two string keys with a fixed
/// set of values are checked by the leader only ([`leader_problem`]): onelog 0.1.0 stored
/// any string for them, and a log it wrote must apply here as it did there.
pub fn value_problem(def: &GroupConfigDef, value: &str) -> Option<String> {
    let invalid = |why: &str| Some(format!("Invalid value {value} for configuration {}{why}", def.name));
    match def.check {
        AtLeast(min) => {
            let parsed = match def.config_type {
                ConfigType::Int => value.trim().parse::<i32>().map(i64::from).ok(),
                _ => value.trim().parse::<i64>().ok(),
            };
            match parsed {
                None if def.config_type == ConfigType::Int => invalid(": Not a number of type INT"),
                None => invalid(": Not a number of type LONG"),
                Some(v) if v < min => invalid(&format!(": Value must be at least {min}")),
                Some(_) => None,
            }
        }
        ValueCheck::Boolean => {
            let ok = ["true", "false"].iter().any(|b| value.trim().eq_ignore_ascii_case(b));
            (!ok).then(|| invalid(": Expected value to be either true or false")).flatten()
        }
        OneOf(_) | AutoOffsetReset | ValueCheck::Text => None,
    }
}

/// The string checks apply leaves out (see [`value_problem`]).
fn string_problem(def: &GroupConfigDef, value: &str) -> Option<String> {
    let invalid = |why: String| Some(format!("Invalid value {value} for configuration {}{why}", def.name));
    match def.check {
        OneOf(allowed) if !allowed.contains(&value) => {
            invalid(format!(": String must be one of: {}", allowed.join(", ")))
        }
        AutoOffsetReset => {
            let ok = matches!(value, "latest" | "earliest")
                || value.strip_prefix("by_duration:").is_some_and(|d| d.starts_with('P'));
            let why = ": the value must be either 'earliest', 'latest' or of the format \
                       'by_duration:<PnDTnHnMn.nS.>'.";
            (!ok).then(|| invalid(why.to_string())).flatten()
        }
        _ => None,
    }
}

/// An inclusive range of a broker's `group.*.min/max.*` pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub min: i64,
    pub max: i64,
}

impl Bounds {
    /// A stored override within these bounds (Kafka's `GroupConfig.evaluate` clamps it).
    pub fn cap(self, value: i64) -> i64 {
        value.clamp(self.min, self.max.max(self.min))
    }
}

/// The broker's bounds on the consumer-group keys: `group.consumer.min/max.session.timeout.ms`,
/// `…heartbeat.interval.ms` and `…assignment.interval.ms` (KIP-1263).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerGroupBounds {
    pub session_timeout_ms: Bounds,
    pub heartbeat_interval_ms: Bounds,
    pub assignment_interval_ms: Bounds,
}

impl Default for ConsumerGroupBounds {
    /// Kafka's defaults.
    fn default() -> Self {
        ConsumerGroupBounds {
            session_timeout_ms: Bounds { min: 45_000, max: 60_000 },
            heartbeat_interval_ms: Bounds { min: 5_000, max: 15_000 },
            assignment_interval_ms: Bounds { min: 0, max: 15_000 },
        }
    }
}

/// The broker's bounds on the Streams-group keys (`group.streams.min/max.*`): a range for the
/// session timeout, heartbeat interval and assignment interval, a most for the standby and
/// warmup replicas, a least for the task offset interval, as Kafka 4.4's `GroupConfig` bounds
/// each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamsGroupBounds {
    pub session_timeout_ms: Bounds,
    pub heartbeat_interval_ms: Bounds,
    pub assignment_interval_ms: Bounds,
    /// `group.streams.max.standby.replicas`.
    pub max_standby_replicas: i64,
    /// `group.streams.min.task.offset.interval.ms`.
    pub min_task_offset_interval_ms: i64,
    /// `group.streams.max.warmup.replicas`.
    pub max_warmup_replicas: i64,
}

impl Default for StreamsGroupBounds {
    /// Kafka's defaults.
    fn default() -> Self {
        StreamsGroupBounds {
            session_timeout_ms: Bounds { min: 45_000, max: 60_000 },
            heartbeat_interval_ms: Bounds { min: 5_000, max: 15_000 },
            assignment_interval_ms: Bounds { min: 0, max: 15_000 },
            max_standby_replicas: 2,
            min_task_offset_interval_ms: 15_000,
            max_warmup_replicas: 20,
        }
    }
}

/// The broker's bounds on the share-group keys (`group.share.min/max.*`): session timeout,
/// heartbeat interval and assignment interval (Kafka's `GroupCoordinatorConfig`), record lock
/// duration, delivery count limit and record locks per partition (its `ShareGroupConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareGroupBounds {
    pub session_timeout_ms: Bounds,
    pub heartbeat_interval_ms: Bounds,
    pub assignment_interval_ms: Bounds,
    pub record_lock_duration_ms: Bounds,
    pub delivery_count_limit: Bounds,
    pub partition_max_record_locks: Bounds,
}

impl Default for ShareGroupBounds {
    /// Kafka's defaults.
    fn default() -> Self {
        ShareGroupBounds {
            session_timeout_ms: Bounds { min: 45_000, max: 60_000 },
            heartbeat_interval_ms: Bounds { min: 5_000, max: 15_000 },
            assignment_interval_ms: Bounds { min: 0, max: 15_000 },
            record_lock_duration_ms: Bounds { min: 15_000, max: 60_000 },
            delivery_count_limit: Bounds { min: 2, max: 10 },
            partition_max_record_locks: Bounds { min: 100, max: 4_000 },
        }
    }
}

/// What the leader checks a group's overrides against: this broker's own group settings
/// (the defaults of an unset session timeout or heartbeat interval) and their bounds.
#[derive(Debug, Clone, Copy)]
pub struct BrokerGroupConfigs<'a> {
    pub consumer: &'a GroupSettings,
    pub consumer_bounds: &'a ConsumerGroupBounds,
    pub streams: &'a StreamsSettings,
    pub streams_bounds: &'a StreamsGroupBounds,
    pub share: &'a ShareSettings,
    pub share_bounds: &'a ShareGroupBounds,
}

/// A bound check of Kafka 4.4's `GroupConfig.validateValues`, each with its own message.
#[derive(Clone, Copy)]
enum Limit {
    Range(Bounds),
    Max(i64),
    Min(i64),
}

impl Limit {
    fn problem(self, key: &str, value: i64) -> Option<String> {
        match self {
            Limit::Range(b) if value < b.min || value > b.max => {
                Some(format!("{key} must be in the range {} to {} inclusive.", b.min, b.max))
            }
            Limit::Max(max) if value > max => Some(format!("{key} must be less than or equal to {max}")),
            Limit::Min(min) if value < min => Some(format!("{key} must be greater than or equal to {min}")),
            _ => None,
        }
    }
}

/// The bound checks in Kafka's order.
fn limits(broker: &BrokerGroupConfigs<'_>) -> [(&'static str, Limit); 15] {
    let (consumer, streams, share) = (broker.consumer_bounds, broker.streams_bounds, broker.share_bounds);
    [
        (CONSUMER_HEARTBEAT_INTERVAL_MS, Limit::Range(consumer.heartbeat_interval_ms)),
        (CONSUMER_SESSION_TIMEOUT_MS, Limit::Range(consumer.session_timeout_ms)),
        (CONSUMER_ASSIGNMENT_INTERVAL_MS, Limit::Range(consumer.assignment_interval_ms)),
        (SHARE_HEARTBEAT_INTERVAL_MS, Limit::Range(share.heartbeat_interval_ms)),
        (SHARE_SESSION_TIMEOUT_MS, Limit::Range(share.session_timeout_ms)),
        (SHARE_RECORD_LOCK_DURATION_MS, Limit::Range(share.record_lock_duration_ms)),
        (SHARE_DELIVERY_COUNT_LIMIT, Limit::Range(share.delivery_count_limit)),
        (SHARE_PARTITION_MAX_RECORD_LOCKS, Limit::Range(share.partition_max_record_locks)),
        (SHARE_ASSIGNMENT_INTERVAL_MS, Limit::Range(share.assignment_interval_ms)),
        (STREAMS_HEARTBEAT_INTERVAL_MS, Limit::Range(streams.heartbeat_interval_ms)),
        (STREAMS_SESSION_TIMEOUT_MS, Limit::Range(streams.session_timeout_ms)),
        (STREAMS_NUM_STANDBY_REPLICAS, Limit::Max(streams.max_standby_replicas)),
        (STREAMS_ASSIGNMENT_INTERVAL_MS, Limit::Range(streams.assignment_interval_ms)),
        (STREAMS_TASK_OFFSET_INTERVAL_MS, Limit::Min(streams.min_task_offset_interval_ms)),
        (STREAMS_NUM_WARMUP_REPLICAS, Limit::Max(streams.max_warmup_replicas)),
    ]
}

fn int_value(overrides: &Overrides, key: &str) -> Option<i64> {
    overrides.get(key).and_then(|v| v.trim().parse::<i64>().ok())
}

/// Why the leader refuses a group's overrides after an alteration (`overrides` is the
/// resource's whole set, as Kafka's controller validates it), given this broker's group
/// settings and bounds: the string values, then Kafka 4.4's bound checks of the keys
/// present, then the session timeout > heartbeat interval rule per group type, with the
/// broker default for whichever of the two is not set, then the DLQ topic name.
/// INVALID_CONFIG.
pub fn leader_problem(overrides: &Overrides, broker: BrokerGroupConfigs<'_>) -> Option<String> {
    let strings = overrides.iter().filter_map(|(k, v)| group_config_def(k).map(|d| (d, v)));
    if let Some(problem) = strings.into_iter().find_map(|(d, v)| string_problem(d, v)) {
        return Some(problem);
    }
    for (key, limit) in limits(&broker) {
        if let Some(problem) = int_value(overrides, key).and_then(|v| limit.problem(key, v)) {
            return Some(problem);
        }
    }
    let (consumer, streams, share) = (broker.consumer, broker.streams, broker.share);
    let pairs = [
        ("consumer", consumer.session_timeout_ms, consumer.heartbeat_interval_ms),
        ("share", share.session_timeout_ms, share.heartbeat_interval_ms),
        ("streams", streams.session_timeout_ms, streams.heartbeat_interval_ms),
    ];
    if let Some(problem) = pairs.into_iter().find_map(|(kind, s, h)| heartbeat_problem(overrides, kind, s, h))
    {
        return Some(problem);
    }
    let dlq = overrides.get("errors.deadletterqueue.topic.name");
    dlq.filter(|name| name.starts_with("__"))
        .map(|_| "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'".to_string())
}

/// Kafka's `validateSessionExceedsHeartbeat` for one group type (`kind`): checked only when
/// the group sets either key, the broker's value standing in for the one it does not set.
fn heartbeat_problem(
    overrides: &Overrides,
    kind: &str,
    session_default: i32,
    heartbeat_default: i32,
) -> Option<String> {
    let (session, heartbeat) =
        (format!("{kind}.session.timeout.ms"), format!("{kind}.heartbeat.interval.ms"));
    if !overrides.contains_key(&session) && !overrides.contains_key(&heartbeat) {
        return None;
    }
    let effective_session = int_value(overrides, &session).unwrap_or(i64::from(session_default));
    let effective_heartbeat = int_value(overrides, &heartbeat).unwrap_or(i64::from(heartbeat_default));
    (effective_session <= effective_heartbeat).then(|| format!("{session} must be greater than {heartbeat}"))
}

/// The settings one consumer group's heartbeats run with: the broker's, with the group's
/// `consumer.*` overrides layered on top, each capped to the broker's bounds (Kafka 4.4's
/// `GroupConfig.evaluate`; a value outside them was accepted under other bounds).
pub fn consumer_settings(
    broker: &GroupSettings,
    bounds: &ConsumerGroupBounds,
    overrides: Option<&Overrides>,
) -> GroupSettings {
    let mut settings = broker.clone();
    let Some(overrides) = overrides else { return settings };
    let capped = |key: &str, b: Bounds| int_value(overrides, key).map(|v| b.cap(v));
    if let Some(v) = capped(CONSUMER_SESSION_TIMEOUT_MS, bounds.session_timeout_ms) {
        settings.session_timeout_ms = i32::try_from(v).unwrap_or(i32::MAX);
    }
    if let Some(v) = capped(CONSUMER_HEARTBEAT_INTERVAL_MS, bounds.heartbeat_interval_ms) {
        settings.heartbeat_interval_ms = i32::try_from(v).unwrap_or(i32::MAX);
    }
    if let Some(v) = capped(CONSUMER_ASSIGNMENT_INTERVAL_MS, bounds.assignment_interval_ms) {
        settings.assignment_interval_ms = v;
    }
    settings
}

/// The settings one Streams group's heartbeats run with: the broker's, with the group's
/// `streams.*` overrides layered on top, each capped to the broker's bounds as Kafka 4.4's
/// `GroupConfig.evaluate` caps it (a range, a most or a least; the initial rebalance delay and
/// the acceptable recovery lag have none). `max_size` is the broker's alone: Kafka has no
/// group config for it.
pub fn streams_settings(
    broker: &StreamsSettings,
    bounds: &StreamsGroupBounds,
    overrides: Option<&Overrides>,
) -> StreamsSettings {
    let mut settings = broker.clone();
    let Some(overrides) = overrides else { return settings };
    let int = |key: &str, field: &mut i32, cap: &dyn Fn(i64) -> i64| {
        if let Some(v) = int_value(overrides, key) {
            *field = i32::try_from(cap(v)).unwrap_or(i32::MAX);
        }
    };
    let s = &mut settings;
    int(STREAMS_SESSION_TIMEOUT_MS, &mut s.session_timeout_ms, &|v| bounds.session_timeout_ms.cap(v));
    int(STREAMS_HEARTBEAT_INTERVAL_MS, &mut s.heartbeat_interval_ms, &|v| {
        bounds.heartbeat_interval_ms.cap(v)
    });
    int(STREAMS_NUM_STANDBY_REPLICAS, &mut s.num_standby_replicas, &|v| v.min(bounds.max_standby_replicas));
    int(STREAMS_INITIAL_REBALANCE_DELAY_MS, &mut s.initial_rebalance_delay_ms, &|v| v);
    int(STREAMS_ASSIGNMENT_INTERVAL_MS, &mut s.assignment_interval_ms, &|v| {
        bounds.assignment_interval_ms.cap(v)
    });
    int(STREAMS_TASK_OFFSET_INTERVAL_MS, &mut s.task_offset_interval_ms, &|v| {
        v.max(bounds.min_task_offset_interval_ms)
    });
    int(STREAMS_NUM_WARMUP_REPLICAS, &mut s.num_warmup_replicas, &|v| v.min(bounds.max_warmup_replicas));
    if let Some(lag) = int_value(overrides, STREAMS_ACCEPTABLE_RECOVERY_LAG) {
        s.acceptable_recovery_lag = lag;
    }
    settings
}

/// What onelog 0.1.0's apply accepted for a group: these keys, each within this range
/// (Kafka's default bounds, fixed then).
const ACCEPTED_BY_0_1_0: &[(&str, Option<(i64, i64)>)] = &[
    (CONSUMER_HEARTBEAT_INTERVAL_MS, Some((5_000, 15_000))),
    (CONSUMER_SESSION_TIMEOUT_MS, Some((45_000, 60_000))),
    ("share.auto.offset.reset", None),
    ("share.heartbeat.interval.ms", Some((5_000, 15_000))),
    ("share.isolation.level", None),
    ("share.record.lock.duration.ms", Some((15_000, 60_000))),
    ("share.session.timeout.ms", Some((45_000, 60_000))),
    (STREAMS_HEARTBEAT_INTERVAL_MS, Some((5_000, 15_000))),
    (STREAMS_NUM_STANDBY_REPLICAS, Some((0, 2))),
    (STREAMS_SESSION_TIMEOUT_MS, Some((45_000, 60_000))),
];

/// Why a group alteration must wait until the cluster finalized `onelog.version` 3: a
/// member still running 0.1.0 (possible below that level) would refuse it in apply (a key it
/// does not know, or a value outside the bounds it had fixed) while the others store it, and
/// the replicas would differ.
/// A deletion counts too: 0.1.0 refuses to delete a key it does not know, and a refusal
/// does not bump `DynamicConfigs::changes` where a no-op deletion does.
pub fn refused_by_0_1_0(alteration: &ConfigAlteration) -> Option<String> {
    let known = ACCEPTED_BY_0_1_0.iter().find(|(name, _)| *name == alteration.name);
    let value = alteration.value.as_deref().filter(|_| alteration.kind == AlterKind::Set);
    let accepted = match (known, value) {
        (None, _) => false,
        (Some((_, Some((min, max)))), Some(v)) => {
            v.trim().parse::<i64>().is_ok_and(|v| (*min..=*max).contains(&v))
        }
        (Some(_), _) => true,
    };
    (!accepted).then(|| {
        format!(
            "{} can be altered once the cluster finalized onelog.version 3 \
             (kafka-features.sh upgrade --feature onelog.version=3): onelog 0.1.0 refuses it",
            alteration.name
        )
    })
}

#[cfg(test)]
#[path = "group_config_tests.rs"]
mod tests;

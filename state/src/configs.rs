//! Dynamic configs: what AlterConfigs (key 33) and IncrementalAlterConfigs (key 44) store in
//! the replicated state, and the one function both use to compute a resource's new overrides.
//!
//! A topic's overrides live on the topic (`Topic::configs`); the dynamic broker configs (per
//! broker and the cluster-wide default), group configs (KIP-848's `consumer.*`, KIP-932's
//! `share.*`, KIP-1071's `streams.*`; their keys and checks are `group_config`) and
//! client-metrics subscriptions (KIP-714) live here.
//! The leader runs [`altered`] to answer `validate_only` and to refuse early; apply runs it
//! again on the state the op meets, so two alterations of one resource in flight at once
//! both take effect, as Kafka's controller serializes them.

use std::collections::BTreeMap;

use kafka_compat::error_code;
use serde::{Deserialize, Serialize};

use crate::group_config::{group_config_def, value_problem as group_value_problem, GroupConfigDef};
use crate::topic_config::{topic_config_def, value_problem, ConfigType, TOPIC_CONFIGS};
use crate::xgroup::placement::is_topic_placement_config;

/// Config overrides of one resource: name → value.
pub type Overrides = BTreeMap<String, String>;

/// The dynamic configs of everything but topics.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DynamicConfigs {
    /// Bumped by every applied alteration, so readers that cache a derived value (the
    /// storage layer's segment sizes) know when to look again.
    pub changes: u64,
    /// Kafka's `<default>` broker entity (resource name ""): DYNAMIC_DEFAULT_BROKER_CONFIG.
    pub broker_default: Overrides,
    /// Per broker id: DYNAMIC_BROKER_CONFIG.
    pub brokers: BTreeMap<i32, Overrides>,
    pub groups: BTreeMap<String, Overrides>,
    pub client_metrics: BTreeMap<String, Overrides>,
}

impl DynamicConfigs {
    /// The dynamic value of broker config `name` on `node_id`: its own override, else the
    /// cluster-wide default, with the DescribeConfigs source of whichever answered.
    pub fn broker_value(&self, node_id: i32, name: &str) -> Option<(&str, i8)> {
        let own = self.brokers.get(&node_id).and_then(|o| o.get(name));
        own.map(|v| (v.as_str(), SOURCE_DYNAMIC_BROKER))
            .or_else(|| self.broker_default.get(name).map(|v| (v.as_str(), SOURCE_DYNAMIC_DEFAULT_BROKER)))
    }
}

/// DescribeConfigs `config_source` values.
pub const SOURCE_DYNAMIC_TOPIC: i8 = 1;
pub const SOURCE_DYNAMIC_BROKER: i8 = 2;
pub const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
pub const SOURCE_STATIC_BROKER: i8 = 4;
pub const SOURCE_DEFAULT: i8 = 5;
pub const SOURCE_DYNAMIC_CLIENT_METRICS: i8 = 7;
pub const SOURCE_DYNAMIC_GROUP: i8 = 8;

/// What an alteration addresses (Kafka's ConfigResource).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub enum ConfigResource {
    Topic(String),
    /// Resource name "": the cluster-wide default.
    BrokerDefault,
    Broker(i32),
    Group(String),
    ClientMetrics(String),
}

/// IncrementalAlterConfigs' operations (KIP-339), with Kafka's wire codes 0..=3.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum AlterKind {
    Set,
    Delete,
    Append,
    Subtract,
}

impl AlterKind {
    pub fn from_code(code: i8) -> Option<AlterKind> {
        Some(match code {
            0 => AlterKind::Set,
            1 => AlterKind::Delete,
            2 => AlterKind::Append,
            3 => AlterKind::Subtract,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ConfigAlteration {
    pub name: String,
    pub kind: AlterKind,
    pub value: Option<String>,
}

/// One resource of a request. `replace` is AlterConfigs: the alterations (all `Set`) become
/// the resource's whole set of overrides.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ResourceAlteration {
    pub resource: ConfigResource,
    pub replace: bool,
    pub alterations: Vec<ConfigAlteration>,
}

/// A client-metrics config, with its default.
struct ResourceConfigDef {
    name: &'static str,
    default: &'static str,
    config_type: ConfigType,
    /// Inclusive range of an Int config.
    range: (i64, i64),
}

const fn int(name: &'static str, default: &'static str, range: (i64, i64)) -> ResourceConfigDef {
    ResourceConfigDef { name, default, config_type: ConfigType::Int, range }
}

const fn text(name: &'static str, default: &'static str, config_type: ConfigType) -> ResourceConfigDef {
    ResourceConfigDef { name, default, config_type, range: (0, 0) }
}

/// KIP-714 client-metrics subscriptions. onelog stores and describes them, and does not
/// advertise GetTelemetrySubscriptions, so no client pushes metrics to it.
const CLIENT_METRICS_CONFIGS: &[ResourceConfigDef] = &[
    int("interval.ms", "300000", (100, 3_600_000)),
    text("match", "", ConfigType::List),
    text("metrics", "", ConfigType::List),
];

/// (name, effective value, source) of every client-metrics config, defaults included.
pub fn client_metrics_entries(overrides: Option<&Overrides>) -> Vec<(&'static str, String, i8, ConfigType)> {
    described(CLIENT_METRICS_CONFIGS, overrides, SOURCE_DYNAMIC_CLIENT_METRICS)
}

fn described(
    defs: &[ResourceConfigDef],
    overrides: Option<&Overrides>,
    source: i8,
) -> Vec<(&'static str, String, i8, ConfigType)> {
    defs.iter()
        .map(|d| match overrides.and_then(|o| o.get(d.name)) {
            Some(v) => (d.name, v.clone(), source, d.config_type),
            None => (d.name, d.default.to_string(), SOURCE_DEFAULT, d.config_type),
        })
        .collect()
}

/// A refused alteration: the Kafka error code and message.
pub type AlterError = (i16, String);

/// The dynamic broker config a topic config's broker synonym names (`log.retention.ms`,
/// `message.max.bytes`, …): Kafka's `DynamicLogConfig` makes every one of them dynamic.
pub fn dynamic_broker_def(name: &str) -> Option<&'static crate::topic_config::TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.broker_name == name)
}

/// The resource's overrides after `change`, or why it is refused (nothing changes then).
pub fn altered(current: &Overrides, change: &ResourceAlteration) -> Result<Overrides, AlterError> {
    let mut names: Vec<&str> = change.alterations.iter().map(|a| a.name.as_str()).collect();
    names.sort_unstable();
    if names.windows(2).any(|w| w[0] == w[1]) {
        return Err((error_code::INVALID_REQUEST, "Error due to duplicate config keys".into()));
    }
    let mut next = if change.replace { kept_placement(current, &change.resource) } else { current.clone() };
    for alteration in &change.alterations {
        placement_unchanged(&change.resource, &alteration.name)?;
        let def = definition(&change.resource, &alteration.name)?;
        let value = match (alteration.kind, alteration.value.as_deref()) {
            (AlterKind::Delete, _) => {
                next.remove(&alteration.name);
                continue;
            }
            (_, None) => {
                let message = format!("Null value not supported for : {}", alteration.name);
                return Err((error_code::INVALID_REQUEST, message));
            }
            (AlterKind::Set, Some(value)) => value.to_string(),
            (kind, Some(value)) => {
                if def.config_type != Some(ConfigType::List) {
                    let message =
                        format!("Can't {kind:?} to key {} because its type is not LIST.", alteration.name);
                    return Err((error_code::INVALID_CONFIG, message));
                }
                let old = next.get(&alteration.name).map(String::as_str).unwrap_or(def.default);
                list_altered(old, value, kind)
            }
        };
        if let Some(problem) = def.problem(&alteration.name, &value) {
            return Err((value_error_code(&change.resource), problem));
        }
        next.insert(alteration.name.clone(), value);
    }
    Ok(next)
}

/// What a replacing AlterConfigs keeps of a topic's configs: its placement, decided at
/// creation (`placement`), which the request cannot name.
fn kept_placement(current: &Overrides, resource: &ConfigResource) -> Overrides {
    let placed =
        |name: &&String| matches!(resource, ConfigResource::Topic(_)) && is_topic_placement_config(name);
    current.iter().filter(|(name, _)| placed(name)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Refuses an alteration of a topic's placement: moving a topic between Raft groups is not
/// supported (docs/SCALING.md §2).
fn placement_unchanged(resource: &ConfigResource, name: &str) -> Result<(), AlterError> {
    if matches!(resource, ConfigResource::Topic(_)) && is_topic_placement_config(name) {
        let message = format!(
            "{name} is set when a topic is created and cannot be changed: moving a topic between Raft groups \
             is not supported"
        );
        return Err((error_code::INVALID_CONFIG, message));
    }
    Ok(())
}

/// Kafka's answer to a bad value: INVALID_CONFIG for topics, groups and client metrics;
/// INVALID_REQUEST for brokers (its dynamic broker config validation throws that; checked
/// with `scripts/kafka-reference.sh`: `message.max.bytes=abc` on the broker default).
fn value_error_code(resource: &ConfigResource) -> i16 {
    match resource {
        ConfigResource::Broker(_) | ConfigResource::BrokerDefault => error_code::INVALID_REQUEST,
        ConfigResource::Topic(_) | ConfigResource::Group(_) | ConfigResource::ClientMetrics(_) => {
            error_code::INVALID_CONFIG
        }
    }
}

/// Kafka's list semantics (KIP-339): APPEND adds the values not present yet, SUBTRACT
/// removes every given value; an unset config starts from its default.
fn list_altered(old: &str, value: &str, kind: AlterKind) -> String {
    let mut items: Vec<&str> = old.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let given = value.split(',').map(str::trim).filter(|s| !s.is_empty());
    match kind {
        AlterKind::Subtract => {
            let given: Vec<&str> = given.collect();
            items.retain(|i| !given.contains(i));
        }
        _ => {
            for g in given {
                if !items.contains(&g) {
                    items.push(g);
                }
            }
        }
    }
    items.join(",")
}

/// How one config of one resource type is checked.
struct Definition {
    /// None: a broker config Kafka does not know, which it stores unchecked (plugins).
    config_type: Option<ConfigType>,
    default: &'static str,
    check: Check,
}

enum Check {
    Topic(&'static crate::topic_config::TopicConfigDef),
    /// The type of a group config's value only: its bounds depend on the broker's configs,
    /// so the leader checks them before proposing (`group_config::leader_problem`).
    Group(&'static GroupConfigDef),
    Range(&'static ResourceConfigDef),
    None,
}

impl Definition {
    fn problem(&self, name: &str, value: &str) -> Option<String> {
        match &self.check {
            Check::Topic(def) => value_problem(def, name, value),
            Check::Group(def) => group_value_problem(def, value),
            Check::Range(def) if def.config_type == ConfigType::Int => match value.trim().parse::<i64>() {
                Ok(v) if (def.range.0..=def.range.1).contains(&v) => None,
                Ok(_) => Some(format!(
                    "Invalid value {value} for configuration {}: Value must be in [{}, {}]",
                    def.name, def.range.0, def.range.1
                )),
                Err(_) => Some(format!(
                    "Invalid value {value} for configuration {}: Not a number of type INT",
                    def.name
                )),
            },
            Check::Range(_) | Check::None => None,
        }
    }
}

fn definition(resource: &ConfigResource, name: &str) -> Result<Definition, AlterError> {
    let unknown = |what: &str| (error_code::INVALID_CONFIG, format!("Unknown {what} config name: {name}"));
    let from = |defs: &'static [ResourceConfigDef], what: &str| {
        let def = defs.iter().find(|d| d.name == name).ok_or_else(|| unknown(what))?;
        Ok(Definition { config_type: Some(def.config_type), default: def.default, check: Check::Range(def) })
    };
    match resource {
        ConfigResource::Topic(_) => {
            let def = topic_config_def(name).ok_or_else(|| unknown("topic"))?;
            Ok(Definition {
                config_type: Some(def.config_type),
                default: def.default,
                check: Check::Topic(def),
            })
        }
        ConfigResource::Broker(_) | ConfigResource::BrokerDefault => Ok(match dynamic_broker_def(name) {
            Some(def) => Definition {
                config_type: Some(def.config_type),
                default: def.default,
                check: Check::Topic(def),
            },
            None => Definition { config_type: None, default: "", check: Check::None },
        }),
        ConfigResource::Group(_) => {
            let def = group_config_def(name).ok_or_else(|| unknown("group"))?;
            Ok(Definition {
                config_type: Some(def.config_type),
                default: def.default,
                check: Check::Group(def),
            })
        }
        ConfigResource::ClientMetrics(_) => from(CLIENT_METRICS_CONFIGS, "client metrics"),
    }
}

#[cfg(test)]
#[path = "configs_tests.rs"]
mod tests;

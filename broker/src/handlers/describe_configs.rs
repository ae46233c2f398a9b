//! DescribeConfigs (key 32): topic, broker, group and client-metrics configs with their
//! sources and defaults, so tools see every effective value (DESIGN §6: defaults must be
//! listed). Synonyms come most specific first, as Kafka orders them: topic (or group),
//! dynamic broker, dynamic cluster default, static broker, default.
//!
//! Read your writes through any node: a follower may not have applied a change the leader has
//! already answered (AlterConfigs goes to the controller, the leader; clients such as sarama
//! describe through another broker right after). So a follower forwards a request for
//! cluster-wide resources (topics, groups, client metrics) to the leader at dispatch
//! (`Route::Leader` on its registry row); a broker resource stays here, where this node's
//! static configs are. If the leader cannot be asked, this node answers.

use std::collections::BTreeMap;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{ApiKey, DescribeConfigsResponse, RequestKind, ResponseKind};

use super::util::str_bytes;
use super::{Forwarded, HandlerResult};
use crate::config::BrokerConfig;
use crate::config_admin::{RESOURCE_BROKER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP, RESOURCE_TOPIC};
use crate::ctx::SharedCtx;
use crate::security::authz;
use onelog_state::configs::{
    client_metrics_entries, DynamicConfigs, SOURCE_DEFAULT, SOURCE_DYNAMIC_DEFAULT_BROKER,
    SOURCE_DYNAMIC_GROUP, SOURCE_DYNAMIC_TOPIC, SOURCE_STATIC_BROKER,
};
use onelog_state::group_config::{is_internal, GroupConfigDef, GROUP_CONFIGS};
use onelog_state::topic_config::TOPIC_CONFIGS;
use onelog_state::xgroup::placement::{is_topic_placement_config, TOPIC_GROUP_CONFIG};
use onelog_state::BrokerState;

pub const KEY: ApiKey = ApiKey::DescribeConfigs;
pub const VERSIONS: (i16, i16) = (1, 4);
pub const ACCEPTED_MIN_VERSION: i16 = 1;

pub const FORWARDED: Forwarded = Forwarded { when: cluster_wide, settled: |_, _, _| true };

/// Whether every resource asked for is cluster-wide (no broker resource).
fn cluster_wide(body: &RequestKind) -> bool {
    let RequestKind::DescribeConfigs(body) = body else { return false };
    !body.resources.is_empty() && body.resources.iter().all(|r| r.resource_type != RESOURCE_BROKER)
}

/// One effective config value and where it comes from, most specific first in `synonyms`.
pub struct ConfigEntry {
    pub name: String,
    pub value: String,
    pub source: i8,
    pub config_type: i8,
    pub synonyms: Vec<(String, String, i8)>,
    pub documentation: Option<&'static str>,
    /// A broker config that cannot change at run time (Kafka reports these read-only).
    pub read_only: bool,
}

impl ConfigEntry {
    /// The entry whose value and source are its first synonym's.
    fn of(name: &str, config_type: i8, synonyms: Vec<(String, String, i8)>) -> ConfigEntry {
        let (value, source) =
            synonyms.first().map_or((String::new(), SOURCE_DEFAULT), |s| (s.1.clone(), s.2));
        ConfigEntry {
            name: name.to_string(),
            value,
            source,
            config_type,
            synonyms,
            documentation: None,
            read_only: false,
        }
    }
}

/// Which broker level a broker description is for: `Some(id)` a broker, `None` the
/// cluster-wide default (resource name "").
type BrokerLevel = Option<i32>;

/// The broker synonyms of `key` below a topic: dynamic broker (at `level`), dynamic default,
/// static broker, default.
fn broker_synonyms(
    config: &BrokerConfig,
    dynamic: &DynamicConfigs,
    level: BrokerLevel,
    key: &str,
    default: &str,
) -> Vec<(String, String, i8)> {
    let mut synonyms = Vec::new();
    if let Some((v, source)) = level.and_then(|id| dynamic.broker_value(id, key)) {
        synonyms.push((key.to_string(), v.to_string(), source));
    } else if let Some(v) = dynamic.broker_default.get(key) {
        synonyms.push((key.to_string(), v.clone(), SOURCE_DYNAMIC_DEFAULT_BROKER));
    }
    if let (Some(v), true) = (config.get(key), config.is_set(key)) {
        synonyms.push((key.to_string(), v.to_string(), SOURCE_STATIC_BROKER));
    }
    synonyms.push((key.to_string(), default.to_string(), SOURCE_DEFAULT));
    // The dynamic default listed after a broker's own override too, as Kafka lists it.
    if let (Some(id), Some(v)) = (level, dynamic.broker_default.get(key)) {
        if dynamic.brokers.get(&id).is_some_and(|o| o.contains_key(key)) {
            synonyms.insert(1, (key.to_string(), v.clone(), SOURCE_DYNAMIC_DEFAULT_BROKER));
        }
    }
    synonyms
}

/// Every topic config of a topic: set on the topic, else from the broker, else the default;
/// then its placement in a cluster of several Raft groups (issue 32), read-only, only where
/// it was recorded.
pub fn topic_entries(
    config: &BrokerConfig,
    state: &BrokerState,
    topic_configs: &BTreeMap<String, String>,
) -> Vec<ConfigEntry> {
    let mut entries = configured_topic_entries(config, state, topic_configs);
    let placed = topic_configs.iter().filter(|(name, _)| is_topic_placement_config(name));
    entries.extend(placed.map(|(name, value)| {
        let synonyms = vec![(name.clone(), value.clone(), SOURCE_DYNAMIC_TOPIC)];
        let mut entry = ConfigEntry::of(name, onelog_state::topic_config::ConfigType::String as i8, synonyms);
        entry.read_only = true;
        entry.documentation = Some(if name == TOPIC_GROUP_CONFIG {
            "The Raft group holding the topic, decided when it was created."
        } else {
            "The placement key that picked the topic's Raft group when it was created."
        });
        entry
    }));
    entries
}

fn configured_topic_entries(
    config: &BrokerConfig,
    state: &BrokerState,
    topic_configs: &BTreeMap<String, String>,
) -> Vec<ConfigEntry> {
    TOPIC_CONFIGS
        .iter()
        .map(|def| {
            let mut synonyms = Vec::new();
            if let Some(v) = topic_configs.get(def.name) {
                synonyms.push((def.name.to_string(), v.clone(), SOURCE_DYNAMIC_TOPIC));
            }
            let level = Some(config.node_id);
            synonyms.extend(broker_synonyms(config, &state.configs, level, def.broker_name, def.default));
            let mut entry = ConfigEntry::of(def.name, def.config_type as i8, synonyms);
            entry.documentation =
                (!def.enforced).then_some("Accepted and reported; onelog does not act on it.");
            entry
        })
        .collect()
}

/// Every broker config, with its dynamic value at `level` if any; then the dynamic configs
/// onelog does not know (Kafka stores and lists those too).
fn broker_entries(config: &BrokerConfig, dynamic: &DynamicConfigs, level: BrokerLevel) -> Vec<ConfigEntry> {
    let mut entries: Vec<ConfigEntry> = config
        .entries()
        .map(|(k, _, _, ty)| {
            let default = config.default_of(k).unwrap_or_default();
            let mut entry = ConfigEntry::of(k, ty as i8, broker_synonyms(config, dynamic, level, k, default));
            entry.read_only = BrokerConfig::read_only_problem(k).is_some();
            entry
        })
        .collect();
    let own = level.and_then(|id| dynamic.brokers.get(&id));
    let unknown = own.into_iter().chain([&dynamic.broker_default]).flat_map(|o| o.keys());
    for key in unknown {
        if config.get(key).is_none() && !entries.iter().any(|e| &e.name == key) {
            let synonyms = broker_synonyms(config, dynamic, level, key, "");
            let synonyms = synonyms.into_iter().filter(|s| s.2 != SOURCE_DEFAULT).collect();
            entries.push(ConfigEntry::of(
                key,
                onelog_state::topic_config::ConfigType::String as i8,
                synonyms,
            ));
        }
    }
    entries
}

/// Every config Kafka 4.4 lists for a group (the group need not exist), as Kafka 4.4 shows
/// them: the group's override (GROUP_CONFIG), then the chain of the `group.*` broker config
/// that supplies the default, so a group without an override shows the broker's current
/// value and where it was set (DEFAULT_CONFIG when nowhere). A key whose broker config onelog
/// does not have (`group.share.*`, `group.*.assignor.offload.enable`) shows Kafka's default
/// under the broker config's name; one without a broker synonym, under its own name. An
/// internal key shows only when the group or the broker sets it, as in Kafka.
fn group_entries(config: &BrokerConfig, state: &BrokerState, group: &str) -> Vec<ConfigEntry> {
    let overrides = state.configs.groups.get(group);
    let set = |def: &GroupConfigDef| {
        overrides.is_some_and(|o| o.contains_key(def.name))
            || def.broker_name.is_some_and(|b| config.is_set(b))
    };
    GROUP_CONFIGS
        .iter()
        .filter(|def| !is_internal(def.name) || set(def))
        .map(|def| {
            let mut synonyms = Vec::new();
            if let Some(v) = overrides.and_then(|o| o.get(def.name)) {
                synonyms.push((def.name.to_string(), v.clone(), SOURCE_DYNAMIC_GROUP));
            }
            match def.broker_name {
                Some(broker) if config.get(broker).is_some() => {
                    let default = config.default_of(broker).unwrap_or(def.default);
                    let level = Some(config.node_id);
                    synonyms.extend(broker_synonyms(config, &state.configs, level, broker, default));
                }
                Some(broker) => synonyms.push((broker.to_string(), def.default.to_string(), SOURCE_DEFAULT)),
                None => synonyms.push((def.name.to_string(), def.default.to_string(), SOURCE_DEFAULT)),
            }
            ConfigEntry::of(def.name, def.config_type as i8, synonyms)
        })
        .collect()
}

/// Client-metrics entries: (name, value, source, type) with no broker synonyms.
fn resource_entries(
    listed: Vec<(&'static str, String, i8, onelog_state::topic_config::ConfigType)>,
) -> Vec<ConfigEntry> {
    listed
        .into_iter()
        .map(|(name, value, source, ty)| {
            let synonyms = if source == SOURCE_DEFAULT {
                Vec::new()
            } else {
                vec![(name.to_string(), value.clone(), source)]
            };
            ConfigEntry {
                name: name.to_string(),
                value,
                source,
                config_type: ty as i8,
                synonyms,
                documentation: None,
                read_only: false,
            }
        })
        .collect()
}

fn entries_of(ctx: &SharedCtx, resource_type: i8, name: &str) -> Result<Vec<ConfigEntry>, (i16, String)> {
    let me = ctx.config.node_id;
    ctx.applied.state(|state| match resource_type {
        RESOURCE_TOPIC => match state.topics.get(name) {
            Some(t) => Ok(topic_entries(&ctx.config, state, &t.configs)),
            None => Err((error_code::UNKNOWN_TOPIC_OR_PARTITION, format!("Topic '{name}' does not exist."))),
        },
        RESOURCE_BROKER if name.is_empty() => Ok(broker_entries(&ctx.config, &state.configs, None)),
        RESOURCE_BROKER if name == me.to_string() => {
            Ok(broker_entries(&ctx.config, &state.configs, Some(me)))
        }
        RESOURCE_BROKER => Err((
            error_code::INVALID_REQUEST,
            format!("Unexpected broker id, expected {me} or empty string, but received {name}"),
        )),
        RESOURCE_GROUP if name.is_empty() => {
            Err((error_code::INVALID_REQUEST, "Group name must not be empty".to_string()))
        }
        RESOURCE_GROUP => Ok(group_entries(&ctx.config, state, name)),
        RESOURCE_CLIENT_METRICS => {
            Ok(resource_entries(client_metrics_entries(state.configs.client_metrics.get(name))))
        }
        other => Err((error_code::INVALID_REQUEST, format!("Resource type {other} is not supported."))),
    })
}

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = crate::security::authz::Subject::of(&req);
    let RequestKind::DescribeConfigs(body) = req.body else { anyhow::bail!("not a DescribeConfigs body") };
    let mut results = Vec::with_capacity(body.resources.len());
    for resource in &body.resources {
        let name = resource.resource_name.as_str();
        let refused =
            ctx.authorizer.config_refusal(&who, resource.resource_type, name, authz::op::DESCRIBE_CONFIGS);
        let entries = match refused {
            Some(code) => Err((code, String::new())),
            None => entries_of(&ctx, resource.resource_type, name),
        };
        let mut result = DescribeConfigsResult::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name.clone());
        match entries {
            Ok(entries) => {
                let keys = resource.configuration_keys.as_ref();
                let configs = entries
                    .into_iter()
                    .filter(|e| keys.is_none_or(|k| k.iter().any(|k| k.as_str() == e.name)))
                    .map(|e| to_result(e, body.include_synonyms, body.include_documentation))
                    .collect();
                result = result.with_configs(configs);
            }
            Err((code, message)) => {
                result = result.with_error_code(code).with_error_message(Some(str_bytes(message)))
            }
        }
        results.push(result);
    }
    Ok(Some(ResponseKind::DescribeConfigs(DescribeConfigsResponse::default().with_results(results))))
}

fn to_result(
    e: ConfigEntry,
    include_synonyms: bool,
    include_documentation: bool,
) -> DescribeConfigsResourceResult {
    let synonyms = if include_synonyms {
        e.synonyms
            .into_iter()
            .map(|(n, v, s)| {
                DescribeConfigsSynonym::default()
                    .with_name(str_bytes(n))
                    .with_value(Some(str_bytes(v)))
                    .with_source(s)
            })
            .collect()
    } else {
        Vec::new()
    };
    DescribeConfigsResourceResult::default()
        .with_name(str_bytes(e.name))
        .with_value(Some(str_bytes(e.value)))
        .with_read_only(e.read_only)
        .with_config_source(e.source)
        .with_is_sensitive(false)
        .with_config_type(e.config_type)
        .with_synonyms(synonyms)
        .with_documentation(e.documentation.filter(|_| include_documentation).map(str_bytes))
}

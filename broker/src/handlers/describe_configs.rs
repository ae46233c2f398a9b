//! DescribeConfigs (key 32): topic and broker configs with their sources and defaults, so
//! tools see every effective value (DESIGN §6: defaults must be listed).

use std::collections::BTreeMap;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{ApiKey, DescribeConfigsResponse, RequestKind, ResponseKind};

use super::util::str_bytes;
use super::HandlerResult;
use crate::config::BrokerConfig;
use crate::ctx::SharedCtx;
use onelog_state::topic_config::TOPIC_CONFIGS;

pub const KEY: ApiKey = ApiKey::DescribeConfigs;
pub const VERSIONS: (i16, i16) = (1, 4);
pub const ACCEPTED_MIN_VERSION: i16 = 1;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;

const SOURCE_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;

/// One effective config value and where it comes from, most specific first in `synonyms`.
pub struct ConfigEntry {
    pub name: String,
    pub value: String,
    pub source: i8,
    pub config_type: i8,
    pub synonyms: Vec<(String, String, i8)>,
    pub documentation: Option<&'static str>,
}

/// Every topic config of a topic: set on the topic, else from the broker, else the default.
pub fn topic_entries(config: &BrokerConfig, topic_configs: &BTreeMap<String, String>) -> Vec<ConfigEntry> {
    let broker: BTreeMap<&str, (&str, bool)> = config.entries().map(|(k, v, set, _)| (k, (v, set))).collect();
    TOPIC_CONFIGS
        .iter()
        .map(|def| {
            let mut synonyms = Vec::new();
            if let Some(v) = topic_configs.get(def.name) {
                synonyms.push((def.name.to_string(), v.clone(), SOURCE_TOPIC));
            }
            if let Some((v, true)) = broker.get(def.broker_name) {
                synonyms.push((def.broker_name.to_string(), v.to_string(), SOURCE_STATIC_BROKER));
            }
            synonyms.push((def.broker_name.to_string(), def.default.to_string(), SOURCE_DEFAULT));
            let (value, source) = (synonyms[0].1.clone(), synonyms[0].2);
            let documentation =
                (!def.enforced).then_some("Accepted and reported; onelog does not act on it.");
            ConfigEntry {
                name: def.name.to_string(),
                value,
                source,
                config_type: def.config_type as i8,
                synonyms,
                documentation,
            }
        })
        .collect()
}

fn broker_entries(config: &BrokerConfig) -> Vec<ConfigEntry> {
    config
        .entries()
        .map(|(k, v, set, ty)| {
            let source = if set { SOURCE_STATIC_BROKER } else { SOURCE_DEFAULT };
            ConfigEntry {
                name: k.to_string(),
                value: v.to_string(),
                source,
                config_type: ty as i8,
                synonyms: vec![(k.to_string(), v.to_string(), source)],
                documentation: None,
            }
        })
        .collect()
}

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::DescribeConfigs(body) = req.body else { anyhow::bail!("not a DescribeConfigs body") };
    let mut results = Vec::with_capacity(body.resources.len());
    for resource in &body.resources {
        let name = resource.resource_name.to_string();
        let entries = match resource.resource_type {
            RESOURCE_TOPIC => ctx.applied.read(|applied| match applied.state.topics.get(&name) {
                Some(t) => Ok(topic_entries(&ctx.config, &t.configs)),
                None => {
                    Err((error_code::UNKNOWN_TOPIC_OR_PARTITION, format!("Topic '{name}' does not exist.")))
                }
            }),
            RESOURCE_BROKER if name.is_empty() || name == ctx.node_id.to_string() => {
                Ok(broker_entries(&ctx.config))
            }
            RESOURCE_BROKER => Err((error_code::INVALID_REQUEST, format!("Broker {name} is not this node."))),
            other => Err((error_code::INVALID_REQUEST, format!("Resource type {other} is not supported."))),
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
        .with_read_only(false)
        .with_config_source(e.source)
        .with_is_sensitive(false)
        .with_config_type(e.config_type)
        .with_synonyms(synonyms)
        .with_documentation(e.documentation.filter(|_| include_documentation).map(str_bytes))
}

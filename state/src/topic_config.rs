//! Topic configs: the names Kafka defines, their broker-level defaults, and validation.
//!
//! A topic stores only what was set on it; the effective value falls back to the broker
//! config, which falls back to the default here — the same layering DescribeConfigs reports.

use std::collections::BTreeMap;

/// DescribeConfigs `config_type` values (KIP-569).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Long = 5,
    Double = 6,
    List = 7,
}

/// One topic config: its name, the broker config that supplies its default, and that default.
#[derive(Debug, Clone, Copy)]
pub struct TopicConfigDef {
    pub name: &'static str,
    pub broker_name: &'static str,
    pub default: &'static str,
    pub config_type: ConfigType,
    /// Whether onelog acts on it; the others are accepted and stored so that tools and
    /// Kafka Streams, which set them, keep working.
    pub enforced: bool,
}

const fn def(
    name: &'static str,
    broker_name: &'static str,
    default: &'static str,
    config_type: ConfigType,
    enforced: bool,
) -> TopicConfigDef {
    TopicConfigDef { name, broker_name, default, config_type, enforced }
}

use ConfigType::{Boolean, Double, Int, List, Long};
const STRING: ConfigType = ConfigType::String;

/// Every topic config onelog accepts. Segment size defaults to 128 MiB rather than Kafka's
/// 1 GiB (onelog used to preallocate whole segments; it now reserves blocks step by step
/// unless `preallocate` is set).
pub const TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def("cleanup.policy", "log.cleanup.policy", "delete", List, false),
    def("compression.type", "compression.type", "producer", STRING, false),
    def("delete.retention.ms", "log.cleaner.delete.retention.ms", "86400000", Long, false),
    def("file.delete.delay.ms", "log.segment.delete.delay.ms", "60000", Long, false),
    def("flush.messages", "log.flush.interval.messages", "9223372036854775807", Long, false),
    def("flush.ms", "log.flush.interval.ms", "9223372036854775807", Long, false),
    def("index.interval.bytes", "log.index.interval.bytes", "4096", Int, false),
    def("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", "9223372036854775807", Long, false),
    def("max.message.bytes", "message.max.bytes", "1048588", Int, true),
    def(
        "message.timestamp.after.max.ms",
        "log.message.timestamp.after.max.ms",
        "9223372036854775807",
        Long,
        false,
    ),
    def(
        "message.timestamp.before.max.ms",
        "log.message.timestamp.before.max.ms",
        "9223372036854775807",
        Long,
        false,
    ),
    def("message.timestamp.type", "log.message.timestamp.type", "CreateTime", STRING, true),
    def("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio", "0.5", Double, false),
    def("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", "0", Long, false),
    def("min.insync.replicas", "min.insync.replicas", "1", Int, false),
    def("preallocate", "log.preallocate", "false", Boolean, true),
    def("retention.bytes", "log.retention.bytes", "-1", Long, true),
    def("retention.ms", "log.retention.ms", "604800000", Long, true),
    def("segment.bytes", "log.segment.bytes", "134217728", Int, true),
    def("segment.index.bytes", "log.index.size.max.bytes", "10485760", Int, false),
    def("segment.jitter.ms", "log.roll.jitter.ms", "0", Long, false),
    def("segment.ms", "log.roll.ms", "604800000", Long, false),
    def("unclean.leader.election.enable", "unclean.leader.election.enable", "false", Boolean, false),
];

pub fn topic_config_def(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// Returns why `value` is not acceptable for topic config `name`, or `None`.
pub fn topic_config_problem(name: &str, value: &str) -> Option<String> {
    if crate::xgroup::placement::is_topic_placement_config(name) {
        return crate::xgroup::placement::topic_config_value_problem(name, value);
    }
    let Some(def) = topic_config_def(name) else {
        return Some(format!("Unknown topic config name: {name}"));
    };
    value_problem(def, def.name, value)
}

/// Kafka 4.x's `LogConfig` minimum of `segment.bytes` (and of the broker's `log.segment.bytes`):
/// `atLeast(1048576)`, read from kafka-storage 4.1.1's `LogConfig` (KIP-1030 raised it from 14).
pub const SEGMENT_BYTES_MIN: i32 = 1024 * 1024;

/// Lower bounds Kafka puts on integer topic configs, by name.
fn int_min(name: &str) -> Option<i32> {
    (name == "segment.bytes").then_some(SEGMENT_BYTES_MIN)
}

/// Upper bounds onelog puts on integer topic configs, by name: a batch must fit one Raft entry
/// (`limits::MESSAGE_BYTES_MAX`).
fn int_max(name: &str) -> Option<i32> {
    (name == "max.message.bytes").then_some(crate::limits::MESSAGE_BYTES_MAX)
}

/// Why `value` does not fit `def`'s type or range; `name` is the config as the request named
/// it (the topic config or its broker synonym).
pub fn value_problem(def: &TopicConfigDef, name: &str, value: &str) -> Option<String> {
    if let (Some(min), Ok(v)) = (int_min(def.name), value.trim().parse::<i32>()) {
        if v < min {
            return Some(format!(
                "Invalid value {value} for configuration {name}: Value must be at least {min}"
            ));
        }
    }
    if let (Some(max), Ok(v)) = (int_max(def.name), value.trim().parse::<i32>()) {
        if v > max {
            return Some(format!(
                "Invalid value {value} for configuration {name}: Value must be no more than {max}"
            ));
        }
    }
    let ok = match def.config_type {
        Boolean => value == "true" || value == "false",
        Int => value.trim().parse::<i32>().is_ok(),
        Long => value.trim().parse::<i64>().is_ok(),
        Double => value.trim().parse::<f64>().is_ok(),
        ConfigType::String | List => match def.name {
            "message.timestamp.type" => value == "CreateTime" || value == "LogAppendTime",
            "compression.type" => {
                ["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"].contains(&value)
            }
            "cleanup.policy" => value.split(',').map(str::trim).all(|p| p == "delete" || p == "compact"),
            _ => true,
        },
    };
    (!ok).then(|| {
        let expected = match def.config_type {
            Int => ": Not a number of type INT",
            Long => ": Not a number of type LONG",
            Double => ": Not a number of type DOUBLE",
            Boolean => ": Expected value to be either true or false",
            ConfigType::String | List => "",
        };
        format!("Invalid value {value} for configuration {name}{expected}")
    })
}

/// Validates a full set of topic configs, returning the first problem.
pub fn topic_configs_problem(configs: &BTreeMap<String, String>) -> Option<String> {
    configs.iter().find_map(|(k, v)| topic_config_problem(k, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_known_names_and_values() {
        assert!(topic_config_problem("retention.ms", "1000").is_none());
        assert!(topic_config_problem("retention.ms", "soon").is_some());
        assert!(topic_config_problem("no.such.config", "1").is_some());
        assert!(topic_config_problem("message.timestamp.type", "LogAppendTime").is_none());
        assert!(topic_config_problem("cleanup.policy", "compact,delete").is_none());
        assert!(topic_config_problem("cleanup.policy", "shred").is_some());
    }

    /// Regression (issue 13, reproduction 1): a topic allowing 100 MiB batches let one batch
    /// become a Raft entry above raft-store's 64 MiB entry limit, and the leader exited.
    #[test]
    fn max_message_bytes_above_what_one_entry_holds_is_refused() {
        let max = crate::limits::MESSAGE_BYTES_MAX;
        assert!(topic_config_problem("max.message.bytes", &max.to_string()).is_none());
        let problem = topic_config_problem("max.message.bytes", &(100 << 20).to_string()).expect("refused");
        assert!(problem.contains("no more than"), "{problem}");
        let def = topic_config_def("max.message.bytes").expect("known");
        assert!(value_problem(def, "message.max.bytes", &(max + 1).to_string()).is_some());
    }

    /// Regression: `segment.bytes` below Kafka 4.x's minimum (1 MiB) was accepted.
    #[test]
    fn segment_bytes_below_kafkas_minimum_is_refused() {
        assert!(topic_config_problem("segment.bytes", "1048576").is_none());
        let problem = topic_config_problem("segment.bytes", "1048575").expect("refused");
        assert!(problem.contains("at least 1048576"), "{problem}");
        assert!(topic_config_problem("segment.bytes", "14").is_some());
    }
}

//! Command line and broker configuration.
//!
//! Flags cover what differs per node (ids, addresses, data directory); Kafka broker configs
//! (`auto.create.topics.enable`, `message.max.bytes`, `log.retention.ms`, …) are given as
//! repeated `--config key=value`, with Kafka's names, and reported by DescribeConfigs.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Parser;

use crate::state::topic_config::{ConfigType, TOPIC_CONFIGS};

/// onelog: a Kafka-compatible broker whose every write is an entry in one Raft log.
#[derive(Debug, Clone, Parser)]
#[command(name = "onelog", version, about)]
pub struct Args {
    /// This node's id in the Raft group and its Kafka broker id.
    #[arg(long, default_value_t = 1)]
    pub node_id: u64,
    /// Directory holding the Raft log, checkpoints and partition segment files.
    #[arg(long, default_value = "./data")]
    pub data_dir: PathBuf,
    /// Address the Kafka listener binds.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub kafka_listen: SocketAddr,
    /// host:port clients are told to connect to (Metadata); defaults to --kafka-listen.
    #[arg(long)]
    pub advertised_kafka: Option<String>,
    /// Address for Raft traffic between nodes (not bound by a one-node cluster unless given).
    #[arg(long)]
    pub raft_listen: Option<SocketAddr>,
    /// Other voters as id=raft_host:port@kafka_host:port, comma separated (multi-node clusters).
    #[arg(long, value_delimiter = ',')]
    pub peers: Vec<String>,
    /// Kafka broker config override, key=value (repeatable), e.g. auto.create.topics.enable=false.
    #[arg(long = "config", value_name = "KEY=VALUE")]
    pub configs: Vec<String>,
    /// Address of the HTTP admin API (status, digest, membership); not bound when absent.
    #[arg(long)]
    pub admin_listen: Option<SocketAddr>,
}

/// Broker-only configs and their defaults (topic-level defaults come from TOPIC_CONFIGS).
const BROKER_CONFIGS: &[(&str, &str, ConfigType)] = &[
    ("auto.create.topics.enable", "true", ConfigType::Boolean),
    ("num.partitions", "1", ConfigType::Int),
    ("default.replication.factor", "1", ConfigType::Int),
    ("socket.request.max.bytes", "104857600", ConfigType::Int),
    ("log.retention.check.interval.ms", "300000", ConfigType::Long),
    ("delete.topic.enable", "true", ConfigType::Boolean),
    // KIP-98: how long an idle producer id keeps its state, and how often the leader looks.
    ("producer.id.expiration.ms", "86400000", ConfigType::Int),
    ("producer.id.expiration.check.interval.ms", "600000", ConfigType::Int),
    // KIP-98: the longest transaction.timeout.ms a producer may ask for (else
    // INVALID_TRANSACTION_TIMEOUT), how long an idle transactional id is kept, and how often
    // the leader looks for expired transactions.
    ("transaction.max.timeout.ms", "900000", ConfigType::Int),
    ("transactional.id.expiration.ms", "604800000", ConfigType::Int),
    ("transaction.abort.timed.out.transaction.cleanup.interval.ms", "10000", ConfigType::Int),
    ("transaction.remove.expired.transaction.cleanup.interval.ms", "3600000", ConfigType::Int),
    // KIP-134: how long the first rebalance of an empty group waits for more members.
    ("group.initial.rebalance.delay.ms", "3000", ConfigType::Int),
    // The session timeouts a JoinGroup may ask for (else INVALID_SESSION_TIMEOUT).
    ("group.min.session.timeout.ms", "6000", ConfigType::Int),
    ("group.max.session.timeout.ms", "1800000", ConfigType::Int),
    // KIP-389: members per group (else GROUP_MAX_SIZE_REACHED).
    ("group.max.size", "2147483647", ConfigType::Int),
];

/// Effective broker configuration: every known key with its value and whether it was set.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    values: BTreeMap<String, (String, bool, ConfigType)>,
}

impl BrokerConfig {
    pub fn from_overrides(overrides: &[String]) -> anyhow::Result<Self> {
        let mut values = BTreeMap::new();
        for (key, default, ty) in BROKER_CONFIGS {
            values.insert(key.to_string(), (default.to_string(), false, *ty));
        }
        for def in TOPIC_CONFIGS {
            values.insert(def.broker_name.to_string(), (def.default.to_string(), false, def.config_type));
        }
        for item in overrides {
            let (key, value) =
                item.split_once('=').with_context(|| format!("--config {item}: expected key=value"))?;
            let Some(entry) = values.get_mut(key) else { bail!("--config {key}: unknown broker config") };
            *entry = (value.to_string(), true, entry.2);
        }
        let config = BrokerConfig { values };
        config.check()?;
        Ok(config)
    }

    fn check(&self) -> anyhow::Result<()> {
        for (key, (value, _, ty)) in &self.values {
            let ok = match ty {
                ConfigType::Boolean => value == "true" || value == "false",
                ConfigType::Int => value.parse::<i32>().is_ok(),
                ConfigType::Long => value.parse::<i64>().is_ok(),
                ConfigType::Double => value.parse::<f64>().is_ok(),
                ConfigType::String | ConfigType::List => true,
            };
            if !ok {
                bail!("--config {key}={value}: not a valid {ty:?}");
            }
        }
        Ok(())
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(|(v, _, _)| v.as_str())
    }

    /// (value, explicitly set, type) for DescribeConfigs.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str, bool, ConfigType)> {
        self.values.iter().map(|(k, (v, set, ty))| (k.as_str(), v.as_str(), *set, *ty))
    }

    pub fn bool(&self, key: &str) -> bool {
        self.get(key) == Some("true")
    }

    pub fn i64(&self, key: &str) -> i64 {
        self.get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("config {key} is validated at start"))
    }
}

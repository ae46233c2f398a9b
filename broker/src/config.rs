//! Command line and broker configuration.
//!
//! Flags cover what differs per node (ids, addresses, data directory); Kafka broker configs
//! (`auto.create.topics.enable`, `message.max.bytes`, `log.retention.ms`, …) are given as
//! repeated `--config key=value`, with Kafka's names, and reported by DescribeConfigs. They are
//! parsed once at start-up into [`Settings`], typed fields the broker reads; the string keys
//! appear only in this file (a misspelt key fails start-up, never a request).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Parser;

use onelog_state::command::ReplicatedLimits;
use onelog_state::entry::EntryOptions;
use onelog_state::topic_config::{topic_config_def, ConfigType, TOPIC_CONFIGS};
use onelog_state::BrokerState;

/// The broker synonym of a topic config (`retention.ms` → `log.retention.ms`).
fn dynamic_broker_name(topic_key: &str) -> &'static str {
    topic_config_def(topic_key).map_or("", |d| d.broker_name)
}

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
///
/// None of these is dynamic (IncrementalAlterConfigs / AlterConfigs answer INVALID_REQUEST
/// "Cannot update these configs dynamically", as Kafka does for its read-only configs): Kafka
/// marks every one read-only except `producer.id.expiration.ms`. In onelog that one is a
/// replicated limit, written only by a new leader's takeover entry (`Op::SetLimits`); changing
/// it at run time would need its own op, so it stays static here. The dynamic broker configs are
/// the broker synonyms of the topic configs (`log.retention.ms`, `message.max.bytes`,
/// `log.segment.bytes`, …), as Kafka's `DynamicLogConfig` has them; see [`BrokerConfig::dynamic_int`].
const BROKER_CONFIGS: &[(&str, &str, ConfigType)] = &[
    ("auto.create.topics.enable", "true", ConfigType::Boolean),
    ("num.partitions", "1", ConfigType::Int),
    ("default.replication.factor", "1", ConfigType::Int),
    ("socket.request.max.bytes", "104857600", ConfigType::Int),
    // The Kafka listener (`net/`). Kafka's `queued.max.request.bytes` defaults to -1 (no
    // bound); onelog bounds request memory by default, and -1 lifts the bound. Kafka can alter
    // `max.connections*` dynamically; here they are read-only like the rest of this list.
    ("connections.max.idle.ms", "600000", ConfigType::Long),
    ("max.connections", "2147483647", ConfigType::Int),
    ("max.connections.per.ip", "2147483647", ConfigType::Int),
    ("queued.max.request.bytes", "536870912", ConfigType::Long),
    // onelog's own (Kafka has none): how long one request frame may take to arrive, from its
    // first byte to its last. The default is Kafka clients' `request.timeout.ms`: a client
    // has given up on a request by then.
    ("onelog.request.read.timeout.ms", "30000", ConfigType::Long),
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

/// Broker-only configs that may change at run time (IncrementalAlterConfigs / AlterConfigs on
/// a broker id or the cluster default), read per request through [`BrokerConfig::dynamic_int`].
const DYNAMIC_BROKER_CONFIGS: &[(&str, &str, ConfigType)] = &[
    // Free bytes the data directory's file system must keep: below it the leader refuses
    // Produce with KAFKA_STORAGE_ERROR (see `storage::free_space`). onelog's own name (Kafka
    // has no such guard; it takes the log dir offline on the first failed write). 1 GiB keeps
    // room for the Raft log's two preallocated 64 MiB segments, checkpoints and retention; 0
    // turns the guard off.
    ("log.dir.free.bytes.min", "1073741824", ConfigType::Long),
];

/// Effective broker configuration: every known key with its value and whether it was set
/// (for DescribeConfigs), and the same values typed.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    values: Values,
    pub settings: Settings,
    /// This node's broker id: whose dynamic broker configs (`DynamicConfigs::brokers`) apply.
    pub node_id: i32,
}

/// key → (value, explicitly set, type).
#[derive(Debug, Clone)]
struct Values(BTreeMap<String, (String, bool, ConfigType)>);

/// The broker configs the broker acts on, parsed once at start-up.
#[derive(Debug, Clone)]
pub struct Settings {
    pub auto_create_topics: bool,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub socket_request_max_bytes: usize,
    pub delete_topic_enable: bool,
    /// `message.max.bytes`: the largest record batch, unless the topic's `max.message.bytes`.
    pub message_max_bytes: i64,
    /// `log.segment.bytes`, at least 1 KiB.
    pub log_segment_bytes: u64,
    /// `log.dir.free.bytes.min` at start-up (the dynamic value, if any, wins per request).
    pub log_dir_free_bytes_min: i64,
    /// `log.preallocate`: reserve a whole segment's blocks when it is created (Kafka's default,
    /// and onelog's, is off: blocks are reserved step by step as the segment fills).
    pub log_preallocate: bool,
    pub log_retention_ms: i64,
    pub log_retention_bytes: i64,
    pub log_retention_check_interval_ms: u64,
    /// `log.message.timestamp.type` is LogAppendTime.
    pub log_append_time: bool,
    pub producer_id_expiration_ms: i64,
    pub producer_id_expiration_check_interval_ms: u64,
    /// `transaction.max.timeout.ms`, within 1..=i32::MAX.
    pub txn_timeout_ms_max: i32,
    pub transactional_id_expiration_ms: i64,
    pub txn_abort_timed_out_interval_ms: u64,
    pub txn_remove_expired_interval_ms: u64,
    pub group: GroupSettings,
    pub listener: ListenerSettings,
}

/// The Kafka listener's settings (besides `socket.request.max.bytes`).
#[derive(Debug, Clone, Copy)]
pub struct ListenerSettings {
    /// `connections.max.idle.ms`; -1 (never) is kept as a year.
    pub connections_max_idle_ms: u64,
    /// `max.connections`, further capped by the open files limit (`net/connections.rs`).
    pub max_connections: usize,
    /// `max.connections.per.ip`.
    pub max_connections_per_ip: usize,
    /// `queued.max.request.bytes`: request memory over all connections; -1 lifts the bound.
    pub queued_max_request_bytes: usize,
    /// `onelog.request.read.timeout.ms`.
    pub request_read_timeout_ms: u64,
}

/// The longest timeout kept (ms): a year stands for "never" and keeps deadlines computable.
const TIMEOUT_MS_MAX: i64 = 365 * 24 * 3600 * 1000;

impl ListenerSettings {
    fn parse(c: &Values, socket_request_max_bytes: usize) -> anyhow::Result<Self> {
        let timeout = |ms: i64| if ms <= 0 { TIMEOUT_MS_MAX } else { ms.min(TIMEOUT_MS_MAX) } as u64;
        let queued = c.int("queued.max.request.bytes")?;
        let queued_max_request_bytes = if queued == -1 { usize::MAX } else { queued.max(0) as usize };
        if queued_max_request_bytes < socket_request_max_bytes {
            // A frame is read only once its memory is reserved: a largest frame must fit.
            bail!(
                "queued.max.request.bytes={queued} is below socket.request.max.bytes={socket_request_max_bytes}: \
                 a frame of the largest allowed size could never be read"
            );
        }
        Ok(ListenerSettings {
            connections_max_idle_ms: timeout(c.int("connections.max.idle.ms")?),
            max_connections: c.int("max.connections")?.max(0) as usize,
            max_connections_per_ip: c.int("max.connections.per.ip")?.max(0) as usize,
            queued_max_request_bytes,
            request_read_timeout_ms: timeout(c.int("onelog.request.read.timeout.ms")?),
        })
    }
}

/// The group coordinator's settings (`group.*`).
#[derive(Debug, Clone, Copy)]
pub struct GroupSettings {
    /// KIP-134: how long the first rebalance of an empty group waits for more members.
    pub initial_rebalance_delay_ms: u64,
    /// The session timeouts a JoinGroup may ask for (else INVALID_SESSION_TIMEOUT).
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    /// KIP-389: members per group (else GROUP_MAX_SIZE_REACHED).
    pub max_size: usize,
}

/// `message.max.bytes`, refused at start-up above what one Raft entry holds
/// (`onelog_state::limits::MESSAGE_BYTES_MAX`), as a dynamic alteration is.
fn message_max_bytes(c: &Values) -> anyhow::Result<i64> {
    let value = c.int("message.max.bytes")?;
    let max = onelog_state::limits::MESSAGE_BYTES_MAX;
    if value > i64::from(max) {
        anyhow::bail!(
            "message.max.bytes={value} is above {max}: one batch must fit one Raft entry (64 MiB with its framing)"
        );
    }
    Ok(value)
}

impl Settings {
    fn parse(c: &Values) -> anyhow::Result<Settings> {
        let socket_request_max_bytes = c.int("socket.request.max.bytes")?.max(0) as usize;
        Ok(Settings {
            auto_create_topics: c.bool("auto.create.topics.enable")?,
            num_partitions: c.int("num.partitions")? as i32,
            default_replication_factor: c.int("default.replication.factor")?.clamp(-1, i64::from(i16::MAX))
                as i16,
            socket_request_max_bytes,
            delete_topic_enable: c.bool("delete.topic.enable")?,
            message_max_bytes: message_max_bytes(c)?,
            log_segment_bytes: c.int("log.segment.bytes")?.max(1024) as u64,
            log_preallocate: c.bool("log.preallocate")?,
            log_dir_free_bytes_min: c.int("log.dir.free.bytes.min")?.max(0),
            log_retention_ms: c.int("log.retention.ms")?,
            log_retention_bytes: c.int("log.retention.bytes")?,
            log_retention_check_interval_ms: c.int("log.retention.check.interval.ms")?.max(100) as u64,
            log_append_time: c.text("log.message.timestamp.type")? == "LogAppendTime",
            producer_id_expiration_ms: c.int("producer.id.expiration.ms")?,
            producer_id_expiration_check_interval_ms: c
                .int("producer.id.expiration.check.interval.ms")?
                .max(100) as u64,
            txn_timeout_ms_max: c.int("transaction.max.timeout.ms")?.clamp(1, i64::from(i32::MAX)) as i32,
            transactional_id_expiration_ms: c.int("transactional.id.expiration.ms")?,
            txn_abort_timed_out_interval_ms: c
                .int("transaction.abort.timed.out.transaction.cleanup.interval.ms")?
                .max(10) as u64,
            txn_remove_expired_interval_ms: c
                .int("transaction.remove.expired.transaction.cleanup.interval.ms")?
                .max(100) as u64,
            group: GroupSettings {
                initial_rebalance_delay_ms: c.int("group.initial.rebalance.delay.ms")?.max(0) as u64,
                min_session_timeout_ms: c.int("group.min.session.timeout.ms")? as i32,
                max_session_timeout_ms: c.int("group.max.session.timeout.ms")? as i32,
                max_size: c.int("group.max.size")?.max(1) as usize,
            },
            listener: ListenerSettings::parse(c, socket_request_max_bytes)?,
        })
    }

    /// The limits this node writes into the replicated state when it leads.
    pub fn replicated_limits(&self) -> ReplicatedLimits {
        ReplicatedLimits {
            txn_timeout_ms_max: self.txn_timeout_ms_max,
            producer_id_expiration_ms: self.producer_id_expiration_ms,
            transactional_id_expiration_ms: self.transactional_id_expiration_ms,
            ..ReplicatedLimits::default()
        }
    }

    /// What the leader's settings add to building an entry.
    pub fn entry_options(&self, node_id: u64) -> EntryOptions {
        EntryOptions {
            log_append_time_default: self.log_append_time,
            node_id: node_id as i32,
            bug_ack_before_commit: crate::fault::flag("bug.ack-before-commit"),
            bug_ack_txn_before_commit: crate::fault::flag("bug.ack-txn-before-commit"),
        }
    }
}

impl BrokerConfig {
    pub fn from_overrides(overrides: &[String]) -> anyhow::Result<Self> {
        let mut values = BTreeMap::new();
        for (key, default, ty) in BROKER_CONFIGS.iter().chain(DYNAMIC_BROKER_CONFIGS) {
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
        let values = Values(values);
        values.check()?;
        let settings = Settings::parse(&values)?;
        Ok(BrokerConfig { values, settings, node_id: 0 })
    }

    pub fn with_node_id(self, node_id: u64) -> Self {
        BrokerConfig { node_id: node_id as i32, ..self }
    }

    /// Whether `name` is a broker config onelog knows and cannot change at run time (see
    /// [`BROKER_CONFIGS`]): the refusal Kafka gives, checked with `scripts/kafka-reference.sh`.
    pub fn read_only_problem(name: &str) -> Option<(i16, String)> {
        BROKER_CONFIGS.iter().any(|(k, _, _)| *k == name).then(|| {
            (
                kafka_compat::error_code::INVALID_REQUEST,
                format!("Cannot update these configs dynamically: Set({name})"),
            )
        })
    }

    /// The value of a dynamic integer broker config in force on this node: its dynamic
    /// broker override, else the dynamic cluster default, else `static_value` (the settings').
    /// Read per request or per duty round, so an alteration takes effect once applied.
    pub fn dynamic_int(&self, state: &BrokerState, key: &str, static_value: i64) -> i64 {
        let dynamic = state.configs.broker_value(self.node_id, key);
        dynamic.and_then(|(v, _)| v.trim().parse().ok()).unwrap_or(static_value)
    }

    /// A topic's integer config: set on the topic, else the dynamic broker synonym, else the
    /// static broker setting.
    pub fn topic_int(&self, state: &BrokerState, topic: &str, key: &str, static_value: i64) -> i64 {
        let broker_name = dynamic_broker_name(key);
        let set =
            state.topics.get(topic).and_then(|t| t.configs.get(key)).and_then(|v| v.trim().parse().ok());
        set.unwrap_or_else(|| self.dynamic_int(state, broker_name, static_value))
    }

    /// A topic's config as text: set on the topic, else the dynamic broker synonym, else the
    /// static broker setting, else the default.
    pub fn topic_str(&self, state: &BrokerState, topic: &str, key: &str) -> String {
        let broker_name = dynamic_broker_name(key);
        let set = state.topics.get(topic).and_then(|t| t.configs.get(key)).cloned();
        set.or_else(|| state.configs.broker_value(self.node_id, broker_name).map(|(v, _)| v.to_string()))
            .or_else(|| self.get(broker_name).map(str::to_string))
            .or_else(|| self.default_of(broker_name).map(str::to_string))
            .unwrap_or_default()
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key)
    }

    /// Whether `key` was given on the command line (STATIC_BROKER_CONFIG).
    pub fn is_set(&self, key: &str) -> bool {
        self.values.0.get(key).is_some_and(|(_, set, _)| *set)
    }

    /// The built-in default of a known broker config (DEFAULT_CONFIG).
    pub fn default_of(&self, key: &str) -> Option<&'static str> {
        BROKER_CONFIGS
            .iter()
            .chain(DYNAMIC_BROKER_CONFIGS)
            .find(|(k, _, _)| *k == key)
            .map(|(_, d, _)| *d)
            .or_else(|| TOPIC_CONFIGS.iter().find(|d| d.broker_name == key).map(|d| d.default))
    }

    /// (value, explicitly set, type) for DescribeConfigs.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str, bool, ConfigType)> {
        self.values.0.iter().map(|(k, (v, set, ty))| (k.as_str(), v.as_str(), *set, *ty))
    }
}

impl Values {
    fn check(&self) -> anyhow::Result<()> {
        for (key, (value, _, ty)) in &self.0 {
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

    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|(v, _, _)| v.as_str())
    }

    fn text(&self, key: &str) -> anyhow::Result<&str> {
        self.get(key).with_context(|| format!("broker config {key} is not known"))
    }

    fn bool(&self, key: &str) -> anyhow::Result<bool> {
        Ok(self.text(key)? == "true")
    }

    fn int(&self, key: &str) -> anyhow::Result<i64> {
        let value = self.text(key)?;
        value.parse().with_context(|| format!("broker config {key}={value} is not an integer"))
    }
}

#[cfg(test)]
mod tests {
    use super::BrokerConfig;

    /// Issue 13, reproduction 1: a broker allowing batches larger than one Raft entry holds
    /// would exit on the first such batch; it refuses to start instead.
    #[test]
    fn message_max_bytes_above_what_one_entry_holds_refuses_to_start() {
        let max = onelog_state::limits::MESSAGE_BYTES_MAX;
        let at_max =
            BrokerConfig::from_overrides(&[format!("message.max.bytes={max}")]).expect("the cap is allowed");
        assert_eq!(at_max.settings.message_max_bytes, i64::from(max));
        let err = BrokerConfig::from_overrides(&[format!("message.max.bytes={}", 100 << 20)]).unwrap_err();
        assert!(err.to_string().contains("one Raft entry"), "{err}");
    }
}

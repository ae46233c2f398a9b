//! Command line and broker configuration.
//!
//! Kafka broker configs (`auto.create.topics.enable`, `message.max.bytes`, `log.retention.ms`,
//! `listeners`, `node.id`, …) keep Kafka's names wherever Kafka has one and are reported by
//! DescribeConfigs. Each comes from, later winning: its default, the TOML file (`sources`), an
//! `ONELOG_*` variable, a flag (`--config key=value`, or the per-node flags `--node-id`,
//! `--data-dir`, `--kafka-listen`, … which set `node.id`, `log.dirs`, `listeners`, …). They are
//! parsed once at start-up into [`Settings`] and [`NodeSettings`], typed fields the broker
//! reads; the string keys appear only in this module. An unknown key, a value of the wrong
//! type or out of its range fails start-up with the key, the value, where it was set and what
//! is allowed, never a request.

pub mod authz;
pub mod consumer_group;
mod defs;
mod jaas;
pub mod listeners;
mod node_settings;
pub mod raft_groups;
pub mod security;
#[cfg(test)]
mod security_tests;
pub mod share_group;
pub mod sources;
pub mod streams_group;

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Parser;

use onelog_state::command::ReplicatedLimits;
use onelog_state::entry::EntryOptions;
use onelog_state::topic_config::{topic_config_def, ConfigType, TOPIC_CONFIGS};
use onelog_state::BrokerState;

use defs::{BrokerConfigDef, BROKER_CONFIGS, DYNAMIC_BROKER_CONFIGS, NODE_CONFIGS, SECURITY_CONFIGS};
pub use node_settings::NodeSettings;
use sources::{Given, Origin};

/// The broker synonym of a topic config (`retention.ms` → `log.retention.ms`).
fn dynamic_broker_name(topic_key: &str) -> &'static str {
    topic_config_def(topic_key).map_or("", |d| d.broker_name)
}

/// onelog: a Kafka-compatible broker whose every write is an entry in one Raft log.
///
/// The per-node flags have no clap defaults: a flag given wins over the environment and the
/// file, and the defaults live with the other configs' (`defs::NODE_CONFIGS`).
#[derive(Debug, Clone, Default, Parser)]
#[command(name = "onelog", version, about)]
pub struct Args {
    /// TOML file of broker configs with Kafka's names (default: ./onelog.toml if it exists).
    #[arg(long, value_name = "PATH")]
    pub config_file: Option<PathBuf>,
    /// This node's id in the Raft group and its Kafka broker id (`node.id`, default 1).
    #[arg(long)]
    pub node_id: Option<u64>,
    /// Directory holding the Raft log, checkpoints and partition segment files (`log.dirs`,
    /// default ./data).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Address the Kafka listener binds (`listeners`, default 127.0.0.1:9092).
    #[arg(long)]
    pub kafka_listen: Option<String>,
    /// host:port clients are told to connect to (`advertised.listeners`); defaults to the
    /// listener's address.
    #[arg(long)]
    pub advertised_kafka: Option<String>,
    /// Address for Raft traffic between nodes (`onelog.raft.listener`; not bound by a one-node
    /// cluster unless given).
    #[arg(long)]
    pub raft_listen: Option<String>,
    /// Other voters as id=raft_host:port@kafka_host:port, comma separated (`onelog.peers`).
    #[arg(long, value_delimiter = ',')]
    pub peers: Vec<String>,
    /// Kafka broker config override, key=value (repeatable), e.g. auto.create.topics.enable=false.
    #[arg(long = "config", value_name = "KEY=VALUE")]
    pub configs: Vec<String>,
    /// Address of the HTTP admin API (`onelog.admin.listener`: status, digest, membership);
    /// not bound when absent.
    #[arg(long)]
    pub admin_listen: Option<String>,
}

/// A listener flag's host:port as Kafka writes a listener (`PLAINTEXT://host:port`).
fn with_protocol(at: &str) -> String {
    if at.contains("://") {
        at.to_string()
    } else {
        format!("PLAINTEXT://{at}")
    }
}

impl Args {
    /// The per-node flags given, as the configs they set.
    fn node_flags(&self) -> Vec<Given> {
        let data_dir = self.data_dir.as_ref().map(|d| d.to_string_lossy().into_owned());
        let peers = (!self.peers.is_empty()).then(|| self.peers.join(","));
        [
            ("node.id", self.node_id.map(|n| n.to_string())),
            ("log.dirs", data_dir),
            ("listeners", self.kafka_listen.as_deref().map(with_protocol)),
            ("advertised.listeners", self.advertised_kafka.as_deref().map(with_protocol)),
            ("onelog.raft.listener", self.raft_listen.clone()),
            ("onelog.peers", peers),
            ("onelog.admin.listener", self.admin_listen.clone()),
        ]
        .into_iter()
        .filter_map(|(key, value)| Some(Given { key: key.to_string(), value: value?, origin: Origin::Flag }))
        .collect()
    }
}

/// Effective broker configuration: every known key with its value and where it was set
/// (for DescribeConfigs), and the same values typed.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    values: Values,
    pub settings: Settings,
    pub node: NodeSettings,
    /// This node's broker id: whose dynamic broker configs (`DynamicConfigs::brokers`) apply.
    pub node_id: i32,
}

/// key → (value, where it was set, type).
#[derive(Debug, Clone)]
struct Values(BTreeMap<String, (String, Origin, ConfigType)>);

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
    /// `onelog.raft.entries.in.flight`: entries the proposer hands to Raft before the first
    /// applies (1..=`limits::ENTRIES_IN_FLIGHT_MAX`).
    pub entries_in_flight: usize,
    /// `onelog.raft.segment.bytes`: the size of one Raft log segment file.
    pub raft_segment_bytes: u64,
    /// `onelog.runtime.worker.threads`: the async runtime's worker threads; 0 is one per CPU
    /// the process may use (`main.rs` builds the runtime with it).
    pub runtime_worker_threads: usize,
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
    /// KIP-848 consumer groups (`group.consumer.*`): the settings the leader puts in each
    /// heartbeat op (with the group's own overrides layered on top) and their bounds.
    pub consumer_group: consumer_group::ConsumerGroupConfig,
    /// KIP-1071 Streams groups (`group.streams.*`), as `consumer_group`.
    pub streams_group: streams_group::StreamsGroupConfig,
    /// KIP-932 share groups (`group.share.*`), as `consumer_group`.
    pub share_group: share_group::ShareGroupConfig,
    pub listener: ListenerSettings,
    /// `authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found`.
    pub authz: authz::AuthzSettings,
    /// `onelog.raft.groups` and the settings of its groups (`config::raft_groups`).
    pub raft_groups: raft_groups::RaftGroupSettings,
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
                "queued.max.request.bytes={queued} ({}) is below socket.request.max.bytes={socket_request_max_bytes}: \
                 a frame of the largest allowed size could never be read",
                c.origin("queued.max.request.bytes")
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
            "message.max.bytes={value} ({}) is above {max}: one batch must fit one Raft entry (64 MiB with its framing)",
            c.origin("message.max.bytes")
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
            entries_in_flight: c
                .int("onelog.raft.entries.in.flight")?
                .clamp(1, crate::limits::ENTRIES_IN_FLIGHT_MAX as i64)
                as usize,
            raft_segment_bytes: c
                .int("onelog.raft.segment.bytes")?
                .max(raft_store::limits::SEGMENT_BYTES_MIN as i64) as u64,
            runtime_worker_threads: c
                .int("onelog.runtime.worker.threads")?
                .clamp(0, crate::limits::RUNTIME_WORKER_THREADS_MAX as i64)
                as usize,
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
            consumer_group: consumer_group::parse(
                |key| c.int(key),
                c.text("group.consumer.assignors")?,
                c.text("group.consumer.migration.policy")?,
            )?,
            streams_group: streams_group::parse(|key| c.int(key))?,
            share_group: share_group::parse(|key| c.int(key), c.text("group.share.assignors")?)?,
            listener: ListenerSettings::parse(c, socket_request_max_bytes)?,
            raft_groups: raft_groups::RaftGroupSettings::parse(c)?,
            authz: authz::AuthzSettings::parse(
                c.text("authorizer.class.name")?,
                c.text("super.users")?,
                c.bool("allow.everyone.if.no.acl.found")?,
            )?,
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
        EntryOptions { log_append_time_default: self.log_append_time, node_id: node_id as i32 }
    }
}

impl BrokerConfig {
    /// The configuration a node starts with: defaults, then the TOML file, then `ONELOG_*`
    /// variables, then flags.
    pub fn load(args: &Args) -> anyhow::Result<Self> {
        let mut given = Vec::new();
        if let Some(path) = sources::file_to_read(args.config_file.as_deref())? {
            given.extend(sources::read_file(&path)?);
        }
        let keys: Vec<&str> = known_defaults().map(|(key, _, _)| key).collect();
        given.extend(sources::from_env(keys.into_iter(), |name| std::env::var(name).ok()));
        given.extend(args.node_flags());
        given.extend(sources::from_flags(&args.configs)?);
        Self::from_given(given)
    }

    /// Defaults and `--config key=value` items only: for tests and tools.
    pub fn from_overrides(overrides: &[String]) -> anyhow::Result<Self> {
        Self::from_given(sources::from_flags(overrides)?)
    }

    fn from_given(given: Vec<Given>) -> anyhow::Result<Self> {
        let mut values = BTreeMap::new();
        for (key, default, ty) in known_defaults() {
            values.insert(key.to_string(), (default.to_string(), Origin::Default, ty));
        }
        for Given { key, value, origin } in given {
            if security::is_listener_override(&key) || raft_groups::is_prefixed_key(&key) {
                values.insert(key, (value, origin, ConfigType::String));
                continue;
            }
            let Some(entry) = values.get_mut(&key) else {
                bail!("{key} ({origin}): unknown broker config{}", suggestion(&key));
            };
            *entry = (value, origin, entry.2);
        }
        let values = Values(values);
        values.check()?;
        let settings = Settings::parse(&values)?;
        let node = NodeSettings::parse(&values)?;
        let node_id = node.node_id as i32;
        Ok(BrokerConfig { values, settings, node, node_id })
    }

    /// One line per config set other than by default, with its origin, for the start-up log
    /// (Kafka logs its whole `KafkaConfig`; the defaults are in DescribeConfigs and the docs).
    pub fn describe_set(&self) -> String {
        let set: Vec<String> = self
            .values
            .0
            .iter()
            .filter(|(_, (_, origin, _))| *origin != Origin::Default)
            .map(|(key, (value, origin, _))| match security::is_sensitive(key) {
                true => format!("{key}=[hidden] ({origin})"),
                false => format!("{key}={value} ({origin})"),
            })
            .collect();
        if set.is_empty() {
            "every config at its default".to_string()
        } else {
            set.join("; ")
        }
    }

    /// Whether `name` is a broker config onelog knows and cannot change at run time (see
    /// [`BROKER_CONFIGS`]): the refusal Kafka gives, checked with `scripts/kafka-reference.sh`.
    pub fn read_only_problem(name: &str) -> Option<(i16, String)> {
        let read_only =
            BROKER_CONFIGS.iter().chain(NODE_CONFIGS).chain(SECURITY_CONFIGS).any(|d| d.name == name);
        read_only.then(|| {
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

    /// Whether `key` was set by the file, the environment or a flag (STATIC_BROKER_CONFIG).
    pub fn is_set(&self, key: &str) -> bool {
        self.values.0.get(key).is_some_and(|(_, origin, _)| *origin != Origin::Default)
    }

    /// The built-in default of a known broker config (DEFAULT_CONFIG).
    pub fn default_of(&self, key: &str) -> Option<&'static str> {
        known_defaults().find(|(k, _, _)| *k == key).map(|(_, d, _)| d)
    }

    /// (value, explicitly set, type) for DescribeConfigs; secrets (JAAS configs) and the
    /// per-listener overrides are left out.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str, bool, ConfigType)> {
        self.values
            .0
            .iter()
            .filter(|(k, _)| !security::is_sensitive(k) && !k.starts_with(security::LISTENER_PREFIX))
            .map(|(k, (v, origin, ty))| (k.as_str(), v.as_str(), *origin != Origin::Default, *ty))
    }
}

/// Every known config: (name, default, type); node and broker configs, then the broker
/// synonyms of the topic configs.
fn known_defaults() -> impl Iterator<Item = (&'static str, &'static str, ConfigType)> {
    let own = NODE_CONFIGS.iter().chain(BROKER_CONFIGS).chain(DYNAMIC_BROKER_CONFIGS).chain(SECURITY_CONFIGS);
    own.map(|d| (d.name, d.default, d.config_type))
        .chain(TOPIC_CONFIGS.iter().map(|d| (d.broker_name, d.default, d.config_type)))
}

fn own_def(key: &str) -> Option<&'static BrokerConfigDef> {
    NODE_CONFIGS
        .iter()
        .chain(BROKER_CONFIGS)
        .chain(DYNAMIC_BROKER_CONFIGS)
        .chain(SECURITY_CONFIGS)
        .find(|d| d.name == key)
}

/// ", did you mean …?" when a known key differs from `key` by a character or two.
fn suggestion(key: &str) -> String {
    let close = known_defaults().map(|(k, _, _)| k).min_by_key(|k| edit_distance(key, k));
    match close {
        Some(k) if edit_distance(key, k) <= 2 => format!(", did you mean {k}?"),
        _ => String::new(),
    }
}

/// Levenshtein distance, for [`suggestion`] on keys of a few dozen characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb)).min(row[j] + 1).min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

impl Values {
    /// Every value's type, and the range of onelog's own integer configs.
    fn check(&self) -> anyhow::Result<()> {
        for (key, (value, origin, ty)) in &self.0 {
            let problem = match own_def(key) {
                Some(def) => defs::value_problem(def, value),
                None => type_problem(*ty, value),
            };
            if let Some(problem) = problem {
                bail!("{key}={value} ({origin}): {problem}");
            }
        }
        Ok(())
    }

    /// Where `key` was set, for an error about its value.
    fn origin(&self, key: &str) -> String {
        self.0.get(key).map_or_else(|| "unknown".to_string(), |(_, origin, _)| origin.to_string())
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|(v, _, _)| v.as_str())
    }

    /// Every set key starting with `prefix`, with its value.
    fn with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.0
            .range(prefix.to_string()..)
            .take_while(move |(k, _)| k.starts_with(prefix))
            .map(|(k, (v, _, _))| (k.as_str(), v.as_str()))
    }

    fn text(&self, key: &str) -> anyhow::Result<&str> {
        self.get(key).with_context(|| format!("broker config {key} is not known"))
    }

    fn bool(&self, key: &str) -> anyhow::Result<bool> {
        Ok(self.text(key)? == "true")
    }

    fn int(&self, key: &str) -> anyhow::Result<i64> {
        let value = self.text(key)?;
        value.trim().parse().with_context(|| format!("broker config {key}={value} is not an integer"))
    }
}

/// Why `value` is not of type `ty` (the topic configs' broker synonyms; their ranges are
/// checked where a topic's config is, `onelog_state::topic_config`).
fn type_problem(ty: ConfigType, value: &str) -> Option<String> {
    let ok = match ty {
        ConfigType::Boolean => value == "true" || value == "false",
        ConfigType::Int => value.trim().parse::<i32>().is_ok(),
        ConfigType::Long => value.trim().parse::<i64>().is_ok(),
        ConfigType::Double => value.trim().parse::<f64>().is_ok(),
        ConfigType::String | ConfigType::List => true,
    };
    (!ok).then(|| format!("not a valid {ty:?}"))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::sources::{self, Given, Origin};
    use super::BrokerConfig;

    /// The example in `config/onelog.toml` loads, and each value it shows is the default, so
    /// that it documents the defaults truly.
    #[test]
    fn the_example_file_loads_and_shows_the_defaults() {
        let path = Path::new("../config/onelog.toml");
        let given = sources::read_file(path).expect("the example parses");
        assert!(given.len() > 20, "{given:?}");
        let config = BrokerConfig::from_given(given.clone()).expect("the example loads");
        for Given { key, value, .. } in &given {
            assert_eq!(
                config.default_of(key),
                Some(value.as_str()),
                "{key} in the example is not its default"
            );
        }
        assert_eq!(config.node.kafka_listen.to_string(), "127.0.0.1:9092");
        assert_eq!(config.node.advertised_kafka, "127.0.0.1:9092");
    }

    #[test]
    fn later_sources_win_and_describe_set_names_them() {
        let at =
            |key: &str, value: &str, origin: Origin| Given { key: key.into(), value: value.into(), origin };
        let file = Origin::File { path: "f.toml".into(), line: 3 };
        let config = BrokerConfig::from_given(vec![
            at("num.partitions", "3", file.clone()),
            at("log.retention.ms", "10", file),
            at("num.partitions", "5", Origin::Env("ONELOG_NUM_PARTITIONS".into())),
            at("node.id", "7", Origin::Flag),
        ])
        .expect("loads");
        assert_eq!(config.settings.num_partitions, 5);
        assert_eq!(config.settings.log_retention_ms, 10);
        assert_eq!(config.node_id, 7);
        assert!(config.is_set("num.partitions") && !config.is_set("delete.topic.enable"));
        let described = config.describe_set();
        assert!(described.contains("num.partitions=5 (environment ONELOG_NUM_PARTITIONS)"), "{described}");
        assert!(described.contains("log.retention.ms=10 (f.toml line 3)"), "{described}");
    }

    #[test]
    fn a_bad_value_names_the_key_the_origin_and_the_range() {
        let err = BrokerConfig::from_overrides(&["group.max.size=0".into()]).unwrap_err().to_string();
        assert_eq!(err, "group.max.size=0 (command line): must be in [1, 2147483647]");
        let err = BrokerConfig::from_overrides(&["num.partitions=x".into()]).unwrap_err().to_string();
        assert_eq!(err, "num.partitions=x (command line): must be an integer in [1, 2147483647]");
        let err = BrokerConfig::from_overrides(&["log.retention.mss=1".into()]).unwrap_err().to_string();
        assert!(err.contains("unknown broker config, did you mean log.retention.ms?"), "{err}");
        let err = BrokerConfig::from_overrides(&["log.dirs=/a,/b".into()]).unwrap_err().to_string();
        assert!(err.contains("exactly one data directory"), "{err}");
        // A broker id is an INT32 on the wire: a larger one would wrap in Metadata.
        let err = BrokerConfig::from_overrides(&["node.id=2147483648".into()]).unwrap_err().to_string();
        assert_eq!(err, "node.id=2147483648 (command line): must be in [0, 2147483647]");
    }

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

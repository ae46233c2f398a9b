//! The broker configs onelog knows beside the topic configs' broker synonyms
//! (`onelog_state::topic_config::TOPIC_CONFIGS`): name, default, type and allowed range.
//! Ranges are Kafka's validators (`atLeast(1)` and the like) where Kafka has one.

use onelog_state::topic_config::ConfigType::{self, Boolean, Int, List, Long};

const STRING: ConfigType = ConfigType::String;

/// One broker config: its Kafka name, default, type, and the inclusive range of an integer.
#[derive(Debug, Clone, Copy)]
pub struct BrokerConfigDef {
    pub name: &'static str,
    pub default: &'static str,
    pub config_type: ConfigType,
    pub min: i64,
    pub max: i64,
}

const fn def(name: &'static str, default: &'static str, config_type: ConfigType) -> BrokerConfigDef {
    let max = match config_type {
        Int => i32::MAX as i64,
        _ => i64::MAX,
    };
    let min = match config_type {
        Int => i32::MIN as i64,
        _ => i64::MIN,
    };
    BrokerConfigDef { name, default, config_type, min, max }
}

/// [`def`] with a lowest value, as Kafka's `atLeast(min)`.
const fn at_least(
    name: &'static str,
    default: &'static str,
    config_type: ConfigType,
    min: i64,
) -> BrokerConfigDef {
    BrokerConfigDef { min, ..def(name, default, config_type) }
}

/// [`def`] within `min..=max`, as Kafka's `between(min, max)`.
const fn between(
    name: &'static str,
    default: &'static str,
    config_type: ConfigType,
    min: i64,
    max: i64,
) -> BrokerConfigDef {
    BrokerConfigDef { min, max, ..def(name, default, config_type) }
}

/// What differs per node: its id, directory and addresses. Read once at start-up into
/// `NodeSettings`; read-only, like every static broker config. Kafka's names where it has the
/// config (`node.id`, `log.dirs`, `listeners`, `advertised.listeners`); onelog's own for the
/// Raft listener, the other voters and the admin API.
pub const NODE_CONFIGS: &[BrokerConfigDef] = &[
    // Kafka's broker ids are INT32 on the wire (Metadata, FindCoordinator).
    between("node.id", "1", Long, 0, i32::MAX as i64),
    def("log.dirs", "./data", STRING),
    def("listeners", "PLAINTEXT://127.0.0.1:9092", List),
    def("advertised.listeners", "", List),
    def("onelog.raft.listener", "", STRING),
    // id=raft_host:port@kafka_host:port, comma separated.
    def("onelog.peers", "", List),
    def("onelog.admin.listener", "", STRING),
    // A file holding the cluster secret every node's Raft handshake proves (`raft::transport::auth`).
    def("onelog.cluster.secret.file", "", STRING),
    // A file holding the bearer token every admin API change must carry (`admin_api::access`).
    def("onelog.admin.token.file", "", STRING),
    // The Raft port's mutual TLS (`raft::transport::tls`): this node's PEM certificate chain and
    // key, and the cluster's CA every peer's certificate must chain to. Both or neither.
    def("onelog.raft.ssl.keystore.location", "", STRING),
    def("onelog.raft.ssl.truststore.location", "", STRING),
    // HTTPS on the admin API (`admin_api::server`): its PEM keystore, and the CA client
    // certificates chain to when `onelog.admin.ssl.client.auth` asks for them.
    def("onelog.admin.ssl.keystore.location", "", STRING),
    def("onelog.admin.ssl.truststore.location", "", STRING),
    def("onelog.admin.ssl.client.auth", "none", STRING),
];

/// The Kafka listeners' security: protocols per listener name, TLS and SASL. Kafka's names and,
/// where onelog has the same choice, Kafka's defaults; onelog reads PEM files only, and enables
/// the mechanisms it serves (Kafka's default is GSSAPI, which onelog does not). Each `ssl.`/`sasl.`
/// one (and `connections.max.reauth.ms`) may be set per listener as
/// `listener.name.<name>.<key>` (`config::security`). Read-only, like the node configs.
pub const SECURITY_CONFIGS: &[BrokerConfigDef] = &[
    def("listener.security.protocol.map", super::listeners::DEFAULT_PROTOCOL_MAP, List),
    def("ssl.keystore.type", "PEM", STRING),
    def("ssl.keystore.location", "", STRING),
    def("ssl.truststore.type", "PEM", STRING),
    def("ssl.truststore.location", "", STRING),
    def("ssl.client.auth", "none", STRING),
    def("ssl.principal.mapping.rules", "DEFAULT", STRING),
    def("sasl.enabled.mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN", List),
    def("sasl.jaas.config", "", STRING),
    at_least("connections.max.reauth.ms", "0", Long, 0),
];

/// Broker-only configs and their defaults (topic-level defaults come from TOPIC_CONFIGS).
///
/// None of these is dynamic (IncrementalAlterConfigs / AlterConfigs answer INVALID_REQUEST
/// "Cannot update these configs dynamically", as Kafka does for its read-only configs): Kafka
/// marks every one read-only except `producer.id.expiration.ms`. In onelog that one is a
/// replicated limit, written only by a new leader's takeover entry (`Op::SetLimits`); changing
/// it at run time would need its own op, so it stays static here. The dynamic broker configs are
/// the broker synonyms of the topic configs (`log.retention.ms`, `message.max.bytes`,
/// `log.segment.bytes`, …), as Kafka's `DynamicLogConfig` has them; see `BrokerConfig::dynamic_int`.
pub const BROKER_CONFIGS: &[BrokerConfigDef] = &[
    def("auto.create.topics.enable", "true", Boolean),
    at_least("num.partitions", "1", Int, 1),
    between("default.replication.factor", "1", Int, 1, i16::MAX as i64),
    at_least("socket.request.max.bytes", "104857600", Int, 1),
    // The Kafka listener (`net/`). Kafka's `queued.max.request.bytes` defaults to -1 (no
    // bound); onelog bounds request memory by default, and -1 lifts the bound. Kafka can alter
    // `max.connections*` dynamically; here they are read-only like the rest of this list.
    def("connections.max.idle.ms", "600000", Long),
    at_least("max.connections", "2147483647", Int, 0),
    at_least("max.connections.per.ip", "2147483647", Int, 0),
    at_least("queued.max.request.bytes", "536870912", Long, -1),
    // onelog's own (Kafka has none): how long one request frame may take to arrive, from its
    // first byte to its last. The default is Kafka clients' `request.timeout.ms`: a client
    // has given up on a request by then.
    at_least("onelog.request.read.timeout.ms", "30000", Long, 1),
    // onelog's own: entries the leader hands to Raft before the first of them is applied
    // (pipelined proposals, issue 31). 1 waits for each entry's apply before building the
    // next, which measured best on a CPU-bound machine (docs/PERFORMANCE.md).
    between("onelog.raft.entries.in.flight", "1", Int, 1, crate::limits::ENTRIES_IN_FLIGHT_MAX as i64),
    // onelog's own, like Kafka's `num.io.threads`: the threads that run the node's requests,
    // Raft and apply. 0 gives one per CPU the process may use; nodes sharing a machine run
    // with less CPU each when given fewer (docs/OPERATIONS.md, docs/PERFORMANCE.md).
    between("onelog.runtime.worker.threads", "0", Int, 0, crate::limits::RUNTIME_WORKER_THREADS_MAX as i64),
    // onelog's own, like KRaft's `metadata.log.segment.bytes`: the size of one Raft log segment
    // file. Purged segments are recycled (raft-store's prealloc.rs); tests use small ones to
    // roll and recycle segments in seconds.
    at_least("onelog.raft.segment.bytes", "67108864", Long, raft_store::limits::SEGMENT_BYTES_MIN as i64),
    // onelog's own: the Raft groups (docs/SCALING.md §2, `config::raft_groups`). Cluster-wide:
    // every node must be given the same values. `onelog.raft.group.<g>.voters` names a group's
    // voters, preferred leader first.
    between("onelog.raft.groups", "1", Int, 1, onelog_state::xgroup::placement::RAFT_GROUPS_MAX as i64),
    between(
        "onelog.raft.replication.factor",
        "-1",
        Int,
        -1,
        onelog_state::xgroup::placement::RAFT_GROUPS_MAX as i64,
    ),
    // onelog's own: where new topics, transactional ids and groups go (`topic:`, `txn:`,
    // `group:` prefix rules; `onelog.placement.key.<key>` pins a placement key to a group).
    def("onelog.placement.rules", "", STRING),
    // Kafka's names for moving leadership back to the preferred replica; here a Raft group's.
    def("auto.leader.rebalance.enable", "true", Boolean),
    at_least("leader.imbalance.check.interval.seconds", "30", Long, 1),
    at_least("log.retention.check.interval.ms", "300000", Long, 1),
    def("delete.topic.enable", "true", Boolean),
    // KIP-98: how long an idle producer id keeps its state, and how often the leader looks.
    at_least("producer.id.expiration.ms", "86400000", Int, 1),
    at_least("producer.id.expiration.check.interval.ms", "600000", Int, 1),
    // KIP-98: the longest transaction.timeout.ms a producer may ask for (else
    // INVALID_TRANSACTION_TIMEOUT), how long an idle transactional id is kept, and how often
    // the leader looks for expired transactions.
    at_least("transaction.max.timeout.ms", "900000", Int, 1),
    at_least("transactional.id.expiration.ms", "604800000", Int, 1),
    at_least("transaction.abort.timed.out.transaction.cleanup.interval.ms", "10000", Int, 1),
    at_least("transaction.remove.expired.transaction.cleanup.interval.ms", "3600000", Int, 1),
    // KIP-134: how long the first rebalance of an empty group waits for more members.
    at_least("group.initial.rebalance.delay.ms", "3000", Int, 0),
    // The session timeouts a JoinGroup may ask for (else INVALID_SESSION_TIMEOUT).
    def("group.min.session.timeout.ms", "6000", Int),
    def("group.max.session.timeout.ms", "1800000", Int),
    // KIP-389: members per group (else GROUP_MAX_SIZE_REACHED).
    at_least("group.max.size", "2147483647", Int, 1),
    // KIP-848 consumer groups (`group.protocol=consumer`), Kafka 4.4's names and defaults: the
    // session timeout and heartbeat interval the coordinator gives members, their bounds
    // (start-up refuses a default outside them, as Kafka's GroupCoordinatorConfig does), the
    // group size, the server-side assignors (the first is the default) and KIP-1263's least
    // time between two target assignments with its bounds. The bounds also bound each group's
    // own `consumer.*` overrides (group configs, `onelog_state::group_config`).
    at_least("group.consumer.session.timeout.ms", "45000", Int, 1),
    at_least("group.consumer.min.session.timeout.ms", "45000", Int, 1),
    at_least("group.consumer.max.session.timeout.ms", "60000", Int, 1),
    at_least("group.consumer.heartbeat.interval.ms", "5000", Int, 1),
    at_least("group.consumer.min.heartbeat.interval.ms", "5000", Int, 1),
    at_least("group.consumer.max.heartbeat.interval.ms", "15000", Int, 1),
    at_least("group.consumer.max.size", "2147483647", Int, 1),
    def("group.consumer.assignors", "uniform,range", List),
    at_least("group.consumer.assignment.interval.ms", "1000", Int, 0),
    at_least("group.consumer.min.assignment.interval.ms", "0", Int, 0),
    at_least("group.consumer.max.assignment.interval.ms", "15000", Int, 0),
    // Online migration between classic and consumer groups with members: `bidirectional`,
    // `upgrade`, `downgrade` or `disabled` (Kafka reads any other value as `disabled`).
    def("group.consumer.migration.policy", "bidirectional", STRING),
    // KIP-1071 Streams groups (`group.streams.*`), Kafka 4.4's names, defaults and `atLeast`
    // validators (`GroupCoordinatorConfig`): session timeout, heartbeat interval and KIP-1263's
    // assignment interval with their bounds, the group size, the standby and warmup replicas
    // per task with their most, the first rebalance's delay, how often members report their
    // task offsets with its least, and the lag at which a member counts as caught up. Start-up
    // refuses a value outside its bounds as Kafka's does; the bounds also bound each group's
    // own `streams.*` overrides. Kafka keeps the task offset interval, warmup replicas and
    // recovery lag internal (undocumented); onelog declares them like the rest.
    at_least("group.streams.session.timeout.ms", "45000", Int, 1),
    at_least("group.streams.min.session.timeout.ms", "45000", Int, 1),
    at_least("group.streams.max.session.timeout.ms", "60000", Int, 1),
    at_least("group.streams.heartbeat.interval.ms", "5000", Int, 1),
    at_least("group.streams.min.heartbeat.interval.ms", "5000", Int, 1),
    at_least("group.streams.max.heartbeat.interval.ms", "15000", Int, 1),
    at_least("group.streams.max.size", "2147483647", Int, 1),
    at_least("group.streams.num.standby.replicas", "0", Int, 0),
    at_least("group.streams.max.standby.replicas", "2", Int, 0),
    at_least("group.streams.initial.rebalance.delay.ms", "3000", Int, 0),
    at_least("group.streams.assignment.interval.ms", "1000", Int, 0),
    at_least("group.streams.min.assignment.interval.ms", "0", Int, 0),
    at_least("group.streams.max.assignment.interval.ms", "15000", Int, 0),
    at_least("group.streams.task.offset.interval.ms", "60000", Int, 1),
    at_least("group.streams.min.task.offset.interval.ms", "15000", Int, 1),
    at_least("group.streams.num.warmup.replicas", "2", Int, 0),
    at_least("group.streams.max.warmup.replicas", "20", Int, 0),
    at_least("group.streams.acceptable.recovery.lag", "10000", Long, 0),
    // KIP-932 share groups (`group.share.*`), Kafka 4.4's names, defaults and validators
    // (`GroupCoordinatorConfig` for membership, `ShareGroupConfig` for records): session
    // timeout, heartbeat interval and assignment interval with their bounds, the group size
    // and the one server-side assignor; the record lock duration, delivery count limit and
    // record locks per share-partition with their bounds; the share sessions one broker keeps.
    // Start-up refuses a value outside its bounds as Kafka's does; the bounds also bound each
    // group's own `share.*` overrides.
    at_least("group.share.session.timeout.ms", "45000", Int, 1),
    at_least("group.share.min.session.timeout.ms", "45000", Int, 1),
    at_least("group.share.max.session.timeout.ms", "60000", Int, 1),
    at_least("group.share.heartbeat.interval.ms", "5000", Int, 1),
    at_least("group.share.min.heartbeat.interval.ms", "5000", Int, 1),
    at_least("group.share.max.heartbeat.interval.ms", "15000", Int, 1),
    between("group.share.max.size", "200", Int, 1, 1_000),
    def("group.share.assignors", "simple", List),
    at_least("group.share.assignment.interval.ms", "1000", Int, 0),
    at_least("group.share.min.assignment.interval.ms", "0", Int, 0),
    at_least("group.share.max.assignment.interval.ms", "15000", Int, 0),
    between("group.share.record.lock.duration.ms", "30000", Int, 1_000, 3_600_000),
    between("group.share.min.record.lock.duration.ms", "15000", Int, 1_000, 30_000),
    between("group.share.max.record.lock.duration.ms", "60000", Int, 30_000, 3_600_000),
    between("group.share.delivery.count.limit", "5", Int, 2, 10),
    between("group.share.min.delivery.count.limit", "2", Int, 2, 5),
    between("group.share.max.delivery.count.limit", "10", Int, 5, 25),
    between("group.share.partition.max.record.locks", "2000", Int, 100, 10_000),
    between("group.share.min.partition.max.record.locks", "100", Int, 100, 2_000),
    between("group.share.max.partition.max.record.locks", "4000", Int, 2_000, 10_000),
    at_least("group.share.max.share.sessions", "2000", Int, 1),
    // Authorization (`security::authz`, `config::authz`), Kafka's names: an empty class name is no
    // authorizer (everything allowed, the ACL APIs answer SECURITY_DISABLED); Kafka's two ACL
    // authorizer class names select onelog's built-in one. `super.users` is `;`-separated.
    def("authorizer.class.name", "", STRING),
    def("super.users", "", STRING),
    def("allow.everyone.if.no.acl.found", "false", Boolean),
];

/// Broker-only configs that may change at run time (IncrementalAlterConfigs / AlterConfigs on
/// a broker id or the cluster default), read per request through `BrokerConfig::dynamic_int`.
pub const DYNAMIC_BROKER_CONFIGS: &[BrokerConfigDef] = &[
    // Free bytes the data directory's file system must keep: below it the leader refuses
    // Produce with KAFKA_STORAGE_ERROR (see `storage::free_space`). onelog's own name (Kafka
    // has no such guard; it takes the log dir offline on the first failed write). 1 GiB keeps
    // room for the Raft log's two preallocated 64 MiB segments, checkpoints and retention; 0
    // turns the guard off.
    at_least("log.dir.free.bytes.min", "1073741824", Long, 0),
];

/// Why `value` is not a valid `def`: its type, or for an integer its range.
pub fn value_problem(def: &BrokerConfigDef, value: &str) -> Option<String> {
    match def.config_type {
        Boolean if value != "true" && value != "false" => Some("must be true or false".into()),
        Int | Long => match value.trim().parse::<i64>() {
            Err(_) => Some(format!("must be an integer in {}", range_text(def))),
            Ok(v) if v < def.min || v > def.max => Some(format!("must be in {}", range_text(def))),
            Ok(_) => None,
        },
        _ => None,
    }
}

/// `[min, …]`, `[min, max]` as Kafka prints a range.
fn range_text(def: &BrokerConfigDef) -> String {
    let bound = |v: i64| match v {
        v if v == i64::MAX || v == i64::MIN => "…".to_string(),
        v => v.to_string(),
    };
    format!("[{}, {}]", bound(def.min), bound(def.max))
}

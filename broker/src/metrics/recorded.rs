//! Counters and histograms updated where their event happens (see `metrics`).

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

/// The process's one set of recorded metrics.
pub static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiLabels {
    /// Kafka's name of the API (`Produce`, `Fetch`, `EndTxn`, ...).
    pub api: &'static str,
    pub version: i16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub api: &'static str,
    /// Kafka's numeric error code and its name as clients print it (`6`,
    /// `NOT_LEADER_OR_FOLLOWER`; `kafka_compat::error_code::name`).
    pub error_code: i16,
    pub error: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerLabels {
    pub listener: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `committed` or `aborted`.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AppendLabels {
    /// `empty` (a heartbeat, or only a new commit index) or `entries`.
    pub carrying: &'static str,
}

/// The one listener's name in every `listener` label (the security issue adds more).
pub const PLAINTEXT: &str = "PLAINTEXT";

fn latency_buckets() -> Histogram {
    // 50 µs to about 26 s, doubling: a loopback produce is ~0.1 ms, a long-poll Fetch seconds.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 20))
}

fn count_buckets() -> Histogram {
    // 1 to 4096 proposals per entry, doubling.
    Histogram::new(exponential_buckets(1.0, 2.0, 13))
}

fn size_buckets() -> Histogram {
    // 64 B to 64 MiB, by fours.
    Histogram::new(exponential_buckets(64.0, 4.0, 11))
}

#[derive(Debug)]
pub struct Metrics {
    pub requests: Family<ApiLabels, Counter>,
    pub request_duration: Family<ApiLabels, Histogram, fn() -> Histogram>,
    pub request_errors: Family<ErrorLabels, Counter>,
    pub request_bytes: Family<ListenerLabels, Counter>,
    pub response_bytes: Family<ListenerLabels, Counter>,
    pub connections_accepted: Family<ListenerLabels, Counter>,
    pub entry_proposals: Histogram,
    pub entry_bytes: Histogram,
    pub entries_in_flight: Histogram,
    pub commit_duration: Histogram,
    pub log_fsync_duration: Histogram,
    pub transactions: Family<OutcomeLabels, Counter>,
    pub append_entries_received: Family<AppendLabels, Counter>,
    /// `append_entries_received`'s two series, looked up once: a family lookup takes a lock,
    /// and a follower counts every AppendEntries.
    append_entries_empty: Counter,
    append_entries_with_entries: Counter,
}

impl Metrics {
    fn new() -> Self {
        Metrics {
            requests: Family::default(),
            request_duration: Family::new_with_constructor(latency_buckets),
            request_errors: Family::default(),
            request_bytes: Family::default(),
            response_bytes: Family::default(),
            connections_accepted: Family::default(),
            entry_proposals: count_buckets(),
            entry_bytes: size_buckets(),
            entries_in_flight: count_buckets(),
            commit_duration: latency_buckets(),
            log_fsync_duration: latency_buckets(),
            transactions: Family::default(),
            append_entries_received: Family::default(),
            append_entries_empty: Counter::default(),
            append_entries_with_entries: Counter::default(),
        }
        .with_append_series()
    }

    /// Binds the two `append_entries_received` series to the counters `append_entries_received()`
    /// increments.
    fn with_append_series(mut self) -> Self {
        let series =
            |carrying| self.append_entries_received.get_or_create(&AppendLabels { carrying }).clone();
        (self.append_entries_empty, self.append_entries_with_entries) = (series("empty"), series("entries"));
        self
    }

    /// Adds every metric to `registry` (clones share their values).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "kafka_requests",
            "Kafka requests answered, by API and version",
            self.requests.clone(),
        );
        registry.register_with_unit(
            "kafka_request_duration",
            "Time from a Kafka request read to its response built, by API and version",
            Unit::Seconds,
            self.request_duration.clone(),
        );
        registry.register(
            "kafka_request_errors",
            "Error codes in Kafka responses (top level and per partition), by API and code",
            self.request_errors.clone(),
        );
        registry.register_with_unit(
            "kafka_request",
            "Bytes of Kafka requests read, by listener",
            Unit::Bytes,
            self.request_bytes.clone(),
        );
        registry.register_with_unit(
            "kafka_response",
            "Bytes of Kafka responses written, by listener",
            Unit::Bytes,
            self.response_bytes.clone(),
        );
        registry.register(
            "kafka_connections_accepted",
            "Client connections accepted, by listener",
            self.connections_accepted.clone(),
        );
        self.register_raft(registry);
        registry.register(
            "transactions",
            "Transactions ended at apply on this node (client decisions, timeouts, fencing, admin aborts)",
            self.transactions.clone(),
        );
    }

    /// The Raft metrics: entries proposed, commits, fsyncs, AppendEntries received.
    fn register_raft(&self, registry: &mut Registry) {
        registry.register(
            "raft_entry_proposals",
            "Proposals (requests' writes) aggregated into each Raft entry this node proposed",
            self.entry_proposals.clone(),
        );
        registry.register_with_unit(
            "raft_entry",
            "Encoded size of each Raft entry this node proposed",
            Unit::Bytes,
            self.entry_bytes.clone(),
        );
        registry.register(
            "raft_entries_in_flight",
            "Entries this leader had proposed and not yet seen applied, each one included, when it proposed one",
            self.entries_in_flight.clone(),
        );
        registry.register_with_unit(
            "raft_commit_duration",
            "Time from proposing a Raft entry to its commit and apply on this leader",
            Unit::Seconds,
            self.commit_duration.clone(),
        );
        registry.register_with_unit(
            "raft_log_fsync_duration",
            "fdatasync of this node's Raft log segments; its count is the fsyncs done",
            Unit::Seconds,
            self.log_fsync_duration.clone(),
        );
        registry.register(
            "raft_append_entries_received",
            "AppendEntries requests this node received as a follower, empty (heartbeats and commit notices) or carrying entries",
            self.append_entries_received.clone(),
        );
    }

    /// An AppendEntries arrived from the leader, with `entries` entries.
    pub fn append_entries_received(&self, entries: usize) {
        let counter =
            if entries == 0 { &self.append_entries_empty } else { &self.append_entries_with_entries };
        counter.inc();
    }

    /// One Kafka request answered: its latency and the error codes its response carries.
    pub fn request_answered(&self, api: &'static str, version: i16, took: Duration, errors: &[i16]) {
        let labels = ApiLabels { api, version };
        self.requests.get_or_create(&labels).inc();
        self.request_duration.get_or_create(&labels).observe(took.as_secs_f64());
        for &code in errors {
            let error = error_name(code);
            self.request_errors.get_or_create(&ErrorLabels { api, error_code: code, error }).inc();
        }
    }

    pub fn transaction_ended(&self, committed: bool) {
        let outcome = if committed { "committed" } else { "aborted" };
        self.transactions.get_or_create(&OutcomeLabels { outcome }).inc();
    }
}

/// Kafka's name of an API, as a label: built once for every key kafka-protocol knows, so that
/// counting a request allocates nothing.
pub fn api_name(key: ApiKey) -> &'static str {
    static NAMES: LazyLock<HashMap<i16, &'static str>> = LazyLock::new(|| {
        (0..=i16::from(u8::MAX))
            .filter_map(|k| ApiKey::try_from(k).ok())
            .map(|key| (key as i16, &*Box::leak(format!("{key:?}").into_boxed_str())))
            .collect()
    });
    NAMES.get(&(key as i16)).copied().unwrap_or("Unknown")
}

/// Kafka's name of an error code, as a label (`NOT_LEADER_OR_FOLLOWER`, the name clients and
/// `onelog admin` print): built once for every code up to `ERROR_CODE_NAMED_MAX`, so that
/// counting an error allocates nothing; a code beyond it is `UNKNOWN_ERROR_CODE`.
pub fn error_name(code: i16) -> &'static str {
    /// Above every code Kafka 4.x defines (133 in 4.1); a code past it is still counted by
    /// number.
    const ERROR_CODE_NAMED_MAX: i16 = 255;
    static NAMES: LazyLock<HashMap<i16, &'static str>> = LazyLock::new(|| {
        (-1..=ERROR_CODE_NAMED_MAX)
            .map(|code| (code, &*Box::leak(kafka_compat::error_code::name(code).into_boxed_str())))
            .collect()
    });
    NAMES.get(&code).copied().unwrap_or("UNKNOWN_ERROR_CODE")
}

/// raft-store's fsync observer (`raft_store::set_fsync_observer`).
pub fn observe_fsync(took: Duration) {
    METRICS.log_fsync_duration.observe(took.as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::error_name;

    /// The `error` label is the name clients print (it was `NotLeaderOrFollower`, the Rust
    /// enum's Debug form, before).
    #[test]
    fn error_label_is_the_name_clients_print() {
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(i16::MAX), "UNKNOWN_ERROR_CODE");
    }
}

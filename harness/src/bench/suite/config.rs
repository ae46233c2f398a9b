//! The settings of the Rust port of the transaction benchmarks, all from the environment with
//! the Java suite's names and meanings (harness/java `BenchConfig`):
//!
//! - `KAFKA_CONNECTION` bootstrap servers; `WARMUP` unrecorded iterations; `TXES` recorded
//!   iterations (all three required); `MEASURES` file for the sorted latencies (else stdout);
//! - `PRODUCERS` concurrent workers (worker i uses `TX_ID-<i>` and `GROUP-<i>`);
//!   `PAYLOAD_BYTES` record value size (else the iteration number as text); `SUMMARY=json`,
//!   `SUMMARY_FILE` for the one-line JSON summary (implied by the previous two and by
//!   `SUMMARY_FILE`); `TX_ID`, `GROUP` (defaults per bench); `TOPICS`, the two topics written
//!   (default `topic1,topic2`, the names `CreateTopics` reads too: a onelog addition, so
//!   several bench processes can each use topics of their own Raft group);
//! - `CLIENT_CONFIG` extra client properties "k=v,k=v", applied last — librdkafka's names
//!   here, which agree with Java's for the usual ones (e.g. `enable.idempotence=false`).
//!
//! Also the client configurations and record values all four benches share (Java `Clients`).

use anyhow::{bail, Context, Result};
use rdkafka::ClientConfig;

use crate::kafka::client_config;

const TOPICS_DEFAULT: &str = "topic1,topic2";
/// Room for the batch and request headers around one record of `PAYLOAD_BYTES`.
const REQUEST_OVERHEAD_BYTES: usize = 64 * 1024;
/// kafka-clients' default `max.request.size` (librdkafka's `message.max.bytes` is 1,000,000).
const REQUEST_SIZE_DEFAULT_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone)]
pub struct BenchConfig {
    pub bootstrap: String,
    pub warmup: u64,
    pub txes: u64,
    pub measures: Option<String>,
    pub producers: usize,
    /// PRODUCERS was set: ids and groups get a `-<i>` suffix.
    pub concurrent: bool,
    /// Record value size; `None` for the original's short textual value.
    pub payload_bytes: Option<usize>,
    pub summary: bool,
    pub summary_file: Option<String>,
    pub tx_id: String,
    pub group: String,
    /// The benches' topic1 and topic2 (`TOPICS`).
    pub topic1: String,
    pub topic2: String,
    extra: Vec<(String, String)>,
}

impl BenchConfig {
    pub fn from_env(default_tx_id: &str, default_group: &str) -> Result<Self> {
        let producers_env = var("PRODUCERS");
        let payload_env = var("PAYLOAD_BYTES");
        let summary_file = var("SUMMARY_FILE");
        let topics = var("TOPICS").unwrap_or_else(|| TOPICS_DEFAULT.to_owned());
        let Some((topic1, topic2)) = topics.split_once(',') else {
            bail!("TOPICS={topics}: need two topics, comma-separated");
        };
        let cfg = Self {
            bootstrap: required("KAFKA_CONNECTION")?,
            warmup: parse("WARMUP", &required("WARMUP")?)?,
            txes: parse("TXES", &required("TXES")?)?,
            measures: var("MEASURES"),
            concurrent: producers_env.is_some(),
            producers: producers_env.as_deref().map_or(Ok(1), |p| parse("PRODUCERS", p))?,
            payload_bytes: payload_env.as_deref().map(|p| parse("PAYLOAD_BYTES", p)).transpose()?,
            summary: var("SUMMARY").as_deref() == Some("json")
                || producers_env.is_some()
                || payload_env.is_some()
                || summary_file.is_some(),
            summary_file,
            tx_id: var("TX_ID").unwrap_or_else(|| default_tx_id.to_owned()),
            group: var("GROUP").unwrap_or_else(|| default_group.to_owned()),
            topic1: topic1.trim().to_owned(),
            topic2: topic2.split(',').next().unwrap_or_default().trim().to_owned(),
            extra: pairs("CLIENT_CONFIG", &var("CLIENT_CONFIG").unwrap_or_default())?,
        };
        if cfg.txes == 0 || cfg.producers == 0 {
            bail!("need WARMUP >= 0, TXES > 0, PRODUCERS > 0, PAYLOAD_BYTES >= 0");
        }
        Ok(cfg)
    }

    /// Iterations each worker runs, warm-up included.
    pub fn iterations(&self) -> u64 {
        self.warmup + self.txes
    }

    /// Worker i's transactional id: TX_ID itself unless PRODUCERS is set.
    pub fn tx_id(&self, worker: usize) -> String {
        self.suffixed(&self.tx_id, worker)
    }

    /// Worker i's consumer group: GROUP itself unless PRODUCERS is set.
    pub fn group(&self, worker: usize) -> String {
        self.suffixed(&self.group, worker)
    }

    fn suffixed(&self, name: &str, worker: usize) -> String {
        if self.concurrent {
            format!("{name}-{worker}")
        } else {
            name.to_owned()
        }
    }

    /// acks=all and linger.ms=0 as in the Java suite, and idempotence on: kafka-clients 3.0 and
    /// later (the Java benches' default build) enable it by default, librdkafka does not.
    /// `transactional_id` may be `None`. CLIENT_CONFIG comes last.
    pub fn producer(&self, transactional_id: Option<&str>) -> ClientConfig {
        let request_bytes =
            REQUEST_SIZE_DEFAULT_BYTES.max(self.payload_bytes.unwrap_or(0) + REQUEST_OVERHEAD_BYTES);
        let mut config = client_config(&self.bootstrap);
        config
            .set("acks", "all")
            .set("linger.ms", "0")
            .set("enable.idempotence", "true")
            .set("message.max.bytes", request_bytes.to_string());
        if let Some(id) = transactional_id {
            config.set("transactional.id", id);
        }
        self.with_extra(config)
    }

    /// A consumer of `group` that never commits by itself and, like Java's default, reads
    /// uncommitted records (librdkafka defaults to read_committed); `group` may be `None`.
    pub fn consumer(&self, group: Option<&str>) -> ClientConfig {
        let mut config = client_config(&self.bootstrap);
        if let Some(group) = group {
            config.set("group.id", group);
        }
        config
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("isolation.level", "read_uncommitted");
        self.with_extra(config)
    }

    fn with_extra(&self, mut config: ClientConfig) -> ClientConfig {
        for (key, value) in &self.extra {
            config.set(key, value);
        }
        config
    }

    /// The fixed value of PAYLOAD_BYTES bytes, or `None` when values are textual.
    pub fn fixed_payload(&self) -> Option<Vec<u8>> {
        self.payload_bytes.map(|n| vec![b'x'; n])
    }
}

/// Iteration `i`'s value: the fixed payload, else `i` as text.
pub fn value(fixed: Option<&[u8]>, i: u64) -> Vec<u8> {
    fixed.map_or_else(|| i.to_string().into_bytes(), <[u8]>::to_vec)
}

/// A set, non-empty environment variable.
pub fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn required(name: &str) -> Result<String> {
    var(name).with_context(|| format!("environment variable {name} is required"))
}

/// `value`, the content of environment variable `name`, as a number.
pub fn parse<T: std::str::FromStr>(name: &str, value: &str) -> Result<T>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    value.trim().parse().with_context(|| format!("{name}: not a valid number: {value}"))
}

/// "k=v,k=v" (blank entries skipped) from environment variable `name`.
pub fn pairs(name: &str, text: &str) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            bail!("{name}: expected k=v, got {pair}");
        };
        out.push((key.trim().to_owned(), value.trim().to_owned()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_and_values() {
        let parsed = pairs("X", " a=1, ,b = c=d").unwrap();
        assert_eq!(parsed, [("a".into(), "1".into()), ("b".into(), "c=d".into())]);
        assert!(pairs("X", "nokey").is_err());
        assert_eq!(value(None, 42), b"42");
        assert_eq!(value(Some(b"xx"), 42), b"xx");
    }
}

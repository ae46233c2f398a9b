//! rdkafka (librdkafka) helpers shared by the tests and the benchmark: client configs, topic
//! creation through the AdminClient, and reading partitions back from the beginning.
//!
//! `read_partitions` uses `assign()` with explicit offsets and never commits, so what a test
//! reads back is independent of consumer groups; librdkafka still wants a `group.id` before it
//! accepts `assign()` (else `_UNKNOWN_GROUP`). Group tests build their members from
//! [`group_member_config`].

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, Timestamp, TopicPartitionList};

/// Timeout for one metadata or watermark request.
pub const CLIENT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A client config pointed at `bootstrap`.
pub fn client_config(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "onelog-harness")
        .set("broker.address.family", "v4");
    config
}

/// Creates topics with replication factor 1; fails if any creation fails.
pub async fn create_topics(bootstrap: &str, topics: &[(&str, i32)]) -> Result<()> {
    create_topics_with(bootstrap, topics, &[]).await
}

/// Creates topics with replication factor 1, each with `configs`; fails if any creation fails.
pub async fn create_topics_with<'a>(
    bootstrap: &str,
    topics: &[(&'a str, i32)],
    configs: &[(&'a str, &'a str)],
) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create()?;
    let new_topics: Vec<NewTopic<'a>> = topics
        .iter()
        .map(|(name, partitions)| {
            let topic = NewTopic::new(name, *partitions, TopicReplication::Fixed(1));
            configs.iter().fold(topic, |t, (k, v)| t.set(k, v))
        })
        .collect();
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let started = Instant::now();
    let results = admin.create_topics(&new_topics, &options).await.with_context(|| {
        format!("AdminClient create_topics via {bootstrap}, after {:.1} s", started.elapsed().as_secs_f64())
    })?;
    for result in results {
        if let Err((name, code)) = result {
            bail!("AdminClient create_topics {name}: {code:?}");
        }
    }
    Ok(())
}

/// A member of consumer group `group` that commits only what it processed: offsets are stored
/// by the test after processing (`enable.auto.offset.store=false`) and auto-committed every
/// `commit_interval` (and on revocation and close), reading from the earliest offset.
pub fn group_member_config(
    bootstrap: &str,
    group: &str,
    client_id: &str,
    commit_interval: Duration,
    session_timeout: Duration,
) -> ClientConfig {
    let mut config = client_config(bootstrap);
    config
        .set("group.id", group)
        .set("client.id", client_id)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "true")
        .set("auto.commit.interval.ms", commit_interval.as_millis().to_string())
        .set("enable.auto.offset.store", "false")
        .set("session.timeout.ms", session_timeout.as_millis().to_string())
        .set("heartbeat.interval.ms", "1000");
    config
}

/// Produces each number of `values` (as key and value, in decimal) to `topic` with an
/// idempotent producer, at most 1,000 in flight; fails on any delivery error.
pub async fn produce_numbered(bootstrap: &str, topic: &str, values: Range<usize>) -> Result<()> {
    let producer: FutureProducer =
        client_config(bootstrap).set("enable.idempotence", "true").set("linger.ms", "5").create()?;
    let mut pending = Vec::new();
    for v in values {
        let value = v.to_string();
        let record = FutureRecord::to(topic).key(&value).payload(&value);
        pending.push(producer.send_result(record).map_err(|(e, _)| e)?);
        if pending.len() == 1_000 {
            for f in pending.drain(..) {
                f.await?.map_err(|(e, _)| e)?;
            }
        }
    }
    for f in pending {
        f.await?.map_err(|(e, _)| e)?;
    }
    Ok(())
}

/// One consumed record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumedRecord {
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Vec<u8>)>,
    pub timestamp: Timestamp,
}

/// Records per (topic, partition).
pub type PartitionRecords = BTreeMap<(String, i32), Vec<ConsumedRecord>>;

/// Reads every listed partition from its start up to the high watermark it has when the read
/// begins, with CRC checks on. Fails on any consumer error but a lost broker connection, or
/// after `timeout`.
pub fn read_partitions(
    bootstrap: &str,
    partitions: &[(String, i32)],
    timeout: Duration,
) -> Result<PartitionRecords> {
    let consumer: BaseConsumer = client_config(bootstrap)
        .set("group.id", "onelog-harness-reader")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("check.crcs", "true")
        .set("enable.partition.eof", "false")
        .create()
        .context("creating consumer")?;
    let mut targets = BTreeMap::new();
    let mut assignment = TopicPartitionList::new();
    for (topic, partition) in partitions {
        let high = high_watermark(&consumer, topic, *partition)?;
        targets.insert((topic.clone(), *partition), high);
        assignment.add_partition_offset(topic, *partition, Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;
    poll_until(&consumer, &targets, timeout)
}

/// The partition's high watermark, retrying the errors a Kafka client retries (a leader that
/// moved, or is still being elected after a restart) for up to `CLIENT_REQUEST_TIMEOUT`.
/// librdkafka reports a partition whose last Metadata named no leader as an unknown
/// partition, without asking again; right after every node restarted, that happens (the
/// brokers answer LEADER_NOT_AVAILABLE until a leader is agreed, as Kafka's do during an
/// election), so it is retried too.
pub(crate) fn high_watermark(consumer: &BaseConsumer, topic: &str, partition: i32) -> Result<i64> {
    use rdkafka::error::{KafkaError, RDKafkaErrorCode};
    let deadline = Instant::now() + CLIENT_REQUEST_TIMEOUT;
    loop {
        match consumer.fetch_watermarks(topic, partition, CLIENT_REQUEST_TIMEOUT) {
            Ok((_, high)) => return Ok(high),
            Err(KafkaError::MetadataFetch(
                RDKafkaErrorCode::NotLeaderForPartition
                | RDKafkaErrorCode::LeaderNotAvailable
                | RDKafkaErrorCode::UnknownPartition,
            )) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(e).with_context(|| format!("watermarks of {topic}/{partition}")),
        }
    }
}

/// A broker connection that failed: librdkafka reports it through `poll` as an error, but
/// reconnects (or uses another broker) by itself, as Java's consumer does without telling.
/// A node killed while a reader starts made `follower_kill_9` fail on it in CI.
pub fn is_connection_lost(e: &rdkafka::error::KafkaError) -> bool {
    use rdkafka::error::{KafkaError, RDKafkaErrorCode};
    matches!(
        e,
        KafkaError::MessageConsumption(
            RDKafkaErrorCode::BrokerTransportFailure | RDKafkaErrorCode::AllBrokersDown
        )
    )
}

fn poll_until(
    consumer: &BaseConsumer,
    targets: &BTreeMap<(String, i32), i64>,
    timeout: Duration,
) -> Result<PartitionRecords> {
    let mut out: PartitionRecords = targets.keys().map(|k| (k.clone(), Vec::new())).collect();
    let done = |out: &PartitionRecords| {
        targets.iter().all(|(k, &high)| out[k].last().map_or(high == 0, |r| r.offset + 1 >= high))
    };
    let deadline = Instant::now() + timeout;
    while !done(&out) {
        if Instant::now() > deadline {
            let progress: Vec<String> = targets
                .iter()
                .map(|(k, high)| format!("{}/{}: {} of {high}", k.0, k.1, out[k].len()))
                .collect();
            bail!("consumer timed out after {timeout:?}: {}", progress.join(", "));
        }
        let Some(message) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        if message.as_ref().is_err_and(is_connection_lost) {
            continue;
        }
        let message = message.map_err(|e| anyhow::anyhow!("consumer error: {e:?}"))?;
        let key = (message.topic().to_owned(), message.partition());
        let records = out.get_mut(&key).with_context(|| format!("message from unassigned {key:?}"))?;
        records.push(to_record(&message));
    }
    Ok(out)
}

fn to_record<M: Message>(message: &M) -> ConsumedRecord {
    let headers = message
        .headers()
        .map(|hs| {
            hs.iter().map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec).unwrap_or_default())).collect()
        })
        .unwrap_or_default();
    ConsumedRecord {
        offset: message.offset(),
        key: message.key().map(<[u8]>::to_vec),
        value: message.payload().map(<[u8]>::to_vec),
        headers,
        timestamp: message.timestamp(),
    }
}

//! Reads what a running cluster holds of an upgrade fixture into a [`ClusterState`]: the same
//! function reads the old release's cluster when the fixture is made (into its manifest) and
//! the current build's when it loads the fixture (compared with the manifest).
//!
//! Everything goes through the PLAINTEXT listener of the leader (the fixture's super user),
//! with typed requests (`RawClient`) where the exact answer matters, and a librdkafka consumer
//! for what a read_committed application sees. Nothing here writes.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use bytes::Bytes;
use kafka_compat::error_code;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    DescribeConfigsRequest, DescribeProducersRequest, FetchRequest, ListOffsetsRequest, MetadataRequest,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder, RecordSet};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::manifest::{ClusterState, PartitionState, TopicState, FIXTURE_PREFIX};
use super::observe_admin;
use crate::kafka::client_config;
use crate::raw_ops::{
    fetch_request, fetch_results, topic_name, FETCH_PARTITION_BYTES_MAX, FETCH_VERSION_CAP,
};
use crate::{Cluster, RawClient};

/// Names `observe` cannot find by listing: topics the fixture deleted, and transactional ids
/// (no API lists every id with its state on every release).
#[derive(Debug, Clone, Default)]
pub struct Names {
    pub deleted_topics: Vec<String>,
    pub transactional_ids: Vec<String>,
}

/// Where `observe` asks: the leader (every request but a broker's configs), each node (its
/// own broker configs), and every node for librdkafka.
#[derive(Debug, Clone)]
pub struct Target {
    pub leader: SocketAddr,
    pub nodes: BTreeMap<u64, SocketAddr>,
    pub bootstrap: String,
}

impl Target {
    /// The PLAINTEXT listeners of `cluster`, once its nodes agree on a leader that serves
    /// (has applied an entry of its own term: before, its coordinators answer NOT_COORDINATOR).
    pub fn of(cluster: &mut Cluster) -> Result<Target> {
        let deadline = Instant::now() + SERVING_WAIT;
        let leader = loop {
            let leader = cluster.leader()?;
            if cluster.status(leader).is_ok_and(|s| s.serving) {
                break leader;
            }
            if Instant::now() > deadline {
                bail!("leader {leader} not serving after {SERVING_WAIT:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let leader = cluster.kafka_addr(leader);
        let nodes = cluster.ids().into_iter().map(|id| (id, cluster.kafka_addr(id))).collect();
        Ok(Target { leader, nodes, bootstrap: cluster.bootstrap() })
    }
}

/// How long [`Target::of`] waits for a serving leader.
const SERVING_WAIT: Duration = Duration::from_secs(30);
/// How long the read_committed read of every partition may take.
const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// ListOffsets' timestamps.
const EARLIEST: i64 = -2;
const LATEST: i64 = -1;
/// DescribeConfigs' resource type of a topic, and the config source of a topic override.
pub(super) const RESOURCE_TOPIC: i8 = 2;
const SOURCE_DYNAMIC_TOPIC: i8 = 1;

/// Everything the fixture's names hold on the cluster `target` names.
pub async fn observe(target: &Target, names: &Names) -> Result<ClusterState> {
    let mut client = RawClient::connect_negotiated(target.leader).await?;
    let mut state = ClusterState::default();
    for (topic, partitions) in fixture_topics(&mut client).await? {
        let mut t = TopicState { configs: topic_configs(&mut client, &topic).await?, ..Default::default() };
        for p in 0..partitions {
            t.partitions.insert(p, partition(&mut client, &topic, p).await?);
        }
        state.topics.insert(topic, t);
    }
    let partitions: Vec<(String, i32, i64, i64)> = state
        .topics
        .iter()
        .flat_map(|(t, s)| {
            s.partitions.iter().map(|(p, ps)| (t.clone(), *p, ps.log_start_offset, ps.last_stable_offset))
        })
        .collect();
    for ((topic, p), lines) in read_committed(&target.bootstrap, &partitions)? {
        state
            .topics
            .get_mut(&topic)
            .and_then(|t| t.partitions.get_mut(&p))
            .context("read an unknown partition")?
            .read_committed = lines;
    }
    for topic in &names.deleted_topics {
        state.deleted_topics.insert(topic.clone(), error_code::name(topic_error(&mut client, topic).await?));
    }
    observe_admin::groups(&mut client, &mut state).await?;
    observe_admin::transactions(&mut client, &names.transactional_ids, &mut state).await?;
    observe_admin::security(&mut client, &mut state).await?;
    observe_admin::broker_configs(&target.nodes, &mut state).await?;
    Ok(state)
}

/// `fx-` topics Metadata lists, with their partition counts.
async fn fixture_topics(client: &mut RawClient) -> Result<BTreeMap<String, i32>> {
    let version = client.version::<MetadataRequest>(12)?;
    let response = client.request(version, &MetadataRequest::default().with_topics(None)).await?;
    let mut out = BTreeMap::new();
    for t in response.topics {
        let name = t.name.map(|n| n.0.to_string()).unwrap_or_default();
        if name.starts_with(FIXTURE_PREFIX) {
            ensure!(t.error_code == 0, "Metadata of {name}: {}", error_code::name(t.error_code));
            out.insert(name, t.partitions.len() as i32);
        }
    }
    Ok(out)
}

/// Metadata's error code for one topic by name (a deleted one: UNKNOWN_TOPIC_OR_PARTITION).
async fn topic_error(client: &mut RawClient, topic: &str) -> Result<i16> {
    let version = client.version::<MetadataRequest>(12)?;
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(topic_name(topic)))]))
        .with_allow_auto_topic_creation(false);
    let response = client.request(version, &request).await?;
    Ok(response.topics.first().map_or(0, |t| t.error_code))
}

/// A topic's dynamic configs, "key=value", sorted.
async fn topic_configs(client: &mut RawClient, topic: &str) -> Result<Vec<String>> {
    let resource = DescribeConfigsResource::default()
        .with_resource_type(RESOURCE_TOPIC)
        .with_resource_name(StrBytes::from_string(topic.to_string()));
    let configs = describe_configs(client, resource).await?;
    Ok(configs
        .into_iter()
        .filter(|(_, _, source)| *source == SOURCE_DYNAMIC_TOPIC)
        .map(|(k, v, _)| format!("{k}={v}"))
        .collect())
}

/// DescribeConfigs of one resource: (name, value, source), sorted by name.
pub(super) async fn describe_configs(
    client: &mut RawClient,
    resource: DescribeConfigsResource,
) -> Result<Vec<(String, String, i8)>> {
    let version = client.version::<DescribeConfigsRequest>(4)?;
    let name = resource.resource_name.to_string();
    // kafka-protocol's default is Some([]): no keys at all.
    let resource = resource.with_configuration_keys(None);
    let response =
        client.request(version, &DescribeConfigsRequest::default().with_resources(vec![resource])).await?;
    let result = response.results.into_iter().next().context("DescribeConfigs answered no resource")?;
    ensure!(result.error_code == 0, "DescribeConfigs {name:?}: {}", error_code::name(result.error_code));
    let mut out: Vec<(String, String, i8)> = result
        .configs
        .into_iter()
        .map(|c| (c.name.to_string(), c.value.map(|v| v.to_string()).unwrap_or_default(), c.config_source))
        .collect();
    out.sort();
    Ok(out)
}

/// One partition's offsets, batches, records and producers.
async fn partition(client: &mut RawClient, topic: &str, p: i32) -> Result<PartitionState> {
    let log_start_offset = list_offset(client, topic, p, EARLIEST, 0).await?;
    let high_watermark = list_offset(client, topic, p, LATEST, 0).await?;
    let last_stable_offset = list_offset(client, topic, p, LATEST, 1).await?;
    let mut state =
        PartitionState { log_start_offset, high_watermark, last_stable_offset, ..Default::default() };
    for set in fetch_from(client, topic, p, log_start_offset, high_watermark).await? {
        state.batches.push(batch_line(&set));
        // A batch may begin below the log start (DeleteRecords moves it inside a batch):
        // those records are gone for every reader.
        for r in set.records.iter().filter(|r| !r.control && r.offset >= log_start_offset) {
            state.records.push(format!("{} {}", r.offset, text(r.value.as_ref())));
        }
    }
    state.producers = producers(client, topic, p).await?;
    Ok(state)
}

/// ListOffsets for one partition at `timestamp` under `isolation` (0: read_uncommitted).
async fn list_offset(
    client: &mut RawClient,
    topic: &str,
    p: i32,
    timestamp: i64,
    isolation: i8,
) -> Result<i64> {
    let version = client.version::<ListOffsetsRequest>(7)?;
    let request = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_isolation_level(isolation)
        .with_topics(vec![ListOffsetsTopic::default().with_name(topic_name(topic)).with_partitions(vec![
            ListOffsetsPartition::default().with_partition_index(p).with_timestamp(timestamp),
        ])]);
    let response = client.request(version, &request).await?;
    let answer = response.topics.iter().flat_map(|t| &t.partitions).find(|x| x.partition_index == p);
    let answer = answer.with_context(|| format!("ListOffsets lacks {topic}/{p}"))?;
    ensure!(
        answer.error_code == 0,
        "ListOffsets {topic}/{p} at {timestamp}: {}",
        error_code::name(answer.error_code)
    );
    Ok(answer.offset)
}

/// Every batch of `topic`/`p` from `from` to `high` (read_uncommitted), as stored.
async fn fetch_from(
    client: &mut RawClient,
    topic: &str,
    p: i32,
    from: i64,
    high: i64,
) -> Result<Vec<RecordSet>> {
    let version = client.version::<FetchRequest>(FETCH_VERSION_CAP)?;
    let (mut sets, mut offset) = (Vec::new(), from);
    while offset < high {
        let request = fetch_request(&[(topic, p, offset)], FETCH_PARTITION_BYTES_MAX);
        let response = client.request(version, &request).await?;
        let data = fetch_results(&response).into_iter().find(|r| r.topic == topic && r.partition == p);
        let data = data.with_context(|| format!("Fetch lacks {topic}/{p}"))?;
        ensure!(data.error_code == 0, "Fetch {topic}/{p} @{offset}: {}", error_code::name(data.error_code));
        let mut bytes: Bytes = data.records;
        let fetched = RecordBatchDecoder::decode_all(&mut bytes)
            .with_context(|| format!("decoding {topic}/{p} @{offset}"))?;
        let before = offset;
        for set in fetched {
            let last = set.records.last().map_or(offset - 1, |r| r.offset);
            if last >= offset {
                offset = last + 1;
                sets.push(set);
            }
        }
        if offset == before {
            bail!("{topic}/{p}: nothing fetched at {offset} below the high watermark {high}");
        }
    }
    Ok(sets)
}

/// "base..last N codec [transactional] [control] pid P epoch E seq S leader_epoch L".
fn batch_line(set: &RecordSet) -> String {
    let (Some(first), Some(last)) = (set.records.first(), set.records.last()) else {
        return "empty batch".to_string();
    };
    let codec = match set.compression {
        Compression::None => "none",
        Compression::Gzip => "gzip",
        Compression::Snappy => "snappy",
        Compression::Lz4 => "lz4",
        Compression::Zstd => "zstd",
    };
    let flags = match (first.transactional, first.control) {
        (true, true) => " transactional control",
        (true, false) => " transactional",
        (false, true) => " control",
        (false, false) => "",
    };
    format!(
        "{}..{} {} {codec}{flags} pid {} epoch {} seq {} leader_epoch {}",
        first.offset,
        last.offset,
        set.records.len(),
        first.producer_id,
        first.producer_epoch,
        first.sequence,
        first.partition_leader_epoch
    )
}

fn text(value: Option<&Bytes>) -> String {
    String::from_utf8_lossy(value.map(|v| v.as_ref()).unwrap_or_default()).into_owned()
}

/// DescribeProducers of one partition: "pid P epoch E last_sequence S last_timestamp T
/// txn_start O", sorted.
async fn producers(client: &mut RawClient, topic: &str, p: i32) -> Result<Vec<String>> {
    let version = client.version::<DescribeProducersRequest>(0)?;
    let request = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(topic_name(topic))
        .with_partition_indexes(vec![p])]);
    let response = client.request(version, &request).await?;
    let answer = response.topics.iter().flat_map(|t| &t.partitions).find(|x| x.partition_index == p);
    let answer = answer.with_context(|| format!("DescribeProducers lacks {topic}/{p}"))?;
    ensure!(answer.error_code == 0, "DescribeProducers {topic}/{p}: {}", error_code::name(answer.error_code));
    let mut out: Vec<String> = answer
        .active_producers
        .iter()
        .map(|s| {
            format!(
                "pid {} epoch {} last_sequence {} last_timestamp {} txn_start {}",
                s.producer_id.0,
                s.producer_epoch,
                s.last_sequence,
                s.last_timestamp,
                s.current_txn_start_offset
            )
        })
        .collect();
    out.sort();
    Ok(out)
}

/// What a read_committed librdkafka consumer returns from each (topic, partition, log start,
/// last stable offset): "offset value" lines, per partition.
fn read_committed(
    bootstrap: &str,
    partitions: &[(String, i32, i64, i64)],
) -> Result<BTreeMap<(String, i32), Vec<String>>> {
    let consumer: BaseConsumer = client_config(bootstrap)
        .set("group.id", "upgrade-observer")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("check.crcs", "true")
        .set("enable.partition.eof", "false")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    let mut out = BTreeMap::new();
    for (topic, p, start, _) in partitions {
        assignment.add_partition_offset(topic, *p, Offset::Offset(*start))?;
        out.insert((topic.clone(), *p), Vec::new());
    }
    consumer.assign(&assignment)?;
    let deadline = Instant::now() + READ_TIMEOUT;
    loop {
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            let m = message.context("read_committed consumer")?;
            let line = format!("{} {}", m.offset(), String::from_utf8_lossy(m.payload().unwrap_or_default()));
            out.get_mut(&(m.topic().to_string(), m.partition()))
                .context("a record of a partition not asked")?
                .push(line);
            continue;
        }
        let position = consumer.position()?;
        let done = partitions.iter().all(|(topic, p, start, end)| {
            end <= start
                || matches!(position.find_partition(topic, *p).map(|e| e.offset()), Some(Offset::Offset(o)) if o >= *end)
        });
        if done {
            return Ok(out);
        }
        if Instant::now() > deadline {
            bail!("read_committed read incomplete after {READ_TIMEOUT:?}: position {position:?}");
        }
    }
}

//! Typed requests on top of [`RawClient`]: create topics, produce record batches, read a
//! partition back, ask where it ends, delete records below an offset. Each returns the broker's error codes as data so tests can assert on them.

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    CreateTopicsRequest, DeleteRecordsRequest, FetchRequest, FetchResponse, ListOffsetsRequest,
    ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::batch::{decode_batches, StoredRecord};
use crate::raw_client::RawClient;

/// Highest Produce version the harness sends: v13 names topics by id only.
pub const PRODUCE_VERSION_CAP: i16 = 12;
/// Highest Fetch version the harness sends: v13 names topics by id only.
pub const FETCH_VERSION_CAP: i16 = 12;
/// Highest ListOffsets version the harness sends.
pub const LIST_OFFSETS_VERSION_CAP: i16 = 7;
/// ListOffsets' timestamp for the latest offset.
const LATEST_TIMESTAMP: i64 = -1;
/// Bytes a harness fetch asks for per partition and round.
pub const FETCH_PARTITION_BYTES_MAX: i32 = 4 * 1024 * 1024;

/// Creates topics named `topics` with the given partition counts; returns (name, error code).
pub async fn create_topics(client: &mut RawClient, topics: &[(&str, i32)]) -> Result<Vec<(String, i16)>> {
    let request = CreateTopicsRequest::default().with_timeout_ms(30_000).with_topics(
        topics
            .iter()
            .map(|(name, partitions)| {
                CreatableTopic::default()
                    .with_name(topic_name(name))
                    .with_num_partitions(*partitions)
                    .with_replication_factor(-1)
            })
            .collect(),
    );
    let version = client.version::<CreateTopicsRequest>(7)?;
    let response = client.request(version, &request).await?;
    Ok(response.topics.iter().map(|t| (t.name.0.to_string(), t.error_code)).collect())
}

/// Creates topics and fails unless every one was created.
pub async fn create_topics_ok(client: &mut RawClient, topics: &[(&str, i32)]) -> Result<()> {
    for (name, code) in create_topics(client, topics).await? {
        if code != 0 {
            bail!("CreateTopics {name:?}: error code {code}");
        }
    }
    Ok(())
}

/// One record batch for one topic-partition of a Produce request.
#[derive(Debug, Clone)]
pub struct BatchFor {
    pub topic: String,
    pub partition: i32,
    pub records: Bytes,
}

/// Sends ONE Produce request holding every batch in `batches` (grouped by topic, in order).
pub async fn produce(client: &mut RawClient, acks: i16, batches: &[BatchFor]) -> Result<ProduceResponse> {
    let version = client.version::<ProduceRequest>(PRODUCE_VERSION_CAP)?;
    produce_at(client, version, acks, batches).await
}

/// [`produce`] for transactional batches: the request names `transactional_id`, as Kafka
/// requires of transactional records (without one, TRANSACTIONAL_ID_AUTHORIZATION_FAILED
/// before any other check).
pub async fn produce_transactional(
    client: &mut RawClient,
    acks: i16,
    transactional_id: &str,
    batches: &[BatchFor],
) -> Result<ProduceResponse> {
    let version = client.version::<ProduceRequest>(PRODUCE_VERSION_CAP)?;
    let id = kafka_protocol::messages::TransactionalId(kafka_protocol::protocol::StrBytes::from_string(
        transactional_id.to_string(),
    ));
    client.request(version, &produce_request(acks, batches).with_transactional_id(Some(id))).await
}

/// [`produce`] at an explicit version.
pub async fn produce_at(
    client: &mut RawClient,
    version: i16,
    acks: i16,
    batches: &[BatchFor],
) -> Result<ProduceResponse> {
    client.request(version, &produce_request(acks, batches)).await
}

/// A Produce request holding every batch in `batches`, grouped by topic in first-seen order.
pub fn produce_request(acks: i16, batches: &[BatchFor]) -> ProduceRequest {
    let mut topic_data: Vec<TopicProduceData> = Vec::new();
    for batch in batches {
        let partition = PartitionProduceData::default()
            .with_index(batch.partition)
            .with_records(Some(batch.records.clone()));
        match topic_data.iter_mut().find(|t| t.name.0.as_str() == batch.topic) {
            Some(topic) => topic.partition_data.push(partition),
            None => topic_data.push(
                TopicProduceData::default()
                    .with_name(topic_name(&batch.topic))
                    .with_partition_data(vec![partition]),
            ),
        }
    }
    ProduceRequest::default().with_acks(acks).with_timeout_ms(30_000).with_topic_data(topic_data)
}

/// Every (topic, partition, error code, base offset) in a Produce response.
pub fn produce_results(response: &ProduceResponse) -> Vec<(String, i32, i16, i64)> {
    response
        .responses
        .iter()
        .flat_map(|t| {
            t.partition_responses
                .iter()
                .map(move |p| (t.name.0.to_string(), p.index, p.error_code, p.base_offset))
        })
        .collect()
}

/// A partition as read back with Fetch.
#[derive(Debug, Clone)]
pub struct FetchedPartition {
    pub high_watermark: i64,
    pub records: Vec<StoredRecord>,
}

impl FetchedPartition {
    /// The records' values as text, in offset order (an absent value as "").
    pub fn values(&self) -> Vec<String> {
        let value = |r: &StoredRecord| r.record.value.as_deref().unwrap_or_default().to_vec();
        self.records.iter().map(|r| String::from_utf8_lossy(&value(r)).into_owned()).collect()
    }
}

/// Reads `topic`/`partition` from offset 0 up to its high watermark (read_uncommitted).
pub async fn fetch_all(client: &mut RawClient, topic: &str, partition: i32) -> Result<FetchedPartition> {
    let version = client.version::<FetchRequest>(FETCH_VERSION_CAP)?;
    let mut records = Vec::new();
    let mut offset = 0;
    loop {
        let (high_watermark, blob) = fetch_once(client, version, topic, partition, offset).await?;
        let fetched = decode_batches(blob).with_context(|| format!("{topic}/{partition} @{offset}"))?;
        // A batch may start before `offset`: Fetch returns the whole batch holding it.
        let before = offset;
        records.extend(fetched.into_iter().filter(|r| r.offset >= before));
        offset = records.last().map_or(before, |r| r.offset + 1);
        if offset >= high_watermark {
            return Ok(FetchedPartition { high_watermark, records });
        }
        if offset == before {
            bail!("{topic}/{partition}: no records at {offset} below high watermark {high_watermark}");
        }
    }
}

async fn fetch_once(
    client: &mut RawClient,
    version: i16,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<(i64, Bytes)> {
    let request = fetch_request(&[(topic, partition, offset)], FETCH_PARTITION_BYTES_MAX);
    let response = client.request(version, &request).await?;
    if response.error_code != 0 {
        bail!("Fetch {topic}/{partition}: top-level error {}", response.error_code);
    }
    let data = fetch_results(&response)
        .into_iter()
        .find(|r| r.topic == topic && r.partition == partition)
        .with_context(|| format!("Fetch response lacks {topic}/{partition}"))?;
    if data.error_code != 0 {
        bail!("Fetch {topic}/{partition} @{offset}: error {}", data.error_code);
    }
    Ok((data.high_watermark, data.records))
}

/// A Fetch request (read_uncommitted, no wait, no leader epoch) for each (topic, partition,
/// offset), asking up to `partition_bytes_max` per partition; for pipelining with
/// [`RawClient::send_request`].
pub fn fetch_request(partitions: &[(&str, i32, i64)], partition_bytes_max: i32) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for &(topic, partition, offset) in partitions {
        let fetch = FetchPartition::default()
            .with_partition(partition)
            .with_fetch_offset(offset)
            .with_partition_max_bytes(partition_bytes_max);
        match topics.iter_mut().find(|t| t.topic.0.as_str() == topic) {
            Some(t) => t.partitions.push(fetch),
            None => {
                topics.push(FetchTopic::default().with_topic(topic_name(topic)).with_partitions(vec![fetch]))
            }
        }
    }
    FetchRequest::default().with_max_wait_ms(0).with_min_bytes(1).with_topics(topics)
}

/// One partition of a Fetch response, as data.
#[derive(Debug, Clone)]
pub struct FetchResult {
    pub topic: String,
    pub partition: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub records: Bytes,
}

/// Every partition of a Fetch response (topics named, i.e. v12 and below).
pub fn fetch_results(response: &FetchResponse) -> Vec<FetchResult> {
    response
        .responses
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| FetchResult {
                topic: t.topic.0.to_string(),
                partition: p.partition_index,
                error_code: p.error_code,
                high_watermark: p.high_watermark,
                records: p.records.clone().unwrap_or_default(),
            })
        })
        .collect()
}

/// A topic name as kafka-protocol types it.
pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

/// A KIP-848 first join (epoch 0, a 30 s rebalance timeout) of `member` to `group`,
/// subscribed to `topic`, owning nothing.
pub fn consumer_join(
    group: &str,
    member: &str,
    topic: &str,
) -> kafka_protocol::messages::ConsumerGroupHeartbeatRequest {
    kafka_protocol::messages::ConsumerGroupHeartbeatRequest::default()
        .with_group_id(kafka_protocol::messages::GroupId(StrBytes::from_string(group.to_owned())))
        .with_member_id(StrBytes::from_string(member.to_owned()))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![topic_name(topic)]))
        .with_topic_partitions(Some(vec![]))
}

/// Where `topic`/`partition` ends as ListOffsets (latest) tells it: (high watermark, last stable
/// offset), asked under read_uncommitted and read_committed.
pub async fn end_offsets(client: &mut RawClient, topic: &str, partition: i32) -> Result<(i64, i64)> {
    let version = client.version::<ListOffsetsRequest>(LIST_OFFSETS_VERSION_CAP)?;
    let mut ends = [0; 2];
    for (isolation, end) in ends.iter_mut().enumerate() {
        let partitions = vec![ListOffsetsPartition::default()
            .with_partition_index(partition)
            .with_timestamp(LATEST_TIMESTAMP)];
        let request = ListOffsetsRequest::default()
            .with_replica_id((-1).into())
            .with_isolation_level(isolation as i8)
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(partitions)]);
        let response = client.request(version, &request).await?;
        let p = response
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition)
            .with_context(|| format!("ListOffsets response lacks {topic}/{partition}"))?;
        if p.error_code != 0 {
            bail!("ListOffsets {topic}/{partition} isolation {isolation}: error {}", p.error_code);
        }
        *end = p.offset;
    }
    Ok((ends[0], ends[1]))
}

/// DeleteRecords (v2) of partition 0 of `topic` up to `offset`: (error code, low watermark).
pub async fn delete_records(client: &mut RawClient, topic: &str, offset: i64) -> Result<(i16, i64)> {
    let results = delete_records_of(client, topic, &[(0, offset)]).await?;
    let (_, code, low) = results.first().copied().context("DeleteRecords response without a partition")?;
    Ok((code, low))
}

/// DeleteRecords (v2) of `topic`'s partitions, each up to its offset: (partition, error code,
/// low watermark) per partition answered.
pub async fn delete_records_of(
    client: &mut RawClient,
    topic: &str,
    upto: &[(i32, i64)],
) -> Result<Vec<(i32, i16, i64)>> {
    let partitions = upto
        .iter()
        .map(|(partition, offset)| {
            DeleteRecordsPartition::default().with_partition_index(*partition).with_offset(*offset)
        })
        .collect();
    let request = DeleteRecordsRequest::default()
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(partitions)])
        .with_timeout_ms(30_000);
    let response = client.request(2, &request).await?;
    let answered = response.topics.iter().flat_map(|t| &t.partitions);
    Ok(answered.map(|p| (p.partition_index, p.error_code, p.low_watermark)).collect())
}

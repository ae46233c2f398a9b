//! `__consumer_offsets` as Kafka's clients expect it, on the wire against a real onelog
//! process: Metadata lists it as internal (by name, by id, and among all topics), a Metadata
//! request naming it with auto-create on does not create a real topic, it cannot be created,
//! produced to (on any node) or deleted, and reads find an empty partition. franz-go's `TestConsumeRegex`
//! (scripts/kgo-suite.sh) checks the same with a regex consumer.

use anyhow::{ensure, Context, Result};
use harness::batch::{encode_batch, TestRecord};
use harness::raw_ops::{end_offsets, fetch_request, fetch_results, produce, topic_name, BatchFor};
use harness::{Broker, BrokerOptions, Cluster, ClusterOptions, RawClient};
use kafka_compat::error_code::{INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::{
    CreateTopicsRequest, DeleteTopicsRequest, FetchRequest, MetadataRequest, MetadataResponse,
};

const NAME: &str = "__consumer_offsets";

async fn metadata(
    client: &mut RawClient,
    topics: Option<Vec<MetadataRequestTopic>>,
) -> Result<MetadataResponse> {
    let request = MetadataRequest::default().with_topics(topics).with_allow_auto_topic_creation(true);
    client.request(12, &request).await
}

fn internal_of(response: &MetadataResponse) -> Vec<&MetadataResponseTopic> {
    response.topics.iter().filter(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == NAME)).collect()
}

fn check_internal(topic: &MetadataResponseTopic, leader: i32) -> Result<()> {
    ensure!(topic.error_code == 0 && topic.is_internal, "{topic:?}");
    ensure!(!topic.topic_id.is_nil(), "a topic id: {topic:?}");
    ensure!(topic.partitions.len() == 1, "{topic:?}");
    let p = &topic.partitions[0];
    ensure!(p.error_code == 0 && p.leader_id.0 == leader && p.replica_nodes.len() == 1, "{p:?}");
    Ok(())
}

/// Regression: Metadata had no `__consumer_offsets` (franz-go's `TestConsumeRegex` waited for
/// it to show as internal), and a Metadata request naming it with auto-create on created a
/// real, non-internal topic of that name.
#[tokio::test(flavor = "multi_thread")]
async fn consumer_offsets_is_a_virtual_internal_topic() {
    let broker =
        Broker::start(BrokerOptions::default().config("log.segment.bytes", 1 << 20)).expect("onelog");
    let result = scenario(&broker).await;
    broker.unwrap_or_dump(result);
}

async fn scenario(broker: &Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    let leader = metadata(&mut client, None).await?.controller_id.0;

    let by_name =
        metadata(&mut client, Some(vec![MetadataRequestTopic::default().with_name(Some(topic_name(NAME)))]))
            .await?;
    let named = internal_of(&by_name);
    ensure!(named.len() == 1, "{by_name:?}");
    check_internal(named[0], leader)?;
    let id = named[0].topic_id;
    let by_id =
        metadata(&mut client, Some(vec![MetadataRequestTopic::default().with_name(None).with_topic_id(id)]))
            .await?;
    ensure!(by_id.topics.len() == 1, "{by_id:?}");
    check_internal(&by_id.topics[0], leader)?;
    ensure!(by_id.topics[0].name.as_ref().is_some_and(|n| n.0.as_str() == NAME), "{by_id:?}");
    // Listed once among all topics: the Metadata request above created no real topic.
    let all = metadata(&mut client, None).await?;
    let listed = internal_of(&all);
    ensure!(listed.len() == 1, "listed once: {all:?}");
    check_internal(listed[0], leader)?;
    ensure!(listed[0].topic_id == id, "the same id: {all:?}");

    let create = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic_name(NAME))
            .with_num_partitions(1)
            .with_replication_factor(1)])
        .with_timeout_ms(10_000);
    let created = client.request(5, &create).await?;
    ensure!(created.topics[0].error_code == TOPIC_ALREADY_EXISTS, "{created:?}");

    let batch = encode_batch(&[TestRecord::new("k", "offsets", 1)])?;
    let batches = [BatchFor { topic: NAME.to_string(), partition: 0, records: batch }];
    let produced = produce(&mut client, -1, &batches).await?;
    let code = produced.responses[0].partition_responses[0].error_code;
    ensure!(code == INVALID_TOPIC_EXCEPTION, "produce: {produced:?}");

    let fetch_version = client.version::<FetchRequest>(12)?;
    let fetched = client.request(fetch_version, &fetch_request(&[(NAME, 0, 0)], 1 << 20)).await?;
    let read = fetch_results(&fetched).into_iter().next().context("a fetched partition")?;
    ensure!(
        read.error_code == 0 && read.high_watermark == 0 && read.records.is_empty(),
        "fetch: {fetched:?}"
    );
    ensure!(end_offsets(&mut client, NAME, 0).await? == (0, 0), "ListOffsets latest is 0");

    let delete =
        DeleteTopicsRequest::default().with_topic_names(vec![topic_name(NAME)]).with_timeout_ms(10_000);
    let deleted = client.request(4, &delete).await?;
    ensure!(deleted.responses[0].error_code == INVALID_TOPIC_EXCEPTION, "delete: {deleted:?}");
    let after = metadata(&mut client, None).await?;
    ensure!(internal_of(&after).len() == 1, "still listed: {after:?}");
    Ok(())
}

/// Regression: a follower answered a Produce to `__consumer_offsets` NOT_LEADER_OR_FOLLOWER,
/// so a client went looking for a leader of a topic it may not write; Kafka refuses an append
/// to an internal topic before it looks for the partition's leader, and so does onelog now.
#[tokio::test(flavor = "multi_thread")]
async fn a_follower_refuses_a_produce_to_the_internal_topic_as_invalid() {
    let options = ClusterOptions::new(3).config("log.segment.bytes", 1 << 20);
    let mut cluster = Cluster::start_with(options).expect("starting the cluster");
    let result = follower_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn follower_scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let follower = cluster.ids().into_iter().find(|id| *id != leader).context("a follower")?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(follower)).await?;
    let batch = encode_batch(&[TestRecord::new("k", "offsets", 1)])?;
    let batches = [BatchFor { topic: NAME.to_string(), partition: 0, records: batch }];
    let produced = produce(&mut client, -1, &batches).await?;
    let code = produced.responses[0].partition_responses[0].error_code;
    ensure!(code == INVALID_TOPIC_EXCEPTION, "produce on follower {follower}: {produced:?}");
    Ok(())
}

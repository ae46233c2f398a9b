//! Regression (found by the compatibility matrix: confluent-kafka's AdminClient after a leader
//! kill): topic administration sent to a follower used to get NOT_CONTROLLER, which
//! librdkafka's admin client hands to the application instead of retrying; Kafka 4.x brokers
//! relay such requests to the controller (KIP-590). A follower now relays CreateTopics,
//! CreatePartitions and DeleteTopics to the leader and answers once it has applied the change
//! itself, so its next Metadata shows it.
//!
//! Regression (issue 27): each forwarded request opened (and authenticated) a Raft-transport
//! connection of its own; forwarding now rides the connection the follower keeps to the
//! leader for Raft, so twenty relayed requests open no new connection.

use anyhow::{ensure, Context, Result};
use harness::{Cluster, ClusterOptions, RawClient};
use kafka_compat::error_code::{NONE, UNKNOWN_TOPIC_OR_PARTITION};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "relayed";

fn name() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

/// (error code, partition count) of TOPIC in this node's Metadata.
async fn described(client: &mut RawClient) -> Result<(i16, usize)> {
    let version = client.version::<MetadataRequest>(9)?;
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(name()))]))
        .with_allow_auto_topic_creation(false);
    let response = client.request(version, &request).await?;
    let topic = response.topics.first().context("no topic in Metadata")?;
    Ok((topic.error_code, topic.partitions.len()))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_follower_relays_topic_admin_to_the_leader() {
    let options = ClusterOptions::new(3).config("log.segment.bytes", 1024 * 1024);
    let mut cluster = Cluster::start_with(options).expect("starting the cluster");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let follower = cluster.ids().into_iter().find(|id| *id != leader).context("a follower")?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(follower)).await?;

    let create =
        CreateTopicsRequest::default().with_timeout_ms(10_000).with_topics(vec![CreatableTopic::default()
            .with_name(name())
            .with_num_partitions(2)
            .with_replication_factor(-1)]);
    let version = client.version::<CreateTopicsRequest>(7)?;
    let created = client.request(version, &create).await?;
    let code = created.topics.first().context("no CreateTopics result")?.error_code;
    ensure!(code == NONE, "CreateTopics through follower {follower}: error {code}");
    ensure!(described(&mut client).await? == (NONE, 2), "the follower's Metadata after CreateTopics");

    let grow = CreatePartitionsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatePartitionsTopic::default().with_name(name()).with_count(3)]);
    let version = client.version::<CreatePartitionsRequest>(3)?;
    let grown = client.request(version, &grow).await?;
    let code = grown.results.first().context("no CreatePartitions result")?.error_code;
    ensure!(code == NONE, "CreatePartitions through follower {follower}: error {code}");
    ensure!(described(&mut client).await? == (NONE, 3), "the follower's Metadata after CreatePartitions");

    let delete = DeleteTopicsRequest::default().with_timeout_ms(10_000).with_topic_names(vec![name()]);
    let version = client.version::<DeleteTopicsRequest>(5)?;
    let deleted = client.request(version, &delete).await?;
    let code = deleted.responses.first().context("no DeleteTopics result")?.error_code;
    ensure!(code == NONE, "DeleteTopics through follower {follower}: error {code}");
    let (code, _) = described(&mut client).await?;
    ensure!(code == UNKNOWN_TOPIC_OR_PARTITION, "the follower still describes the deleted topic ({code})");
    relays_on_one_connection(cluster, follower, &mut client).await
}

/// Twenty relayed CreateTopics open no Raft-transport connection beyond those the follower
/// had: its log names each connection it makes ("connected to raft peer").
async fn relays_on_one_connection(
    cluster: &mut Cluster,
    follower: u64,
    client: &mut RawClient,
) -> Result<()> {
    let log = cluster.log_path(follower);
    let connections = || harness::process::log_lines_with(&log, &["connected to raft peer"]).map(|l| l.len());
    let before = connections()?;
    let version = client.version::<CreateTopicsRequest>(7)?;
    for i in 0..20 {
        let topic = CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(format!("relayed-{i}"))))
            .with_num_partitions(1)
            .with_replication_factor(-1);
        let create = CreateTopicsRequest::default().with_timeout_ms(10_000).with_topics(vec![topic]);
        let code = client.request(version, &create).await?.topics.first().context("no result")?.error_code;
        ensure!(code == NONE, "relayed CreateTopics {i}: error {code}");
    }
    let after = connections()?;
    ensure!(after == before, "twenty relayed requests opened {} Raft connections", after - before);
    Ok(())
}

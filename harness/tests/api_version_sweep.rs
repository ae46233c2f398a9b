//! The version sweep: for every API key a node advertises and every version in its range,
//! one valid request with one element in every array, sent to the leader and to a follower
//! of a three-node cluster. Each must get a response that decodes at that version with the
//! request's correlation id and nothing left over, and the connection must stay open (an
//! ApiVersions after each proves it). An advertised key without a builder fails the test, so
//! every new handler adds one here.
//!
//! Cases the sweep found and pins (regressions):
//! - Produce v0–v2, advertised-only, closed the connection; they now answer every partition
//!   UNSUPPORTED_VERSION (`kafka_compat::legacy_produce`, requests built by hand here because
//!   kafka-protocol 0.18 no longer has those versions).

use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use harness::raw_client::frame_with_header;
use harness::raw_ops::{create_topics_ok, topic_name};
use harness::{Cluster, ClusterOptions, RawClient};
use kafka_compat::error_code::UNSUPPORTED_VERSION;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;

#[path = "api_version_sweep/builders.rs"]
mod sweep_builders;
use sweep_builders::{build, Fixture};

/// Kafka's minimum segment size, so segments roll early; disk is not the reason any more (a
/// partition reserves its blocks step by step, docs/ARCHITECTURE.md "Design choices").
const SEGMENT_BYTES: u32 = 1024 * 1024;
/// Produce versions advertised but answered UNSUPPORTED_VERSION (kafka-protocol cannot encode them).
const LEGACY_PRODUCE_VERSIONS: std::ops::RangeInclusive<i16> = 0..=2;
/// How long the cluster's replicas may take to learn the new topic.
const TOPIC_PROPAGATION: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread")]
async fn every_advertised_api_version_answers_and_decodes() {
    let options = ClusterOptions::new(3).config("log.segment.bytes", SEGMENT_BYTES);
    let mut cluster = Cluster::start_with(options).expect("starting three onelog nodes");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let follower = cluster.followers()?[0];
    let mut admin = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    create_topics_ok(&mut admin, &[(sweep_builders::TOPIC, 1)]).await?;
    let fixture = fixture(&mut admin).await?;
    wait_topic_known(cluster.kafka_addr(follower)).await?;
    let mut total = 0;
    for (role, id) in [("leader", leader), ("follower", follower)] {
        let covered =
            sweep_node(cluster.kafka_addr(id), &fixture).await.with_context(|| format!("{role} {id}"))?;
        println!("{role} node {id}: {covered} (key, version) pairs answered and decoded");
        total += covered;
    }
    println!("version sweep: {total} (key, version) pairs covered on two nodes");
    Ok(())
}

async fn fixture(client: &mut RawClient) -> Result<Fixture> {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default()
            .with_name(Some(topic_name(sweep_builders::TOPIC)))]));
    let response = client.request(12, &request).await?;
    let topic = response.topics.first().context("topic missing from Metadata")?;
    ensure!(topic.error_code == 0, "Metadata of the sweep topic: error {}", topic.error_code);
    Ok(Fixture { topic_id: topic.topic_id })
}

async fn wait_topic_known(addr: std::net::SocketAddr) -> Result<()> {
    let deadline = tokio::time::Instant::now() + TOPIC_PROPAGATION;
    loop {
        let mut client = RawClient::connect(addr).await?;
        let request = MetadataRequest::default()
            .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default()
                .with_name(Some(topic_name(sweep_builders::TOPIC)))]));
        let response = client.request(9, &request).await?;
        if response.topics.first().is_some_and(|t| t.error_code == 0) {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            bail!("the follower does not know the sweep topic after {TOPIC_PROPAGATION:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sweeps one node; returns the number of (key, version) pairs answered.
async fn sweep_node(addr: std::net::SocketAddr, fixture: &Fixture) -> Result<usize> {
    let mut client = RawClient::connect(addr).await?;
    let advertised = client.api_versions().await?.api_keys;
    let mut missing = Vec::new();
    let mut covered = 0;
    for range in &advertised {
        let key = ApiKey::try_from(range.api_key)
            .map_err(|_| anyhow::anyhow!("advertised key {} unknown to kafka-protocol", range.api_key))?;
        for version in range.min_version..=range.max_version {
            if key == ApiKey::Produce && LEGACY_PRODUCE_VERSIONS.contains(&version) {
                legacy_produce(&mut client, version).await?;
            } else {
                let Some(body) = build(key, version, fixture) else {
                    missing.push(format!("{key:?}"));
                    break;
                };
                exchange(&mut client, key, version, &body)
                    .await
                    .with_context(|| format!("{key:?} v{version}"))?;
            }
            // The connection survived: an ApiVersions on it answers.
            client.api_versions().await.with_context(|| format!("ApiVersions after {key:?} v{version}"))?;
            covered += 1;
        }
    }
    ensure!(missing.is_empty(), "advertised keys without a sweep builder: {missing:?}");
    Ok(covered)
}

/// Sends `body` at `version` and decodes the response at that version.
async fn exchange(client: &mut RawClient, key: ApiKey, version: i16, body: &RequestKind) -> Result<()> {
    let mut encoded = BytesMut::new();
    body.encode(&mut encoded, version).context("encoding the request")?;
    let correlation_id = 1_000 + key as i32 * 100 + version as i32;
    client.write_raw(&frame_with_header(key as i16, version, correlation_id, &encoded)).await?;
    let mut frame = client.read_frame().await.context("no response (connection closed?)")?;
    let header = ResponseHeader::decode(&mut frame, key.response_header_version(version))?;
    ensure!(
        header.correlation_id == correlation_id,
        "correlation id {} != {correlation_id}",
        header.correlation_id
    );
    ResponseKind::decode(key, &mut frame, version).context("decoding the response")?;
    ensure!(!frame.has_remaining(), "{} bytes left after the response body", frame.remaining());
    Ok(())
}

/// Produce v0–v2, by hand: acks=-1, one topic, one partition, an empty record set.
async fn legacy_produce(client: &mut RawClient, version: i16) -> Result<()> {
    let mut body = BytesMut::new();
    body.put_i16(-1);
    body.put_i32(1_000);
    body.put_i32(1);
    body.put_i16(sweep_builders::TOPIC.len() as i16);
    body.put_slice(sweep_builders::TOPIC.as_bytes());
    body.put_i32(1);
    body.put_i32(0);
    body.put_i32(0);
    let correlation_id = 77 + i32::from(version);
    client.write_raw(&frame_with_header(0, version, correlation_id, &body)).await?;
    let frame = client.read_frame().await.with_context(|| format!("Produce v{version}: no response"))?;
    let mut b: Bytes = frame;
    ensure!(b.get_i32() == correlation_id, "Produce v{version}: wrong correlation id");
    ensure!(
        b.get_i32() == 1 && b.get_i16() as usize == sweep_builders::TOPIC.len(),
        "Produce v{version}: topics"
    );
    b.advance(sweep_builders::TOPIC.len());
    ensure!(b.get_i32() == 1 && b.get_i32() == 0, "Produce v{version}: partitions");
    let code = b.get_i16();
    ensure!(code == UNSUPPORTED_VERSION, "Produce v{version}: error {code}, want UNSUPPORTED_VERSION");
    b.advance(8 + if version >= 2 { 8 } else { 0 } + if version >= 1 { 4 } else { 0 });
    ensure!(!b.has_remaining(), "Produce v{version}: {} bytes left", b.remaining());
    Ok(())
}

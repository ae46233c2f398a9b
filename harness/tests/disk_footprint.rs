//! Issue 13, reproduction 6 (disk): what a partition costs on disk, and what a node does when
//! its disk is (nearly) full, with real clients against real three-node clusters.
//!
//! - 120 one-record partitions with the default 128 MiB `log.segment.bytes` cost each node a
//!   few dozen KiB per partition in real blocks (`st_blocks` × 512), not a segment each; the
//!   records survive a kill -9 of every node.
//! - The free-space guard: with `log.dir.free.bytes.min` raised above the free space (the
//!   dynamic cluster default, set with IncrementalAlterConfigs), Produce gets
//!   KAFKA_STORAGE_ERROR on every partition while a librdkafka consumer still reads what was
//!   written; lowering the reserve lets a librdkafka producer write again, without a restart.
//! - A node killed and restarted while below the reserve serves reads again, and still refuses
//!   writes until the reserve is lowered.
//! - Retention still runs below the reserve: a `retention.bytes` set then deletes the oldest
//!   segment, moving the log start offset and freeing its blocks.
//!
//! The guard is tested through the reserve rather than a really full file system, so it runs
//! wherever the suite runs (a true ENOSPC would need a small file system of its own).

use std::time::Duration;

use anyhow::{ensure, Result};
use harness::batch::{encode_batch, TestRecord};
use harness::kafka::{client_config, read_partitions};
use harness::raw_ops::{create_topics_ok, produce, produce_results, BatchFor};
use harness::{Cluster, ClusterOptions, RawClient};
use kafka_compat::error_code::KAFKA_STORAGE_ERROR;
use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::IncrementalAlterConfigsRequest;
use kafka_protocol::protocol::StrBytes;
use rdkafka::producer::{FutureProducer, FutureRecord};

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// One-record partitions of the footprint test (issue 13 asks for 100+).
const PARTITIONS: i32 = 120;
/// What one such partition may cost a node: "a few hundred KiB" at most (issue 13). The
/// segment reserves 64 KiB first; the rest is its two directories.
const PARTITION_BYTES_MAX: u64 = 256 * 1024;
/// A reserve no file system here can meet (1 EiB).
const RESERVE_UNREACHABLE: &str = "1152921504606846976";

/// Bytes the partition files of node `id` hold on disk.
fn partition_bytes(cluster: &Cluster, id: u64) -> Result<u64> {
    harness::disk::partition_file_bytes(&cluster.data_dir(id))
}

fn one_record(value: &str) -> Result<bytes::Bytes> {
    encode_batch(&[TestRecord::new(value.to_string(), value.to_string(), 1_000)])
}

/// Sets (`Some`) or deletes (`None`) the cluster-wide dynamic `log.dir.free.bytes.min`.
async fn set_reserve(client: &mut RawClient, value: Option<&str>) -> Result<()> {
    alter_config(client, RESOURCE_BROKER, "", "log.dir.free.bytes.min", value).await
}

/// IncrementalAlterConfigs of one config of one resource; fails unless it was applied.
async fn alter_config(
    client: &mut RawClient,
    resource_type: i8,
    resource: &str,
    name: &str,
    value: Option<&str>,
) -> Result<()> {
    let config = AlterableConfig::default()
        .with_name(StrBytes::from_string(name.to_string()))
        .with_config_operation(if value.is_some() { OP_SET } else { OP_DELETE })
        .with_value(value.map(|v| StrBytes::from_string(v.to_string())));
    let resource_request = AlterConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(StrBytes::from_string(resource.to_string()))
        .with_configs(vec![config]);
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![resource_request]);
    let response = client.request(1, &request).await?;
    let codes: Vec<i16> = response.responses.iter().map(|r| r.error_code).collect();
    ensure!(codes == [0], "IncrementalAlterConfigs {resource:?} {name}={value:?}: {response:?}");
    Ok(())
}

/// Produces one raw batch to `topic`/0 on `addr`; returns the partition's error code.
async fn raw_produce_code(client: &mut RawClient, topic: &str, value: &str) -> Result<i16> {
    let batch = BatchFor { topic: topic.into(), partition: 0, records: one_record(value)? };
    let results = produce_results(&produce(client, -1, &[batch]).await?);
    ensure!(results.len() == 1, "one partition answered: {results:?}");
    Ok(results[0].2)
}

fn producer(bootstrap: &str) -> Result<FutureProducer> {
    Ok(client_config(bootstrap).set("acks", "all").set("linger.ms", "0").create()?)
}

async fn send(producer: &FutureProducer, topic: &str, partition: i32, value: &str) -> Result<()> {
    let record = FutureRecord::to(topic).partition(partition).key(value).payload(value);
    producer
        .send(record, Duration::from_secs(30))
        .await
        .map_err(|(e, _)| anyhow::anyhow!("delivery of {value} to {topic}/{partition}: {e}"))?;
    Ok(())
}

/// The values of `topic`/0 a librdkafka consumer reads from the start.
fn read_values(bootstrap: &str, topic: &str) -> Result<Vec<String>> {
    let read = read_partitions(bootstrap, &[(topic.to_string(), 0)], READ_TIMEOUT)?;
    let records = read.get(&(topic.to_string(), 0)).cloned().unwrap_or_default();
    Ok(records
        .iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into())
        .collect())
}

/// Regression (issue 13 reproduction 6: 8 one-record topics cost 1 GiB): every partition
/// reserved a whole 128 MiB segment per node on its first write. Now 120 one-record
/// partitions cost each node at most PARTITION_BYTES_MAX per partition in real blocks, and the
/// records survive kill -9 of all three nodes (recovery finds the end of a sparse segment).
#[tokio::test(flavor = "multi_thread")]
async fn one_record_partitions_cost_kilobytes_per_node_and_survive_restart() {
    let mut cluster = Cluster::start(3).expect("starting 3 nodes");
    let result = footprint_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn footprint_scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    create_topics_ok(&mut client, &[("tiny", PARTITIONS)]).await?;
    let producer = producer(&cluster.bootstrap())?;
    for p in 0..PARTITIONS {
        send(&producer, "tiny", p, &format!("record-{p}")).await?;
    }
    cluster.assert_digests_equal()?; // every node applied all 120 records
    for id in cluster.ids() {
        let bytes = partition_bytes(cluster, id)?;
        let per_partition = bytes / PARTITIONS as u64;
        eprintln!("node {id}: {bytes} bytes of partition files, {per_partition} per partition");
        ensure!(
            per_partition <= PARTITION_BYTES_MAX,
            "node {id}: {PARTITIONS} one-record partitions hold {bytes} bytes ({per_partition} each)"
        );
    }
    for id in cluster.ids() {
        cluster.kill9(id)?;
    }
    cluster.start_all()?;
    let wanted: Vec<(String, i32)> = (0..PARTITIONS).map(|p| ("tiny".to_string(), p)).collect();
    let read = read_partitions(&cluster.bootstrap(), &wanted, READ_TIMEOUT)?;
    for p in 0..PARTITIONS {
        let records = read.get(&("tiny".to_string(), p)).cloned().unwrap_or_default();
        let values: Vec<_> = records.iter().map(|r| r.value.clone().unwrap_or_default()).collect();
        ensure!(values == [format!("record-{p}").into_bytes()], "tiny/{p} after restart: {records:?}");
    }
    Ok(())
}

/// Regression (issue 13 reproduction 6: on a full disk every node exited with no error code to
/// clients): below `log.dir.free.bytes.min` the leader answers Produce with the retriable
/// KAFKA_STORAGE_ERROR, keeps serving reads and stays up; lowering the reserve at run time
/// lets writes through again.
#[tokio::test(flavor = "multi_thread")]
async fn produce_below_the_free_space_reserve_gets_kafka_storage_error_until_it_is_lowered() {
    let mut cluster = Cluster::start(3).expect("starting 3 nodes");
    let result = guard_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn guard_scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    create_topics_ok(&mut client, &[("guarded", 1)]).await?;
    let producer = producer(&cluster.bootstrap())?;
    send(&producer, "guarded", 0, "before").await?;

    set_reserve(&mut client, Some(RESERVE_UNREACHABLE)).await?;
    let code = raw_produce_code(&mut client, "guarded", "refused").await?;
    ensure!(code == KAFKA_STORAGE_ERROR, "produce below the reserve: error code {code}");
    ensure!(read_values(&cluster.bootstrap(), "guarded")? == ["before"], "reads go on below the reserve");
    cluster.check_none_exited()?;

    set_reserve(&mut client, None).await?;
    send(&producer, "guarded", 0, "after").await?;
    ensure!(read_values(&cluster.bootstrap(), "guarded")? == ["before", "after"]);
    Ok(())
}

/// Regression (issue 13 reproduction 6: a node could not restart on a full disk): a node
/// killed while its disk is below the reserve starts again, serves what was written, and still
/// refuses writes until the reserve is lowered.
#[tokio::test(flavor = "multi_thread")]
async fn a_node_restarts_below_the_free_space_reserve_and_serves_reads() {
    let mut cluster = Cluster::start(3).expect("starting 3 nodes");
    let result = restart_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn restart_scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    create_topics_ok(&mut client, &[("kept", 1)]).await?;
    let producer = producer(&cluster.bootstrap())?;
    for v in ["a", "b", "c"] {
        send(&producer, "kept", 0, v).await?;
    }
    set_reserve(&mut client, Some(RESERVE_UNREACHABLE)).await?;
    drop(client);

    // Every node goes down and comes back below the reserve: the restart itself must not
    // need free space beyond it.
    for id in cluster.ids() {
        cluster.kill9(id)?;
    }
    cluster.start_all()?;
    ensure!(read_values(&cluster.bootstrap(), "kept")? == ["a", "b", "c"], "reads after the restart");
    let leader = cluster.leader()?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    let code = raw_produce_code(&mut client, "kept", "refused").await?;
    ensure!(code == KAFKA_STORAGE_ERROR, "produce after the restart below the reserve: error code {code}");

    set_reserve(&mut client, None).await?;
    send(&producer, "kept", 0, "d").await?;
    ensure!(read_values(&cluster.bootstrap(), "kept")? == ["a", "b", "c", "d"]);
    Ok(())
}

/// Kafka's minimum `segment.bytes`, and records that fill more than one segment of it.
const SMALL_SEGMENT_BYTES: &str = "1048576";
const LARGE_RECORD_BYTES: usize = 100 * 1024;
const LARGE_RECORDS: usize = 16;
/// How long retention may take to act once allowed (it runs every 100 ms here).
const RETENTION_DEADLINE: Duration = Duration::from_secs(30);

/// Issue 13 reproduction 6 asks that retention still run on a full disk, since deleting
/// segments is what frees space: below the reserve, a `retention.bytes` set on the topic
/// (an alteration, which the guard lets through) deletes its oldest segment on every node.
#[tokio::test(flavor = "multi_thread")]
async fn retention_frees_segments_below_the_free_space_reserve() {
    let options = ClusterOptions::new(3).config("log.retention.check.interval.ms", 100);
    let mut cluster = Cluster::start_with(options).expect("starting 3 nodes");
    let result = retention_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn retention_scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    create_topics_ok(&mut client, &[("trimmed", 1)]).await?;
    alter_config(&mut client, RESOURCE_TOPIC, "trimmed", "segment.bytes", Some(SMALL_SEGMENT_BYTES)).await?;
    let producer = producer(&cluster.bootstrap())?;
    let value = "v".repeat(LARGE_RECORD_BYTES);
    for _ in 0..LARGE_RECORDS {
        send(&producer, "trimmed", 0, &value).await?;
    }
    cluster.assert_digests_equal()?;
    let before: Vec<u64> =
        cluster.ids().iter().map(|id| partition_bytes(cluster, *id)).collect::<Result<_>>()?;

    set_reserve(&mut client, Some(RESERVE_UNREACHABLE)).await?;
    alter_config(&mut client, RESOURCE_TOPIC, "trimmed", "retention.bytes", Some("1")).await?;
    let consumer: rdkafka::consumer::BaseConsumer = client_config(&cluster.bootstrap()).create()?;
    let deadline = std::time::Instant::now() + RETENTION_DEADLINE;
    let low = loop {
        let (low, _) =
            rdkafka::consumer::Consumer::fetch_watermarks(&consumer, "trimmed", 0, Duration::from_secs(10))?;
        if low > 0 || std::time::Instant::now() > deadline {
            break low;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    ensure!(low > 0, "retention did not move the log start below the reserve");
    cluster.assert_digests_equal()?;
    for (id, before) in cluster.ids().into_iter().zip(before) {
        let after = partition_bytes(cluster, id)?;
        ensure!(
            after < before,
            "node {id}: partition files hold {after} bytes after retention, {before} before"
        );
    }
    let code = raw_produce_code(&mut client, "trimmed", "refused").await?;
    ensure!(code == KAFKA_STORAGE_ERROR, "still below the reserve: error code {code}");
    Ok(())
}

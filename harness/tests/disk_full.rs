//! Issue 13, reproduction 6 on a real, small file system: a one-node onelog whose data
//! directory is a 448 MiB tmpfs (mounted by the test, which needs root, as CI has; without it
//! the test fails saying so, it never passes without the file system).
//!
//! Phases: three records written; a ballast file leaves at most 16 MiB free, less than
//! `log.dir.free.bytes.min` and less than one Raft log segment (and the broker's background
//! preparation of its next segment may take even that); Produce gets
//! KAFKA_STORAGE_ERROR while a librdkafka consumer reads the three records; the node is killed
//! and restarts on the nearly full file system and serves them again; the ballast is deleted
//! and the next write goes through without a restart. The node never exits on its own.

use std::time::Duration;

use anyhow::{ensure, Result};
use harness::batch::{encode_batch, TestRecord};
use harness::disk::{available_bytes, ballast, Tmpfs};
use harness::kafka::{client_config, read_partitions};
use harness::raw_ops::{create_topics_ok, produce, produce_results, BatchFor};
use harness::{Broker, BrokerOptions, RawClient};
use kafka_compat::error_code::KAFKA_STORAGE_ERROR;
use rdkafka::producer::{FutureProducer, FutureRecord};

const MIB: u64 = 1024 * 1024;
/// Room for the Raft log's two 64 MiB preallocated segments, the reserve and the records.
const FS_BYTES: u64 = 448 * MIB;
const RESERVE_BYTES: u64 = 160 * MIB;
/// Free space left by the ballast: below the reserve and below one Raft log segment.
const LEFT_FREE_BYTES: u64 = 16 * MIB;
const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// Longer than the broker reuses a free-space reading (`FREE_SPACE_READING_MAX_AGE_MS`, 100 ms).
const READING_AGE: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread")]
async fn a_nearly_full_file_system_refuses_produce_serves_reads_restarts_and_recovers() {
    let root = tempfile::Builder::new().prefix("onelog-disk-full-").tempdir().expect("temp dir");
    let fs = Tmpfs::mount(&root.path().join("fs"), FS_BYTES).expect("a tmpfs for the data directory");
    let options = BrokerOptions { dir: Some(fs.path().join("node")), ..BrokerOptions::default() }
        .config("log.dir.free.bytes.min", RESERVE_BYTES)
        .config("log.segment.bytes", MIB);
    let mut broker = Broker::start(options).expect("starting onelog on the tmpfs");
    let result = scenario(&mut broker, &fs).await;
    broker.unwrap_or_dump(result);
}

async fn scenario(broker: &mut Broker, fs: &Tmpfs) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    create_topics_ok(&mut client, &[("full", 1)]).await?;
    let producer: FutureProducer = client_config(&broker.bootstrap()).set("acks", "all").create()?;
    for v in ["a", "b", "c"] {
        send(&producer, v).await?;
    }

    let free = available_bytes(fs.path())?;
    ensure!(free > RESERVE_BYTES + LEFT_FREE_BYTES, "the tmpfs starts with {free} bytes free");
    let ballast_path = fs.path().join("ballast");
    ballast(&ballast_path, LEFT_FREE_BYTES)?;
    ensure!(available_bytes(fs.path())? < RESERVE_BYTES);
    tokio::time::sleep(READING_AGE).await;
    ensure!(raw_produce_code(&mut client).await? == KAFKA_STORAGE_ERROR, "produce on a nearly full disk");
    ensure!(read_values(broker)? == ["a", "b", "c"], "reads on a nearly full disk");
    ensure!(broker.is_running(), "the node exited on a nearly full disk");

    broker.kill9()?;
    broker.restart()?;
    ensure!(read_values(broker)? == ["a", "b", "c"], "reads after restarting on a nearly full disk");
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    ensure!(raw_produce_code(&mut client).await? == KAFKA_STORAGE_ERROR, "produce after the restart");

    std::fs::remove_file(&ballast_path)?;
    tokio::time::sleep(READING_AGE).await;
    let producer: FutureProducer = client_config(&broker.bootstrap()).set("acks", "all").create()?;
    send(&producer, "d").await?;
    ensure!(read_values(broker)? == ["a", "b", "c", "d"], "the write after space was freed");
    ensure!(broker.is_running(), "the node exited");
    Ok(())
}

async fn send(producer: &FutureProducer, value: &str) -> Result<()> {
    let record = FutureRecord::to("full").partition(0).key(value).payload(value);
    producer.send(record, Duration::from_secs(30)).await.map_err(|(e, _)| anyhow::anyhow!("{value}: {e}"))?;
    Ok(())
}

async fn raw_produce_code(client: &mut RawClient) -> Result<i16> {
    let records = encode_batch(&[TestRecord::new("refused", "refused", 1_000)])?;
    let batch = BatchFor { topic: "full".into(), partition: 0, records };
    let results = produce_results(&produce(client, -1, &[batch]).await?);
    ensure!(results.len() == 1, "{results:?}");
    Ok(results[0].2)
}

fn read_values(broker: &Broker) -> Result<Vec<String>> {
    let read = read_partitions(&broker.bootstrap(), &[("full".to_string(), 0)], READ_TIMEOUT)?;
    let records = read.get(&("full".to_string(), 0)).cloned().unwrap_or_default();
    Ok(records
        .iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into())
        .collect())
}

//! A restart after records were deleted past the checkpoint (found by issue 28's Kafka
//! Streams soak, which purges its repartition topics with DeleteRecords): every restart logged
//! ERROR "partition files end before the checkpoint", a false alarm. The checkpoint still
//! counts the deleted records, their files are gone, and replaying the log above the
//! checkpoint deletes them again; only a log that still starts below the checkpoint's end
//! misses anything.
//!
//! One node, 1 MiB segments: records written, a checkpoint, more records (so the files roll
//! past the checkpoint's end), DeleteRecords up to the high watermark, kill -9, restart.
//! Asserted: the node logs that the short files held only records deleted since (so the
//! scenario did reach the case) and no ERROR about them; the log start is the high watermark
//! after the restart; a record written then reads back at the next offset.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::admin_api;
use harness::batch::{decode_batches, encode_batch, TestRecord};
use harness::raw_ops::{
    create_topics_ok, delete_records, end_offsets, fetch_request, fetch_results, produce, produce_results,
    BatchFor,
};
use harness::{Cluster, ClusterOptions, RawClient};

const TOPIC: &str = "purged";
const SEGMENT_BYTES: u32 = 1024 * 1024;
/// 48 records of 64 KiB: three segments' worth.
const RECORDS: usize = 48;
const RECORD_BYTES: usize = 64 * 1024;
const CHECKPOINT_TIMEOUT: Duration = Duration::from_secs(60);
const JUDGED: &str = "partition files that ended before the checkpoint held only records deleted since";
const FALSE_ALARM: &str = "partition files end before the checkpoint";

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_after_records_deleted_past_the_checkpoint_raises_no_false_alarm() {
    let options = ClusterOptions::new(1).config("log.segment.bytes", SEGMENT_BYTES);
    let mut cluster = Cluster::start_with(options).expect("cluster");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(1)).await?;
    create_topics_ok(&mut client, &[(TOPIC, 1)]).await?;
    write(&mut client, "before").await?;
    checkpoint(cluster)?;
    write(&mut client, "after").await?;
    let (_, high) = end_offsets(&mut client, TOPIC, 0).await?;
    ensure!(delete_records(&mut client, TOPIC, high).await? == (0, high), "DeleteRecords up to {high}");

    cluster.kill9(1)?;
    cluster.start_node(1)?;
    cluster.wait_serving(1)?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(1)).await?;
    let (start, end) = end_offsets(&mut client, TOPIC, 0).await?;
    ensure!(
        (start, end) == (high, high),
        "after the restart the log spans [{start}, {end}), not [{high}, {high})"
    );
    write_one(&mut client, "later").await?;
    let fetched = read_from(&mut client, high).await?;
    ensure!(fetched == [(high, "later".to_string())], "read back from {high} after the restart: {fetched:?}");

    let log = std::fs::read_to_string(cluster.log_path(1))?;
    let alarms: Vec<&str> = log.lines().filter(|l| l.contains("ERROR") && l.contains(FALSE_ALARM)).collect();
    ensure!(alarms.is_empty(), "false alarms after the restart: {alarms:?}");
    ensure!(
        log.contains(JUDGED),
        "the node never judged a short partition log: the scenario did not reach the case"
    );
    println!("restart after DeleteRecords to {high} past the checkpoint: log [{start}, {end}), judged short files deleted since, no ERROR");
    Ok(())
}

async fn write(client: &mut RawClient, tag: &str) -> Result<()> {
    let value = "v".repeat(RECORD_BYTES);
    for i in 0..RECORDS {
        let records = encode_batch(&[TestRecord::new(format!("{tag}-{i}"), value.clone(), 1_000)])?;
        let results = produce_results(
            &produce(client, -1, &[BatchFor { topic: TOPIC.into(), partition: 0, records }]).await?,
        );
        ensure!(results.iter().all(|r| r.2 == 0), "produce {tag}-{i}: {results:?}");
    }
    Ok(())
}

async fn write_one(client: &mut RawClient, value: &str) -> Result<()> {
    let records = encode_batch(&[TestRecord::new(value.to_string(), value.to_string(), 1_000)])?;
    let results = produce_results(
        &produce(client, -1, &[BatchFor { topic: TOPIC.into(), partition: 0, records }]).await?,
    );
    ensure!(results.iter().all(|r| r.2 == 0), "produce {value}: {results:?}");
    Ok(())
}

/// (offset, value) of every record from `offset` on, one Fetch (v12, topics by name).
async fn read_from(client: &mut RawClient, offset: i64) -> Result<Vec<(i64, String)>> {
    let response = client.request(12, &fetch_request(&[(TOPIC, 0, offset)], 1 << 20)).await?;
    let result = fetch_results(&response).into_iter().next().context("no partition in the Fetch response")?;
    ensure!(result.error_code == 0, "Fetch from {offset}: error {}", result.error_code);
    let value = |r: &harness::batch::StoredRecord| r.record.value.as_deref().unwrap_or_default().to_vec();
    Ok(decode_batches(result.records)?
        .iter()
        .map(|r| (r.offset, String::from_utf8_lossy(&value(r)).into_owned()))
        .collect())
}

/// `POST /checkpoint`, then waits until the node reports a checkpoint at least that far.
fn checkpoint(cluster: &Cluster) -> Result<()> {
    let addr = cluster.admin_addr(1);
    let applied = admin_api::status(addr)?.last_applied.as_u64().context("no applied index")?;
    let response = admin_api::post(addr, "/checkpoint")?;
    ensure!(response.status == 202, "POST /checkpoint: {} {}", response.status, response.text());
    let started = Instant::now();
    while admin_api::status(addr)?.checkpoint_index.as_u64().map_or(true, |i| i < applied) {
        ensure!(
            started.elapsed() < CHECKPOINT_TIMEOUT,
            "no checkpoint at {applied} within {CHECKPOINT_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

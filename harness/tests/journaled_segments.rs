//! Journaled partition segments (issue 31, step 2 of docs/PERFORMANCE.md's write-amplification
//! design): on a new cluster (`onelog.version` 6 from its first entries), a produced batch is
//! written once per node, into the Raft log, and the partitions index it there.
//!
//! Three nodes with 256 KiB Raft log segments; librdkafka writes 1 KiB records one at a time,
//! nine to the topic `big` for each one to `small`:
//! - every node journals its partition segments and their own files hold next to nothing;
//! - a checkpoint purges the log, and the purged segments the partitions point into are kept
//!   (parked); every record reads back after a kill -9 of all three nodes;
//! - once `big` is deleted up to its end (DeleteRecords), its segments go, the parked ones are
//!   mostly dead, a checkpoint copies what `small` keeps of them into its own files, and the
//!   next releases them: `small` reads back whole, and far fewer segments stay parked;
//! - a follower wiped and restarted catches up from a snapshot archive built from journaled
//!   segments, and the three nodes' digests agree.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use harness::kafka::{client_config, create_topics};
use harness::raw_ops::delete_records;
use harness::txn::{read_values, READ_COMMITTED};
use harness::{admin_api, Cluster, ClusterOptions, RawClient};
use rdkafka::producer::{FutureProducer, FutureRecord};

const BIG: &str = "big";
const SMALL: &str = "small";
const RECORDS: usize = 3_000;
const RECORD_BYTES: usize = 1_024;
const TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread")]
async fn batches_stay_in_the_raft_log_and_its_segments_are_kept_while_pointed_into() {
    let options = ClusterOptions::new(3).config("onelog.raft.segment.bytes", 256 * 1024);
    let mut cluster = Cluster::start_with(options).expect("starting 3 nodes");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    create_topics(&bootstrap, &[(BIG, 1), (SMALL, 1)]).await?;
    let written = write(cluster).await?;
    for id in cluster.ids() {
        let status = cluster.status(id)?;
        ensure!(status.journaled_segments, "node {id} does not journal: {status:?}");
        let (journals, own) = partition_files(cluster, id)?;
        ensure!(journals >= 2, "node {id}: {journals} journals");
        // Without journals the own files hold every byte (over 3 MB); with them, nothing.
        ensure!(own < 512 * 1024, "node {id}: own files hold {own} bytes");
        println!("node {id}: {journals} journals, own files hold {own} bytes");
    }

    let end = last_log_index(cluster)?;
    let parked = checkpoint_all(cluster, end - 2_100)?;
    ensure!(parked.iter().all(|p| *p >= 3), "parked segments per node: {parked:?}");
    let first_parked =
        cluster.ids().iter().map(|id| parked_files(cluster, *id)).collect::<Result<Vec<_>>>()?;
    for id in cluster.ids() {
        cluster.kill9(id)?;
    }
    cluster.start_all()?;
    check_read_back(&bootstrap, &written, &[BIG, SMALL])?;
    println!("after a kill -9 of every node, every record reads back; parked segments {parked:?}");

    let leader = cluster.leader()?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    let big = written.iter().filter(|(topic, _)| *topic == BIG).count() as i64;
    let (code, low) = delete_records(&mut client, BIG, big).await?;
    ensure!(code == 0 && low == big, "DeleteRecords of {BIG}: {code}, {low}");
    // Two checkpoints: the first copies what `small` keeps, the second releases.
    let mut end = last_log_index(cluster)?;
    for round in 0..2 {
        write_more(cluster, round).await?;
        checkpoint_all(cluster, end)?;
        end = last_log_index(cluster)?;
    }
    for (id, first) in cluster.ids().into_iter().zip(&first_parked) {
        let now = parked_files(cluster, id)?;
        let kept: Vec<_> = first.iter().filter(|f| now.contains(f)).collect();
        ensure!(
            kept.is_empty(),
            "node {id} still keeps {kept:?} of the segments {first:?}; parked now {now:?}"
        );
    }
    check_read_back(&bootstrap, &written, &[SMALL])?;
    println!("after {BIG} was deleted: the segments parked at first {first_parked:?} are released, {SMALL} reads back whole");

    let follower = cluster.followers()?[0];
    cluster.kill9(follower)?;
    cluster.wipe(follower)?;
    cluster.start_node(follower)?;
    cluster.assert_digests_equal()?;
    Ok(())
}

/// `RECORDS` records, each acknowledged by all before the next (one entry each): record `n` to
/// `small` when `n % 10 == 9`, else to `big`. Returns (topic, value) in order.
async fn write(cluster: &Cluster) -> Result<Vec<(&'static str, String)>> {
    let producer: FutureProducer =
        client_config(&cluster.bootstrap()).set("acks", "all").set("linger.ms", "0").create()?;
    let mut written = Vec::new();
    for n in 0..RECORDS {
        let topic = if n % 10 == 9 { SMALL } else { BIG };
        let value = format!("{n:0width$}", width = RECORD_BYTES);
        let record = FutureRecord::to(topic).partition(0).key("k").payload(&value);
        producer.send(record, TIMEOUT).await.map_err(|(e, _)| anyhow::anyhow!("record {n}: {e}"))?;
        written.push((topic, value));
    }
    Ok(written)
}

/// 2,200 small records to a third topic: enough entries past a checkpoint to purge below it.
async fn write_more(cluster: &Cluster, round: usize) -> Result<()> {
    let topic = format!("filler-{round}");
    create_topics(&cluster.bootstrap(), &[(topic.as_str(), 1)]).await?;
    let producer: FutureProducer =
        client_config(&cluster.bootstrap()).set("acks", "all").set("linger.ms", "0").create()?;
    for n in 0..2_200 {
        let record = FutureRecord::to(&topic).partition(0).key("k").payload("x");
        producer.send(record, TIMEOUT).await.map_err(|(e, _)| anyhow::anyhow!("filler {n}: {e}"))?;
    }
    Ok(())
}

/// Checkpoints every node and waits until each purged past `index`; the parked segments each
/// then keeps.
fn checkpoint_all(cluster: &Cluster, index: u64) -> Result<Vec<u64>> {
    let mut parked = Vec::new();
    for id in cluster.ids() {
        let addr = cluster.admin_addr(id);
        tokio::task::block_in_place(|| admin_api::checkpoint_and_purge_past(addr, index, TIMEOUT))?;
        parked.push(cluster.status(id)?.parked_log_segments);
    }
    Ok(parked)
}

fn last_log_index(cluster: &mut Cluster) -> Result<u64> {
    let leader = cluster.leader()?;
    let status = cluster.status(leader)?;
    status.last_log_index.as_u64().context("no last log index")
}

/// Every record written to `topics` reads back once, in order.
fn check_read_back(bootstrap: &str, written: &[(&'static str, String)], topics: &[&str]) -> Result<()> {
    for topic in topics {
        let values = tokio::task::block_in_place(|| read_values(bootstrap, topic, 1, READ_COMMITTED))?;
        let want: Vec<&String> = written.iter().filter(|(t, _)| t == topic).map(|(_, v)| v).collect();
        ensure!(
            values.iter().eq(want.iter().copied()),
            "{topic}: {} records read back, {} written",
            values.len(),
            want.len()
        );
    }
    Ok(())
}

/// Journals in node `id`'s partition directories, and the bytes its own segment files hold
/// on disk (blocks, not lengths).
fn partition_files(cluster: &Cluster, id: u64) -> Result<(usize, u64)> {
    use std::os::unix::fs::MetadataExt;
    let (mut journals, mut own) = (0, 0);
    for entry in harness::disk::files_under(&cluster.data_dir(id).join("state"))? {
        match entry.extension().and_then(|e| e.to_str()) {
            Some("refs") => journals += 1,
            Some("log") => own += std::fs::metadata(&entry)?.blocks() * 512,
            _ => {}
        }
    }
    Ok((journals, own))
}

/// Raft log segment files of node `id` that hold only purged entries: the parked ones.
fn parked_files(cluster: &Cluster, id: u64) -> Result<Vec<String>> {
    let purged = cluster.status(id)?.purged_index.as_u64().context("nothing purged")?;
    let mut bases: Vec<u64> = std::fs::read_dir(cluster.data_dir(id).join("raft-log"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".seg")?.parse().ok())
        .collect();
    bases.sort();
    // A segment is wholly purged when the next one starts at or below the purge point + 1.
    let parked = bases.windows(2).filter(|w| w[1] <= purged + 1).map(|w| w[0].to_string()).collect();
    Ok(parked)
}

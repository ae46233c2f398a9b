//! The Raft log recycles purged segments only once onelog 0.1.0 can no longer be started on the
//! data (issue 31; docs/ARCHITECTURE.md, Storage and recovery). A recycled segment keeps an
//! earlier life's records after its own, and 0.1.0's recovery, which ends a segment at its
//! first zero header, would read them as a torn tail and drop every later segment. So a node
//! recycles only after a checkpoint that records feature levels (which 0.1.0 refuses to open)
//! is durable: on a cluster upgraded from 0.1.0, after the operator finalizes a level.
//!
//! Three nodes of this build start on 0.1.0's data (the golden fixture, as
//! `upgrade_fixture.rs`) with 64 KiB Raft segments for what they write. The fixture's one
//! segment is 64 MiB, so the first round writes 1,000 records of 68 KiB to fill it, then
//! small ones; writes and a checkpoint on every node then purge that segment and several
//! small ones:
//! - before any level is finalized, no node keeps a purged segment for reuse (no
//!   `recycled-*` file) and every node still describes 0.1.0's levels;
//! - after `kafka-features.sh upgrade --feature onelog.version=2`, the same writes and
//!   checkpoints leave recycled segments on every node;
//! - every record written reads back once, in order.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use harness::kafka::{client_config, create_topics};
use harness::txn::{read_values, READ_COMMITTED};
use harness::upgrade::fixture::{self, fixture_dir, reader_configs};
use harness::upgrade::make::unpack_into;
use harness::upgrade::manifest::{Manifest, MANIFEST_FILE};
use harness::{admin_api, java, Cluster};
use rdkafka::producer::{FutureProducer, FutureRecord};

const RELEASE: &str = "0.1.0";
const TOPIC: &str = "recycling-gate";
/// Large records that fill the fixture's 64 MiB segment (and a little more).
const LARGE_RECORDS: usize = 1_000;
const LARGE_BYTES: usize = 68 * 1024;
/// Small records per round: past the 2,000 entries a node keeps below its checkpoint
/// (`LOG_ENTRIES_KEPT_BELOW_CHECKPOINT`), so that each checkpoint purges several segments.
const SMALL_RECORDS: usize = 3_000;
const SMALL_BYTES: usize = 1_024;
const TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread")]
async fn purged_segments_are_recycled_only_once_0_1_0_cannot_open_the_data() {
    let dir = fixture_dir(RELEASE);
    let manifest = Manifest::read(&dir.join(MANIFEST_FILE)).expect("the fixture's manifest");
    let mut configs: Vec<(String, String)> = manifest.node_configs.clone().into_iter().collect();
    configs.extend(reader_configs());
    configs.push(("onelog.raft.segment.bytes".to_string(), (64 * 1024).to_string()));
    let mut cluster =
        Cluster::prepare(fixture::cluster_options(None, &configs)).expect("the fixture's ports");
    unpack_into(&cluster, &dir, &manifest).expect("unpacking the fixture");
    cluster.start_all().expect("three nodes of this build on 0.1.0's data directories");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    create_topics(&bootstrap, &[(TOPIC, 1)]).await?;
    let mut sizes = vec![LARGE_BYTES; LARGE_RECORDS];
    sizes.extend([SMALL_BYTES; SMALL_RECORDS]);
    write_and_purge(cluster, 0, &sizes).await?;
    for id in cluster.ids() {
        let recycled = recycled_files(cluster, id)?;
        ensure!(recycled.is_empty(), "node {id} recycles before any level is finalized: {recycled:?}");
        // Segments were purged (not only entries): the fixture's 64 MiB one is gone.
        let files = listing(cluster, id)?;
        ensure!(
            files.iter().all(|(_, len)| *len < 1 << 20),
            "node {id} still holds the fixture's segment: {files:?}"
        );
        let level = java::described_feature(&cluster.kafka_addr(id).to_string(), "onelog.version")?.2;
        ensure!(level == 1, "node {id} describes onelog.version {level}, 0.1.0's is 1");
    }
    println!("before finalization: segments purged, none kept for reuse");

    let upgrade = ["upgrade", "--feature", "onelog.version=2"];
    let (ok, text) = tokio::task::block_in_place(|| java::feature_command(&bootstrap, &upgrade))?;
    ensure!(ok && text.contains("onelog.version was upgraded to 2."), "kafka-features upgrade: {text}");
    write_and_purge(cluster, sizes.len(), &[SMALL_BYTES; SMALL_RECORDS]).await?;
    for id in cluster.ids() {
        let recycled = recycled_files(cluster, id)?;
        ensure!(
            !recycled.is_empty(),
            "node {id} kept no purged segment after finalization; its Raft log: {:?}",
            listing(cluster, id)?
        );
        println!("node {id}: {} recycled segments after finalization", recycled.len());
    }

    let values = read_values(&bootstrap, TOPIC, 1, READ_COMMITTED)?;
    let written = sizes.len() + SMALL_RECORDS;
    let numbers: Vec<usize> = values.iter().filter_map(|v| v.parse().ok()).collect();
    ensure!(values.len() == written, "read back {} records, wrote {written}", values.len());
    ensure!(numbers.iter().copied().eq(0..written), "the records read back are not those written, in order");
    Ok(())
}

/// Record `n`'s value: its number, zero-padded to `bytes`.
fn value(n: usize, bytes: usize) -> String {
    // Not `format!`'s width, which stops at 65,535.
    let digits = n.to_string();
    "0".repeat(bytes.saturating_sub(digits.len())) + &digits
}

/// Writes records numbered from `first`, of `sizes`, one at a time (an entry each), then has
/// every node checkpoint and waits until each has purged all but the last 2,100 of them (it
/// keeps 2,000 below its checkpoint).
async fn write_and_purge(cluster: &mut Cluster, first: usize, sizes: &[usize]) -> Result<()> {
    let producer: FutureProducer =
        client_config(&cluster.bootstrap()).set("acks", "1").set("linger.ms", "0").create()?;
    let leader = cluster.leader()?;
    let start = last_log_index(cluster, leader)?;
    for (n, &bytes) in (first..).zip(sizes) {
        let value = value(n, bytes);
        let record = FutureRecord::to(TOPIC).partition(0).key("k").payload(&value);
        producer.send(record, TIMEOUT).await.map_err(|(e, _)| anyhow::anyhow!("record {n}: {e}"))?;
    }
    for id in cluster.ids() {
        let (addr, past) = (cluster.admin_addr(id), start + (sizes.len() as u64 - 2_100));
        tokio::task::block_in_place(|| admin_api::checkpoint_and_purge_past(addr, past, TIMEOUT))?;
    }
    Ok(())
}

fn last_log_index(cluster: &Cluster, id: u64) -> Result<u64> {
    let status = admin_api::status(cluster.admin_addr(id))?;
    status.last_log_index.as_u64().with_context(|| format!("node {id}: no last log index"))
}

/// Purged segments node `id` keeps for reuse (`recycled-N.seg.tmp` in its Raft log directory).
fn recycled_files(cluster: &Cluster, id: u64) -> Result<Vec<String>> {
    let files = listing(cluster, id)?;
    Ok(files.into_iter().map(|(name, _)| name).filter(|name| name.starts_with("recycled-")).collect())
}

/// The names and sizes in node `id`'s Raft log directory.
fn listing(cluster: &Cluster, id: u64) -> Result<Vec<(String, u64)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(cluster.data_dir(id).join("raft-log"))? {
        let entry = entry?;
        out.push((entry.file_name().to_string_lossy().into_owned(), entry.metadata()?.len()));
    }
    out.sort();
    Ok(out)
}

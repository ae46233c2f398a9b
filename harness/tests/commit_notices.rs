//! Commit notices ride on the next AppendEntries (issue 31, the `vendor/openraft` patch's
//! `commit_notify_delay_us`). Released openraft sends each follower an empty AppendEntries
//! whenever the commit index moves, so a follower received two requests per entry under
//! load: the entry, then the notice that it committed. The leader now holds a new commit
//! index back for `limits::RAFT_COMMIT_NOTIFY_DELAY_US` when it has nothing else for that
//! follower, and the next entry carries it.
//!
//! Three nodes; one idempotent acks=all producer writes records one at a time, each awaited,
//! so every record is an entry of its own and the next one follows within a round trip.
//! Checked, on each follower, from `onelog_raft_append_entries_received_total`:
//!
//! - fewer than half as many empty AppendEntries as ones carrying entries (without the patch
//!   there is one empty notice per entry, plus the heartbeats);
//! - once the writes stop, the follower still learns the last commit and applies up to the
//!   leader's last entry (the held-back notice goes out when due);
//! - every record is read back once, in order.

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use harness::kafka::{client_config, create_topics};
use harness::scrape::Scrape;
use harness::txn::{read_values, READ_COMMITTED};
use harness::Cluster;
use rdkafka::producer::{FutureProducer, FutureRecord};

const TOPIC: &str = "commit-notices";
const RECORDS: usize = 300;
const TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_rides_on_the_next_append_and_an_idle_follower_still_learns_it() {
    let mut cluster = Cluster::start(3).expect("starting 3 nodes");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    create_topics(&bootstrap, &[(TOPIC, 1)]).await?;
    let leader = cluster.leader()?;
    let followers = cluster.followers()?;
    let before: Vec<(f64, f64)> = followers.iter().map(|&f| received(cluster, f)).collect::<Result<_>>()?;
    write_one_at_a_time(&bootstrap).await?;
    for (&follower, (empty_before, entries_before)) in followers.iter().zip(before) {
        let (empty, entries) = received(cluster, follower)?;
        let (empty, entries) = (empty - empty_before, entries - entries_before);
        println!("follower {follower}: {entries} AppendEntries with entries, {empty} empty");
        ensure!(
            entries >= (RECORDS / 2) as f64,
            "follower {follower}: only {entries} AppendEntries with entries"
        );
        ensure!(
            empty < entries / 2.0,
            "follower {follower}: {empty} empty AppendEntries for {entries} with entries: commits are not riding on the next entry"
        );
    }
    let last = applied(cluster, leader)?;
    for &follower in &followers {
        wait_applied(cluster, follower, last)?;
    }
    let values = read_values(&bootstrap, TOPIC, 1, READ_COMMITTED)?;
    let expected: Vec<String> = (0..RECORDS).map(|i| format!("record-{i}")).collect();
    ensure!(values == expected, "read back {} records, not the {RECORDS} written in order", values.len());
    Ok(())
}

/// Each record sent once the previous one is acknowledged: one entry per record.
async fn write_one_at_a_time(bootstrap: &str) -> Result<()> {
    let producer: FutureProducer = client_config(bootstrap)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "0")
        .create()?;
    for i in 0..RECORDS {
        let value = format!("record-{i}");
        let record = FutureRecord::to(TOPIC).partition(0).key(&value).payload(&value);
        producer.send(record, TIMEOUT).await.map_err(|(e, _)| anyhow::anyhow!("{value}: {e}"))?;
    }
    Ok(())
}

/// (empty, carrying entries) AppendEntries `node` has received so far.
fn received(cluster: &Cluster, node: u64) -> Result<(f64, f64)> {
    let scrape = Scrape::of(cluster.admin_addr(node))?;
    let name = "onelog_raft_append_entries_received_total";
    Ok((scrape.sum(name, &[("carrying", "empty")]), scrape.sum(name, &[("carrying", "entries")])))
}

fn applied(cluster: &Cluster, node: u64) -> Result<u64> {
    let status = cluster.status(node)?;
    status.last_applied.as_u64().with_context(|| format!("node {node}: last_applied {}", status.last_applied))
}

/// Waits until `node` has applied `index`: it learns the commit from a held-back notice or a
/// heartbeat, since nothing else is written.
fn wait_applied(cluster: &Cluster, node: u64, index: u64) -> Result<()> {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let now = applied(cluster, node)?;
        if now >= index {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("node {node} applied up to {now}, the leader up to {index}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

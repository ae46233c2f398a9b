//! Transactions survive a leader change (issue 17): a new leader keeps every transaction the
//! log shows open, and its producer carries on with it, as with Apache Kafka, whose partition
//! leaders and coordinator can move under an open transaction without ending it.
//!
//! - A transaction with acknowledged writes on two partitions, the leader killed -9, more
//!   writes to both partitions through the new leader (which never saw them added), then a
//!   commit: it succeeds and read_committed shows all four writes once. Before issue 17 the
//!   new leader aborted the transaction at takeover and the commit failed.
//! - A write of the open transaction in flight when its leader dies: the fault-injection
//!   build's delay point `proposer.before-txn-write` holds the leader (only while the arm file
//!   exists, so the next leader passes) and the leader is killed there. librdkafka sends the
//!   write again to the new leader; it is acknowledged, and the commit holds it exactly once.
//!   With `ONELOG_FAULT_FLAGS=bug.ack-txn-before-commit` in its environment (the nodes inherit
//!   it) the held write is acknowledged before it is in any log, is lost with its leader, and
//!   the transaction commits without it: this test then fails, as the chaos checker's
//!   `--bug ack-txn-before-commit` run does under a schedule.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::kafka::create_topics;
use harness::txn::{read_values, transactional_producer, READ_COMMITTED, READ_UNCOMMITTED};
use harness::{Cluster, ClusterOptions};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

/// Longer than the whole test: the killed leader never appends the held entry.
const DELAY: &str = "proposer.before-txn-write:600000";
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);
const COMMIT_TIMEOUT: Duration = Duration::from_secs(30);

async fn deliver(producer: &FutureProducer, topic: &str, partition: i32, value: &str) -> Result<()> {
    let record = FutureRecord::to(topic).partition(partition).key(value).payload(value);
    producer
        .send(record, DELIVERY_TIMEOUT)
        .await
        .map_err(|(e, _)| anyhow::anyhow!("delivery of {value:?}: {e}"))?;
    Ok(())
}

fn sorted(mut values: Vec<String>) -> Vec<String> {
    values.sort();
    values
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transaction_open_across_a_leader_kill_commits_with_every_write() {
    let options = ClusterOptions::new(3).config("log.segment.bytes", 1 << 20);
    let mut cluster = Cluster::start_with(options).expect("starting cluster");
    let result = open_across_kill(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn open_across_kill(cluster: &mut Cluster) -> Result<()> {
    const TOPIC: &str = "txn-open-across-kill";
    let (leader, _) = cluster.wait_for_leader(Duration::from_secs(30))?;
    create_topics(&cluster.bootstrap(), &[(TOPIC, 2)]).await?;
    let producer = transactional_producer(&cluster.bootstrap(), "open-across-kill")?;
    producer.begin_transaction()?;
    deliver(&producer, TOPIC, 0, "before-0").await?;
    deliver(&producer, TOPIC, 1, "before-1").await?;
    cluster.kill9(leader)?;
    let (new_leader, election) = cluster.wait_for_leader(Duration::from_secs(30))?;
    let resumed = Instant::now();
    deliver(&producer, TOPIC, 0, "after-0").await.context("a write after the leader change")?;
    deliver(&producer, TOPIC, 1, "after-1").await.context("a write after the leader change")?;
    producer.commit_transaction(COMMIT_TIMEOUT).context("the commit after the leader change")?;
    println!(
        "killed leader {leader}; node {new_leader} leads after {election:?}; two more writes and the \
         commit took {:?}",
        resumed.elapsed()
    );
    let live = restart(cluster, leader)?;
    let committed = sorted(read_values(&live, TOPIC, 2, READ_COMMITTED)?);
    ensure!(
        committed == ["after-0", "after-1", "before-0", "before-1"],
        "read_committed shows {committed:?}: every write of the transaction, once each"
    );
    cluster.assert_digests_equal()?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_in_flight_when_its_leader_dies_is_carried_to_the_next_leader() {
    let arm = tempfile::NamedTempFile::new().expect("arm file");
    let arm_path = arm.path().to_path_buf();
    // Not armed while the cluster starts and the transaction's first write goes in.
    std::fs::remove_file(&arm_path).expect("disarm");
    let mut options = ClusterOptions::new(3).config("log.segment.bytes", 1 << 20);
    options.env.push(("ONELOG_FAULT_DELAY".into(), DELAY.into()));
    options.env.push(("ONELOG_FAULT_ARMED_BY".into(), arm_path.display().to_string()));
    let mut cluster = Cluster::start_with(options).expect("starting cluster");
    let result = in_flight_write(&mut cluster, &arm_path).await;
    drop(std::fs::remove_file(&arm_path));
    cluster.unwrap_or_dump(result);
}

async fn in_flight_write(cluster: &mut Cluster, arm: &Path) -> Result<()> {
    const TOPIC: &str = "txn-in-flight-write";
    let (leader, _) = cluster.wait_for_leader(Duration::from_secs(30))?;
    create_topics(&cluster.bootstrap(), &[(TOPIC, 2)]).await?;
    let producer = transactional_producer(&cluster.bootstrap(), "in-flight-write")?;
    producer.begin_transaction()?;
    // The transaction's first write opens it in the log.
    deliver(&producer, TOPIC, 0, "first").await?;
    std::fs::write(arm, b"armed")?;
    let record = FutureRecord::to(TOPIC).partition(1).key("second").payload("second");
    // Queued now (`send` would queue only once awaited); librdkafka delivers it on its own.
    let second =
        producer.send_result(record).map_err(|(e, _)| anyhow::anyhow!("queueing the second write: {e}"))?;
    let held = wait_for_log(cluster, leader, "fault injection: delaying", Duration::from_secs(20));
    ensure!(
        held,
        "the leader never reached the delay point: is ONELOG_BIN built with --features fault-injection?"
    );
    ensure!(cluster.leader()? == leader, "the leader changed before the kill");
    cluster.kill9(leader)?;
    std::fs::remove_file(arm)?;
    let (new_leader, election) = cluster.wait_for_leader(Duration::from_secs(30))?;
    println!("killed leader {leader} holding the second write; node {new_leader} leads after {election:?}");
    let delivered = tokio::time::timeout(DELIVERY_TIMEOUT, second).await;
    println!("the second write: {delivered:?}");
    ensure!(
        matches!(delivered, Ok(Ok(Ok(_)))),
        "the in-flight write failed with the leader change: {delivered:?}"
    );
    producer.commit_transaction(COMMIT_TIMEOUT).context("the commit after the leader change")?;
    let live = restart(cluster, leader)?;
    let uncommitted = sorted(read_values(&live, TOPIC, 2, READ_UNCOMMITTED).context("read_uncommitted")?);
    let committed = sorted(read_values(&live, TOPIC, 2, READ_COMMITTED).context("read_committed")?);
    ensure!(
        committed == ["first", "second"],
        "the transaction committed with {committed:?} (the log holds {uncommitted:?}): it must hold \
         both acknowledged writes, once each"
    );
    ensure!(uncommitted == committed, "the log holds {uncommitted:?} beside the commit");
    cluster.assert_digests_equal()?;
    Ok(())
}

/// Starts the killed node again and returns every live node's bootstrap address once all of
/// them name the leader: the restarted node names none until it hears from the new one, and
/// librdkafka's watermark query does not retry the partition error its Metadata then carries.
fn restart(cluster: &mut Cluster, id: u64) -> Result<String> {
    cluster.start_node(id)?;
    cluster.wait_for_leader(Duration::from_secs(30))?;
    Ok(cluster.live_bootstrap())
}

fn wait_for_log(cluster: &Cluster, id: u64, text: &str, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if std::fs::read_to_string(cluster.log_path(id)).is_ok_and(|log| log.contains(text)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

//! Kafka transactions (KIP-98) with librdkafka against a three-node cluster.
//!
//! The "13 physical, 10 logical" run of the EOS article (shared/seeds/kafka-eos-live-run-ru):
//! one transactional producer sends batch A (5 records) and commits; batch B fails after
//! three synchronous sends and is aborted; batch B is sent again (5) and committed. A
//! read_committed consumer must see exactly the 10 committed records, a read_uncommitted one
//! all 13 — the aborted three are on disk, hidden by the abort marker, not erased.
//!
//! Then zombie fencing: a second producer with the same transactional.id fences the first;
//! the first's writes and commit are refused and none of them becomes visible.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use harness::kafka::create_topics;
use harness::txn::{
    read_values, send_sync, transactional_producer, READ_COMMITTED, READ_UNCOMMITTED, TXN_CALL_TIMEOUT,
};
use harness::{Cluster, ClusterOptions};
use rdkafka::error::KafkaError;
use rdkafka::producer::Producer;

const TIMEOUT: Duration = TXN_CALL_TIMEOUT;

#[tokio::test(flavor = "multi_thread")]
async fn librdkafka_thirteen_physical_ten_logical() {
    let mut cluster = Cluster::start_with(ClusterOptions::new(3)).expect("starting cluster");
    let result = thirteen_ten(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn thirteen_ten(cluster: &mut Cluster) -> Result<()> {
    cluster.wait_for_leader(Duration::from_secs(30))?;
    let bootstrap = cluster.bootstrap();
    let topic = "eos-live-run";
    create_topics(&bootstrap, &[(topic, 1)]).await?;
    let producer = transactional_producer(&bootstrap, "eos-live-run-txn")?;

    producer.begin_transaction()?;
    for i in 0..5 {
        send_sync(&producer, topic, None, &format!("A{i}"), &format!("batchA-{i}")).await?;
    }
    producer.commit_transaction(TIMEOUT).context("commit batch A")?;

    producer.begin_transaction()?;
    for i in 0..3 {
        send_sync(&producer, topic, None, &format!("B{i}"), &format!("batchB-try1-{i}")).await?;
    }
    // The simulated processing failure on the third record.
    producer.abort_transaction(TIMEOUT).context("abort batch B")?;

    producer.begin_transaction()?;
    for i in 0..5 {
        send_sync(&producer, topic, None, &format!("B{i}"), &format!("batchB-{i}")).await?;
    }
    producer.commit_transaction(TIMEOUT).context("commit batch B")?;

    let committed = read_values(&bootstrap, topic, 1, READ_COMMITTED)?;
    let uncommitted = read_values(&bootstrap, topic, 1, READ_UNCOMMITTED)?;
    println!("read_committed={} read_uncommitted={}", committed.len(), uncommitted.len());
    let expected: Vec<String> =
        (0..5).map(|i| format!("batchA-{i}")).chain((0..5).map(|i| format!("batchB-{i}"))).collect();
    ensure!(committed == expected, "read_committed saw {committed:?}");
    ensure!(uncommitted.len() == 13, "read_uncommitted saw {} records: {uncommitted:?}", uncommitted.len());
    ensure!(uncommitted.iter().filter(|v| v.starts_with("batchB-try1")).count() == 3);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn librdkafka_zombie_is_fenced_and_its_writes_stay_invisible() {
    let mut cluster = Cluster::start_with(ClusterOptions::new(3)).expect("starting cluster");
    let result = zombie(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn zombie(cluster: &mut Cluster) -> Result<()> {
    cluster.wait_for_leader(Duration::from_secs(30))?;
    let bootstrap = cluster.bootstrap();
    let topic = "zombie";
    create_topics(&bootstrap, &[(topic, 2)]).await?;
    let old = transactional_producer(&bootstrap, "fenced-txn")?;
    old.begin_transaction()?;
    send_sync(&old, topic, None, "z0", "zombie-0").await?;

    // The new instance fences the old one and aborts its open transaction.
    let new = transactional_producer(&bootstrap, "fenced-txn")?;
    new.begin_transaction()?;
    send_sync(&new, topic, None, "n0", "new-0").await?;
    new.commit_transaction(TIMEOUT).context("new instance commits")?;

    let late = send_sync(&old, topic, None, "z1", "zombie-1").await;
    let commit = old.commit_transaction(TIMEOUT);
    let show = |r: &Result<_, _>| r.as_ref().map(|_| ()).map_err(ToString::to_string);
    println!("zombie send: {:?}; zombie commit: {:?}", show(&late.map(|_| ())), commit);
    ensure!(commit.is_err(), "the zombie's commit must fail");
    if let Err(KafkaError::Transaction(e)) = &commit {
        ensure!(e.is_fatal() || e.txn_requires_abort(), "zombie commit error {e:?}");
    }
    let committed = read_values(&bootstrap, topic, 2, READ_COMMITTED)?;
    ensure!(committed == vec!["new-0".to_string()], "read_committed saw {committed:?}");
    let uncommitted = read_values(&bootstrap, topic, 2, READ_UNCOMMITTED)?;
    ensure!(
        uncommitted.contains(&"zombie-0".to_string()),
        "the zombie's first write is on disk: {uncommitted:?}"
    );
    Ok(())
}

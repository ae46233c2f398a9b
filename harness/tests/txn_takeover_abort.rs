//! DESIGN §4's takeover abort, pinned: a transactional write is acknowledged once the leader
//! has stamped it, before its entry is in any log; if that leader dies then, the write is
//! lost, and the new leader must abort the transaction, so the client's commit fails instead
//! of committing the transaction without it (a lost acknowledged write, a torn transaction).
//!
//! The window is made certain with the fault-injection build's delay point
//! `proposer.answered-before-write` (the leader waits there, after answering the write and
//! before appending its entry, for far longer than the test takes): the leader is killed
//! inside it. The chaos checker's `--bug skip-takeover-abort` run (issue 14) is the same
//! scenario under a schedule; this test fails with `ONELOG_FAULT_FLAGS=bug.skip-takeover-abort`
//! in its environment (the nodes inherit it).

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use harness::kafka::create_topics;
use harness::txn::{read_values, transactional_producer, READ_COMMITTED, READ_UNCOMMITTED};
use harness::{Cluster, ClusterOptions};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

const TOPIC: &str = "txn-takeover-abort";
/// Longer than the whole test: the killed leader never appends the delayed entry.
const DELAY: &str = "proposer.answered-before-write:600000";
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread")]
async fn a_write_lost_with_its_leader_aborts_its_transaction() {
    let mut options = ClusterOptions::new(3).config("log.segment.bytes", 1 << 20);
    options.env.push(("ONELOG_FAULT_DELAY".into(), DELAY.into()));
    let mut cluster = Cluster::start_with(options).expect("starting cluster");
    let result = lost_write_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn deliver(producer: &FutureProducer, partition: i32, value: &str) -> Result<()> {
    let record = FutureRecord::to(TOPIC).partition(partition).key(value).payload(value);
    producer
        .send(record, DELIVERY_TIMEOUT)
        .await
        .map_err(|(e, _)| anyhow::anyhow!("delivery of {value:?}: {e}"))?;
    Ok(())
}

async fn lost_write_scenario(cluster: &mut Cluster) -> Result<()> {
    let (leader, _) = cluster.wait_for_leader(Duration::from_secs(30))?;
    let bootstrap = cluster.bootstrap();
    create_topics(&bootstrap, &[(TOPIC, 2)]).await?;
    let producer = transactional_producer(&bootstrap, "takeover-abort")?;

    // The transaction's first write waits for its entry to commit (DESIGN §4, `txn_is_open`);
    // the second is answered once stamped, and the leader then waits at the delay point.
    producer.begin_transaction()?;
    deliver(&producer, 0, "first").await?;
    deliver(&producer, 1, "second").await?;
    ensure!(cluster.leader()? == leader, "the leader changed before the kill");
    cluster.kill9(leader)?;
    let (new_leader, _) = cluster.wait_for_leader(Duration::from_secs(30))?;
    println!("killed leader {leader} inside the delayed write; node {new_leader} leads");

    let commit = producer.commit_transaction(Duration::from_secs(30));
    println!("commit after the leader change: {commit:?}");
    let live = cluster.live_bootstrap();
    let uncommitted = read_values(&live, TOPIC, 2, READ_UNCOMMITTED).context("read_uncommitted")?;
    ensure!(
        uncommitted == ["first"],
        "the log holds {uncommitted:?}, expected only the first write (the second lost with its \
         leader): is ONELOG_BIN built with --features fault-injection?"
    );
    let committed = read_values(&live, TOPIC, 2, READ_COMMITTED).context("read_committed")?;
    ensure!(
        commit.is_err() && committed.is_empty(),
        "the transaction committed ({commit:?}) without its acknowledged write \"second\": \
         read_committed shows {committed:?}; the new leader must abort it at takeover"
    );
    Ok(())
}

//! Transactions across Raft groups (issue 32, docs/SCALING.md §3), on three nodes running
//! three groups (group g led by node g + 1), topics `xg0-…`, `xg1-…` and `ruled-…` placed in
//! groups 0, 1 and 2:
//!
//! 1. a librdkafka producer (transactions v1: AddPartitionsToTxn) whose id is placed in group 2
//!    writes one record to a topic of each group per transaction, one in four aborted: its
//!    commits are one decision entry in group 2, delivered to groups 0 and 1; read_committed
//!    shows each committed transaction whole in all three topics and no aborted one, and no
//!    partition's last stable offset is left behind;
//! 2. a producer coordinated in group 0 writes to groups 1 and 2 only;
//! 3. the leader of a participant group (1) is killed -9 in the middle of transactions, then
//!    the coordinator group's (2): no transaction is lost or torn, and each group's replicas end
//!    with equal digests;
//! 4. offsets in a transaction coordinated in group 2 (`send_offsets_to_transaction`), whose
//!    consumer group lives in group 0: committed with the transaction, dropped with an abort;
//! 5. the Java client's "13 physical, 10 logical" run (`TxnLiveRun`) on a topic of group 1 with
//!    a transactional id of group 2, with kafka-clients 4.x (transactions v2) and 3.9 (v1).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::java::Clients;
use harness::kafka::create_topics;
use harness::raft_groups::{
    digests_agree, java_live_run, settle, GROUP0_PREFIX, GROUP1_PREFIX, RULED_PREFIX,
};
use harness::txn::{transactional_config, READ_COMMITTED};
use harness::txn_ledger::{kill_leader_mid_run, TxnLedger};
use harness::Cluster;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

const GROUPS: u64 = 3;
const TXNS: usize = 150;
const KILL_AFTER: usize = 40;
const SETTLE_TIMEOUT: Duration = Duration::from_secs(40);
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transactions_span_raft_groups() {
    let mut cluster = harness::raft_groups::start_three_groups().expect("starting 3 nodes with 3 groups");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

/// The topics of groups 0, 1 and 2.
fn topics() -> [String; 3] {
    [format!("{GROUP0_PREFIX}xout"), format!("{GROUP1_PREFIX}xout"), format!("{RULED_PREFIX}xout")]
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    settle(cluster, &[1, 2, 3], GROUPS, SETTLE_TIMEOUT).await?;
    let topics = topics();
    create_topics(&cluster.bootstrap(), &topics.iter().map(|t| (t.as_str(), 1)).collect::<Vec<_>>()).await?;
    let targets = |topics: &[String]| topics.iter().map(|t| (t.clone(), 0)).collect();
    let all = Arc::new(TxnLedger::new(&format!("{RULED_PREFIX}xapp"), targets(&topics)));
    transactions(cluster, &all, 0..TXNS, "coordinated in group 2, writing to groups 0, 1 and 2").await?;
    let from_0 = Arc::new(TxnLedger::new(&format!("{GROUP0_PREFIX}xapp"), targets(&topics[1..])));
    transactions(cluster, &from_0, 0..TXNS / 3, "coordinated in group 0, writing to groups 1 and 2").await?;
    leader_kill_mid_transactions(cluster, &all, 1, TXNS).await?;
    leader_kill_mid_transactions(cluster, &all, 2, 2 * TXNS).await?;
    offsets_in_transactions(cluster).await?;
    for clients in [Clients::Kafka4, Clients::Kafka3] {
        java_live_run_across_groups(cluster, clients).await?;
    }
    for g in 0..GROUPS {
        digests_agree(cluster, &[1, 2, 3], g, Duration::from_secs(30)).await?;
    }
    Ok(())
}

/// Transactions `txns` of `run`'s producer, one after the other.
async fn transactions(
    cluster: &Cluster,
    run: &TxnLedger,
    txns: std::ops::Range<usize>,
    what: &str,
) -> Result<()> {
    let started = Instant::now();
    let count = txns.len();
    let producer = run.init(&cluster.bootstrap())?;
    for txn in txns.clone() {
        run.attempt(&producer, txn, txn % 4 == 3)?;
    }
    let elapsed = started.elapsed();
    drop(producer);
    let committed = tokio::task::block_in_place(|| run.verify(&cluster.bootstrap(), txns.end))?;
    println!(
        "{count} transactions {what}: {committed} committed in all, {:.2} ms per transaction; \
         read_committed shows each whole and no aborted one",
        elapsed.as_secs_f64() * 1000.0 / count as f64
    );
    Ok(())
}

/// Group `group`'s leader killed -9 after `KILL_AFTER` of transactions `first` … `first` +
/// `TXNS`, restarted once they are done.
async fn leader_kill_mid_transactions(
    cluster: &mut Cluster,
    run: &Arc<TxnLedger>,
    group: u64,
    first: usize,
) -> Result<()> {
    let report = kill_leader_mid_run(cluster, run, (group, GROUPS), first..first + TXNS, KILL_AFTER).await?;
    let role = if group == 2 { "coordinator" } else { "participant" };
    println!("group {group}'s leader, the {role}: {report}, {} aborted or unknown", run.not_committed());
    Ok(())
}

/// `send_offsets_to_transaction` of a consumer group (group 0's) from a transaction of group 2:
/// the committed offset appears with a commit and not with an abort.
async fn offsets_in_transactions(cluster: &Cluster) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    let [_, input, output] = topics();
    // Placed in group 0 by rule (`group:xg0-=0`), so its offsets join from another group.
    let consumer_group = &format!("{GROUP0_PREFIX}offsets");
    let consumer: BaseConsumer =
        harness::kafka::client_config(&bootstrap).set("group.id", consumer_group).create()?;
    let producer: FutureProducer =
        transactional_config(&bootstrap, &format!("{RULED_PREFIX}xoffsets")).create()?;
    tokio::task::block_in_place(|| -> Result<()> {
        producer.init_transactions(CALL_TIMEOUT)?;
        for (offset, commit) in [(5, true), (9, false), (7, true)] {
            producer.begin_transaction()?;
            let record = FutureRecord::to(&output).partition(0).key("k").payload("offsets");
            producer.send_result(record).map_err(|(e, _)| e)?;
            let mut offsets = TopicPartitionList::new();
            offsets.add_partition_offset(&input, 0, Offset::Offset(offset))?;
            let metadata = consumer.group_metadata().context("group metadata")?;
            producer.send_offsets_to_transaction(&offsets, &metadata, CALL_TIMEOUT)?;
            if commit {
                producer.commit_transaction(CALL_TIMEOUT)?;
            } else {
                producer.abort_transaction(CALL_TIMEOUT)?;
            }
            let want = if commit { offset } else { 5 };
            let committed = committed_offset(&bootstrap, consumer_group, &input)?;
            ensure!(committed == want, "after offset {offset} (commit {commit}): committed {committed}");
        }
        Ok(())
    })?;
    println!("offsets of group 0's consumer group in transactions of group 2: committed with a commit, dropped with an abort");
    Ok(())
}

/// The offset `group` has committed for `topic`-0, asked as a read_committed consumer asks
/// (librdkafka sets require_stable then): while group 0 has not applied the decision yet the
/// answer is UNSTABLE_OFFSET_COMMIT, which the client retries, never the old value.
fn committed_offset(bootstrap: &str, group: &str, topic: &str) -> Result<i64> {
    let consumer: BaseConsumer = harness::kafka::client_config(bootstrap)
        .set("group.id", group)
        .set("isolation.level", READ_COMMITTED)
        .create()?;
    let mut wanted = TopicPartitionList::new();
    wanted.add_partition(topic, 0);
    let list = consumer.committed_offsets(wanted, CALL_TIMEOUT)?;
    let offset = list.find_partition(topic, 0).context("no partition")?.offset();
    Ok(offset.to_raw().unwrap_or(-1))
}

/// `TxnLiveRun` (harness/java) on a topic of group 1 with a transactional id of group 2.
async fn java_live_run_across_groups(cluster: &Cluster, clients: Clients) -> Result<()> {
    let (topic, id) =
        (format!("{GROUP1_PREFIX}java-{clients:?}"), format!("{RULED_PREFIX}xjava-{clients:?}"));
    java_live_run(cluster, clients, &topic, &id).await?;
    println!("TxnLiveRun ({clients:?}), topic in group 1, coordinator in group 2: 13 physical, 10 logical, read_committed reads the 10");
    Ok(())
}

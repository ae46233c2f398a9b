//! Transactions coordinated in the Raft group their transactional id is placed in (issue 32),
//! on three nodes running three groups (group g led by node g + 1), with librdkafka clients:
//!
//! 1. FindCoordinator(TRANSACTION) names, on every node, the leader of the id's group: ids
//!    named `ruled-…` (rule `txn:ruled-=2`) group 2's leader, other ids the group of their hash;
//! 2. a producer whose id is placed in group 2 runs transactions on group 2's topic, one in four
//!    aborted: its producer id is of group 2's range, group 2's leader describes it, group 0's
//!    log takes none of its entries, and read_committed shows each committed transaction
//!    exactly once and no aborted one;
//! 3. group 2's leader is killed -9 in the middle of more transactions: the producer follows
//!    its coordinator to the new leader, no transaction is lost or torn, and each group's
//!    replicas end with equal digests;
//! 4. the Java client's "13 physical, 10 logical" run (`TxnLiveRun`) in group 2, with
//!    kafka-clients 4.x (transactions v2: implicit adds in Produce v12, EndTxn v5) and 3.9
//!    (v1: AddPartitionsToTxn): read_committed reads the 10 committed records;
//! 5. `kafka-transactions.sh` on a transaction held open in group 2: `describe` names group 2's
//!    leader as its coordinator, `list` (every node asked) shows it once, `describe-producers`
//!    its first offset, and `abort` (WriteTxnMarkers to group 2's leader) aborts it through
//!    group 2's log: read_committed skips it, nothing hangs, and the producer carries on.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::java::Clients;
use harness::kafka::create_topics;
use harness::raft_groups::{
    digests_agree, group_row, java_live_run, preferred_of_three, settle, three_group_rules, RULED_PREFIX,
};
use harness::txn::{describe_transactions, open_after_commit, read_values, send_sync, READ_COMMITTED};
use harness::txn_ledger::{kill_leader_mid_run, TxnLedger};
use harness::{Cluster, RawClient};
use kafka_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;
use onelog_state::xgroup::placement::{IdKind, Placement};
use onelog_state::xgroup::{producer_id_base, producer_id_group};
use rdkafka::error::KafkaError;
use rdkafka::producer::Producer;

const GROUPS: u64 = 3;
const PARTS: i32 = 2;
/// Transactions before the kill, and in the run with the kill.
const TXNS: usize = 200;
const KILL_AFTER: usize = 60;
const SETTLE_TIMEOUT: Duration = Duration::from_secs(40);
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Group 0's applied index may move by this much while group 2 takes `TXNS` transactions: its
/// own duties (liveness, limits), never one entry per transaction.
const GROUP0_ENTRIES_MAX: u64 = TXNS as u64 / 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transactions_run_in_the_raft_group_of_their_transactional_id() {
    let mut cluster = harness::raft_groups::start_three_groups().expect("starting 3 nodes with 3 groups");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

fn topic() -> String {
    format!("{RULED_PREFIX}txn-out")
}

fn transactional_id() -> String {
    format!("{RULED_PREFIX}app")
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    settle(cluster, &[1, 2, 3], GROUPS, SETTLE_TIMEOUT).await?;
    create_topics(&cluster.bootstrap(), &[(&topic(), PARTS)]).await?;
    coordinators_are_the_groups_leaders(cluster).await?;
    let targets = (0..PARTS).map(|p| (topic(), p)).collect();
    let run = Arc::new(TxnLedger::new(&transactional_id(), targets));
    transactions_in_group_2(cluster, &run).await?;
    leader_kill_mid_transactions(cluster, &run).await?;
    for clients in [Clients::Kafka4, Clients::Kafka3] {
        java_live_run_in_group_2(cluster, clients).await?;
    }
    transactions_tool_in_group_2(cluster).await?;
    for g in 0..GROUPS {
        digests_agree(cluster, &[1, 2, 3], g, Duration::from_secs(30)).await?;
    }
    Ok(())
}

/// FindCoordinator v3 (one key) and v4 (a batch) on every node, for ids of every group.
async fn coordinators_are_the_groups_leaders(cluster: &Cluster) -> Result<()> {
    let placement = Placement::new(GROUPS as u32, &three_group_rules(), BTreeMap::new())?;
    let ids: Vec<String> = (0..12).map(|i| format!("app-{i}")).chain([transactional_id()]).collect();
    let expected: Vec<i32> =
        ids.iter().map(|id| preferred_of_three(u64::from(placement.id(IdKind::Txn, id))) as i32).collect();
    for g in 0..GROUPS as u32 {
        ensure!(ids.iter().any(|id| placement.id(IdKind::Txn, id) == g), "no id of group {g} in {ids:?}");
    }
    ensure!(placement.id(IdKind::Txn, &transactional_id()) == 2, "the rule places ruled- ids in group 2");
    for node in 1..=3 {
        let mut client = RawClient::connect_negotiated(cluster.kafka_addr(node)).await?;
        let keys: Vec<StrBytes> = ids.iter().map(|id| StrBytes::from_string(id.clone())).collect();
        let batch: FindCoordinatorResponse = client
            .request(4, &FindCoordinatorRequest::default().with_key_type(1).with_coordinator_keys(keys))
            .await?;
        let found: Vec<i32> = batch.coordinators.iter().map(|c| c.node_id.0).collect();
        ensure!(
            found == expected,
            "node {node}: coordinators {found:?}, the ids' groups' leaders {expected:?}"
        );
        for (id, want) in ids.iter().zip(&expected) {
            let one = FindCoordinatorRequest::default()
                .with_key_type(1)
                .with_key(StrBytes::from_string(id.clone()));
            let answer: FindCoordinatorResponse = client.request(3, &one).await?;
            ensure!(answer.error_code == 0 && answer.node_id.0 == *want, "node {node}, {id}: {answer:?}");
        }
    }
    println!(
        "FindCoordinator on every node names the leader of each transactional id's group ({} ids)",
        ids.len()
    );
    Ok(())
}

/// Transactions 0 … `TXNS` of one producer coordinated in group 2.
async fn transactions_in_group_2(cluster: &Cluster, run: &TxnLedger) -> Result<()> {
    let leader2 = preferred_of_three(2);
    let applied =
        |g| -> Result<u64> { Ok(group_row(cluster, leader2, g)?["last_applied"].as_u64().unwrap_or(0)) };
    let (group0_before, group2_before) = (applied(0)?, applied(2)?);
    let started = Instant::now();
    let producer = run.init(&cluster.bootstrap())?;
    for txn in 0..TXNS {
        run.attempt(&producer, txn, txn % 4 == 3)?;
    }
    let elapsed = started.elapsed();
    let (group0_grew, group2_grew) = (applied(0)? - group0_before, applied(2)? - group2_before);
    ensure!(
        group0_grew <= GROUP0_ENTRIES_MAX && group2_grew >= TXNS as u64,
        "{TXNS} transactions of group 2: group 0 applied {group0_grew} entries, group 2 {group2_grew}"
    );
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader2)).await?;
    let described = describe_transactions(&mut client, &[&transactional_id()]).await?;
    let pid = described.first().context("no answer")?.producer_id.0;
    ensure!(described[0].error_code == 0, "DescribeTransactions on group 2's leader: {described:?}");
    ensure!(
        producer_id_group(pid) == 2 && pid >= producer_id_base(2),
        "producer id {pid} is not of group 2's range"
    );
    let committed = tokio::task::block_in_place(|| run.verify(&cluster.bootstrap(), TXNS))?;
    println!(
        "{TXNS} transactions coordinated in group 2 ({committed} committed) in {:.1} s, producer id {pid} \
         (group 2's range); group 0 applied {group0_grew} entries meanwhile, group 2 {group2_grew}",
        elapsed.as_secs_f64()
    );
    Ok(())
}

/// Group 2's leader killed -9 after `KILL_AFTER` of transactions `TXNS` … 2 × `TXNS`;
/// restarted once they are done.
async fn leader_kill_mid_transactions(cluster: &mut Cluster, run: &Arc<TxnLedger>) -> Result<()> {
    let report = kill_leader_mid_run(cluster, run, (2, GROUPS), TXNS..2 * TXNS, KILL_AFTER).await?;
    println!("group 2's leader: {report}, {} aborted or unknown", run.not_committed());
    Ok(())
}

/// `TxnLiveRun` (harness/java) on a topic and transactional id of group 2.
async fn java_live_run_in_group_2(cluster: &Cluster, clients: Clients) -> Result<()> {
    let (topic, id) = (format!("{RULED_PREFIX}java-{clients:?}"), format!("{RULED_PREFIX}java-{clients:?}"));
    java_live_run(cluster, clients, &topic, &id).await?;
    println!("TxnLiveRun ({clients:?}) in group 2: 13 physical, 10 logical, read_committed reads the 10");
    Ok(())
}

/// `kafka-transactions.sh` describe, list, describe-producers, abort and find-hanging on a
/// transaction of group 2 (the one-group version: `java_transactions.rs`).
async fn transactions_tool_in_group_2(cluster: &Cluster) -> Result<()> {
    let (bootstrap, topic, id) =
        (cluster.bootstrap(), format!("{RULED_PREFIX}tools"), format!("{RULED_PREFIX}tools-app"));
    create_topics(&bootstrap, &[(&topic, 2)]).await?;
    let (producer, [first_0, _]) = open_after_commit(&bootstrap, &topic, &id).await?;
    let leader2 = group_row(cluster, preferred_of_three(0), 2)?["leader"].to_string();
    let described = tool(&bootstrap, &["describe", "--transactional-id", &id], "CoordinatorId")?;
    let row = described.first().with_context(|| format!("describe: {described:?}"))?;
    ensure!(row["CoordinatorId"] == leader2 && row["TransactionState"] == "Ongoing", "describe: {row:?}");
    let pid = row["ProducerId"].clone();
    ensure!(pid.parse::<i64>().is_ok_and(|p| producer_id_group(p) == 2), "describe: {row:?}");
    let listed = tool(&bootstrap, &["list"], "TransactionalId")?;
    let ours: Vec<_> = listed.iter().filter(|r| r["TransactionalId"] == id).collect();
    ensure!(ours.len() == 1 && ours[0]["ProducerId"] == pid, "list: {listed:?}");
    let producers =
        tool(&bootstrap, &["describe-producers", "--topic", &topic, "--partition", "0"], "ProducerId")?;
    let open = producers.iter().find(|r| r["ProducerId"] == pid).context("describe-producers")?;
    ensure!(open["CurrentTransactionStartOffset"] == first_0.to_string(), "describe-producers: {open:?}");

    let start = first_0.to_string();
    tool(&bootstrap, &["abort", "--topic", &topic, "--partition", "0", "--start-offset", &start], "-")?;
    let described = tool(&bootstrap, &["describe", "--transactional-id", &id], "CoordinatorId")?;
    ensure!(described.first().is_some_and(|r| r["TransactionState"] == "CompleteAbort"), "{described:?}");
    let args = ["find-hanging", "--topic", &topic, "--max-transaction-timeout", "0"];
    ensure!(tool(&bootstrap, &args, "Topic")?.is_empty(), "find-hanging after the abort");
    let committed = tokio::task::block_in_place(|| read_values(&bootstrap, &topic, 2, READ_COMMITTED))?;
    ensure!(committed == ["earlier"], "read_committed after the abort: {committed:?}");
    match producer.commit_transaction(CALL_TIMEOUT) {
        Err(KafkaError::Transaction(e)) if e.txn_requires_abort() => {}
        other => anyhow::bail!("commit after the admin abort: {other:?}"),
    }
    producer.abort_transaction(CALL_TIMEOUT)?;
    producer.begin_transaction()?;
    send_sync(&producer, &topic, Some(1), "k3", "after").await?;
    producer.commit_transaction(CALL_TIMEOUT).context("a new transaction after the abort")?;
    println!("kafka-transactions.sh in group 2: coordinator node {leader2}, listed once, aborted through group 2, then a new commit");
    Ok(())
}

/// Runs `kafka-transactions.sh args` and parses its table (from the `first_column` header).
fn tool(bootstrap: &str, args: &[&str], first_column: &str) -> Result<Vec<BTreeMap<String, String>>> {
    let out = tokio::task::block_in_place(|| harness::java::transactions(bootstrap, args))?;
    Ok(harness::java::table(&out.stdout, first_column))
}

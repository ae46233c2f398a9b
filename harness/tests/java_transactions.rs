//! Kafka transactions with the Java client and Kafka's own transaction tool, on a three-node
//! cluster (issue #5, acceptance items 1 and 6).
//!
//! The "13 physical, 10 logical" live run of the EOS article (shared/seeds/kafka-eos-live-run-ru)
//! with the `TxnLiveRun` driver (harness/java), once per client generation:
//! - kafka-clients 4.x uses transactions v2, because onelog finalizes `transaction.version` 2:
//!   partitions join the transaction implicitly through Produce v12, EndTxn v5 bumps the epoch
//!   at every commit and abort;
//! - kafka-clients 3.9 uses transactions v1: AddPartitionsToTxn, EndTxn v4 or lower, the epoch
//!   stays.
//!
//! Batch A (5) is committed, batch B aborted after three synchronous sends, batch B (5) sent
//! again and committed: a read_committed consumer reads exactly the 10 committed values in
//! order, a read_uncommitted one all 13, each up to the partition's end offset (16: 13 records
//! and three markers). `kafka-transactions.sh describe` then shows which protocol ran: epoch 3
//! after three v2 EndTxn, 0 under v1.
//!
//! Then `kafka-transactions.sh` (TransactionsCommand, kafka-tools 4.x) on a transaction a
//! librdkafka producer holds open on two partitions: `list` and `describe` show it Ongoing with
//! its producer id and partitions, `describe-producers` shows the producer on each partition
//! with the transaction's first offset there; after the commit `describe` says CompleteCommit
//! and no producer has an open transaction.
//!
//! And `kafka-transactions.sh abort` (WriteTxnMarkers) on such a transaction, named by its first
//! offset on one partition: the whole transaction aborts through the log (onelog cannot tear it),
//! so `describe` says CompleteAbort, read_committed reads past it without its records, and the
//! librdkafka producer's commit fails with an abortable error, after which it aborts and commits
//! a new transaction. `find-hanging` finds nothing hanging before or after.
//!
//! A transaction aborted while its first batch still lingers in the client, right after a
//! commit (`TxnLingeringAbort`), succeeds with both client generations, as on Kafka.
//!
//! Needs `ONELOG_JAVA_CLASSPATH` and `ONELOG_JAVA3_CLASSPATH` (scripts/test.sh sets both);
//! without them the tests fail.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{ensure, Context, Result};
use harness::java::{self, Clients};
use harness::kafka::create_topics;
use harness::txn::{
    open_after_commit, read_values, send_sync, READ_COMMITTED, READ_UNCOMMITTED,
    TXN_CALL_TIMEOUT as TXN_TIMEOUT,
};
use harness::{Cluster, ClusterOptions};
use rdkafka::error::KafkaError;
use rdkafka::producer::Producer;
use serde_json::{json, Value};

/// Partition segments of 1 MiB (Kafka's minimum): these scenarios write a few records. Since
/// partitions reserve blocks step by step this no longer saves disk; it keeps segments rolling.
const SEGMENT_BYTES: u64 = 1 << 20;

fn three_nodes() -> Cluster {
    let options = ClusterOptions::new(3).config("log.segment.bytes", SEGMENT_BYTES);
    Cluster::start_with(options).expect("starting 3 nodes")
}

#[test]
fn java4_thirteen_physical_ten_logical() {
    live_run(Clients::Kafka4);
}

#[test]
fn java3_thirteen_physical_ten_logical() {
    live_run(Clients::Kafka3);
}

/// The live run with `clients` on a fresh cluster.
fn live_run(clients: Clients) {
    on_three_nodes(clients, live_run_scenario);
}

/// `scenario` with `clients` on a fresh three-node cluster, which must end with every node
/// up; fails first if that client build is missing.
fn on_three_nodes(clients: Clients, scenario: fn(&Cluster, Clients) -> Result<()>) {
    clients.classpath().expect("the Java scenario drivers");
    let mut cluster = three_nodes();
    let result = scenario(&cluster, clients).and_then(|()| cluster.check_none_exited());
    cluster.unwrap_or_dump(result);
}

fn live_run_scenario(cluster: &Cluster, clients: Clients) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    let topic = "java-eos-live-run";
    tokio::runtime::Runtime::new()?.block_on(create_topics(&bootstrap, &[(topic, 1)]))?;
    let txn_id = format!("java-live-run-{clients:?}");
    let args = [bootstrap.clone(), format!("--topic={topic}"), format!("--transactional-id={txn_id}")];
    let summary = clients.run("TxnLiveRun", &args)?;
    println!("TxnLiveRun ({clients:?}): {summary}");

    let committed: Vec<String> =
        (0..5).map(|i| format!("batchA-{i}")).chain((0..5).map(|i| format!("batchB-{i}"))).collect();
    let aborted: Vec<String> = (0..3).map(|i| format!("batchB-try1-{i}")).collect();
    ensure!(summary["physical"] == 13 && summary["logical"] == 10, "{summary}");
    // Each batch's records follow the previous transaction's marker: A at 0..5 (commit marker 5),
    // the aborted three at 6..9 (abort marker 9), B at 10..15 (commit marker 15).
    let sent_in_order: Vec<String> =
        committed[..5].iter().chain(&aborted).chain(&committed[5..]).cloned().collect();
    let offsets = (0..5).chain(6..9).chain(10..15);
    let expected_sent: Vec<Value> = sent_in_order
        .iter()
        .zip(offsets)
        .map(|(value, offset)| json!({"value": value, "partition": 0, "offset": offset}))
        .collect();
    ensure!(summary["sent"] == json!(expected_sent), "acknowledged offsets: {}", summary["sent"]);

    let read_committed = &summary["read_committed"];
    ensure!(read_committed["values"] == json!(committed), "read_committed: {read_committed}");
    let read_uncommitted = &summary["read_uncommitted"];
    ensure!(read_uncommitted["values"] == json!(sent_in_order), "read_uncommitted: {read_uncommitted}");
    // After the last commit the last stable offset is the log end: both read to 16.
    for read in [read_committed, read_uncommitted] {
        ensure!(read["end_offsets"] == json!({"0": 16}) && read["positions"] == json!({"0": 16}), "{read}");
    }
    println!(
        "read_committed={} read_uncommitted={}",
        committed.len(),
        read_uncommitted["values"].as_array().map_or(0, Vec::len)
    );

    // Which transaction protocol ran shows in the epoch: v2 (4.x) bumps it at each of the three
    // EndTxn, v1 (3.x) keeps the one InitProducerId gave.
    let described = describe(&bootstrap, &txn_id)?;
    let epoch = match clients {
        Clients::Kafka4 | Clients::Kafka44 => "3",
        Clients::Kafka3 => "0",
    };
    ensure!(described["TransactionState"] == "CompleteCommit", "describe: {described:?}");
    ensure!(described["ProducerEpoch"] == epoch, "{clients:?}: epoch {epoch} expected: {described:?}");
    Ok(())
}

/// A transaction aborted while its first batch lingers in the client, right after a commit
/// (`TxnLingeringAbort`): added, nothing written. Kafka 3.9's client (transactions v1) got
/// INVALID_TXN_STATE, fatal, before `TxnCoordinator::ends_added_only`; Kafka answers success.
#[test]
fn java3_abort_while_the_first_batch_lingers() {
    lingering_abort(Clients::Kafka3);
}

#[test]
fn java4_abort_while_the_first_batch_lingers() {
    lingering_abort(Clients::Kafka4);
}

fn lingering_abort(clients: Clients) {
    on_three_nodes(clients, lingering_abort_scenario);
}

fn lingering_abort_scenario(cluster: &Cluster, clients: Clients) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    let topic = format!("java-lingering-abort-{clients:?}").to_lowercase();
    tokio::runtime::Runtime::new()?.block_on(create_topics(&bootstrap, &[(topic.as_str(), 1)]))?;
    let txn_id = format!("java-lingering-abort-{clients:?}");
    let args = [bootstrap.clone(), format!("--topic={topic}"), format!("--transactional-id={txn_id}")];
    let summary = clients.run("TxnLingeringAbort", &args)?;
    println!("TxnLingeringAbort ({clients:?}): {summary}");
    ensure!(summary["aborted"] == "ok", "{summary}");
    ensure!(summary["read_committed"] == json!(["committed-1", "committed-2"]), "{summary}");
    Ok(())
}

const TOOL_TOPIC: &str = "java-txn-tool";
const TOOL_TXN_ID: &str = "java-txn-tool-txn";

#[tokio::test(flavor = "multi_thread")]
async fn transactions_tool_lists_and_describes_an_open_transaction() {
    java::classpath().expect("the Java scenario drivers");
    let cluster = three_nodes();
    let result = tool_scenario(&cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn tool_scenario(cluster: &Cluster) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    create_topics(&bootstrap, &[(TOOL_TOPIC, 2)]).await?;
    // A committed transaction on partition 0 (its record and marker) first, so the open one
    // starts at offset 2 there and at 0 on partition 1.
    let (producer, [first_0, first_1]) = open_after_commit(&bootstrap, TOOL_TOPIC, TOOL_TXN_ID).await?;
    ensure!((first_0, first_1) == (2, 0), "the open transaction starts at {first_0} and {first_1}");

    let described = describe(&bootstrap, TOOL_TXN_ID)?;
    ensure!(described["TransactionState"] == "Ongoing", "describe: {described:?}");
    let pid = described["ProducerId"].clone();
    ensure!(pid.parse::<i64>().is_ok_and(|p| p >= 0), "describe: {described:?}");
    let partitions: BTreeSet<String> =
        described["TopicPartitions"].split(',').map(|p| p.trim().to_owned()).collect();
    let expected = BTreeSet::from([format!("{TOOL_TOPIC}-0"), format!("{TOOL_TOPIC}-1")]);
    ensure!(partitions == expected, "describe: partitions {partitions:?}");

    // Every broker is asked and the lists merged: the transaction appears once.
    let listed = tool(&bootstrap, &["list"], "TransactionalId")?;
    let ours: Vec<_> = listed.iter().filter(|r| r["TransactionalId"] == TOOL_TXN_ID).collect();
    ensure!(ours.len() == 1, "list: {listed:?}");
    ensure!(ours[0]["TransactionState"] == "Ongoing" && ours[0]["ProducerId"] == pid, "list: {:?}", ours[0]);

    for (partition, first) in [(0, first_0), (1, first_1)] {
        let row = producer_row(&bootstrap, partition, &pid)?;
        ensure!(row["CurrentTransactionStartOffset"] == first.to_string(), "partition {partition}: {row:?}");
        ensure!(row["ProducerEpoch"] == described["ProducerEpoch"], "partition {partition}: {row:?}");
    }

    producer.commit_transaction(TXN_TIMEOUT).context("commit")?;
    let described = describe(&bootstrap, TOOL_TXN_ID)?;
    ensure!(described["TransactionState"] == "CompleteCommit", "describe after commit: {described:?}");
    ensure!(described["ProducerId"] == pid && described["TopicPartitions"].is_empty(), "{described:?}");
    for partition in [0, 1] {
        let row = producer_row(&bootstrap, partition, &pid)?;
        ensure!(
            row["CurrentTransactionStartOffset"] == "None",
            "partition {partition} after commit: {row:?}"
        );
    }
    Ok(())
}

const ABORT_TOPIC: &str = "java-txn-abort";
const ABORT_TXN_ID: &str = "java-txn-abort-txn";

#[tokio::test(flavor = "multi_thread")]
async fn transactions_tool_aborts_an_open_transaction() {
    java::classpath().expect("the Java scenario drivers");
    let cluster = three_nodes();
    let result = abort_scenario(&cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn abort_scenario(cluster: &Cluster) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    create_topics(&bootstrap, &[(ABORT_TOPIC, 2)]).await?;
    // "earlier" committed on partition 0; "open-0", "open-1" (from offset 2) and "open-2" (on
    // partition 1, from 0) in the open transaction.
    let (producer, [first_0, _]) = open_after_commit(&bootstrap, ABORT_TOPIC, ABORT_TXN_ID).await?;
    let described = describe(&bootstrap, ABORT_TXN_ID)?;
    ensure!(described["TransactionState"] == "Ongoing", "describe: {described:?}");
    let (pid, epoch) = (described["ProducerId"].clone(), described["ProducerEpoch"].clone());
    let row = producers_of(&bootstrap, ABORT_TOPIC, 0)?.into_iter().find(|r| r["ProducerId"] == pid);
    ensure!(
        row.as_ref().is_some_and(|r| r["CurrentTransactionStartOffset"] == first_0.to_string()),
        "describe-producers: {row:?}"
    );
    // With no minimum age every open transaction is a candidate, and the coordinator's view
    // (DescribeTransactions lists both partitions) clears it: not hanging.
    ensure!(hanging(&bootstrap)?.is_empty(), "find-hanging while open");

    let start = first_0.to_string();
    let args = ["abort", "--topic", ABORT_TOPIC, "--partition", "0", "--start-offset", &start];
    let out = tokio::task::block_in_place(|| java::transactions(&bootstrap, &args))?;
    println!("kafka-transactions.sh {}:\n{}{}", args.join(" "), out.stdout, out.stderr.trim_end());

    let described = describe(&bootstrap, ABORT_TXN_ID)?;
    ensure!(described["TransactionState"] == "CompleteAbort", "describe after abort: {described:?}");
    ensure!(described["ProducerId"] == pid && described["TopicPartitions"].is_empty(), "{described:?}");
    ensure!(described["ProducerEpoch"] != epoch, "the abort bumps the epoch: {described:?}");
    for partition in [0, 1] {
        let open: Vec<_> = producers_of(&bootstrap, ABORT_TOPIC, partition)?
            .into_iter()
            .filter(|r| r["CurrentTransactionStartOffset"] != "None")
            .collect();
        ensure!(open.is_empty(), "partition {partition} after abort: {open:?}");
    }
    ensure!(hanging(&bootstrap)?.is_empty(), "find-hanging after abort");

    // read_committed is not held at the aborted transaction's start, and skips its records.
    let committed = read_sorted(&bootstrap, READ_COMMITTED)?;
    ensure!(committed == ["earlier"], "read_committed after abort: {committed:?}");
    let uncommitted = read_sorted(&bootstrap, READ_UNCOMMITTED)?;
    ensure!(uncommitted == ["earlier", "open-0", "open-1", "open-2"], "read_uncommitted: {uncommitted:?}");

    // The producer learns of the abort at its commit, aborts, and carries on.
    match producer.commit_transaction(TXN_TIMEOUT) {
        Err(KafkaError::Transaction(e)) if e.txn_requires_abort() => println!("commit after abort: {e}"),
        other => anyhow::bail!("commit after the admin abort: {other:?}"),
    }
    producer.abort_transaction(TXN_TIMEOUT).context("abort after the admin abort")?;
    producer.begin_transaction()?;
    send_sync(&producer, ABORT_TOPIC, Some(1), "k3", "after").await?;
    producer.commit_transaction(TXN_TIMEOUT).context("commit of a new transaction")?;
    let committed = read_sorted(&bootstrap, READ_COMMITTED)?;
    ensure!(committed == ["after", "earlier"], "read_committed at the end: {committed:?}");
    let described = describe(&bootstrap, ABORT_TXN_ID)?;
    ensure!(described["TransactionState"] == "CompleteCommit", "describe at the end: {described:?}");
    Ok(())
}

/// Every data record's value of the abort scenario's topic under `isolation`, sorted.
fn read_sorted(bootstrap: &str, isolation: &str) -> Result<Vec<String>> {
    let mut values = tokio::task::block_in_place(|| read_values(bootstrap, ABORT_TOPIC, 2, isolation))?;
    values.sort();
    Ok(values)
}

/// `find-hanging --topic` of the abort scenario's topic with no minimum transaction age.
fn hanging(bootstrap: &str) -> Result<Vec<BTreeMap<String, String>>> {
    let args = ["find-hanging", "--topic", ABORT_TOPIC, "--max-transaction-timeout", "0"];
    tool(bootstrap, &args, "Topic")
}

/// `describe-producers` of one partition of `topic`: every row.
fn producers_of(bootstrap: &str, topic: &str, partition: i32) -> Result<Vec<BTreeMap<String, String>>> {
    let partition = partition.to_string();
    tool(bootstrap, &["describe-producers", "--topic", topic, "--partition", &partition], "ProducerId")
}

/// `describe --transactional-id`: its one row.
fn describe(bootstrap: &str, txn_id: &str) -> Result<BTreeMap<String, String>> {
    let rows = tool(bootstrap, &["describe", "--transactional-id", txn_id], "CoordinatorId")?;
    ensure!(rows.len() == 1, "describe: {rows:?}");
    Ok(rows.into_iter().next().unwrap_or_default())
}

/// `describe-producers` of one partition: the row of `pid`.
fn producer_row(bootstrap: &str, partition: i32, pid: &str) -> Result<BTreeMap<String, String>> {
    let rows = producers_of(bootstrap, TOOL_TOPIC, partition)?;
    rows.into_iter().find(|r| r["ProducerId"] == pid).with_context(|| format!("producer {pid} not shown"))
}

/// Runs `kafka-transactions.sh args`, prints its output, and parses its table.
fn tool(bootstrap: &str, args: &[&str], first_column: &str) -> Result<Vec<BTreeMap<String, String>>> {
    let out = tokio::task::block_in_place(|| java::transactions(bootstrap, args))?;
    println!("kafka-transactions.sh {}:\n{}", args.join(" "), out.stdout.trim_end());
    Ok(java::table(&out.stdout, first_column))
}

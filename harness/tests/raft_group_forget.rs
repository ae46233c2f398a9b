//! A participant Raft group forgets the producer ids of another group's transactional ids once
//! that group no longer knows them (issue 32, docs/SCALING.md §3.4, `onelog.version` 9), on
//! three nodes running three groups with `transactional.id.expiration.ms` 3 s and the expiry
//! and forget checks every 500 ms:
//!
//! 1. librdkafka producers A and B, their ids placed in group 2, each commit a transaction
//!    writing a topic of group 1: every replica of group 1 keeps both producer ids
//!    (`/status` `remote_producers` 2);
//! 2. B begins another transaction, on group 2's topic only, and keeps it open; A stays idle:
//!    A's transactional id expires in group 2 and group 1 forgets A's producer id, not B's;
//! 3. B commits and idles: group 1 forgets its producer id too;
//! 4. A's transactional id starts again, with a new producer id, and commits across the groups:
//!    read_committed shows every committed record of group 1's topic once;
//! 5. it opens another transaction on group 1's topic, and `kafka-transactions.sh abort` on
//!    that partition (WriteTxnMarkers to group 1's leader, which asks group 2's) aborts it:
//!    the producer's commit gets the abortable error, and read_committed never shows the
//!    record.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::kafka::create_topics;
use harness::raft_groups::{group_row, settle, three_group_rules, GROUP1_PREFIX, RULED_PREFIX};
use harness::txn::{read_values, transactional_producer, READ_COMMITTED};
use harness::{Cluster, ClusterOptions};
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

const GROUPS: u64 = 3;
const SETTLE_TIMEOUT: Duration = Duration::from_secs(40);
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Expiry (3 s) plus the checks, with room for a loaded machine.
const FORGET_TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_participant_forgets_producer_ids_their_group_forgot() {
    let options = ClusterOptions::new(3)
        .config("onelog.raft.groups", GROUPS)
        .config("leader.imbalance.check.interval.seconds", 1)
        .config("onelog.placement.rules", three_group_rules())
        .config("transactional.id.expiration.ms", 3_000)
        .config("transaction.remove.expired.transaction.cleanup.interval.ms", 500)
        .config("producer.id.expiration.check.interval.ms", 500);
    let mut cluster = Cluster::start_with(options).expect("starting 3 nodes with 3 groups");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    settle(cluster, &[1, 2, 3], GROUPS, SETTLE_TIMEOUT).await?;
    let (in1, in2) = (format!("{GROUP1_PREFIX}fout"), format!("{RULED_PREFIX}fout"));
    create_topics(&cluster.bootstrap(), &[(&in1, 1), (&in2, 1)]).await?;
    let bootstrap = cluster.bootstrap();
    let (a_id, b_id) = (format!("{RULED_PREFIX}forget-a"), format!("{RULED_PREFIX}forget-b"));
    let a = transactional_producer(&bootstrap, &a_id)?;
    let b = transactional_producer(&bootstrap, &b_id)?;
    commit(&a, &[(&in1, "a-0")]).await?;
    commit(&b, &[(&in1, "b-0")]).await?;
    remote_producers(cluster, 2, "both producers wrote group 1's topic")?;

    b.begin_transaction().context("B begins")?;
    send(&b, &in2, "b-open").await?;
    remote_producers(cluster, 1, "A's transactional id expired; B's is in use")?;
    b.commit_transaction(CALL_TIMEOUT).context("B commits")?;
    remote_producers(cluster, 0, "B's transactional id expired too")?;
    drop((a, b));

    let again = transactional_producer(&bootstrap, &a_id)?;
    commit(&again, &[(&in1, "a-1"), (&in2, "a-1")]).await?;
    let (b, t) = (bootstrap.clone(), in1.clone());
    let mut values = tokio::task::spawn_blocking(move || read_values(&b, &t, 1, READ_COMMITTED)).await??;
    values.sort();
    ensure!(values == ["a-0", "a-1", "b-0"], "group 1's topic read_committed: {values:?}");
    println!("A's transactional id, expired and forgotten, committed again across groups: {values:?}");
    abort_at_participant(cluster, &again, &in1).await?;
    cluster.check_none_exited()
}

/// `kafka-transactions.sh abort` on group 1's partition of `producer`'s open transaction,
/// which group 2 coordinates.
async fn abort_at_participant(cluster: &Cluster, producer: &FutureProducer, topic: &str) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    producer.begin_transaction().context("begin")?;
    send(producer, topic, "aborted").await?;
    let args = ["describe-producers", "--topic", topic, "--partition", "0"];
    let producers = tool(&bootstrap, &args, "ProducerId")?;
    let open = producers.iter().find(|r| r["CurrentTransactionStartOffset"] != "None");
    let start = open.with_context(|| format!("describe-producers: {producers:?}"))?
        ["CurrentTransactionStartOffset"]
        .clone();
    tool(&bootstrap, &["abort", "--topic", topic, "--partition", "0", "--start-offset", &start], "-")?;
    match producer.commit_transaction(CALL_TIMEOUT) {
        Err(KafkaError::Transaction(e)) if e.txn_requires_abort() => {}
        other => anyhow::bail!("commit after the admin abort: {other:?}"),
    }
    producer.abort_transaction(CALL_TIMEOUT)?;
    let (b, t) = (bootstrap.clone(), topic.to_string());
    let values = tokio::task::spawn_blocking(move || read_values(&b, &t, 1, READ_COMMITTED)).await??;
    ensure!(!values.iter().any(|v| v == "aborted"), "read_committed after the admin abort: {values:?}");
    println!("kafka-transactions.sh abort at group 1's partition (start offset {start}) aborted group 2's transaction");
    Ok(())
}

/// Runs `kafka-transactions.sh args` and parses its table (from the `first_column` header).
fn tool(
    bootstrap: &str,
    args: &[&str],
    first_column: &str,
) -> Result<Vec<std::collections::BTreeMap<String, String>>> {
    let out = tokio::task::block_in_place(|| harness::java::transactions(bootstrap, args))?;
    Ok(harness::java::table(&out.stdout, first_column))
}

/// One transaction writing `records` ((topic, value)), committed.
async fn commit(producer: &FutureProducer, records: &[(&str, &str)]) -> Result<()> {
    producer.begin_transaction().context("begin_transaction")?;
    for (topic, value) in records {
        send(producer, topic, value).await?;
    }
    producer.commit_transaction(CALL_TIMEOUT).context("commit_transaction")
}

async fn send(producer: &FutureProducer, topic: &str, value: &str) -> Result<()> {
    let record = FutureRecord::<(), str>::to(topic).payload(value).partition(0);
    producer.send(record, CALL_TIMEOUT).await.map_err(|(e, _)| e).context("send")?;
    Ok(())
}

/// Waits until every replica of group 1 keeps `want` remote producer ids.
fn remote_producers(cluster: &Cluster, want: u64, why: &str) -> Result<()> {
    let started = Instant::now();
    loop {
        let counts: Vec<u64> = [1, 2, 3]
            .iter()
            .map(|id| Ok(group_row(cluster, *id, 1)?["remote_producers"].as_u64().unwrap_or(u64::MAX)))
            .collect::<Result<_>>()?;
        if counts.iter().all(|c| *c == want) {
            println!(
                "group 1 keeps {want} remote producer ids on every node ({why}) after {:?}",
                started.elapsed()
            );
            return Ok(());
        }
        ensure!(
            started.elapsed() < FORGET_TIMEOUT,
            "group 1's remote producer ids {counts:?}, want {want}: {why}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

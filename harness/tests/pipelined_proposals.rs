//! Pipelined proposals (issue 31) with a real client: librdkafka writes the two partitions of a
//! transaction in two Produce requests microseconds apart, and the leader now hands the second
//! to Raft while the first replicates, instead of waiting for the first to apply.
//!
//! Three nodes with `onelog.raft.entries.in.flight=4` (the default is 1, see
//! docs/PERFORMANCE.md); one transactional producer runs 200 transactions of one record on each of two
//! partitions, as TxWritesBench does, and a second producer (idempotent, acks=all) writes
//! both partitions meanwhile. Checked:
//!
//! - the leader proposed entries with another still in flight (`raft_entries_in_flight`
//!   above 1; a proposer that waits for each entry's apply only ever observes 1), and never
//!   more than the configured 4;
//! - read_committed shows every committed record exactly once, and each partition holds each
//!   producer's records in the order they were sent: the entries built against the entries in
//!   flight stamped offsets and sequences that applied as stamped.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use harness::kafka::create_topics;
use harness::scrape::Scrape;
use harness::txn::{read_values, transactional_producer, READ_COMMITTED};
use harness::{Cluster, ClusterOptions};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

const TOPIC: &str = "pipelined";
const TRANSACTIONS: usize = 200;
const IDEMPOTENT_RECORDS: usize = 400;
const TIMEOUT: Duration = Duration::from_secs(30);
/// `onelog.raft.entries.in.flight` of the nodes (the default, 1, does not pipeline).
const IN_FLIGHT: i32 = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_transactions_two_writes_are_in_flight_together_and_apply_as_stamped() {
    let options = ClusterOptions::new(3)
        .config("log.segment.bytes", 1 << 20)
        .config("onelog.raft.entries.in.flight", IN_FLIGHT);
    let mut cluster = Cluster::start_with(options).expect("starting 3 nodes");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let bootstrap = cluster.bootstrap();
    create_topics(&bootstrap, &[(TOPIC, 2)]).await?;
    let before = in_flight_buckets(&Scrape::of(cluster.admin_addr(leader))?);
    let idempotent = tokio::spawn(idempotent_writes(bootstrap.clone()));
    let producer = transactional_producer(&bootstrap, "pipelined-tx")?;
    for i in 0..TRANSACTIONS {
        producer.begin_transaction()?;
        let values = [format!("tx-{i}-p0"), format!("tx-{i}-p1")];
        deliver_all(&producer, values.iter().enumerate().map(|(p, v)| (p as i32, v.as_str()))).await?;
        producer.commit_transaction(TIMEOUT).with_context(|| format!("commit {i}"))?;
    }
    idempotent.await??;

    let after = in_flight_buckets(&Scrape::of(cluster.admin_addr(leader))?);
    let (proposed, alone, at_most_4) = (after.0 - before.0, after.1 - before.1, after.2 - before.2);
    println!("{proposed} entries proposed, {alone} with nothing else in flight, {at_most_4} with at most 4");
    ensure!(proposed >= TRANSACTIONS as f64, "only {proposed} entries for {TRANSACTIONS} transactions");
    ensure!(alone < proposed, "every one of {proposed} entries was proposed with nothing else in flight");
    ensure!(
        at_most_4 == proposed,
        "{} entries were proposed with more than 4 in flight",
        proposed - at_most_4
    );

    let values = read_values(&bootstrap, TOPIC, 2, READ_COMMITTED)?;
    check_exactly_once_in_order(&values)
}

/// (entries proposed, of them with 1 in flight, with at most 4) on the leader so far.
fn in_flight_buckets(scrape: &Scrape) -> (f64, f64, f64) {
    let bucket = |le| scrape.sum("onelog_raft_entries_in_flight_bucket", &[("le", le)]);
    (scrape.sum("onelog_raft_entries_in_flight_count", &[]), bucket("1.0"), bucket("4.0"))
}

/// An idempotent acks=all producer writing both partitions while the transactions run.
async fn idempotent_writes(bootstrap: String) -> Result<()> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("enable.idempotence", "true")
        .set("linger.ms", "0")
        .create()?;
    let values: Vec<String> = (0..IDEMPOTENT_RECORDS).map(|i| format!("idem-{i}-p{}", i % 2)).collect();
    deliver_all(&producer, values.iter().enumerate().map(|(i, v)| ((i % 2) as i32, v.as_str()))).await?;
    producer.flush(TIMEOUT)?;
    Ok(())
}

/// Enqueues every (partition, value) at once, in order, then waits for each delivery.
async fn deliver_all<'a>(
    producer: &FutureProducer,
    records: impl Iterator<Item = (i32, &'a str)>,
) -> Result<()> {
    let mut deliveries = Vec::new();
    for (partition, value) in records {
        let record = FutureRecord::to(TOPIC).partition(partition).key(value).payload(value);
        let delivery = producer.send_result(record).map_err(|(e, _)| anyhow::anyhow!("{value}: {e}"))?;
        deliveries.push((value.to_string(), delivery));
    }
    for (value, delivery) in deliveries {
        let delivered =
            tokio::time::timeout(TIMEOUT, delivery).await.with_context(|| format!("{value}: no delivery"))?;
        delivered
            .map_err(|_| anyhow::anyhow!("{value}: cancelled"))?
            .map_err(|(e, _)| anyhow::anyhow!("{value}: {e}"))?;
    }
    Ok(())
}

/// Every record once; per partition, each producer's records in the order sent.
fn check_exactly_once_in_order(values: &[String]) -> Result<()> {
    let expected = 2 * TRANSACTIONS + IDEMPOTENT_RECORDS;
    let mut unique = values.to_vec();
    unique.sort();
    unique.dedup();
    ensure!(unique.len() == values.len(), "{} duplicates", values.len() - unique.len());
    ensure!(values.len() == expected, "{} records read, {expected} written", values.len());
    for partition in ["p0", "p1"] {
        for producer in ["tx", "idem"] {
            let sequence: Vec<usize> = values
                .iter()
                .filter(|v| v.starts_with(producer) && v.ends_with(partition))
                .map(|v| v.split('-').nth(1).and_then(|n| n.parse().ok()).expect("a numbered value"))
                .collect();
            ensure!(
                sequence.windows(2).all(|w| w[0] < w[1]),
                "{producer} on {partition} out of order: {sequence:?}"
            );
        }
    }
    Ok(())
}

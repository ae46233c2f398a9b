//! `GET /metrics` read as Prometheus would, during and after a transactional load on three
//! nodes (issue 16's acceptance):
//!
//! - every committed and every aborted transaction is counted exactly once, on every node;
//! - at every scrape, each partition has log start ≤ LSO ≤ HW ≤ log end;
//! - the request counter and the latency histogram count exactly the requests sent, and the
//!   error counter exactly the partitions refused;
//! - Raft gauges agree across nodes, and the leader reports each follower's lag.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::batch::{encode_batch, TestRecord};
use harness::kafka::create_topics;
use harness::raw_ops::{produce, produce_results, BatchFor};
use harness::scrape::Scrape;
use harness::txn::{send_sync, transactional_producer};
use harness::{Cluster, ClusterOptions, RawClient};
use rdkafka::producer::Producer;

const TOPIC: &str = "metered";
const PARTITIONS: i32 = 3;
const TRANSACTIONS: usize = 40;
/// One transaction in this many is aborted.
const ABORT_EVERY: usize = 4;
const RAW_PRODUCES: usize = 25;
const REFUSED_PRODUCES: usize = 5;
const TXN_TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_count_a_transaction_load_exactly() {
    let options = ClusterOptions::new(3).config("log.segment.bytes", 1 << 20);
    let mut cluster = Cluster::start_with(options).expect("starting 3 nodes");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let admin = cluster.admin_addr(leader);
    create_topics(&cluster.bootstrap(), &[(TOPIC, PARTITIONS)]).await?;
    let before: BTreeMap<u64, Scrape> = cluster
        .ids()
        .into_iter()
        .map(|id| Ok((id, Scrape::of(cluster.admin_addr(id))?)))
        .collect::<Result<_>>()?;

    // The load runs on its own thread; this one scrapes the leader meanwhile.
    let bootstrap = cluster.bootstrap();
    let load = tokio::task::spawn(async move { transactions(&bootstrap).await });
    let mut scrapes = 0;
    let mut last_committed = 0.0;
    while !load.is_finished() {
        let scrape = Scrape::of(admin)?;
        check_offsets(&scrape)?;
        check_histograms(&scrape)?;
        let committed = scrape.sum("onelog_transactions_total", &[("outcome", "committed")]);
        ensure!(
            committed >= last_committed,
            "the committed counter went back: {last_committed} → {committed}"
        );
        last_committed = committed;
        scrapes += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (committed, aborted) = load.await??;
    println!("{committed} transactions committed and {aborted} aborted; {scrapes} scrapes during the load");
    ensure!(scrapes >= 3, "only {scrapes} scrapes happened during the load");

    // Every node applies every decision: each counts each transaction once.
    let deadline = Instant::now() + Duration::from_secs(20);
    for id in cluster.ids() {
        let counted = loop {
            let scrape = Scrape::of(cluster.admin_addr(id))?;
            let delta = |outcome| {
                scrape.sum("onelog_transactions_total", &[("outcome", outcome)])
                    - before[&id].sum("onelog_transactions_total", &[("outcome", outcome)])
            };
            let counted = (delta("committed"), delta("aborted"));
            if counted == (committed as f64, aborted as f64) || Instant::now() > deadline {
                break (counted, scrape);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let ((c, a), scrape) = counted;
        ensure!(
            (c, a) == (committed as f64, aborted as f64),
            "node {id} counted {c} committed and {a} aborted; the client committed {committed} and aborted {aborted}"
        );
        ensure!(scrape.value("onelog_transactions_open", &[])? == 0.0, "node {id}: a transaction still open");
        check_offsets(&scrape)?;
        ensure!(
            scrape.sum("onelog_raft_log_fsync_duration_seconds_count", &[]) > 0.0,
            "node {id}: no fsync counted"
        );
    }

    raw_produces(cluster, leader).await?;
    raft_gauges(cluster, leader)?;
    Ok(())
}

/// Runs `TRANSACTIONS` transactions of one record per partition, aborting one in
/// `ABORT_EVERY`; returns (committed, aborted).
async fn transactions(bootstrap: &str) -> Result<(usize, usize)> {
    let producer = transactional_producer(bootstrap, "metrics-txn")?;
    let (mut committed, mut aborted) = (0, 0);
    for i in 0..TRANSACTIONS {
        producer.begin_transaction().context("begin")?;
        for partition in 0..PARTITIONS {
            send_sync(&producer, TOPIC, Some(partition), "k", &format!("txn-{i}")).await?;
        }
        if i % ABORT_EVERY == ABORT_EVERY - 1 {
            producer.abort_transaction(TXN_TIMEOUT).context("abort")?;
            aborted += 1;
        } else {
            producer.commit_transaction(TXN_TIMEOUT).context("commit")?;
            committed += 1;
        }
    }
    Ok((committed, aborted))
}

/// log start ≤ LSO ≤ HW ≤ log end, for every partition in the scrape; and every partition of
/// the topic is there.
fn check_offsets(scrape: &Scrape) -> Result<()> {
    for partition in 0..PARTITIONS {
        let p = partition.to_string();
        let labels = [("topic", TOPIC), ("partition", p.as_str())];
        let get = |name: &str| scrape.value(name, &labels);
        let start = get("onelog_partition_log_start_offset")?;
        let lso = get("onelog_partition_last_stable_offset")?;
        let hw = get("onelog_partition_high_watermark")?;
        let end = get("onelog_partition_log_end_offset")?;
        ensure!(
            start <= lso && lso <= hw && hw <= end,
            "{TOPIC}/{p}: start {start} LSO {lso} HW {hw} end {end}"
        );
    }
    Ok(())
}

/// Each latency histogram's count equals its `+Inf` bucket, and its buckets never decrease.
fn check_histograms(scrape: &Scrape) -> Result<()> {
    let counts = scrape.samples.iter().filter(|s| s.name == "onelog_kafka_request_duration_seconds_count");
    for count in counts {
        let api = count.labels["api"].as_str();
        let version = count.labels["version"].as_str();
        let mut buckets: Vec<(f64, f64)> = scrape
            .matching("onelog_kafka_request_duration_seconds_bucket", &[("api", api), ("version", version)])
            .map(|s| (s.labels["le"].parse::<f64>().unwrap_or(f64::INFINITY), s.value))
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        ensure!(
            buckets.windows(2).all(|w| w[0].1 <= w[1].1),
            "{api} v{version}: buckets decrease: {buckets:?}"
        );
        let inf = buckets.last().map(|b| b.1);
        ensure!(inf == Some(count.value), "{api} v{version}: count {} but +Inf bucket {inf:?}", count.value);
    }
    Ok(())
}

/// Produce requests sent one by one on a raw connection: the counter and the histogram count
/// each once; a partition that does not exist is one UNKNOWN_TOPIC_OR_PARTITION (3) each.
async fn raw_produces(cluster: &mut Cluster, leader: u64) -> Result<()> {
    let admin = cluster.admin_addr(leader);
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    let before = Scrape::of(admin)?;
    let batch = |partition| -> Result<BatchFor> {
        let records = encode_batch(&[TestRecord::new("k", "raw", 0)])?;
        Ok(BatchFor { topic: TOPIC.to_string(), partition, records })
    };
    for _ in 0..RAW_PRODUCES {
        let response = produce(&mut client, -1, &[batch(0)?]).await?;
        ensure!(produce_results(&response).iter().all(|r| r.2 == 0), "raw produce refused: {response:?}");
    }
    for _ in 0..REFUSED_PRODUCES {
        let response = produce(&mut client, -1, &[batch(PARTITIONS + 7)?]).await?;
        ensure!(produce_results(&response).iter().all(|r| r.2 == 3), "expected error 3: {response:?}");
    }
    let after = Scrape::of(admin)?;
    let delta = |name: &str, labels: &[(&str, &str)]| after.sum(name, labels) - before.sum(name, labels);
    let sent = (RAW_PRODUCES + REFUSED_PRODUCES) as f64;
    let produce_api = [("api", "Produce")];
    ensure!(
        delta("onelog_kafka_requests_total", &produce_api) == sent,
        "requests counted: {}",
        delta("onelog_kafka_requests_total", &produce_api)
    );
    let histogram = delta("onelog_kafka_request_duration_seconds_count", &produce_api);
    ensure!(histogram == sent, "latency histogram counted {histogram} Produce requests, {sent} sent");
    let refused = delta(
        "onelog_kafka_request_errors_total",
        &[("api", "Produce"), ("error_code", "3"), ("error", "UNKNOWN_TOPIC_OR_PARTITION")],
    );
    ensure!(refused == REFUSED_PRODUCES as f64, "error counter: {refused}, {REFUSED_PRODUCES} refused");
    ensure!(
        delta("onelog_kafka_request_bytes_total", &[("listener", "PLAINTEXT")]) > 0.0,
        "no request bytes counted"
    );
    println!("raw Produce: {sent} requests counted once each, {refused} refusals counted");
    Ok(())
}

/// Term and leader agree on every node; the leader names both followers' lag.
fn raft_gauges(cluster: &mut Cluster, leader: u64) -> Result<()> {
    let scrapes: BTreeMap<u64, Scrape> = cluster
        .ids()
        .into_iter()
        .map(|id| Ok((id, Scrape::of(cluster.admin_addr(id))?)))
        .collect::<Result<_>>()?;
    let term = scrapes[&leader].value("onelog_raft_term", &[])?;
    for (id, scrape) in &scrapes {
        ensure!(scrape.value("onelog_raft_leader", &[])? == leader as f64, "node {id} names another leader");
        ensure!(scrape.value("onelog_raft_term", &[])? == term, "node {id} is in another term");
        ensure!(
            scrape.value("onelog_raft_is_leader", &[])? == (*id == leader) as u8 as f64,
            "node {id}: is_leader"
        );
        let commit = scrape.value("onelog_raft_commit_index", &[])?;
        let applied = scrape.value("onelog_raft_applied_index", &[])?;
        ensure!(applied <= commit, "node {id}: applied {applied} beyond commit {commit}");
    }
    for follower in cluster.ids().into_iter().filter(|id| *id != leader) {
        let f = follower.to_string();
        let lag =
            scrapes[&leader].value("onelog_raft_replication_lag_entries", &[("follower", f.as_str())])?;
        ensure!(lag >= 0.0, "follower {follower}: lag {lag}");
    }
    Ok(())
}

//! A node that lost its data directory must not help a lagging node become leader.
//!
//! Regression (cluster_failover `wiped_lowest_id_node_rejoins`, 2026-12-02): the wiped node
//! started with an empty log, initialized a "new" cluster and granted its vote to a peer that
//! lacked entries the cluster had committed; that peer was elected, and the node holding those
//! entries failed openraft's `has_log_id` assertion (a release build would have overwritten
//! them). Here the window is made certain: the entries are committed by the wiped node and the
//! one node then stopped, so the only candidate left while that node is down is the lagging
//! one. The wiped node must refuse it, and every acknowledged record must survive.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use harness::batch::{encode_batch, TestRecord};
use harness::raw_ops::{create_topics_ok, fetch_all, produce, produce_results, BatchFor};
use harness::{Cluster, ClusterOptions, RawClient};

const TOPIC: &str = "wiped-votes";
const PER_ROUND: usize = 20;
/// Many election timeouts: a lagging node with a vote to win would have won it by then.
const NO_LEADER_WINDOW: Duration = Duration::from_secs(8);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wiped_node_refuses_its_vote_to_a_lagging_peer() {
    let options = ClusterOptions::new(3).config("log.segment.bytes", 1 << 20);
    let mut cluster = Cluster::start_with(options).expect("starting 3 nodes");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let (wiped, lagging, keeper) = (1, 2, 3);
    let leader = cluster.leader()?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    create_topics_ok(&mut client, &[(TOPIC, 1)]).await?;
    produce_round(cluster, "all three", 0).await?;

    // The lagging node misses the second round: it is committed by the other two.
    cluster.kill9(lagging)?;
    produce_round(cluster, "without the lagging node", 1).await?;

    cluster.kill9(wiped)?;
    cluster.kill9(keeper)?;
    cluster.wipe(wiped)?;
    cluster.spawn_node(wiped)?;
    cluster.spawn_node(lagging)?;
    println!("node {wiped} wiped and started beside the lagging node {lagging}; node {keeper} down");
    tokio::time::sleep(NO_LEADER_WINDOW).await;
    cluster.check_none_exited()?;
    for id in [wiped, lagging] {
        let seen = cluster.leader_seen_by(id)?;
        ensure!(
            seen.is_none(),
            "node {id} names leader {seen:?} while the only node with every entry is down"
        );
    }

    cluster.start_node(keeper)?;
    let (leader, took) = cluster.wait_for_leader(Duration::from_secs(30))?;
    println!("node {keeper} back; leader {leader} after {:.3} s", took.as_secs_f64());
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    let read = fetch_all(&mut client, TOPIC, 0).await?;
    let values = read.values();
    let expected: Vec<String> =
        (0..2).flat_map(|round| (0..PER_ROUND).map(move |i| value(round, i))).collect();
    ensure!(values == expected, "acknowledged records lost or changed: read {values:?}");
    cluster.wait_serving(wiped)?;
    cluster.wait_serving(lagging)?;
    cluster.assert_digests_equal()?;
    cluster.check_none_exited()?;
    Ok(())
}

fn value(round: usize, i: usize) -> String {
    format!("round-{round}-{i}")
}

/// Produces one round with acks=all to the current leader and checks it was acknowledged.
async fn produce_round(cluster: &mut Cluster, what: &str, round: usize) -> Result<()> {
    let leader = cluster.leader()?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    let records: Vec<TestRecord> =
        (0..PER_ROUND).map(|i| TestRecord::new("k", value(round, i), i as i64)).collect();
    let batches = [BatchFor { topic: TOPIC.to_string(), partition: 0, records: encode_batch(&records)? }];
    let response = produce(&mut client, -1, &batches).await?;
    let results = produce_results(&response);
    let (_, _, code, _) = results.first().context("no partition in the Produce response")?;
    ensure!(*code == 0, "round {round} ({what}) not acknowledged by leader {leader}: {results:?}");
    println!("round {round} ({what}) acknowledged by leader {leader}");
    Ok(())
}

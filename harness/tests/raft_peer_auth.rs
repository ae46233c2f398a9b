//! The Raft port admits only nodes holding the cluster secret (issue 15), with real processes:
//! a node restarted with another secret is refused by its peers (and refuses them), gets no
//! entry while the others go on writing, and both sides log why; given the right secret again
//! it catches up. The frame-level cases (forged Vote, AppendEntries and TimeoutNow) are in
//! `broker/src/raft/transport/security_tests.rs`.

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use harness::batch::{encode_batch, TestRecord};
use harness::raw_ops::{create_topics_ok, produce, produce_results, BatchFor};
use harness::{Cluster, ClusterOptions, RawClient};

const TOPIC: &str = "secret";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_with_another_cluster_secret_is_refused_and_catches_up_once_it_has_ours() {
    let options = ClusterOptions::new(3).config("log.segment.bytes", 1 << 20);
    let mut cluster = Cluster::start_with(options).expect("starting 3 nodes");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    create_topics_ok(&mut client, &[(TOPIC, 1)]).await?;
    let outsider = cluster.followers()?[0];

    let wrong = cluster.root().join("another-secret");
    std::fs::write(&wrong, "not the secret the other two nodes share")?;
    cluster.kill9(outsider)?;
    cluster.set_node_env(outsider, vec![("ONELOG_CLUSTER_SECRET_FILE".into(), wrong.display().to_string())]);
    cluster.spawn_node(outsider)?;
    let stuck_at = cluster.last_applied_once_up(outsider)?;
    for i in 0..50 {
        let records = encode_batch(&[TestRecord::new("k", format!("v{i}"), i)])?;
        let response =
            produce(&mut client, -1, &[BatchFor { topic: TOPIC.to_string(), partition: 0, records }]).await?;
        ensure!(
            produce_results(&response).iter().all(|r| r.2 == 0),
            "the two nodes with the secret refused: {response:?}"
        );
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let now = cluster.last_applied(outsider)?;
    ensure!(now == stuck_at, "the node with another secret applied {stuck_at:?} → {now:?}");
    let leader_log = std::fs::read_to_string(cluster.log_path(leader))?;
    ensure!(
        leader_log.contains("did not prove the cluster secret"),
        "the leader did not log that node {outsider} is refused"
    );
    let outsider_log = std::fs::read_to_string(cluster.log_path(outsider))?;
    ensure!(
        outsider_log.contains("did not prove the cluster secret"),
        "the outsider did not log why it is refused"
    );
    println!(
        "node {outsider} with another secret: stuck at applied {stuck_at:?} while 50 records were written"
    );

    cluster.kill9(outsider)?;
    cluster.set_node_env(outsider, Vec::new());
    let restarted = Instant::now();
    cluster.start_node(outsider)?;
    cluster.assert_digests_equal()?;
    println!("with the cluster's secret it caught up in {:.3} s", restarted.elapsed().as_secs_f64());
    Ok(())
}

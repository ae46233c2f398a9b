//! The leader epoch a node cut off from the quorum reports (KIP-320): never above the term of
//! the leader the majority has.
//!
//! `a_cut_off_node_reports_no_epoch_no_leader_had`: a follower is isolated from both peers
//! (its clients still reach it) and calls elections, raising its own Raft term past the
//! leader's. Its Metadata must go on naming the epoch of the last leader it
//! knew. Regression: every partition's epoch was the node's own current term, so the isolated
//! node handed out epochs no leader had. A Java client keeps the highest epoch it has seen and
//! ignores metadata of a lower one, so after one such answer it would wait for a leader with
//! that epoch, which none has until an election passes that term. After the heal, the node
//! follows the leader again and every epoch a client can be told is one a leader holds.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::kafka::create_topics;
use harness::probe::blocking_request;
use harness::{Cluster, ClusterOptions};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "epochs";
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Generous: an isolated follower calls its first election within the election timeout
/// (600 ms at most) and a new one after each that fails; after the heal one election.
const WAIT_TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread")]
async fn a_cut_off_node_reports_no_epoch_no_leader_had() {
    let options = ClusterOptions::new(3).link_proxies();
    let mut cluster = Cluster::start_with(options).expect("cluster");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    create_topics(&cluster.bootstrap(), &[(TOPIC, 1)]).await?;
    let leader = cluster.leader()?;
    let follower = cluster.ids().into_iter().find(|id| *id != leader).context("a follower")?;
    let leader_term = cluster.status(leader)?.term;
    wait_for(|| Ok(epoch_on(cluster, follower)? == leader_term as i32), "the follower's epoch").await?;

    cluster.isolate(follower)?;
    let isolated = Instant::now();
    wait_for(|| Ok(cluster.status(follower)?.term > leader_term + 1), "the isolated node's term to rise")
        .await?;
    let (own_term, epoch) = (cluster.status(follower)?.term, epoch_on(cluster, follower)?);
    println!(
        "node {follower} isolated for {:?}: its term {own_term}, the leader's {leader_term}; it reports epoch {epoch}",
        isolated.elapsed()
    );
    ensure!(
        epoch == leader_term as i32,
        "the isolated node reports epoch {epoch}, not the leader's term {leader_term} (its own term is {own_term})"
    );
    ensure!(
        cluster.status(leader)?.term == leader_term,
        "the majority's leader changed while the node was cut off"
    );

    cluster.heal()?;
    wait_for(
        || {
            let (leader, _) = cluster.wait_for_leader(Duration::from_secs(10))?;
            let term = cluster.status(leader)?.term as i32;
            let epochs = [epoch_on(cluster, leader)?, epoch_on(cluster, follower)?];
            Ok(epochs.iter().all(|e| *e == term))
        },
        "every node to report the leader's term after the heal",
    )
    .await
}

/// The leader epoch node `id` reports for partition 0 of the topic in Metadata v9.
fn epoch_on(cluster: &Cluster, id: u64) -> Result<i32> {
    let topic = MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_static_str(TOPIC))));
    let request = MetadataRequest::default().with_topics(Some(vec![topic]));
    let response = blocking_request(cluster.kafka_addr(id), 9, &request, PROBE_TIMEOUT)?;
    let partition = response
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .with_context(|| format!("node {id}'s Metadata lacks {TOPIC}/0"))?;
    Ok(partition.leader_epoch)
}

/// Polls `done` until it holds; a probe that fails while links change (a closed connection)
/// counts as not yet, and only the deadline fails.
async fn wait_for(mut done: impl FnMut() -> Result<bool>, what: &str) -> Result<()> {
    let deadline = Instant::now() + WAIT_TIMEOUT;
    while !done().unwrap_or(false) {
        ensure!(Instant::now() < deadline, "waited {WAIT_TIMEOUT:?} for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

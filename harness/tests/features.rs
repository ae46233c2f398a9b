//! Finalized feature levels (issue 33) through Kafka's own `kafka-features.sh`
//! (`FeatureCommand`) against a three-node cluster, as an operator finalizes a level after a
//! rolling upgrade:
//! - a new cluster starts at this build's newest levels, and every node describes them;
//! - `downgrade` and `upgrade` of `transaction.version`, sent to a follower, are forwarded,
//!   raise the epoch and show on every node; `--dry-run` changes nothing;
//! - Kafka's refusals, with its messages: a level this build does not support, a feature it
//!   does not know, a downgrade of `onelog.version`, and a change of `onelog.group.placement`,
//!   which only a new cluster's first levels set;
//! - a member that cannot say which levels it supports (stopped here; a node of an older
//!   build in a rolling upgrade) refuses every update;
//! - the levels survive a kill -9 of every node (log and checkpoint).

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use harness::{Cluster, ClusterOptions};

/// How long replicas may take to apply what the leader acknowledged.
const CATCH_UP: Duration = Duration::from_secs(15);

fn features(bootstrap: &str, args: &[&str]) -> Result<(bool, String)> {
    harness::java::feature_command(bootstrap, args)
}

fn described(bootstrap: &str, feature: &str) -> Result<(i16, i16, i16, i64)> {
    harness::java::described_feature(bootstrap, feature)
}

/// Waits until every node in `ids` describes `feature` at `level`; returns the epoch they show.
fn on_every_node(cluster: &Cluster, ids: &[u64], feature: &str, level: i16) -> Result<i64> {
    let deadline = Instant::now() + CATCH_UP;
    loop {
        let shown: Result<Vec<_>> =
            ids.iter().map(|id| described(&cluster.kafka_addr(*id).to_string(), feature)).collect();
        match shown {
            Ok(rows) if rows.iter().all(|r| r.2 == level) => return Ok(rows[0].3),
            other if Instant::now() > deadline => {
                anyhow::bail!("{feature} not at {level} everywhere: {other:?}")
            }
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

fn refused(bootstrap: &str, args: &[&str], message: &str) -> Result<()> {
    let (ok, text) = features(bootstrap, args)?;
    ensure!(!ok, "{args:?} succeeded: {text}");
    ensure!(text.contains(message), "{args:?}: want {message:?} in:\n{text}");
    Ok(())
}

#[test]
fn kafka_features_describes_upgrades_and_refuses_as_kafka() -> Result<()> {
    let mut cluster = Cluster::start_with(ClusterOptions::new(3))?;
    let ids = cluster.ids();
    let leader = cluster.leader()?;
    let follower = *ids.iter().find(|id| **id != leader).expect("a follower");
    let via_follower = cluster.kafka_addr(follower).to_string();

    // A new cluster starts at the newest levels this build supports.
    let epoch = on_every_node(&cluster, &ids, "onelog.version", 9)?;
    ensure!(described(&via_follower, "streams.version")?.2 == 1, "streams.version not finalized at 1");
    ensure!(described(&via_follower, "share.version")?.2 == 1, "share.version not finalized at 1");
    ensure!(described(&via_follower, "group.version")?.2 == 1, "group.version not finalized at 1");
    let placement = described(&via_follower, "onelog.group.placement")?;
    ensure!((placement.0, placement.1, placement.2) == (0, 1, 1), "onelog.group.placement: {placement:?}");
    let (min, max, level, _) = described(&via_follower, "transaction.version")?;
    ensure!((min, max, level) == (0, 2, 2), "transaction.version: {min} {max} {level}");

    // A dry run changes nothing; a downgrade through a follower shows on every node.
    let (ok, text) =
        features(&via_follower, &["downgrade", "--feature", "transaction.version=1", "--dry-run"])?;
    ensure!(ok, "dry run: {text}");
    ensure!(described(&via_follower, "transaction.version")?.2 == 2, "a dry run changed the level");
    let (ok, text) = features(&via_follower, &["downgrade", "--feature", "transaction.version=1"])?;
    ensure!(ok && text.contains("transaction.version was downgraded to 1."), "downgrade: {text}");
    let after = on_every_node(&cluster, &ids, "transaction.version", 1)?;
    ensure!(after > epoch, "epoch {after} after {epoch}");
    let (ok, text) = features(&via_follower, &["upgrade", "--feature", "transaction.version=2"])?;
    ensure!(ok && text.contains("transaction.version was upgraded to 2."), "upgrade: {text}");
    on_every_node(&cluster, &ids, "transaction.version", 2)?;

    // Kafka's refusals and messages.
    let leader_addr = cluster.kafka_addr(leader).to_string();
    refused(
        &via_follower,
        &["upgrade", "--feature", "onelog.version=10"],
        &format!("Invalid update version 10 for feature onelog.version. Local controller {leader} only supports versions 1-9"),
    )?;
    refused(
        &leader_addr,
        &["upgrade", "--feature", "share.version=2"],
        "Invalid update version 2 for feature share.version. Local controller",
    )?;
    refused(
        &leader_addr,
        &["downgrade", "--feature", "onelog.version=1"],
        "Refusing to perform the requested downgrade because it might delete metadata information.",
    )?;
    refused(
        &leader_addr,
        &["disable", "--feature", "onelog.group.placement"],
        "onelog.group.placement is chosen when a cluster is created",
    )?;

    // A member that cannot answer refuses every update.
    cluster.terminate(follower)?;
    let live = cluster.live_bootstrap();
    refused(
        &live,
        &["downgrade", "--feature", "transaction.version=1"],
        &format!("Broker {follower} did not say which feature levels it supports"),
    )?;
    cluster.start_node(follower)?;

    // The levels survive a kill -9 of every node.
    let (ok, text) = features(&leader_addr, &["downgrade", "--feature", "transaction.version=1"])?;
    ensure!(ok, "downgrade before the crash: {text}");
    on_every_node(&cluster, &ids, "transaction.version", 1)?;
    for id in &ids {
        cluster.kill9(*id)?;
    }
    cluster.start_all()?;
    on_every_node(&cluster, &ids, "transaction.version", 1)?;
    on_every_node(&cluster, &ids, "onelog.version", 9)?;
    cluster.check_none_exited()
}

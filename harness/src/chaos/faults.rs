//! Carries out a planned fault on the cluster and measures how long the cluster took to agree
//! on a leader again. Client-side faults are handed to the workload's writers.
//!
//! Network faults go through the cluster's link proxies (`Cluster::isolate`, `one_way`,
//! `client_link`, `heal`), so the run starts its cluster with `link_proxies`.
//!
//! Runs on the run's controller thread, the only owner of the [`Cluster`]. A node that exits on
//! its own is an error of the run (the broker must not exit because of a fault it survives).

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use super::history::{FaultWindow, History};
use super::queue::ClientFaults;
use super::schedule::{FaultKind, Planned};
use crate::netproxy::Mode;
use crate::Cluster;

/// A new leader must be agreed on within this after any fault, or the run fails.
pub const RECOVERY_TIMEOUT: Duration = Duration::from_secs(60);

/// What `disk-full` leaves free on the node's file system: below the run's free-space reserve
/// (`run::DISK_RESERVE_BYTES`) and below one preallocated Raft log segment, so that the node
/// meets both the reserve and a real ENOSPC.
pub const DISK_FULL_LEFT_BYTES: u64 = 2 << 20;

/// Injects `planned`; returns its window (the workload records client-side ones itself).
pub fn inject(
    cluster: &mut Cluster,
    planned: &Planned,
    history: &History,
    client: &ClientFaults,
    rng: &mut StdRng,
) -> Result<Option<FaultWindow>> {
    let began = history.now();
    let started = Instant::now();
    let window = |node: Option<u64>, new_leader_after: Option<Duration>| FaultWindow {
        kind: planned.kind.name().to_string(),
        node,
        began,
        ended: history.now(),
        new_leader_after,
    };
    match planned.kind {
        FaultKind::ClientCrash => {
            client.request_crash();
            Ok(None)
        }
        FaultKind::TxnHijack => {
            client.request_hijack();
            Ok(None)
        }
        FaultKind::KillLeader => {
            let leader = cluster.leader()?;
            cluster.kill9(leader)?;
            let (_, took) = cluster.wait_for_leader(RECOVERY_TIMEOUT)?;
            sleep_rest(started, planned.length);
            cluster.start_node(leader)?;
            Ok(Some(window(Some(leader), Some(took))))
        }
        FaultKind::KillFollower => {
            let follower = pick_follower(cluster, rng)?;
            cluster.kill9(follower)?;
            std::thread::sleep(planned.length);
            cluster.start_node(follower)?;
            Ok(Some(window(Some(follower), None)))
        }
        FaultKind::KillAll => {
            for id in cluster.live_ids() {
                cluster.kill9(id)?;
            }
            std::thread::sleep(planned.length);
            cluster.start_all()?;
            let (_, _) = cluster.wait_for_leader(RECOVERY_TIMEOUT)?;
            let took = started.elapsed();
            Ok(Some(window(None, Some(took))))
        }
        FaultKind::PauseLeader => {
            let leader = cluster.leader()?;
            cluster.sigstop(leader)?;
            let others: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != leader).collect();
            let took = leader_among(cluster, &others, leader, RECOVERY_TIMEOUT);
            sleep_rest(started, planned.length);
            cluster.sigcont(leader)?;
            Ok(Some(window(Some(leader), Some(took?))))
        }
        FaultKind::IsolateLeader | FaultKind::OneWayLeader => {
            let leader = cluster.leader()?;
            let others: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != leader).collect();
            if planned.kind == FaultKind::IsolateLeader {
                cluster.isolate(leader)?;
            } else {
                for other in &others {
                    cluster.one_way(leader, *other)?;
                }
            }
            let took = leader_among(cluster, &others, leader, RECOVERY_TIMEOUT);
            sleep_rest(started, planned.length);
            cluster.heal()?;
            Ok(Some(window(Some(leader), Some(took?))))
        }
        FaultKind::IsolateFollower => {
            let follower = pick_follower(cluster, rng)?;
            cluster.isolate(follower)?;
            std::thread::sleep(planned.length);
            cluster.heal()?;
            Ok(Some(window(Some(follower), None)))
        }
        FaultKind::ClientLinkLeader => {
            let leader = cluster.leader()?;
            cluster.client_link(leader)?.set(Mode::BlackHole);
            std::thread::sleep(planned.length);
            cluster.heal()?;
            Ok(Some(window(Some(leader), None)))
        }
        FaultKind::DiskFull => {
            let node = cluster
                .ids()
                .into_iter()
                .find(|id| cluster.data_tmpfs(*id).is_some())
                .ok_or_else(|| anyhow::anyhow!("disk-full: no node runs on a tmpfs of its own"))?;
            let role = if cluster.leader()? == node { "leader" } else { "follower" };
            let ballast = cluster.data_tmpfs(node).expect("found above").join("ballast");
            crate::disk::ballast(&ballast, DISK_FULL_LEFT_BYTES)?;
            std::thread::sleep(planned.length);
            // A node may stop when its Raft log cannot grow (as Kafka stops a broker whose
            // last log directory failed); it must not lose what it acknowledged, and it must
            // come back once space is freed. Any other fault's exit stays an error.
            let stopped = cluster.wait_exit(node, Duration::ZERO)?;
            std::fs::remove_file(&ballast)?;
            match stopped {
                Some(status) => {
                    println!(
                        "chaos:          disk-full: node {node} ({role}) stopped ({status}); restarting it"
                    );
                    cluster.start_node(node)?;
                }
                None => println!("chaos:          disk-full: node {node} ({role}) kept running"),
            }
            Ok(Some(window(Some(node), None)))
        }
        FaultKind::PauseFollower => {
            let follower = pick_follower(cluster, rng)?;
            cluster.sigstop(follower)?;
            std::thread::sleep(planned.length);
            cluster.sigcont(follower)?;
            Ok(Some(window(Some(follower), None)))
        }
    }
}

fn pick_follower(cluster: &mut Cluster, rng: &mut StdRng) -> Result<u64> {
    let followers = cluster.followers()?;
    followers.choose(rng).copied().ok_or_else(|| anyhow::anyhow!("no follower"))
}

fn sleep_rest(started: Instant, length: Duration) {
    if let Some(rest) = length.checked_sub(started.elapsed()) {
        std::thread::sleep(rest);
    }
}

/// Time until every node of `ids` names one leader other than `not` (a paused node cannot
/// answer, so the cluster-wide agreement would wait for it).
fn leader_among(cluster: &mut Cluster, ids: &[u64], not: u64, timeout: Duration) -> Result<Duration> {
    let started = Instant::now();
    loop {
        let views: Vec<Option<u64>> =
            ids.iter().map(|id| cluster.leader_seen_by(*id).ok().flatten()).collect();
        if let Some(Some(first)) = views.first() {
            if *first != not && views.iter().all(|v| *v == Some(*first)) {
                return Ok(started.elapsed());
            }
        }
        if started.elapsed() > timeout {
            bail!("no new leader among {ids:?} within {timeout:?}: {views:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

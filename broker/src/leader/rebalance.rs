//! The preferred-leader duty, Kafka's `auto.leader.rebalance.enable` for Raft groups
//! (docs/SCALING.md §2): every `leader.imbalance.check.interval.seconds`, a node that leads a
//! group whose preferred leader (its first placed voter) is another node hands the group over,
//! once that node is a voter that answered within an election timeout and whose log is within
//! `REBALANCE_CAUGHT_UP_ENTRIES` of the leader's. With as many groups as nodes, each node leads
//! one again after a failure. (A node that is down keeps the match index it last reached: only
//! a recent answer tells it is there to lead.)
//!
//! The transfer is the one `onelog admin transfer-leader` makes (`raft::transport::transfer`):
//! the group's writes pause until the target has matched the log, then it stands. Runs only
//! when the cluster has more than one group: a one-group cluster keeps the leader it elects,
//! as it always has.

use std::sync::Arc;
use std::time::Duration;

use crate::config::BrokerConfig;
use crate::limits;
use crate::raft::groups::{GroupHandle, NodeGroups};
use crate::raft::transport::auth::Identity;
use crate::raft::transport::peers::Peers;
use crate::raft::transport::transfer;

/// Starts the duty if the cluster has several groups and the operator has not turned it off.
pub fn start(config: &BrokerConfig, peers: &Arc<Peers>, groups: &NodeGroups) {
    let settings = &config.settings.raft_groups;
    if groups.count < 2 || !settings.rebalance {
        return;
    }
    let every = Duration::from_millis(settings.rebalance_interval_ms);
    tokio::spawn(run(peers.clone(), groups.clone(), every));
}

async fn run(peers: Arc<Peers>, groups: NodeGroups, every: Duration) {
    let identity: &Identity = peers.identity();
    let heard = Duration::from_millis(limits::RAFT_ELECTION_TIMEOUT_MAX_MS);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        for handle in groups.handles.iter() {
            let Some(to) = due(handle, identity.node_id) else { continue };
            if !peers.answered_within(to, heard) {
                continue;
            }
            let group = handle.group;
            tracing::info!(group, to, "moving the Raft group's leadership back to its preferred leader");
            match transfer::transfer((&handle.raft, &handle.transfer, group), identity, to).await {
                Ok((leader, term)) => tracing::info!(group, leader, term, "preferred-leader election done"),
                Err(e) => {
                    tracing::warn!(group, to, error = %e, "preferred-leader election failed; retried at the next check")
                }
            }
        }
    }
}

/// The preferred leader `handle`'s group should move to: when this node (`me`) leads it, and
/// the preferred leader is another voter whose log is nearly the leader's.
fn due(handle: &GroupHandle, me: u64) -> Option<u64> {
    let preferred = handle.preferred_leader()?;
    let metrics = handle.raft.metrics();
    let m = metrics.borrow();
    if preferred == me || m.current_leader != Some(me) || m.state != openraft::ServerState::Leader {
        return None;
    }
    if !m.membership_config.membership().voter_ids().any(|id| id == preferred) {
        return None;
    }
    let matched = m.replication.as_ref()?.get(&preferred).copied().flatten()?.index;
    let last = m.last_log_index?;
    (matched + limits::REBALANCE_CAUGHT_UP_ENTRIES >= last).then_some(preferred)
}

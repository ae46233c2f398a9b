//! Leading a Raft group other than 0 (issue 32): each such group a node runs gets its own
//! [`Leadership`] (lease, term, whether it may propose) and [`Proposer`], exactly as group 0's,
//! so its leader can put entries in its log; and its leader keeps the group's cluster id and
//! feature levels those of group 0, which holds the cluster's metadata (docs/SCALING.md §2).
//! A group's log is read with the levels its own state finalized, so an op that a level
//! gates may go into a group's log only once every member of it can read it: group 0's leader
//! checked that before it finalized them (`watch_member_builds`), and a group's voters are
//! members.
//!
//! Requests on a topic placed in the group reach its leadership, applied state and proposer
//! through `Ctx::lane`; its leader keeps the group's topics those group 0 placed in it
//! (`leader::mirror`). At `onelog.version` 8 its leader identifies the group in its log
//! (`XOp::Identify`), so that the group's transaction coordinator (`coord::txn`, started
//! beside it by `node`) hands out producer ids of the group's range.

use std::sync::Arc;
use std::time::Duration;

use onelog_state::command::InitClusterOp;
use onelog_state::features::{
    FeatureUpdate, UpdateFeaturesOp, UpgradeType, ONELOG_VERSION, ONELOG_VERSION_GROUP_COORDINATORS,
};
use onelog_state::xgroup::XOp;

use super::duties::{self, DutyCtx};
use super::leadership::Leadership;
use super::proposer::{Proposer, ProposerOptions};
use crate::config::BrokerConfig;
use crate::limits;
use crate::raft::applied::AppliedView;
use crate::raft::groups::GroupHandle;
use crate::raft::transport::peers::Peers;
use crate::raft::transport::transfer::LeaderTransfer;
use crate::raft::Raft;

/// What leads one group on this node.
#[derive(Clone)]
pub struct GroupLeader {
    pub group: u32,
    /// Its leadership, applied state and proposer, as its duties see them: requests reach
    /// them through `Ctx::lane`, and node start-up adds the transaction coordinator's duties.
    pub duty: Arc<DutyCtx>,
}

/// What starting a group's leader needs from the node.
pub struct GroupLeaderWith<'a> {
    pub node_id: u64,
    pub config: &'a Arc<BrokerConfig>,
    pub peers: &'a Arc<Peers>,
    /// The node's advertised listeners and the inter-broker listener's name.
    pub advertised: &'a [crate::config::listeners::Endpoint],
    pub inter_broker: &'a str,
    /// Group 0's applied state: the cluster id and levels the group follows (unused by `lead`).
    pub group0: &'a AppliedView,
}

/// The leadership and the proposer of one group (group 0's too, `node.rs`): over its Raft,
/// applied state and leadership transfer.
pub fn lead(
    with: &GroupLeaderWith<'_>,
    (raft, applied, transfer): (&Raft, &AppliedView, &Arc<LeaderTransfer>),
) -> (Arc<Leadership>, Proposer) {
    let leadership = Arc::new(Leadership::new(
        with.node_id,
        raft.clone(),
        applied.clone(),
        transfer.clone(),
        with.advertised.to_vec(),
        with.inter_broker,
        with.peers.clone(),
    ));
    let settings = &with.config.settings;
    let proposer = Proposer::start(ProposerOptions {
        leadership: leadership.clone(),
        node_id: with.node_id,
        raft: raft.clone(),
        applied: applied.clone(),
        limits: settings.replicated_limits(),
        entry: settings.entry_options(with.node_id),
        entries_in_flight: settings.entries_in_flight,
    });
    (leadership, proposer)
}

/// Starts the leadership, the proposer and the duties of `handle`'s group.
pub fn start(with: &GroupLeaderWith<'_>, handle: &GroupHandle) -> GroupLeader {
    let (leadership, proposer) = lead(with, (&handle.raft, &handle.applied, &handle.transfer));
    let duty = Arc::new(DutyCtx {
        node_id: with.node_id,
        leadership,
        applied: handle.applied.clone(),
        metadata: with.group0.clone(),
        proposer,
        config: with.config.clone(),
        // A group has no removal notice of its own: the node's is group 0's.
        removal: Default::default(),
        peers: with.peers.clone(),
    });
    duties::start_for_group(duty.clone(), handle.raft.clone());
    tokio::spawn(follow_group0(duty.clone(), with.group0.clone(), handle.group));
    GroupLeader { group: handle.group, duty }
}

/// While this node leads the group: names it with group 0's cluster id, raises its levels to
/// group 0's and mirrors the topics placed in it, each time group 0 applies something or a
/// second passes, and at most every `FOLLOW_GROUP0_INTERVAL_MS_MIN`: group 0 applies hundreds
/// of entries a second when it holds busy partitions, and a pass per entry would cost every
/// other group's leader CPU for changes that are rare (a topic created, a level raised).
async fn follow_group0(ctx: Arc<DutyCtx>, group0: AppliedView, group: u32) {
    let mut group0_applied = group0.applied_index();
    loop {
        if ctx.leadership.may_propose() {
            follow_once(&ctx, &group0, group).await;
        }
        tokio::time::sleep(Duration::from_millis(limits::FOLLOW_GROUP0_INTERVAL_MS_MIN)).await;
        let _ = tokio::time::timeout(Duration::from_secs(1), group0_applied.changed()).await;
    }
}

async fn follow_once(ctx: &DutyCtx, group0: &AppliedView, group: u32) {
    follow_cluster(ctx, group0, group).await;
    identify(ctx, group).await;
    super::mirror::mirror_once(ctx, group0, group).await;
}

/// Once the group's levels allow it (`onelog.version` 8), its log says which group it is, so
/// the transactional ids placed in it get producer ids from its own range (`XOp::Identify`).
async fn identify(ctx: &DutyCtx, group: u32) {
    let groups = ctx.config.settings.raft_groups.groups;
    let (level, known) = ctx.applied.state(|s| (s.features.level(ONELOG_VERSION), s.xgroup.groups));
    if level < ONELOG_VERSION_GROUP_COORDINATORS || known == groups {
        return;
    }
    let op = Box::new(XOp::Identify { group, groups });
    match ctx.proposer.propose(op).await {
        Ok(_) => tracing::info!(
            group,
            groups,
            "the Raft group identified itself: it coordinates its transactional ids"
        ),
        Err(e) => tracing::warn!(group, error = %e, "identifying the Raft group did not commit"),
    }
}

/// Group 0's cluster id and feature levels, put in the group's log where it lacks them.
async fn follow_cluster(ctx: &DutyCtx, group0: &AppliedView, group: u32) {
    let (cluster_id, levels) = group0.state(|s| (s.cluster_id.clone(), s.features.finalized()));
    let named = ctx.applied.state(|s| s.cluster_id.is_some());
    if let (Some(cluster_id), false) = (cluster_id, named) {
        if let Err(e) = ctx.proposer.propose(InitClusterOp { cluster_id }).await {
            tracing::warn!(group, error = %e, "naming the Raft group did not commit");
            return;
        }
    }
    let updates: Vec<FeatureUpdate> = ctx.applied.state(|s| {
        let behind = levels.iter().filter(|(name, level)| s.features.level(name) < *level);
        behind
            .map(|(name, level)| FeatureUpdate {
                name: name.clone(),
                level: *level,
                upgrade_type: UpgradeType::Upgrade,
            })
            .collect()
    });
    if updates.is_empty() {
        return;
    }
    tracing::info!(group, ?updates, "raising the Raft group's feature levels to group 0's");
    match ctx.proposer.propose(UpdateFeaturesOp { updates }).await {
        Ok(Ok(())) => {}
        Ok(Err(refusal)) => {
            tracing::warn!(group, message = %refusal.message, "the group's feature levels refused")
        }
        Err(e) => tracing::warn!(group, error = %e, "the group's feature levels did not commit"),
    }
}

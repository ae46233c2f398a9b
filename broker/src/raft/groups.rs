//! The Raft groups a node runs (issue 32, docs/SCALING.md §2): group 0 always, and each group
//! 1 … `onelog.raft.groups`-1 whose voters (`Layout`) name this node. Each is its own openraft
//! node with its own log, checkpoints and vote gate (`raft::open`), over the node's one
//! connection per peer (`Grouped` frames).
//!
//! A group joins as group 0 does (`raft::rejoin`): a node whose copy of the group's log is
//! empty asks the group's other voters whether the group exists before it votes, so a node that
//! lost its data never starts a second copy of a group that has one; for a new group its
//! preferred leader (first voter) initializes it with the voters' addresses.
//!
//! What runs on them: their election, replication, checkpoints, a leadership and proposer
//! each that keep the group's cluster id and levels group 0's and its topics those group 0
//! placed in it (`leader::groups`, `leader::mirror`), the preferred-leader duty
//! (`leader::rebalance`), `/status` and `/metrics` per group, and the admin API's leadership
//! transfer per group. Requests on a topic's data go to its group (`Ctx::lane`); a node that
//! runs only some groups learns the others' leaders from their voters (`raft::remote_leaders`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use onelog_state::xgroup::placement::Layout;

use super::open::{self, OpenWith, Opened};
use super::transport::auth::Identity;
use super::transport::transfer::LeaderTransfer;
use super::transport::vote_gate::VoteGate;
use super::transport::{GroupRaft, GroupRafts};
use super::{rejoin, NodeAddr, Raft};
use crate::fatal;

/// One group this node runs, as the admin API and the duties drive it.
#[derive(Clone)]
pub struct GroupHandle {
    pub group: u32,
    pub raft: Raft,
    /// The group's leadership transfer on this node (group 0's is shared with `Leadership`).
    pub transfer: Arc<LeaderTransfer>,
    pub votes: Arc<VoteGate>,
    pub log: raft_store::LogReader<super::TypeConfig>,
    /// The group's applied state.
    pub applied: super::applied::AppliedView,
    /// The group's voters as placed, preferred leader first.
    pub placed: Vec<u64>,
}

impl GroupHandle {
    pub fn of(opened: &Opened, placed: Vec<u64>) -> Self {
        GroupHandle {
            group: opened.group,
            raft: opened.raft.clone(),
            transfer: opened.transfer.clone(),
            votes: opened.votes.clone(),
            log: opened.log_reader.clone(),
            applied: opened.applied.clone(),
            placed,
        }
    }

    /// The group's preferred leader: its first placed voter.
    pub fn preferred_leader(&self) -> Option<u64> {
        self.placed.first().copied()
    }
}

/// Every group this node runs, group 0 first, and how many the cluster has.
#[derive(Clone)]
pub struct NodeGroups {
    pub count: u32,
    pub handles: Arc<Vec<GroupHandle>>,
    /// Set when the node begins to stop: a group's Raft stopping is no longer fatal.
    stopping: Arc<AtomicBool>,
}

impl NodeGroups {
    pub fn new(count: u32, handles: Vec<GroupHandle>) -> Self {
        NodeGroups { count, handles: Arc::new(handles), stopping: Arc::default() }
    }

    pub fn get(&self, group: u32) -> Option<&GroupHandle> {
        self.handles.iter().find(|h| h.group == group)
    }

    /// Groups 1 …, as the Raft port serves them.
    pub fn served(&self) -> GroupRafts {
        let others = self.handles.iter().filter(|h| h.group != 0);
        let served = others.map(|h| {
            (h.group, GroupRaft { raft: h.raft.clone(), votes: h.votes.clone(), log: h.log.clone() })
        });
        Arc::new(served.collect())
    }

    pub fn begin_stopping(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }
}

/// The cluster's layout: every group's voters over this node and its configured peers, or the
/// setting that is wrong (the node does not start).
pub fn layout(
    config: &crate::config::BrokerConfig,
    me: u64,
    peers: &BTreeMap<u64, NodeAddr>,
) -> anyhow::Result<Layout> {
    let nodes = peers.keys().copied().chain([me]).collect();
    let layout = config.settings.raft_groups.layout(nodes);
    layout
        .map_err(anyhow::Error::new)
        .context("the Raft groups' placement (onelog.raft.groups, docs/OPERATIONS.md)")
}

/// Opens every group other than 0 whose voters name this node.
pub async fn open_others(with: &OpenWith<'_>, layout: &Layout) -> anyhow::Result<Vec<(Opened, Vec<u64>)>> {
    let mut opened = Vec::new();
    for (g, voters) in layout.voters.iter().enumerate().skip(1) {
        if !voters.contains(&with.node_id) {
            continue;
        }
        let has_peers = voters.len() > 1;
        let group = open::open(&OpenWith { has_peers, ..*with }, g as u32).await?;
        opened.push((group, voters.clone()));
    }
    Ok(opened)
}

/// Joins each group other than 0 in the background: asks its voters whether it exists when
/// this node's copy is empty, initializes a new one from its preferred leader, and stops the
/// node if the group's Raft stops on a fatal error.
pub fn join_others(
    identity: &Identity,
    members: &BTreeMap<u64, NodeAddr>,
    others: &[(Opened, Vec<u64>)],
    groups: &NodeGroups,
) {
    for (opened, placed) in others {
        let voters: BTreeMap<u64, NodeAddr> =
            placed.iter().filter_map(|id| Some((*id, members.get(id)?.clone()))).collect();
        let join = Join {
            identity: identity.clone(),
            group: opened.group,
            raft: opened.raft.clone(),
            root: opened.root.clone(),
            votes: opened.votes.clone(),
            start: opened.start,
            preferred: placed.first().copied(),
            voters,
        };
        tokio::spawn(join.run());
        tokio::spawn(stop_on_fatal(opened.raft.clone(), opened.group, groups.stopping.clone()));
    }
}

struct Join {
    identity: Identity,
    group: u32,
    raft: Raft,
    root: std::path::PathBuf,
    votes: Arc<VoteGate>,
    start: rejoin::Start,
    /// The group's voters and their addresses.
    voters: BTreeMap<u64, NodeAddr>,
    /// Its first placed voter.
    preferred: Option<u64>,
}

impl Join {
    async fn run(self) {
        if let Err(e) = self.join().await {
            tracing::error!(group = self.group, error = %format!("{e:#}"), "cannot join the Raft group");
        }
    }

    async fn join(&self) -> anyhow::Result<()> {
        let me = self.identity.node_id;
        let others: BTreeMap<u64, NodeAddr> =
            self.voters.iter().filter(|(id, _)| **id != me).map(|(id, a)| (*id, a.clone())).collect();
        let catching_up = match self.start {
            rejoin::Start::Normal => None,
            rejoin::Start::CatchingUp(target) => Some(target),
            rejoin::Start::Ask => {
                match rejoin::decide(&self.identity, &others, (&self.root, self.group), &self.votes).await? {
                    rejoin::Decision::NewCluster => None,
                    rejoin::Decision::Existing { target } => Some(target),
                }
            }
        };
        if let Some(target) = catching_up {
            let (raft, root, votes) = (self.raft.clone(), self.root.clone(), self.votes.clone());
            tokio::spawn(rejoin::open_when_caught_up(raft, target, root, votes));
            return Ok(());
        }
        // The preferred leader, not the lowest id, initializes a group: so it is usually the
        // first to stand, and the group starts where the rebalance duty would move it.
        if self.preferred == Some(me) && !self.raft.is_initialized().await? {
            tracing::info!(group = self.group, voters = ?self.voters.keys().collect::<Vec<_>>(), "initializing a new Raft group");
            self.raft.initialize(self.voters.clone()).await?;
        }
        Ok(())
    }
}

/// A group whose Raft stopped on a fatal error (a failed fsync) stops the node, as group 0's
/// does (`leader::duties::watch_raft`): a node that cannot write must not keep answering.
async fn stop_on_fatal(raft: Raft, group: u32, stopping: Arc<AtomicBool>) {
    let mut metrics = raft.metrics();
    drop(raft);
    loop {
        if let Err(error) = &metrics.borrow_and_update().running_state {
            if stopping.load(Ordering::SeqCst) {
                return;
            }
            tracing::error!(group, "a Raft group stopped on a fatal error");
            fatal::stop("Raft node stopped on a fatal error", error);
        }
        if metrics.changed().await.is_err() {
            if !stopping.load(Ordering::SeqCst) {
                fatal::stop("Raft node stopped", &format!("group {group}'s metrics channel closed"));
            }
            return;
        }
    }
}

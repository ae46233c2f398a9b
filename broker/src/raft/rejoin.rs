//! Starting with an empty log: a new cluster, or one this node lost its data in?
//!
//! A node whose log is empty and which has peers asks each of them how much log it holds
//! (`transport::log_state`) before it initializes anything or casts a vote:
//!
//! - if a majority of the voters (this node included) hold nothing, the cluster is new: the
//!   lowest id initializes it, as before;
//! - if any peer holds data, the cluster exists. This node never initializes. If the newest
//!   membership a peer reports names it a voter, it lost its copy of the log: it waits for
//!   answers from a majority of those voters other than itself (any entry the cluster committed
//!   is on a majority, so on one of them), and the furthest log they report (`target`) is at
//!   least as up to date as every committed entry. A node the membership does not name is
//!   joining: it has no vote to give yet, and the first answer will do. Until this node has
//!   applied the log up to `target`'s index, it votes only for candidates whose log reaches
//!   `target` (`transport::vote_gate`); after that its own log holds every committed entry and
//!   openraft decides again.
//!
//! The decision is kept in `<data dir>/rejoining` from before the Raft listener opens until the
//! node has caught up, so a crash in between cannot make a half-filled log look whole.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use super::transport::auth::Identity;
use super::transport::log_state::{self, LogState};
use super::transport::vote_gate::{VoteGate, Votes};
use super::{LogId, NodeAddr, Raft};
use crate::limits;

const MARKER: &str = "rejoining";

/// What `<data dir>/rejoining` records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Marker {
    /// The log was empty at start and the peers have not yet said whether a cluster exists.
    Undecided,
    /// The cluster exists; this node votes as usual once it has applied up to `target.index`.
    CatchingUp { target: LogId },
}

/// How this node starts, decided before the Raft listener opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// It has its log (or no peers): nothing to ask.
    Normal,
    /// Ask the peers first (`decide`).
    Ask,
    /// It is catching up with an existing cluster, decided in an earlier run.
    CatchingUp(LogId),
}

impl Start {
    pub fn votes(self) -> Votes {
        match self {
            Start::Normal => Votes::Open,
            Start::Ask => Votes::Withheld,
            Start::CatchingUp(target) => Votes::ForLogsFrom(target),
        }
    }
}

/// What the peers' answers say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    NewCluster,
    Existing { target: LogId },
}

fn marker_path(data_dir: &Path) -> PathBuf {
    data_dir.join(MARKER)
}

fn write_marker(data_dir: &Path, marker: Marker) -> anyhow::Result<()> {
    let path = marker_path(data_dir);
    let bytes = serde_json::to_vec(&marker)?;
    raft_store::write_file_atomic(&path, &bytes).with_context(|| format!("writing {}", path.display()))
}

fn remove_marker(data_dir: &Path) -> anyhow::Result<()> {
    let path = marker_path(data_dir);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(raft_store::fsync_dir(data_dir)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", path.display())),
    }
}

/// Reads the marker an earlier run left, or records that this one must ask: called before the
/// Raft listener opens. `log_empty`: the log store held no entry and no snapshot at open.
pub fn at_start(data_dir: &Path, log_empty: bool, has_peers: bool) -> anyhow::Result<Start> {
    let path = marker_path(data_dir);
    match std::fs::read(&path) {
        Ok(bytes) => {
            let marker: Marker = serde_json::from_slice(&bytes).with_context(|| {
                format!("{} is damaged; delete it only if this node's log is whole", path.display())
            })?;
            return Ok(match marker {
                Marker::Undecided => Start::Ask,
                Marker::CatchingUp { target } => Start::CatchingUp(target),
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    if !log_empty || !has_peers {
        return Ok(Start::Normal);
    }
    write_marker(data_dir, Marker::Undecided)?;
    Ok(Start::Ask)
}

/// The decision the answers so far allow, if any. `me`: this node; `configured`: this node and
/// the peers it was given (how many must hold nothing for a new cluster).
pub fn judge(me: u64, configured: usize, answers: &BTreeMap<u64, LogState>) -> Option<Decision> {
    let furthest = answers.values().filter(|a| a.has_data()).filter_map(|a| a.last_log_id).max();
    let Some(target) = furthest else {
        return (answers.len() + 1 > configured / 2).then_some(Decision::NewCluster);
    };
    // The cluster's voters, from the newest membership any peer reports.
    let voters =
        answers.values().filter(|a| a.has_data()).max_by_key(|a| a.membership_index).map(|a| &a.voters);
    let voters = voters.map(Vec::as_slice).unwrap_or_default();
    if !voters.contains(&me) {
        return Some(Decision::Existing { target });
    }
    let heard = voters.iter().filter(|v| **v != me && answers.contains_key(v)).count();
    (heard > voters.len() / 2).then_some(Decision::Existing { target })
}

/// Asks every peer, again and again, how much of Raft group `group`'s log it holds, until the
/// answers allow a decision; records it in the marker (in `data_dir`, the group's directory)
/// and the vote gate. `peers`: the group's other voters as configured.
pub async fn decide(
    identity: &Identity,
    peers: &BTreeMap<u64, NodeAddr>,
    (data_dir, group): (&Path, u32),
    gate: &VoteGate,
) -> anyhow::Result<Decision> {
    let ttl = Duration::from_millis(limits::REJOIN_QUERY_TIMEOUT_MS);
    let retry = Duration::from_millis(limits::REJOIN_QUERY_RETRY_MS);
    let mut answers: BTreeMap<u64, LogState> = BTreeMap::new();
    let mut rounds = 0u64;
    let decision = loop {
        let mut asks = JoinSet::new();
        for (&id, addr) in peers.iter() {
            let addr = addr.raft.clone();
            let identity = identity.clone();
            asks.spawn(async move { (id, log_state::ask(&identity, (id, &addr), ttl, group).await) });
        }
        while let Some(answer) = asks.join_next().await {
            if let Ok((id, Some(state))) = answer {
                // Keep the furthest answer a peer ever gave: a log only loses uncommitted
                // entries, and the target must not move back below a committed one.
                let kept = answers.entry(id).or_insert_with(|| state.clone());
                kept.last_log_id = kept.last_log_id.max(state.last_log_id);
                if state.membership_index >= kept.membership_index {
                    (kept.voters, kept.membership_index) = (state.voters, state.membership_index);
                }
            }
        }
        if let Some(decision) = judge(identity.node_id, peers.len() + 1, &answers) {
            break decision;
        }
        if rounds.is_multiple_of(limits::REJOIN_LOG_EVERY_ROUNDS) {
            tracing::warn!(
                group,
                heard_from = ?answers.keys().collect::<Vec<_>>(),
                peers = peers.len(),
                "empty log: waiting for peers to say whether a cluster exists before initializing or voting"
            );
        }
        rounds += 1;
        tokio::time::sleep(retry).await;
    };
    match decision {
        Decision::NewCluster => {
            remove_marker(data_dir)?;
            gate.set(Votes::Open);
            tracing::info!(group, heard_from = ?answers.keys().collect::<Vec<_>>(), "no peer holds data: a new cluster");
        }
        Decision::Existing { target } => {
            write_marker(data_dir, Marker::CatchingUp { target })?;
            gate.set(Votes::ForLogsFrom(target));
            tracing::warn!(
                %target,
                group,
                "this node's log is empty but the cluster exists: it rejoins, and votes only for \
                 candidates at least as up to date as its peers until it has caught up"
            );
        }
    }
    Ok(decision)
}

/// Opens the gate once the node has applied up to `target`'s index, and removes the marker.
pub async fn open_when_caught_up(raft: Raft, target: LogId, data_dir: PathBuf, gate: Arc<VoteGate>) {
    let mut metrics = raft.metrics();
    loop {
        let applied = metrics.borrow().last_applied.map(|l| l.index);
        if applied >= Some(target.index) {
            break;
        }
        if metrics.changed().await.is_err() {
            return; // Raft stopped; the marker stays for the next run.
        }
    }
    // The marker goes first: if removing it fails, the gate stays as it is, the safe side.
    if let Err(e) = remove_marker(&data_dir) {
        tracing::error!(error = %e, "cannot remove the rejoin marker; this node keeps refusing lagging candidates");
        return;
    }
    gate.set(Votes::Open);
    tracing::info!(%target, "caught up with the cluster after losing the log: voting as usual");
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    const VOTERS: [u64; 3] = [1, 2, 3];

    fn at(term: u64, index: u64) -> LogState {
        let last_log_id = Some(LogId::new(CommittedLeaderId::new(term, 0), index));
        LogState { last_log_id, voters: VOTERS.to_vec(), membership_index: Some(1) }
    }
    fn empty() -> LogState {
        LogState::default()
    }
    fn target(state: LogState) -> LogId {
        state.last_log_id.unwrap()
    }

    #[test]
    fn a_new_cluster_needs_a_majority_holding_nothing() {
        assert_eq!(judge(1, 3, &BTreeMap::new()), None);
        assert_eq!(judge(1, 3, &BTreeMap::from([(2, empty())])), Some(Decision::NewCluster));
        // The lowest id has initialized (index 0, term 0) but nothing was elected yet.
        assert_eq!(judge(2, 3, &BTreeMap::from([(1, at(0, 0))])), Some(Decision::NewCluster));
        assert_eq!(judge(1, 5, &BTreeMap::from([(2, empty())])), None);
        assert_eq!(judge(1, 5, &BTreeMap::from([(2, empty()), (3, empty())])), Some(Decision::NewCluster));
    }

    #[test]
    fn a_wiped_voter_needs_answers_from_a_majority_of_the_voters_and_targets_the_furthest_log() {
        // One other voter is not enough of three: the third may hold later entries.
        assert_eq!(judge(1, 3, &BTreeMap::from([(2, at(2, 50))])), None);
        let both = BTreeMap::from([(2, at(2, 50)), (3, at(3, 40))]);
        assert_eq!(judge(1, 3, &both), Some(Decision::Existing { target: target(at(3, 40)) }));
        // A peer holding nothing still counts as an answer.
        let one = BTreeMap::from([(2, empty()), (3, at(1, 7))]);
        assert_eq!(judge(1, 3, &one), Some(Decision::Existing { target: target(at(1, 7)) }));
    }

    #[test]
    fn a_joining_node_the_membership_does_not_name_needs_one_answer() {
        // Node 4, started with peers 1, 2 and 3 after node 1 was removed: 1 never answers.
        let mut state = at(4, 90);
        state.voters = vec![2, 3];
        state.membership_index = Some(80);
        let answers = BTreeMap::from([(2, state.clone())]);
        assert_eq!(judge(4, 4, &answers), Some(Decision::Existing { target: target(state.clone()) }));
        // The newest membership decides: an older one that named node 4 is outvoted.
        let mut old = at(3, 60);
        old.voters = vec![1, 2, 3, 4];
        old.membership_index = Some(50);
        let mixed = BTreeMap::from([(2, state), (3, old)]);
        assert_eq!(judge(4, 4, &mixed), Some(Decision::Existing { target: target(at(4, 90)) }));
    }

    #[test]
    fn the_marker_survives_a_restart_and_goes_once_caught_up() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(at_start(dir.path(), false, true).unwrap(), Start::Normal);
        assert_eq!(at_start(dir.path(), true, false).unwrap(), Start::Normal);
        assert_eq!(at_start(dir.path(), true, true).unwrap(), Start::Ask);
        // A crash before the peers answered: asked again, even though the log now has entries.
        assert_eq!(at_start(dir.path(), false, true).unwrap(), Start::Ask);
        let target = target(at(4, 9));
        write_marker(dir.path(), Marker::CatchingUp { target }).unwrap();
        assert_eq!(at_start(dir.path(), false, true).unwrap(), Start::CatchingUp(target));
        remove_marker(dir.path()).unwrap();
        assert_eq!(at_start(dir.path(), false, true).unwrap(), Start::Normal);
    }
}

//! Leadership transfer on request (`POST /leader/transfer?to=N`, `onelog admin
//! transfer-leader`), for maintenance of the leader's machine without stopping it.
//!
//! openraft 0.9 has no transfer call, and voters refuse a candidate while the leader's lease
//! lasts; the SIGTERM handover gets round that by stopping the old leader. A transfer keeps it
//! running, so instead it:
//!
//! 1. stops taking writes ([`LeaderTransfer::writes_paused`], read by
//!    `Leadership::may_propose`), so the target can catch up with a log that no longer grows;
//! 2. waits until the target has matched the last log index;
//! 3. withholds its own AppendEntries and heartbeats ([`LeaderTransfer::heartbeats_withheld`],
//!    read by the peer client in `raft::network`), so every voter's lease on it runs out;
//! 4. sends the target `TimeoutNow` (it stands once the lease is over), and waits for a new
//!    leader; then it resumes. Writes are refused meanwhile (NOT_LEADER_OR_FOLLOWER, which
//!    clients retry), about one election timeout.
//!
//! Another up-to-date voter may win the election instead of the target; the answer says who
//! leads. The flags belong to the node ([`LeaderTransfer`], one per node, shared by its
//! `Leadership`, its Raft network and its admin API), so two nodes in one process never see
//! each other's transfer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::auth::Identity;
use super::handover::send_timeout_now;
use crate::limits;
use crate::raft::{Metrics, Raft};

/// One node's leadership-transfer state: what a transfer under way has switched off.
#[derive(Debug, Default)]
pub struct LeaderTransfer {
    writes_paused: AtomicBool,
    heartbeats_withheld: AtomicBool,
    /// One transfer at a time.
    transferring: AtomicBool,
}

impl LeaderTransfer {
    /// Whether this node refuses writes while the target catches up (step 1).
    pub fn writes_paused(&self) -> bool {
        self.writes_paused.load(Ordering::SeqCst)
    }

    /// Whether this node withholds AppendEntries and heartbeats from its peers (step 3).
    pub fn heartbeats_withheld(&self) -> bool {
        self.heartbeats_withheld.load(Ordering::SeqCst)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    #[error("this node is not the leader")]
    NotLeader(Option<u64>),
    #[error("node {0} is not a voter")]
    NotAVoter(u64),
    #[error("node {0} already leads")]
    AlreadyLeads(u64),
    #[error("another transfer is under way")]
    Busy,
    #[error("node {0} did not catch up with the log in time")]
    NotCaughtUp(u64),
    #[error("{0}")]
    Failed(String),
    #[error("no new leader within {0:?}")]
    TimedOut(Duration),
}

/// Clears the flags however the transfer ends.
struct Resume<'a>(&'a LeaderTransfer);

impl Drop for Resume<'_> {
    fn drop(&mut self) {
        self.0.heartbeats_withheld.store(false, Ordering::SeqCst);
        self.0.writes_paused.store(false, Ordering::SeqCst);
        self.0.transferring.store(false, Ordering::SeqCst);
    }
}

/// The Raft address of voter `to` and the current term, if this node (`me`) leads and may hand
/// over to `to`.
fn target(m: &Metrics, me: u64, to: u64) -> Result<(String, u64), TransferError> {
    if m.current_leader != Some(me) {
        return Err(TransferError::NotLeader(m.current_leader));
    }
    if to == me {
        return Err(TransferError::AlreadyLeads(me));
    }
    let membership = m.membership_config.membership();
    if !membership.voter_ids().any(|id| id == to) {
        return Err(TransferError::NotAVoter(to));
    }
    let addr = membership.get_node(&to).map(|n| n.raft.clone()).ok_or(TransferError::NotAVoter(to))?;
    Ok((addr, m.current_term))
}

/// Moves leadership of Raft group `group` from this node to `to`; returns the new leader and
/// its term. `raft` and `state` are that group's Raft and [`LeaderTransfer`].
pub async fn transfer(
    (raft, state, group): (&Raft, &LeaderTransfer, u32),
    identity: &Identity,
    to: u64,
) -> Result<(u64, u64), TransferError> {
    let mut metrics = raft.metrics();
    let (addr, term) = target(&metrics.borrow(), identity.node_id, to)?;
    if state.transferring.swap(true, Ordering::SeqCst) {
        return Err(TransferError::Busy);
    }
    let _resume = Resume(state);
    state.writes_paused.store(true, Ordering::SeqCst);
    tracing::info!(to, term, group, "leadership transfer: writes paused until the target has caught up");

    let catch_up = Duration::from_millis(limits::LEADER_TRANSFER_CATCH_UP_MS);
    let caught_up = tokio::time::timeout(catch_up, async {
        loop {
            let done = {
                let m = metrics.borrow();
                let matched =
                    m.replication.as_ref().and_then(|r| r.get(&to).copied().flatten()).map(|l| l.index);
                matched.is_some() && matched == m.last_log_index
            };
            if done || metrics.changed().await.is_err() {
                return done;
            }
        }
    })
    .await;
    if caught_up != Ok(true) {
        return Err(TransferError::NotCaughtUp(to));
    }

    state.heartbeats_withheld.store(true, Ordering::SeqCst);
    send_timeout_now(identity, (to, addr), term, group)
        .await
        .map_err(|e| TransferError::Failed(format!("{e:#}")))?;
    let wait = Duration::from_millis(limits::LEADER_TRANSFER_ELECTION_MS);
    let elected = tokio::time::timeout(wait, async {
        loop {
            let leader = {
                let m = metrics.borrow();
                (m.current_term > term).then_some(m.current_leader).flatten().map(|l| (l, m.current_term))
            };
            if let Some(leader) = leader {
                return Some(leader);
            }
            if metrics.changed().await.is_err() {
                return None;
            }
        }
    })
    .await;
    match elected {
        Ok(Some((leader, new_term))) => {
            tracing::info!(to, leader, term = new_term, "leadership transfer: done");
            Ok((leader, new_term))
        }
        Ok(None) => Err(TransferError::Failed("the Raft node stopped".to_string())),
        Err(_) => Err(TransferError::TimedOut(wait)),
    }
}

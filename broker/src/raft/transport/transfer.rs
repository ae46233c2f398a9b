//! Leadership transfer on request (`POST /leader/transfer?to=N`, `onelog admin
//! transfer-leader`), for maintenance of the leader's machine without stopping it.
//!
//! openraft 0.9 has no transfer call, and voters refuse a candidate while the leader's lease
//! lasts; the SIGTERM handover gets round that by stopping the old leader. A transfer keeps it
//! running, so instead it:
//!
//! 1. stops taking writes (`writes_paused`, read by `Leadership::may_propose`), so the target
//!    can catch up with a log that no longer grows;
//! 2. waits until the target has matched the last log index;
//! 3. withholds its own AppendEntries and heartbeats (`heartbeats_withheld`, read by the peer
//!    client in `raft::network`), so every voter's lease on it runs out;
//! 4. sends the target `TimeoutNow` (it stands once the lease is over), and waits for a new
//!    leader; then it resumes. Writes are refused meanwhile (NOT_LEADER_OR_FOLLOWER, which
//!    clients retry), about one election timeout.
//!
//! Another up-to-date voter may win the election instead of the target; the answer says who
//! leads. The flags are process-wide: a process runs one node.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::auth::Identity;
use super::handover::send_timeout_now;
use crate::limits;
use crate::raft::Raft;

static WRITES_PAUSED: AtomicBool = AtomicBool::new(false);
static HEARTBEATS_WITHHELD: AtomicBool = AtomicBool::new(false);
/// One transfer at a time.
static TRANSFERRING: AtomicBool = AtomicBool::new(false);

pub fn writes_paused() -> bool {
    WRITES_PAUSED.load(Ordering::SeqCst)
}

pub fn heartbeats_withheld() -> bool {
    HEARTBEATS_WITHHELD.load(Ordering::SeqCst)
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
struct Resume;

impl Drop for Resume {
    fn drop(&mut self) {
        HEARTBEATS_WITHHELD.store(false, Ordering::SeqCst);
        WRITES_PAUSED.store(false, Ordering::SeqCst);
        TRANSFERRING.store(false, Ordering::SeqCst);
    }
}

/// Moves leadership from this node (`me`) to `to`; returns the new leader and its term.
pub async fn transfer(raft: &Raft, identity: &Identity, to: u64) -> Result<(u64, u64), TransferError> {
    let me = identity.node_id;
    let mut metrics = raft.metrics();
    let (addr, term) = {
        let m = metrics.borrow();
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
        (addr, m.current_term)
    };
    if TRANSFERRING.swap(true, Ordering::SeqCst) {
        return Err(TransferError::Busy);
    }
    let _resume = Resume;
    WRITES_PAUSED.store(true, Ordering::SeqCst);
    tracing::info!(to, term, "leadership transfer: writes paused until the target has caught up");

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

    HEARTBEATS_WITHHELD.store(true, Ordering::SeqCst);
    send_timeout_now(identity, to, addr, term).await.map_err(|e| TransferError::Failed(format!("{e:#}")))?;
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

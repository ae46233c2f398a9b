//! Leadership handover on graceful shutdown (SIGTERM), so a rolling restart does not wait for
//! a random election timeout and the next leader is a node that has the whole log.
//!
//! The leader stops taking writes, waits until its most caught-up follower has matched its
//! last log index, sends it `TimeoutNow`, and stops. openraft 0.9 has no leadership-transfer
//! call, and voters refuse a vote while the old leader's lease lasts (the maximum election
//! timeout since its last heartbeat); so the follower stands for election as soon as that
//! lease has run out, rather than after its own randomized timeout.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::auth::Identity;
use super::client::Peer;
use super::codec::{self, Kind};
use crate::limits;
use crate::raft::Raft;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimeoutNow {
    pub from: u64,
    pub term: u64,
}

/// Follower side: schedule an election for when the old leader's lease has expired.
pub fn on_timeout_now(raft: &Raft, req: TimeoutNow) -> Result<(), String> {
    let term = raft.metrics().borrow().current_term;
    if req.term < term {
        return Err(format!("stale handover from node {} in term {} (now {term})", req.from, req.term));
    }
    tracing::info!(from = req.from, term = req.term, "leadership handover: standing for election");
    let raft = raft.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(
            limits::RAFT_ELECTION_TIMEOUT_MAX_MS + limits::RAFT_HEARTBEAT_MS / 2,
        ))
        .await;
        let _ = raft.trigger().elect().await;
    });
    Ok(())
}

/// Leader side: hands leadership of Raft group `group` to the most caught-up voter, waiting at
/// most `wait` for one to match the last log index. Returns the chosen node, if any.
pub async fn hand_over(raft: &Raft, identity: &Identity, wait: Duration, group: u32) -> Option<u64> {
    let node_id = identity.node_id;
    let mut metrics = raft.metrics();
    let deadline = tokio::time::Instant::now() + wait;
    let (target, addr, term) = loop {
        let choice = {
            let m = metrics.borrow();
            if m.current_leader != Some(node_id) {
                return None;
            }
            let voters: Vec<u64> =
                m.membership_config.membership().voter_ids().filter(|id| *id != node_id).collect();
            let last = m.last_log_index;
            let best = m.replication.as_ref().and_then(|r| {
                voters.iter().filter(|id| r.get(id).and_then(|l| l.map(|l| l.index)) == last).copied().next()
            });
            best.and_then(|id| {
                let addr = m.membership_config.membership().get_node(&id)?.raft.clone();
                Some((id, addr, m.current_term))
            })
        };
        if let Some(choice) = choice {
            break choice;
        }
        if tokio::time::timeout_at(deadline, metrics.changed()).await.is_err() {
            tracing::warn!("leadership handover: no follower caught up in time; stopping without one");
            return None;
        }
    };
    match send_timeout_now(identity, (target, addr), term, group).await {
        Ok(()) => {
            tracing::info!(to = target, group, "leadership handed over");
            Some(target)
        }
        Err(e) => {
            tracing::warn!(to = target, error = %e, "leadership handover failed");
            None
        }
    }
}

/// Tells `target` (at `addr`) to stand for election in Raft group `group` once the current
/// leader's lease is over.
pub async fn send_timeout_now(
    from: &Identity,
    (target, addr): (u64, String),
    term: u64,
    group: u32,
) -> anyhow::Result<()> {
    let addr = crate::fault::raft_dial(target).unwrap_or(addr);
    let peer = Peer::new(from.clone(), target, addr);
    let from = from.node_id;
    let request_id = peer.next_request_id();
    let frame = codec::encode_for(
        group,
        Kind::TimeoutNow,
        request_id,
        &TimeoutNow { from, term },
        limits::RAFT_FRAME_BYTES_MAX,
    )?;
    let response = peer.call(request_id, frame, Duration::from_secs(1)).await?;
    match response.decode_body::<Result<(), String>>()? {
        Ok(()) => Ok(()),
        Err(refused) => anyhow::bail!("node {target} refused: {refused}"),
    }
}

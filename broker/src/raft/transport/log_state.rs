//! Asking a peer how much log it holds. A node that starts with an empty log asks every peer,
//! to tell a new cluster (nobody has anything) from one it lost its data in (`raft::rejoin`).

use std::time::Duration;

use openraft::storage::RaftLogReader;
use raft_store::LogReader;
use serde::{Deserialize, Serialize};

use super::auth::Identity;
use super::client::Peer;
use super::codec::{self, Kind};
use crate::limits;
use crate::raft::{LogId, Raft, TypeConfig};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LogStateQuery {
    pub from: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LogState {
    /// The id of the last entry in the peer's log (or of its snapshot, once purged).
    pub last_log_id: Option<LogId>,
    /// The voters of the peer's membership, and the log index of that membership.
    pub voters: Vec<u64>,
    pub membership_index: Option<u64>,
}

impl LogState {
    /// Whether the peer holds anything a cluster could have committed: more than the
    /// membership entry `Raft::initialize` writes at index 0 in term 0.
    pub fn has_data(&self) -> bool {
        self.last_log_id.is_some_and(|id| id.index > 0 || id.leader_id.term > 0)
    }
}

/// Peer side: what this node's log holds.
pub async fn on_log_state(raft: &Raft, log: &LogReader<TypeConfig>) -> Result<LogState, String> {
    let (last_index, floor, voters, membership_index) = {
        let metrics = raft.metrics();
        let m = metrics.borrow();
        let voters = m.membership_config.membership().voter_ids().collect();
        (m.last_log_index, m.purged.max(m.snapshot), voters, m.membership_config.log_id().map(|l| l.index))
    };
    let Some(index) = last_index else {
        return Ok(LogState { last_log_id: floor, voters, membership_index });
    };
    let mut log = log.clone();
    let entries = log.try_get_log_entries(index..index + 1).await.map_err(|e| e.to_string())?;
    // The entry can have been purged or truncated since the metrics were read.
    let last = entries.first().map(|entry| entry.log_id).max(floor);
    Ok(LogState { last_log_id: last, voters, membership_index })
}

/// Asks `target` at `addr` once how much of Raft group `group`'s log it holds, waiting at most
/// `ttl`. `None` if it did not answer.
pub async fn ask(
    identity: &Identity,
    (target, addr): (u64, &str),
    ttl: Duration,
    group: u32,
) -> Option<LogState> {
    let addr = crate::fault::raft_dial(target).unwrap_or_else(|| addr.to_string());
    ask_peer(&Peer::new(identity.clone(), target, addr), identity.node_id, ttl, group).await
}

/// [`ask`] over `peer`'s connection, kept for the next call (`Peers::get`); `from` is this
/// node's id.
pub async fn ask_peer(peer: &Peer, from: u64, ttl: Duration, group: u32) -> Option<LogState> {
    let target = peer.target();
    let request_id = peer.next_request_id();
    let frame = codec::encode_for(
        group,
        Kind::LogState,
        request_id,
        &LogStateQuery { from },
        limits::RAFT_FRAME_BYTES_MAX,
    )
    .ok()?;
    let response = peer.call(request_id, frame, ttl).await.ok()?;
    match response.decode_body::<Result<LogState, String>>() {
        Ok(Ok(state)) => Some(state),
        Ok(Err(e)) => {
            tracing::warn!(target, error = %e, "peer could not say how much log it holds");
            None
        }
        Err(e) => {
            tracing::warn!(target, error = %e, "bad answer to a log-state query");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    #[test]
    fn only_the_initial_membership_entry_is_no_data() {
        let state = |term, index| LogState {
            last_log_id: Some(LogId::new(CommittedLeaderId::new(term, 0), index)),
            ..Default::default()
        };
        assert!(!LogState::default().has_data());
        assert!(!state(0, 0).has_data());
        assert!(state(1, 1).has_data());
        assert!(state(1, 0).has_data());
    }
}

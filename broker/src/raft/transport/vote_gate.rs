//! Which votes this node may cast, checked before a Vote request reaches openraft.
//!
//! Raft's safety rests on a voter remembering its log: it grants a vote only to a candidate
//! whose log is at least as up to date as its own. A node whose data directory was lost starts
//! with an empty log and would grant any candidate its vote, so a lagging peer could be
//! elected with it and overwrite entries the cluster had committed (found in
//! `cluster_failover::wiped_lowest_id_node_rejoins`: node 3 then failed openraft's
//! `has_log_id` assertion). Until such a node has caught up (`raft::rejoin`), it votes only for
//! candidates whose log reaches the furthest log its peers reported, which holds every entry
//! the cluster committed; and while it does not know that yet, for nobody.

use std::sync::Mutex;

use openraft::raft::{VoteRequest, VoteResponse};

use crate::incident::Incident;
use crate::raft::LogId;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Votes {
    /// A node with its log: openraft decides.
    Open,
    /// The log was lost and the peers have not yet said how far the cluster got: no vote.
    Withheld,
    /// The log was lost; the peers' furthest log is this one. A vote goes only to a candidate
    /// whose last log id is at least this (Raft's up-to-date rule, against that peer's log).
    ForLogsFrom(LogId),
}

pub struct VoteGate {
    votes: Mutex<Votes>,
    refused: Incident,
}

impl VoteGate {
    pub fn new(votes: Votes) -> Self {
        VoteGate { votes: Mutex::new(votes), refused: Incident::new() }
    }

    pub fn set(&self, votes: Votes) {
        *self.lock() = votes;
    }

    pub fn votes(&self) -> Votes {
        *self.lock()
    }

    /// For `GET /status`: `open`, `withheld`, or `catching_up_to <log id>`.
    pub fn describe(&self) -> String {
        match self.votes() {
            Votes::Open => "open".to_string(),
            Votes::Withheld => "withheld".to_string(),
            Votes::ForLogsFrom(target) => format!("catching_up_to {target}"),
        }
    }

    /// Whether `req` may be handed to openraft; logs (rate-limited) each one that may not.
    pub fn admits(&self, req: &VoteRequest<u64>) -> bool {
        let votes = self.votes();
        let admitted = match votes {
            Votes::Open => true,
            Votes::Withheld => false,
            Votes::ForLogsFrom(target) => req.last_log_id >= Some(target),
        };
        if !admitted {
            self.refused.record(|tally| {
                tracing::warn!(
                    candidate = %req.vote,
                    candidate_last_log = ?req.last_log_id,
                    ?votes,
                    suppressed = tally.suppressed,
                    "vote refused: this node lost its log and has not caught up with the cluster"
                )
            });
        }
        admitted
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Votes> {
        // A poisoned lock only means a panic elsewhere while holding it; the value is a copy.
        self.votes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The answer to a vote this node will not cast: not granted, and our current vote, which
/// is below the candidate's (so the candidate neither steps down nor counts it).
pub fn refusal(current: openraft::Vote<u64>) -> VoteResponse<u64> {
    VoteResponse::new(current, None, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, Vote};

    fn log_id(term: u64, index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(term, 0), index)
    }

    fn request(last: Option<LogId>) -> VoteRequest<u64> {
        VoteRequest::new(Vote::new(9, 2), last)
    }

    #[test]
    fn an_open_gate_admits_every_vote_and_a_withheld_one_none() {
        assert!(VoteGate::new(Votes::Open).admits(&request(None)));
        let gate = VoteGate::new(Votes::Withheld);
        assert!(!gate.admits(&request(Some(log_id(100, 1_000)))));
        assert!(!gate.admits(&request(None)));
    }

    #[test]
    fn a_rejoining_node_votes_only_for_logs_at_least_as_up_to_date_as_its_peers() {
        let gate = VoteGate::new(Votes::ForLogsFrom(log_id(5, 100)));
        assert!(gate.admits(&request(Some(log_id(5, 100)))));
        assert!(gate.admits(&request(Some(log_id(6, 3)))), "a later term is more up to date");
        assert!(!gate.admits(&request(Some(log_id(5, 99)))), "same term, shorter");
        assert!(!gate.admits(&request(Some(log_id(4, 500)))), "longer, but an older term");
        assert!(!gate.admits(&request(None)));
        gate.set(Votes::Open);
        assert!(gate.admits(&request(None)));
    }
}

//! What a peer's request must satisfy before openraft sees it, whoever sent it.
//!
//! openraft trusts its peers: a Vote with term 2^64−2 was granted, the cluster re-elected at
//! term u64::MAX, and the next election made every other node panic inside openraft (issue 15).
//! So every request is checked against the connection and the node's state first:
//!
//! - its sender (the candidate, the leader, the notice's `from`) is the node the connection
//!   authenticated as (`auth`): a member cannot speak for another;
//! - its term is not beyond this node's current term by more than `RAFT_TERM_JUMP_MAX`
//!   (a node cut off and campaigning alone gains a couple of terms a second; a million is six
//!   days of that, and far from the end of a u64);
//! - a Vote or TimeoutNow comes from a voter of this node's membership, once it has one (an
//!   AppendEntries may come from a leader added after this node's membership was written: a
//!   node that was down must still be able to catch up).
//!
//! A refused request closes the connection, logged at a bounded rate (`REFUSED`).

use super::server::Request;
use crate::incident::Incident;
use crate::limits;
use crate::raft::Raft;

/// Requests refused, logged at a bounded rate.
pub static REFUSED: Incident = Incident::new();

/// Whether `request`, on a connection authenticated as node `from`, may reach openraft.
pub fn check(raft: &Raft, from: u64, request: &Request) -> Result<(), String> {
    let (sender, term, needs_voter) = match request {
        Request::AppendEntries(r) => (sender(&r.vote), Some(r.vote.leader_id().term), false),
        Request::InstallSnapshot(r) => (sender(&r.vote), Some(r.vote.leader_id().term), false),
        Request::Vote(r) => (sender(&r.vote), Some(r.vote.leader_id().term), true),
        Request::TimeoutNow(r) => (Some(r.from), Some(r.term), true),
        Request::Removed(r) => (Some(r.from), None, false),
        Request::LogState(q) => (Some(q.from), None, false),
        Request::Features(q) => (Some(q.from), None, false),
        Request::Forward(e) => (Some(e.from), None, false),
        Request::CrossGroup(r) => (Some(r.from), None, false),
    };
    if sender != Some(from) {
        return Err(format!("names sender {sender:?} on a connection authenticated as node {from}"));
    }
    let (current, voter) = {
        let metrics = raft.metrics();
        let m = metrics.borrow();
        let membership = m.membership_config.membership();
        let known = membership.nodes().next().is_some();
        (m.current_term, !known || membership.voter_ids().any(|id| id == from))
    };
    if let Some(term) = term {
        if term > current.saturating_add(limits::RAFT_TERM_JUMP_MAX) {
            return Err(format!(
                "term {term} is beyond this node's term {current} by more than {}",
                limits::RAFT_TERM_JUMP_MAX
            ));
        }
    }
    if needs_voter && !voter {
        return Err(format!("node {from} is not a voter of this node's membership"));
    }
    Ok(())
}

fn sender(vote: &openraft::Vote<u64>) -> Option<u64> {
    vote.leader_id().voted_for()
}

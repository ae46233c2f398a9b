//! The proposer's side of the log: one batch of queued proposals becomes an entry, goes to
//! Raft, and is answered from its applied results, with up to `onelog.raft.entries.in.flight`
//! entries in flight at once (pipelined proposals, issue 31; default 1).
//!
//! Each entry is built against the applied state plus the overlay of the entries in flight
//! (`onelog_state::in_flight`) and handed to openraft with `client_write_ff`, which queues it
//! behind the ones before it: openraft appends, replicates and applies them in that order, so
//! they are answered in that order too. The overlay's rules (barriers, wrong predictions, a
//! failed entry) decide when the next entry may be built; this file adds the leader's own:
//!
//! - The first entry of a term waits, as before, until this node leads, has applied its whole
//!   log and has its takeover entry in the log ([`Sequencer::prepare`]).
//! - With entries in flight, the next is built only in the same term; in another the batch is
//!   answered NOT_LEADER_OR_FOLLOWER, which clients retry, as after any change of leader.
//! - A failed entry (the leader lost its term or is cut off from the quorum) makes the next
//!   entry re-read the applied state first, as one failed entry did before pipelining; every
//!   entry still in flight then gets the same answer, its outcome unknown.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use onelog_state::command::{Command, LeaderStamp, Op, OpResult};
use onelog_state::entry::{self, Decision, InFlight, Proposal, Waiting};
// The fault-injection build's entries may carry the chaos checker's test bugs (`bugs`); a
// release build proposes what the pure builder decides.
#[cfg(feature = "fault-injection")]
use super::bugs::build_entry_in_flight;
#[cfg(not(feature = "fault-injection"))]
use onelog_state::entry::build_entry_in_flight;
use openraft::error::{ClientWriteError, RaftError};

use super::proposer::{ProposerOptions, Reply};
use crate::clock::wall_clock_ms;
use crate::errors::{propose_error_code, Addressed, ProposeError};
use crate::limits;
use crate::metrics::METRICS;
use crate::raft::Raft;

type Written = Pin<Box<dyn Future<Output = Result<Vec<OpResult>, ProposeError>> + Send>>;

/// An entry handed to Raft and not answered yet.
struct Proposed {
    written: Written,
    waiting: Vec<(Waiting, Reply)>,
    op_count: usize,
    bytes: usize,
    at: Instant,
}

pub(super) struct Sequencer {
    options: ProposerOptions,
    /// Term in which the applied state was last known complete (0: re-read it first).
    term: u64,
    /// Term whose takeover entry is in the log.
    takeover_term: u64,
    /// What the entries in flight will leave, for stamping the next.
    in_flight: InFlight,
    /// The entries in flight, oldest first.
    entries: VecDeque<Proposed>,
}

impl Sequencer {
    pub fn new(options: ProposerOptions) -> Self {
        Sequencer {
            options,
            term: 0,
            takeover_term: 0,
            in_flight: InFlight::default(),
            entries: VecDeque::new(),
        }
    }

    pub fn options(&self) -> &ProposerOptions {
        &self.options
    }

    pub fn has_in_flight(&self) -> bool {
        !self.entries.is_empty()
    }

    /// Whether the next entry may be built now.
    pub fn may_build(&self) -> bool {
        self.in_flight.may_build()
            && self.entries.len() < self.options.entries_in_flight
            && self.entries.iter().map(|e| e.bytes).sum::<usize>() < limits::ENTRIES_IN_FLIGHT_BYTES_MAX
    }

    /// The outcome of the oldest entry in flight (only called with one in flight).
    pub async fn oldest_written(&mut self) -> Result<Vec<OpResult>, ProposeError> {
        match self.entries.front_mut() {
            Some(entry) => (&mut entry.written).await,
            None => std::future::pending().await,
        }
    }

    /// Answers the oldest entry in flight from its outcome.
    pub fn settle(&mut self, written: Result<Vec<OpResult>, ProposeError>) {
        let Some(entry) = self.entries.pop_front() else { return };
        match written {
            Ok(results) => {
                METRICS.commit_duration.observe(entry.at.elapsed().as_secs_f64());
                assert_eq!(results.len(), entry.op_count, "one result per proposed op");
                let as_stamped = !results.iter().any(|r| matches!(r, OpResult::Produced(Err(_))));
                self.in_flight.settled(as_stamped);
                for (w, reply) in entry.waiting {
                    let _ = reply.send(Ok(w.answer(&results)));
                }
            }
            Err(err) => {
                // The entry may still commit later under a new leader; this node re-reads the
                // applied state before it stamps again.
                self.term = 0;
                self.in_flight.settled(false);
                answer_failed(entry.waiting, &err);
            }
        }
    }

    /// Whether this leader is cut off from the quorum (check-quorum): its entries in flight
    /// cannot commit here.
    pub fn cut_off(&self) -> bool {
        self.options.leadership.is_cut_off()
    }

    /// Answers every entry in flight as failed with `err`, now: a leader cut off from the
    /// quorum cannot commit them (a new leader still may, which Kafka clients handle as after a
    /// timeout), so its callers are not kept waiting until the partition heals. Regression
    /// (issue 14): transactional commits stalled for the whole partition.
    pub fn fail_all(&mut self, err: &ProposeError) {
        self.term = 0;
        self.in_flight.clear();
        for entry in std::mem::take(&mut self.entries) {
            answer_failed(entry.waiting, err);
        }
    }

    /// Builds `queued` into the next entry and hands it to Raft; answers `takeovers` once the
    /// term's takeover entry is in the log.
    pub async fn propose_batch(
        &mut self,
        queued: Vec<(Proposal, Reply)>,
        takeovers: Vec<tokio::sync::oneshot::Sender<Result<(), ProposeError>>>,
    ) {
        let ready = if self.entries.is_empty() { self.prepare().await } else { self.same_term() };
        for reply in takeovers {
            let _ = reply.send(ready.clone().map(|_| ()));
        }
        match ready {
            Ok(term) if !queued.is_empty() => self.build_and_propose(term, queued).await,
            Ok(_) => {}
            Err(e) => queued.into_iter().for_each(|(_, reply)| drop(reply.send(Err(e.clone())))),
        }
    }

    async fn build_and_propose(&mut self, term: u64, queued: Vec<(Proposal, Reply)>) {
        let stamp = LeaderStamp { now_ms: wall_clock_ms(), term: term as i32 };
        let (proposals, replies): (Vec<Proposal>, Vec<Reply>) = queued.into_iter().unzip();
        let replies_count = replies.len();
        let (applied, options, in_flight) = (&self.options.applied, &self.options.entry, &mut self.in_flight);
        let built = applied.state(|state| build_entry_in_flight(state, in_flight, stamp, options, proposals));
        // `Proposal::size_bytes` bounds each op's encoding from above, so this holds; if it
        // ever did not, refusing the entry (before any answer leaves) keeps the node up where
        // raft-store would refuse the write and the node would stop.
        let encoded = bincode::serialized_size(&built.command).map_or(usize::MAX, |n| n as usize);
        if encoded > limits::ENTRY_BYTES_MAX {
            if !built.command.ops.is_empty() {
                self.in_flight.abandoned();
            }
            super::proposer::refuse_oversized_entry(built.decisions, replies, encoded);
            return;
        }
        let waiting = answer_decided(built.decisions, replies);
        if built.command.ops.is_empty() {
            assert!(waiting.is_empty(), "only proposals with ops in the entry wait for it");
            return;
        }
        if built.open_txn_writes {
            // Writes of an open transaction, unanswered unless the checker's test bug answered
            // them already: the fault-injection build can hold the leader here so that a test
            // kills it with them in flight (`harness/tests/txn_leader_change.rs`; the chaos
            // run's `--txn-write-delay-ms`). Their producer must then carry the transaction on
            // with the next leader.
            crate::fault::delay("proposer.before-txn-write").await;
        }
        METRICS.entry_proposals.observe(replies_count as f64);
        METRICS.entry_bytes.observe(encoded as f64);
        let op_count = built.command.ops.len();
        self.in_flight.proposed(&built.command);
        let written = hand_to_raft(&self.options.raft, built.command).await;
        self.entries.push_back(Proposed { written, waiting, op_count, bytes: encoded, at: Instant::now() });
        METRICS.entries_in_flight.observe(self.entries.len() as f64);
    }

    /// The current term once this node leads, has applied its whole log and has its takeover
    /// entry in the log.
    async fn prepare(&mut self) -> Result<u64, ProposeError> {
        let term = self.ready_term().await?;
        if self.takeover_term != term {
            if let Err(e) = self.take_over(term).await {
                self.term = 0;
                return Err(e);
            }
            self.takeover_term = term;
        }
        Ok(term)
    }

    /// With entries in flight: the term they were built in, if this node still leads in it.
    fn same_term(&self) -> Result<u64, ProposeError> {
        let metrics = self.options.raft.metrics();
        let m = metrics.borrow();
        let leads = m.current_leader == Some(self.options.node_id);
        if leads && self.term != 0 && m.current_term == self.term && self.takeover_term == self.term {
            Ok(self.term)
        } else {
            Err(ProposeError::NotLeader)
        }
    }

    /// The takeover entry, before anything else of this term is proposed: the leader's limits
    /// when the replicated ones differ (`entry::takeover_ops`). Open transactions stay open.
    async fn take_over(&mut self, term: u64) -> Result<(), ProposeError> {
        let ops: Vec<Op> =
            self.options.applied.state(|state| entry::takeover_ops(state, &self.options.limits));
        if ops.is_empty() {
            return Ok(());
        }
        tracing::info!(term, ops = ops.len(), "proposing the takeover entry (limits)");
        let command = Command { stamp: LeaderStamp { now_ms: wall_clock_ms(), term: term as i32 }, ops };
        self.options.raft.client_write(command).await.map(|_| ()).map_err(propose_error)
    }

    /// Returns the current term once this node leads and has applied its whole log.
    async fn ready_term(&mut self) -> Result<u64, ProposeError> {
        let mut metrics = self.options.raft.metrics();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let (leader, term, last_log, applied) = {
                let m = metrics.borrow();
                (m.current_leader, m.current_term, m.last_log_index, m.last_applied.map(|l| l.index))
            };
            if leader != Some(self.options.node_id) {
                return Err(ProposeError::NotLeader);
            }
            if self.term == term || applied >= last_log {
                self.term = term;
                return Ok(term);
            }
            if tokio::time::timeout_at(deadline, metrics.changed()).await.is_err() {
                return Err(ProposeError::NotLeader);
            }
        }
    }
}

/// Queues `command` behind the entries already handed to openraft; the future is its ops'
/// results once it is committed and applied.
async fn hand_to_raft(raft: &Raft, command: Command) -> Written {
    match raft.client_write_ff(command).await {
        Ok(rx) => Box::pin(async move {
            match rx.await {
                Ok(Ok(response)) => Ok(response.data.results),
                Ok(Err(e)) => Err(write_error(e)),
                Err(_) => Err(ProposeError::Fatal("raft stopped before answering an entry".into())),
            }
        }),
        Err(fatal) => Box::pin(std::future::ready(Err(ProposeError::Fatal(fatal.to_string())))),
    }
}

/// Sends the answers the builder decided at once; returns the proposals that wait for the
/// entry, with their replies.
fn answer_decided(decisions: Vec<Decision>, replies: Vec<Reply>) -> Vec<(Waiting, Reply)> {
    let mut waiting = Vec::new();
    for (decision, reply) in decisions.into_iter().zip(replies) {
        match decision {
            Decision::Answered(answer) => drop(reply.send(Ok(answer))),
            Decision::Waiting(w) => waiting.push((w, reply)),
        }
    }
    waiting
}

/// Answers an entry's waiting proposals when it did not commit here: produce partitions
/// decided at stamping keep their answer, the rest get `err`.
fn answer_failed(waiting: Vec<(Waiting, Reply)>, err: &ProposeError) {
    let code = propose_error_code(err, Addressed::PartitionLeader);
    for (w, reply) in waiting {
        let _ = reply.send(w.failed(code, &err.to_string()).ok_or_else(|| err.clone()));
    }
}

fn write_error(e: ClientWriteError<u64, crate::raft::NodeAddr>) -> ProposeError {
    match e {
        ClientWriteError::ForwardToLeader(_) => ProposeError::NotLeader,
        other => ProposeError::Fatal(other.to_string()),
    }
}

fn propose_error(e: RaftError<u64, ClientWriteError<u64, crate::raft::NodeAddr>>) -> ProposeError {
    match e {
        RaftError::APIError(e) => write_error(e),
        other => ProposeError::Fatal(other.to_string()),
    }
}

//! Leader-side aggregation (DESIGN §2, DRMQ's cross-request aggregator) around the pure entry
//! builder (`onelog_state::entry`).
//!
//! Handlers hand proposals to one proposer task. While one entry is being committed, new
//! proposals queue; the next entry takes everything queued, up to a byte and op limit. The
//! proposer takes the entry's one [`LeaderStamp`] (the wall clock and the term: handlers never
//! read the clock for the log), builds the entry against the applied state, answers what the
//! builder decided at once, proposes the rest, and answers it from the applied results.
//!
//! Before its first entry of a term, after every entry of earlier terms is applied, the
//! proposer proposes the takeover entry (`entry::takeover_ops`: the leader's replicated limits
//! if they changed). Transactions open at the takeover stay open (issue 17): every write a
//! client was told about is in the log, so their producers carry on with this leader.
//!
//! Entries are bounded by construction (issue 13): the proposer never takes a proposal into an
//! entry that would pass `limits::ENTRY_BYTES_MAX`, keeps it for the next entry instead, and
//! refuses a proposal larger than that alone with [`ProposeError::TooLarge`]; a
//! non-transactional produce request larger than one entry is split by partition
//! ([`Proposer::submit_produce`]). raft-store would refuse a larger entry, and a refused log
//! write stops the node.
//!
//! Proposals are typed: [`Proposer::propose`] returns the op's own result type
//! ([`TypedOp::Output`]). An applied result of another shape can only come from a broken apply;
//! it stops the node through the fatal path.

use std::time::Duration;

use onelog_state::command::{
    Command, LeaderStamp, Op, OpResult, PartitionProduced, ReplicatedLimits, TypedOp,
};
use onelog_state::entry::{self, Answer, Decision, EntryOptions, Proposal, UnstampedAppend, Waiting};
use onelog_state::features::ONELOG_VERSION;
// The fault-injection build's entries may carry the chaos checker's test bugs (`bugs`); a
// release build proposes what the pure builder decides.
#[cfg(feature = "fault-injection")]
use super::bugs::build_entry;
#[cfg(not(feature = "fault-injection"))]
use onelog_state::entry::build_entry;
use openraft::error::{ClientWriteError, RaftError};
use tokio::sync::{mpsc, oneshot};

use crate::clock::wall_clock_ms;
use crate::fatal;
use crate::limits;
use crate::metrics::METRICS;
use crate::raft::applied::AppliedView;
use crate::raft::Raft;

pub use crate::errors::ProposeError;
use crate::errors::{propose_error_code, Addressed};

type Reply = oneshot::Sender<Result<Answer, ProposeError>>;

/// What the proposer task receives: a proposal with its reply, or a request to make sure the
/// current term's takeover entry is in the log (a duty's, so a new leader acts at once).
enum Queued {
    Proposal(Proposal, Reply),
    TakeOver(oneshot::Sender<Result<(), ProposeError>>),
}

#[derive(Clone)]
pub struct Proposer {
    tx: mpsc::Sender<Queued>,
}

/// What the proposer needs besides the queue.
pub struct ProposerOptions {
    pub node_id: u64,
    pub raft: Raft,
    pub applied: AppliedView,
    /// The limits this leader writes into the replicated state at takeover.
    pub limits: ReplicatedLimits,
    pub entry: EntryOptions,
    /// Whether this node is cut off from the quorum (check-quorum), to stop waiting for an
    /// entry that cannot commit here.
    pub leadership: std::sync::Arc<super::leadership::Leadership>,
}

/// A produce proposal's answer: one result per partition, in request order.
pub type Produced = Result<Vec<PartitionProduced>, ProposeError>;

impl Proposer {
    pub fn start(options: ProposerOptions) -> Proposer {
        let (tx, rx) = mpsc::channel(limits::PROPOSAL_QUEUE_OPS_MAX);
        let task = tokio::spawn(run(Sequencer { options, term: 0, takeover_term: 0 }, rx));
        // A proposer that died (a failed invariant) would leave every later write waiting for
        // ever; the node stops instead, like on a storage fault, and a replica takes over.
        tokio::spawn(async move {
            if let Err(e) = task.await {
                fatal::stop("the proposer stopped", &e);
            }
        });
        Proposer { tx }
    }

    async fn enqueue(
        &self,
        proposal: Proposal,
    ) -> Result<oneshot::Receiver<Result<Answer, ProposeError>>, ProposeError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Queued::Proposal(proposal, reply))
            .await
            .map_err(|_| ProposeError::Fatal("proposer stopped".into()))?;
        Ok(rx)
    }

    /// Queues `op` (in call order with every other submission) and returns a future of its
    /// result: a handler that must keep its connection's order submits in its first stage and
    /// awaits in its second.
    pub async fn submit<O: TypedOp>(
        &self,
        op: O,
    ) -> Result<impl std::future::Future<Output = Result<O::Output, ProposeError>>, ProposeError> {
        let rx = self.enqueue(Proposal::Op(op.into())).await?;
        Ok(async move {
            match rx.await.map_err(|_| ProposeError::Fatal("proposer dropped the request".into()))?? {
                Answer::Op(result) => Ok(typed::<O>(result)),
                Answer::Produced(_) => fatal::invariant("an op proposal was answered as a produce"),
            }
        })
    }

    /// Puts `op` in the log and waits until it is committed and applied.
    pub async fn propose<O: TypedOp>(&self, op: O) -> Result<O::Output, ProposeError> {
        self.submit(op).await?.await
    }

    /// Queues one produce request's partitions; the future answers each, in order, once
    /// committed. A transactional request (every batch transactional) is one proposal,
    /// whatever its size (`entry::Proposal::ProduceTransactional`).
    ///
    /// A non-transactional request larger than one entry (`limits::ENTRY_BYTES_MAX`) is split
    /// by partition into proposals that each fit (`entry::split_for_entries`), queued one after
    /// the other; the future answers once every part is answered (acks: the response leaves
    /// when all of it committed), each part's failure on its own partitions. Kafka promises no
    /// atomicity across the partitions of such a request; onelog keeps it whenever it fits.
    pub async fn submit_produce(
        &self,
        appends: Vec<UnstampedAppend>,
        transactional: bool,
    ) -> Result<impl std::future::Future<Output = Produced>, ProposeError> {
        let groups = if transactional || entry::produce_entry_bytes(&appends) <= limits::ENTRY_BYTES_MAX {
            vec![appends]
        } else {
            entry::split_for_entries(appends, limits::ENTRY_BYTES_MAX)
        };
        let split = groups.len() > 1;
        let mut parts = Vec::with_capacity(groups.len());
        for group in groups {
            let partitions = group.len();
            let proposal =
                if transactional { Proposal::ProduceTransactional(group) } else { Proposal::Produce(group) };
            parts.push((partitions, self.enqueue(proposal).await?));
        }
        Ok(async move {
            let mut answers = Vec::new();
            for (partitions, rx) in parts {
                let answer = rx.await.map_err(|_| ProposeError::Fatal("proposer dropped the request".into()));
                match answer.and_then(|a| a) {
                    Ok(Answer::Produced(produced)) => answers.extend(produced),
                    Ok(Answer::Op(result)) => {
                        fatal::invariant(&format!("a produce was answered with {result:?}"))
                    }
                    // One part of a split request failed: only its partitions carry the error.
                    Err(e) if split => answers.extend(failed_partitions(partitions, &e)),
                    Err(e) => return Err(e),
                }
            }
            Ok(answers)
        })
    }

    /// Makes sure this term's takeover entry is in the log, without proposing
    /// anything else.
    pub async fn take_over(&self) -> Result<(), ProposeError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Queued::TakeOver(reply))
            .await
            .map_err(|_| ProposeError::Fatal("proposer stopped".into()))?;
        rx.await.map_err(|_| ProposeError::Fatal("proposer dropped the request".into()))?
    }
}

/// The op's own result; another shape means apply is broken, and the node stops.
fn typed<O: TypedOp>(result: OpResult) -> O::Output {
    match O::output(result) {
        Ok(output) => output,
        Err(other) => {
            fatal::invariant(&format!("an op of {} was answered with {other:?}", std::any::type_name::<O>()))
        }
    }
}

struct Sequencer {
    options: ProposerOptions,
    /// Term in which the applied state was last known complete.
    term: u64,
    /// Term whose takeover entry is in the log.
    takeover_term: u64,
}

async fn run(mut seq: Sequencer, mut rx: mpsc::Receiver<Queued>) {
    // A proposal taken from the queue that would have passed the entry limit: it opens the
    // next entry.
    let mut carried: Option<Queued> = None;
    loop {
        let first = match carried.take() {
            Some(item) => item,
            None => match rx.recv().await {
                Some(item) => item,
                None => return,
            },
        };
        let mut queued = Vec::new();
        let mut takeovers = Vec::new();
        let mut bytes = 0;
        let mut next = Some(first);
        while let Some(item) = next.take() {
            match item {
                Queued::Proposal(proposal, reply) => {
                    let size = proposal.size_bytes();
                    let finalized = || seq.options.applied.state(|s| s.features.level(ONELOG_VERSION));
                    if let Err(e) = admit(&proposal, finalized) {
                        drop(reply.send(Err(e)));
                    } else if size > limits::ENTRY_BYTES_MAX {
                        refuse_too_large(proposal, reply, size);
                    } else if bytes + size > limits::ENTRY_BYTES_MAX {
                        carried = Some(Queued::Proposal(proposal, reply));
                        break;
                    } else {
                        bytes += size;
                        queued.push((proposal, reply));
                    }
                }
                Queued::TakeOver(reply) => takeovers.push(reply),
            }
            if bytes < limits::PROPOSAL_BYTES_MAX && queued.len() < limits::PROPOSAL_OPS_MAX {
                next = rx.try_recv().ok();
            }
        }
        if queued.is_empty() && takeovers.is_empty() {
            continue;
        }
        let ready = seq.prepare().await;
        for reply in takeovers {
            let _ = reply.send(ready.clone().map(|_| ()));
        }
        match ready {
            Ok(term) => seq.propose_batch(term, queued).await,
            Err(e) => queued.into_iter().for_each(|(_, reply)| drop(reply.send(Err(e.clone())))),
        }
    }
}

/// Refuses an op whose kind needs a higher `onelog.version` than `finalized()`, the cluster's
/// (`Op::onelog_version`): a member of an older build could not decode it. The level only
/// rises, so what is admitted here is still allowed when the entry is built. Every log is at
/// level 1 at least, so the ops 0.1.0 knew (and every produce) are admitted without taking
/// the applied state's lock, which apply may be holding.
fn admit(proposal: &Proposal, finalized: impl FnOnce() -> i16) -> Result<(), ProposeError> {
    let needs = match proposal {
        Proposal::Op(op) if op.onelog_version() > 1 => op.onelog_version(),
        _ => return Ok(()),
    };
    let finalized = finalized();
    if needs > finalized {
        return Err(ProposeError::NotFinalized { needs, finalized });
    }
    Ok(())
}

/// Answers a proposal that alone passes the entry limit; nothing of it is proposed.
fn refuse_too_large(proposal: Proposal, reply: Reply, bytes: usize) {
    let e = ProposeError::TooLarge { bytes, max: limits::ENTRY_BYTES_MAX };
    tracing::debug!(bytes, "refusing a proposal larger than one Raft entry");
    let answer = match proposal.produce_partitions() {
        0 => Err(e),
        partitions => Ok(Answer::Produced(failed_partitions(partitions, &e))),
    };
    let _ = reply.send(answer);
}

/// Answers every proposal of an entry that passed the entry limit once encoded: nothing of
/// it is proposed.
fn refuse_oversized_entry(decisions: Vec<Decision>, replies: Vec<Reply>, encoded: usize) {
    tracing::error!(encoded, max = limits::ENTRY_BYTES_MAX, "an entry passed the entry limit; refused");
    let e = ProposeError::TooLarge { bytes: encoded, max: limits::ENTRY_BYTES_MAX };
    let code = propose_error_code(&e, Addressed::PartitionLeader);
    for (decision, reply) in decisions.into_iter().zip(replies) {
        let answer = match decision {
            Decision::Answered(Answer::Produced(parts)) => {
                Some(Answer::Produced(failed_partitions(parts.len(), &e)))
            }
            Decision::Answered(Answer::Op(_)) => None,
            Decision::Waiting(w) => w.failed(code, &e.to_string()),
        };
        let _ = reply.send(answer.ok_or_else(|| e.clone()));
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

/// `partitions` produce answers carrying `e`, as a partition leader reports it.
fn failed_partitions(partitions: usize, e: &ProposeError) -> Vec<PartitionProduced> {
    let code = propose_error_code(e, Addressed::PartitionLeader);
    (0..partitions).map(|_| PartitionProduced::error(code, e.to_string())).collect()
}

fn propose_error(e: RaftError<u64, ClientWriteError<u64, crate::raft::NodeAddr>>) -> ProposeError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => ProposeError::NotLeader,
        other => ProposeError::Fatal(other.to_string()),
    }
}

impl Sequencer {
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

    async fn propose_batch(&mut self, term: u64, queued: Vec<(Proposal, Reply)>) {
        let stamp = LeaderStamp { now_ms: wall_clock_ms(), term: term as i32 };
        let (proposals, replies): (Vec<Proposal>, Vec<Reply>) = queued.into_iter().unzip();
        let replies_count = replies.len();
        let built =
            self.options.applied.state(|state| build_entry(state, stamp, &self.options.entry, proposals));
        // `Proposal::size_bytes` bounds each op's encoding from above, so this holds; if it
        // ever did not, refusing the entry (before any answer leaves) keeps the node up where
        // raft-store would refuse the write and the node would stop.
        let encoded = bincode::serialized_size(&built.command).map_or(usize::MAX, |n| n as usize);
        if encoded > limits::ENTRY_BYTES_MAX {
            refuse_oversized_entry(built.decisions, replies, encoded);
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
        let op_count = built.command.ops.len();
        METRICS.entry_proposals.observe(replies_count as f64);
        METRICS.entry_bytes.observe(encoded as f64);
        let proposed = std::time::Instant::now();
        match self.write(built.command).await {
            Ok(results) => {
                METRICS.commit_duration.observe(proposed.elapsed().as_secs_f64());
                assert_eq!(results.len(), op_count, "one result per proposed op");
                for (w, reply) in waiting {
                    let _ = reply.send(Ok(w.answer(&results)));
                }
            }
            Err(err) => {
                // The entry may still commit later under a new leader; this node re-reads the
                // applied state before it stamps again.
                self.term = 0;
                let code = propose_error_code(&err, Addressed::PartitionLeader);
                for (w, reply) in waiting {
                    let _ = reply.send(w.failed(code, &err.to_string()).ok_or_else(|| err.clone()));
                }
            }
        }
    }

    /// Writes `command` through Raft: its ops' results once it is committed and applied.
    ///
    /// A leader cut off from the quorum cannot commit the entry; its callers are answered now
    /// as if it had failed (its outcome is unknown: a new leader may still commit it, which
    /// Kafka clients handle as after a timeout) instead of when the partition heals.
    /// Regression (issue 14): transactional commits stalled for the whole partition.
    async fn write(&self, command: Command) -> Result<Vec<OpResult>, ProposeError> {
        let leadership = self.options.leadership.clone();
        let cut_off = async move {
            loop {
                tokio::time::sleep(Duration::from_millis(limits::PAUSE_CHECK_INTERVAL_MS)).await;
                if leadership.is_cut_off() {
                    return;
                }
            }
        };
        tokio::select! {
            written = self.options.raft.client_write(command) => {
                written.map(|response| response.data.results).map_err(propose_error)
            }
            () = cut_off => Err(ProposeError::NotLeader),
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

#[cfg(test)]
mod tests {
    use super::*;
    use onelog_state::command::{FenceMemberOp, InitClusterOp};

    #[test]
    fn an_op_above_the_finalized_onelog_version_is_refused_with_unsupported_version() {
        let fence = FenceMemberOp {
            group_id: "g".into(),
            member_id: "m".into(),
            expected_epoch: None,
            migration: Default::default(),
        };
        let op = || Proposal::Op(Op::FenceConsumerGroupMember(fence.clone()));
        assert!(admit(&op(), || 3).is_ok());
        let refused = admit(&op(), || 2).unwrap_err();
        assert!(matches!(refused, ProposeError::NotFinalized { needs: 3, finalized: 2 }), "{refused:?}");
        assert_eq!(
            propose_error_code(&refused, Addressed::Controller),
            kafka_compat::error_code::UNSUPPORTED_VERSION
        );
        let unread = || -> i16 { unreachable!("an op every build reads needs no look at the level") };
        assert!(admit(&Proposal::Produce(Vec::new()), unread).is_ok(), "produce is as old as the log");
        let init = Proposal::Op(Op::InitCluster(InitClusterOp { cluster_id: "c".into() }));
        assert!(admit(&init, unread).is_ok());
    }
}

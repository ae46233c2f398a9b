//! Leader-side aggregation (DESIGN §2, DRMQ's cross-request aggregator) around the pure entry
//! builder (`onelog_state::entry`).
//!
//! Handlers hand proposals to one proposer task. While entries are being committed, new
//! proposals queue; the next entry takes everything queued, up to a byte and op limit. The
//! proposer takes the entry's one `LeaderStamp` (the wall clock and the term: handlers never
//! read the clock for the log), builds the entry against the applied state and the entries
//! still in flight, answers what the builder decided at once, proposes the rest, and answers
//! it from the applied results (`sequencer`). Up to `onelog.raft.entries.in.flight` entries
//! (default 1) are in flight at once (pipelined proposals, issue 31; `onelog_state::in_flight`
//! has the rules that keep each one applying as stamped).
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

use onelog_state::command::{OpResult, PartitionProduced, ReplicatedLimits, TypedOp};
use onelog_state::entry::{self, Answer, Decision, EntryOptions, Proposal, UnstampedAppend};
use onelog_state::features::ONELOG_VERSION;
use tokio::sync::{mpsc, oneshot};
use tokio::time::MissedTickBehavior;

use super::sequencer::Sequencer;
use crate::fatal;
use crate::limits;
use crate::raft::applied::AppliedView;
use crate::raft::Raft;

pub use crate::errors::ProposeError;
use crate::errors::{propose_error_code, Addressed};

pub(super) type Reply = oneshot::Sender<Result<Answer, ProposeError>>;

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
    /// `onelog.raft.entries.in.flight`: entries handed to Raft before the first applies.
    pub entries_in_flight: usize,
    /// Whether this node is cut off from the quorum (check-quorum), to stop waiting for an
    /// entry that cannot commit here.
    pub leadership: std::sync::Arc<super::leadership::Leadership>,
}

/// A produce proposal's answer: one result per partition, in request order.
pub type Produced = Result<Vec<PartitionProduced>, ProposeError>;

impl Proposer {
    pub fn start(options: ProposerOptions) -> Proposer {
        let (tx, rx) = mpsc::channel(limits::PROPOSAL_QUEUE_OPS_MAX);
        let task = tokio::spawn(run(Sequencer::new(options), rx));
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

    /// Queues a write of a transaction another Raft group coordinates (docs/SCALING.md §3.1):
    /// one proposal, answered per partition once committed, like a transactional request.
    pub async fn submit_remote_produce(
        &self,
        remote: entry::RemoteAppends,
    ) -> Result<impl std::future::Future<Output = Produced>, ProposeError> {
        let rx = self.enqueue(Proposal::ProduceRemote(remote)).await?;
        Ok(async move {
            match rx.await.map_err(|_| ProposeError::Fatal("proposer dropped the request".into()))?? {
                Answer::Produced(produced) => Ok(produced),
                Answer::Op(result) => fatal::invariant(&format!("a produce was answered with {result:?}")),
            }
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

async fn run(mut seq: Sequencer, mut rx: mpsc::Receiver<Queued>) {
    // A proposal taken from the queue that would have passed the entry limit: it opens the
    // next entry.
    let mut carried: Option<Queued> = None;
    let mut cut_off_check = tokio::time::interval(Duration::from_millis(limits::PAUSE_CHECK_INTERVAL_MS));
    cut_off_check.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        let (in_flight, may_build) = (seq.has_in_flight(), seq.may_build());
        // Answers first, so that a settled entry frees its place before the next is built.
        tokio::select! {
            biased;
            written = seq.oldest_written(), if in_flight => seq.settle(written),
            _ = cut_off_check.tick(), if in_flight => {
                if seq.cut_off() {
                    seq.fail_all(&ProposeError::NotLeader);
                }
            }
            first = next_queued(&mut carried, &mut rx), if may_build => {
                let Some(first) = first else { return };
                let (queued, takeovers) = take_batch(first, &mut rx, &mut carried, seq.options());
                if !queued.is_empty() || !takeovers.is_empty() {
                    seq.propose_batch(queued, takeovers).await;
                }
                if !in_flight && seq.has_in_flight() {
                    // The first check comes a whole interval after the entry, not at once
                    // because the interval went unpolled while nothing was in flight.
                    cut_off_check.reset();
                }
            }
        }
    }
}

/// The carried proposal, or the next one queued (`None`: every `Proposer` is gone).
async fn next_queued(carried: &mut Option<Queued>, rx: &mut mpsc::Receiver<Queued>) -> Option<Queued> {
    match carried.take() {
        Some(item) => Some(item),
        None => rx.recv().await,
    }
}

/// A takeover request's reply.
type TakeOverReply = oneshot::Sender<Result<(), ProposeError>>;

/// What goes into one entry: `first` and whatever is queued behind it, up to the entry's byte
/// and op limits (a proposal that would pass them is `carried` to the next entry), and the
/// takeover requests among them. Proposals refused outright are answered here.
fn take_batch(
    first: Queued,
    rx: &mut mpsc::Receiver<Queued>,
    carried: &mut Option<Queued>,
    options: &ProposerOptions,
) -> (Vec<(Proposal, Reply)>, Vec<TakeOverReply>) {
    let mut queued = Vec::new();
    let mut takeovers = Vec::new();
    let mut bytes = 0;
    let mut next = Some(first);
    while let Some(item) = next.take() {
        match item {
            Queued::Proposal(proposal, reply) => {
                let size = proposal.size_bytes();
                let finalized = || options.applied.state(|s| s.features.level(ONELOG_VERSION));
                if let Err(e) = admit(&proposal, finalized) {
                    drop(reply.send(Err(e)));
                } else if size > limits::ENTRY_BYTES_MAX {
                    refuse_too_large(proposal, reply, size);
                } else if bytes + size > limits::ENTRY_BYTES_MAX {
                    *carried = Some(Queued::Proposal(proposal, reply));
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
    (queued, takeovers)
}

/// Refuses an op whose kind needs a higher `onelog.version` than `finalized()`, the cluster's
/// (`Op::onelog_version`): a member of an older build could not decode it. The level only
/// rises, so what is admitted here is still allowed when the entry is built. Every log is at
/// level 1 at least, so the ops 0.1.0 knew (and every produce) are admitted without taking
/// the applied state's lock, which apply may be holding.
fn admit(proposal: &Proposal, finalized: impl FnOnce() -> i16) -> Result<(), ProposeError> {
    let needs = match proposal {
        Proposal::Op(op) if op.onelog_version() > 1 => op.onelog_version(),
        // Stamped into the cross-group step `XOp::Produce`.
        Proposal::ProduceRemote(_) => onelog_state::features::ONELOG_VERSION_RAFT_GROUPS,
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
pub(super) fn refuse_oversized_entry(decisions: Vec<Decision>, replies: Vec<Reply>, encoded: usize) {
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

/// `partitions` produce answers carrying `e`, as a partition leader reports it.
pub(super) fn failed_partitions(partitions: usize, e: &ProposeError) -> Vec<PartitionProduced> {
    let code = propose_error_code(e, Addressed::PartitionLeader);
    (0..partitions).map(|_| PartitionProduced::error(code, e.to_string())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use onelog_state::command::{FenceMemberOp, InitClusterOp, Op};

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

    #[test]
    fn a_write_of_another_groups_transaction_needs_the_cross_group_level() {
        let instance = onelog_state::xgroup::Instance { producer_id: 2 << 48, epoch: 0, n: 0 };
        let remote = || {
            let appends = Vec::new();
            Proposal::ProduceRemote(entry::RemoteAppends { coordinator: 2, instance, prior: None, appends })
        };
        let refused = admit(&remote(), || 6).unwrap_err();
        assert!(matches!(refused, ProposeError::NotFinalized { needs: 7, finalized: 6 }), "{refused:?}");
        assert!(admit(&remote(), || 7).is_ok());
    }
}

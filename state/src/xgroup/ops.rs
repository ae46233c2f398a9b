//! The entries the cross-group protocol adds, and their apply (SCALING.md §3).
//!
//! In the coordinator group: RegisterParticipant and DecisionsDelivered. In a participant
//! group: a transactional write tagged with its instance (carrying, ahead of it, the decision
//! of the producer's previous instance when the participant still held that one open), and
//! ApplyDecisions. The decision itself is the coordinator's EndTxn entry, or any other entry
//! that ends a transaction there (`CrossGroup::decided` is called from each).

use serde::{Deserialize, Serialize};

use super::participant::{apply_decision, Applied};
use super::{coordinator, Decision, GroupId, Instance};
use crate::command::{LeaderStamp, PartitionProduced, ProduceOp, Refusal, TxnOffsetCommitOp};
use crate::effect::Effect;
use crate::groups::{CommitResult, CommittedOffset};
use crate::txns::TxnError;
use crate::BrokerState;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum XOp {
    /// In C: `group` holds data of `instance`.
    Register { instance: Instance, group: GroupId },
    /// In C: participants applied decisions.
    Delivered { confirmations: Vec<(Instance, GroupId)> },
    /// In P: transactional batches of `instance`, coordinated by `coordinator`.
    Produce(XProduceOp),
    /// In P: offsets of a consumer group placed here, pending in `instance`.
    TxnOffsetCommit(XTxnOffsetCommitOp),
    /// In P: decisions of `coordinator`'s instances.
    Decisions { coordinator: GroupId, decisions: Vec<Decision> },
    /// In any group of a cluster of several, once, before it coordinates a transactional id
    /// (`onelog.version` 8): its number and the group count, so that it allocates producer ids
    /// from its own range (`producer_id_base`).
    Identify { group: GroupId, groups: u32 },
    /// In P (`onelog.version` 9): forget these remote producer ids, which their coordinator
    /// said it no longer knows; one still holding an open instance here is kept
    /// (`CrossGroup::forget_remote`).
    Forget { producer_ids: Vec<i64> },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct XProduceOp {
    pub coordinator: GroupId,
    pub instance: Instance,
    /// The decision of the producer's previous instance, applied first (SCALING.md §3.2 step 4).
    pub prior: Option<Decision>,
    pub produce: ProduceOp,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct XTxnOffsetCommitOp {
    pub coordinator: GroupId,
    pub instance: Instance,
    /// As for a write: the previous instance's decision, applied first.
    pub prior: Option<Decision>,
    pub commit: TxnOffsetCommitOp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum XResult {
    Registered(Result<(), TxnError>),
    Produced(Result<Vec<PartitionProduced>, Refusal>),
    TxnOffsets(Result<Vec<CommitResult>, TxnError>),
    /// One per decision, in order.
    Decisions(Vec<Applied>),
    Done,
}

impl XOp {
    /// Whether applying it may append transaction markers (`Op::writes_markers`): a decision,
    /// or a write or commit carrying its producer's previous decision.
    pub fn writes_markers(&self) -> bool {
        match self {
            XOp::Register { .. } | XOp::Delivered { .. } => false,
            XOp::Produce(op) => op.prior.is_some(),
            XOp::TxnOffsetCommit(op) => op.prior.is_some(),
            XOp::Decisions { .. } => true,
            XOp::Identify { .. } | XOp::Forget { .. } => false,
        }
    }

    /// The `onelog.version` that brought the step: 7 for the protocol's five, 8 for Identify,
    /// 9 for Forget.
    pub fn onelog_version(&self) -> i16 {
        match self {
            XOp::Identify { .. } => crate::features::ONELOG_VERSION_GROUP_COORDINATORS,
            XOp::Forget { .. } => crate::features::ONELOG_VERSION_PARTICIPANT_MESSAGES,
            _ => crate::features::ONELOG_VERSION_RAFT_GROUPS,
        }
    }

    /// Whether applying it appends batches at offsets the entry builder did not stamp: markers,
    /// or a tagged write, which the builder's overlay of entries in flight does not follow
    /// (it knows today's produce ops). Such an op goes after every produce op of its entry and
    /// nothing is built behind it until it applied (`Op::changes_produce_checks`,
    /// `Op::is_pipeline_barrier`).
    pub fn takes_offsets(&self) -> bool {
        self.writes_markers() || matches!(self, XOp::Produce(_))
    }
}

pub fn apply_xop(
    state: &mut BrokerState,
    stamp: &LeaderStamp,
    op: &XOp,
    effects: &mut Vec<Effect>,
) -> XResult {
    match op {
        XOp::Register { instance, group } => {
            XResult::Registered(coordinator::register(state, *instance, *group, stamp.now_ms))
        }
        XOp::Delivered { confirmations } => {
            state.xgroup.delivered(confirmations);
            XResult::Done
        }
        XOp::Produce(produce) => XResult::Produced(produce_in_participant(state, stamp, produce, effects)),
        XOp::TxnOffsetCommit(op) => XResult::TxnOffsets(offsets_in_participant(state, stamp, op, effects)),
        XOp::Decisions { coordinator, decisions } => XResult::Decisions(
            decisions.iter().map(|d| apply_decision(state, *coordinator, *d, *stamp, effects)).collect(),
        ),
        XOp::Identify { group, groups } => {
            super::CrossGroup::identify(state, *group, *groups);
            XResult::Done
        }
        XOp::Forget { producer_ids } => {
            state.xgroup.forget_remote(producer_ids);
            XResult::Done
        }
    }
}

/// The prior decision, then the batches, as one op: a write refused leaves the prior decision
/// applied (it stands whatever happens to the write) and its markers in `effects`.
fn produce_in_participant(
    state: &mut BrokerState,
    stamp: &LeaderStamp,
    op: &XProduceOp,
    effects: &mut Vec<Effect>,
) -> Result<Vec<PartitionProduced>, Refusal> {
    if let Some(prior) = op.prior {
        apply_decision(state, op.coordinator, prior, *stamp, effects);
    }
    let owner = crate::apply::TxnOwner::Remote { coordinator: op.coordinator, instance: op.instance };
    // It checks every batch before it appends an effect, so a refusal adds none.
    crate::apply::apply_produce_as(state, stamp.now_ms, &op.produce, effects, owner)
}

/// The prior decision, then the commits, checked as a member's would be and held by the
/// instance until its decision (`apply_txn::txn_offset_commit` for this group's own).
fn offsets_in_participant(
    state: &mut BrokerState,
    stamp: &LeaderStamp,
    op: &XTxnOffsetCommitOp,
    effects: &mut Vec<Effect>,
) -> Result<Vec<CommitResult>, TxnError> {
    if let Some(prior) = op.prior {
        apply_decision(state, op.coordinator, prior, *stamp, effects);
    }
    let producer = op.commit.producer;
    if (producer.producer_id, producer.producer_epoch) != (op.instance.producer_id, op.instance.epoch) {
        return Err(TxnError::Fenced);
    }
    state.xgroup.check_write(op.instance)?;
    let results = crate::apply_txn::check_txn_offsets(state, &op.commit);
    let accepted = op
        .commit
        .commits
        .iter()
        .zip(&results)
        .filter(|(_, (code, _))| *code == kafka_compat::error_code::NONE);
    let offsets: Vec<_> = accepted
        .map(|(c, _)| {
            let committed = CommittedOffset {
                offset: c.offset,
                leader_epoch: c.leader_epoch,
                metadata: c.metadata.clone().unwrap_or_default(),
                commit_time_ms: stamp.now_ms,
            };
            ((c.topic.clone(), c.partition), committed)
        })
        .collect();
    if !offsets.is_empty() {
        state.xgroup.record_offsets(op.coordinator, op.instance, &op.commit.group_id, offsets, stamp.now_ms);
    }
    Ok(results)
}

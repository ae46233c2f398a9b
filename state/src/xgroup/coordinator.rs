//! The coordinator group's side of a cross-group transaction (SCALING.md §3): the current
//! instance of a producer, registering participants, recording a decision with the
//! participants it must reach, and the answers C's leader gives other groups' leaders.
//!
//! Every answer is computed from C's applied state, so a new leader of C answers as the old
//! one would. The order of C's log is what fences: a registration applied after the instance's
//! decision, or after a newer instance became current, is refused.

use super::{CrossGroup, Decision, GroupId, Instance, Undelivered};
use crate::txns::{ProducerIdEpoch, TxnError, TxnState};
use crate::BrokerState;

/// What C answers about an instance a participant holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Resolution {
    /// The producer's current instance, not decided yet: the participant registers and waits.
    Open,
    /// Decided: the outcome for this participant (abort for data C never listed).
    Decided(bool),
}

/// C's answer to JoinTxn: the instance a write of the producer belongs to, and the decision
/// of the instance the participant still holds open, which it must apply before that write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Joined {
    pub instance: Instance,
    pub prior: Option<Decision>,
}

/// The producer's current instance and its transaction's state, if C coordinates it.
pub fn current(state: &BrokerState, producer_id: i64) -> Option<(Instance, TxnState)> {
    let (_, meta) = state.txns.by_producer(producer_id)?;
    let n = state.xgroup.coordinated.get(&producer_id).map_or(0, |c| c.n);
    Some((Instance { producer_id, epoch: meta.producer_epoch, n }, meta.state))
}

/// JoinTxn: a participant's leader has a transactional write of `id` for `group`, and holds
/// `open_here` of the producer undecided. Refused as a Kafka coordinator refuses the write's
/// AddPartitionsToTxn (fenced, aborted by the broker, unknown).
pub fn join(
    state: &BrokerState,
    id: ProducerIdEpoch,
    group: GroupId,
    open_here: Option<Instance>,
) -> Result<Joined, TxnError> {
    let (_, meta) = state.txns.by_producer(id.producer_id).ok_or(TxnError::InvalidProducerIdMapping)?;
    meta.check_epoch(id)?;
    let (instance, _) = current(state, id.producer_id).expect("found above");
    let prior = open_here.filter(|held| *held != instance).map(|held| match resolve(state, held, group) {
        Resolution::Decided(commit) => Decision { instance: held, commit },
        Resolution::Open => unreachable!("only the current instance is open"),
    });
    Ok(Joined { instance, prior })
}

/// The outcome of `instance` for `group` (SCALING.md §3.3): the decision if C listed the
/// group and it has not confirmed; open if it is the producer's current instance and
/// undecided; otherwise abort, because whatever the group holds of it was never listed, so
/// never acknowledged (or was confirmed already, when applying again changes nothing).
pub fn resolve(state: &BrokerState, instance: Instance, group: GroupId) -> Resolution {
    if let Some(decided) = state.xgroup.undelivered.get(&instance) {
        if decided.waiting.contains(&group) {
            return Resolution::Decided(decided.commit);
        }
    }
    match current(state, instance.producer_id) {
        Some((now, _)) if now == instance => Resolution::Open,
        _ => Resolution::Decided(false),
    }
}

/// Of `producer_ids` (remote producers `participant` holds nothing open of), those this group
/// no longer knows, so the participant may forget them (`XOp::Forget`): no transactional id
/// maps to the id any more (it expired, or moved to a new producer id), so a write of it is
/// refused at JoinTxn, and no decision of it waits for the participant, which would bring the
/// entry back. Producer ids are never handed out again.
pub fn gone(state: &BrokerState, participant: GroupId, producer_ids: &[i64]) -> Vec<i64> {
    let waiting: std::collections::BTreeSet<i64> = state
        .xgroup
        .undelivered
        .iter()
        .filter(|(_, decided)| decided.waiting.contains(&participant))
        .map(|(instance, _)| instance.producer_id)
        .collect();
    let known = |pid: &i64| state.txns.by_producer(*pid).is_some() || waiting.contains(pid);
    producer_ids.iter().copied().filter(|pid| !known(pid)).collect()
}

/// Apply of RegisterParticipant: `group` holds data of `instance`, which must still be the
/// producer's current, undecided instance. The transaction is open in C from then on (its
/// timeout runs from here), so that ending it in any way records the decision for `group`.
pub fn register(
    state: &mut BrokerState,
    instance: Instance,
    group: GroupId,
    now_ms: i64,
) -> Result<(), TxnError> {
    let Some((now, _)) = current(state, instance.producer_id) else {
        return Err(TxnError::InvalidProducerIdMapping);
    };
    if now != instance {
        return Err(if instance < now { TxnError::Fenced } else { TxnError::InvalidProducerIdMapping });
    }
    let id = ProducerIdEpoch { producer_id: instance.producer_id, producer_epoch: instance.epoch };
    state.txns.begin_remote(id, now_ms)?;
    state.xgroup.coordinated.entry(instance.producer_id).or_default().participants.insert(group);
    Ok(())
}

impl CrossGroup {
    /// Hook of every decision C applies (EndTxn, fencing by InitProducerId, the broker's
    /// aborts): the instance moves on, and a decision with participants is kept until each of
    /// them confirmed it. `epoch` is the epoch the instance was written with.
    pub fn decided(&mut self, producer_id: i64, epoch: i16, commit: bool) {
        if !self.enabled() {
            return;
        }
        let coordinated = self.coordinated.entry(producer_id).or_default();
        let instance = Instance { producer_id, epoch, n: coordinated.n };
        coordinated.n += 1;
        let waiting = std::mem::take(&mut coordinated.participants);
        if !waiting.is_empty() {
            self.undelivered.insert(instance, Undelivered { commit, waiting });
        }
    }

    /// Apply of DecisionsDelivered: each participant named applied the decision.
    pub fn delivered(&mut self, confirmations: &[(Instance, GroupId)]) {
        for (instance, group) in confirmations {
            if let Some(decided) = self.undelivered.get_mut(instance) {
                decided.waiting.remove(group);
                if decided.waiting.is_empty() {
                    self.undelivered.remove(instance);
                }
            }
        }
    }

    /// What C's leader still has to send: every undelivered decision, per participant.
    pub fn deliveries(&self) -> impl Iterator<Item = (GroupId, Decision)> + '_ {
        self.undelivered.iter().flat_map(|(instance, decided)| {
            decided
                .waiting
                .iter()
                .map(move |group| (*group, Decision { instance: *instance, commit: decided.commit }))
        })
    }
}

//! Stamping a participant's write of a transaction another Raft group coordinates
//! (docs/SCALING.md §3.1): the batches become the cross-group step `XOp::Produce`, tagged
//! with the instance the coordinator named and carrying the decision of the producer's
//! previous instance when this group still holds that one open (§3.2 step 4).
//!
//! Apply writes that prior decision's markers before the batches, one per partition the
//! previous instance wrote here, so the builder counts those offsets before it stamps; and
//! it checks the batches against the group's cross-group state as apply will once the prior
//! decision is in (`xgroup::participant`), so that a write apply would refuse is answered
//! now and the rest of the entry is unaffected. The step is a pipeline barrier
//! (`XOp::takes_offsets`): nothing is built behind it until it applied, so what it does to
//! offsets never has to be predicted for a later entry.

use std::collections::BTreeSet;

use super::{EntryBuilder, Slot, UnstampedAppend, LENGTH_BYTES, TAG_BYTES};
use crate::command::{Op, ProduceOp};
use crate::txns::{ProducerIdEpoch, TxnError};
use crate::xgroup::ops::XProduceOp;
use crate::xgroup::{Decision, GroupId, Instance, XOp};
use crate::BrokerState;

/// What `XOp::Produce` adds to an entry besides its produce op, at least: tags, the
/// coordinator, the instance and the prior decision.
pub(super) const REMOTE_OP_BYTES: usize = 2 * TAG_BYTES + 4 + 8 + 2 + 4 + 1 + (8 + 2 + 4 + 1) + LENGTH_BYTES;

/// A write of `instance`, which group `coordinator` coordinates.
#[derive(Debug)]
pub struct RemoteAppends {
    pub coordinator: GroupId,
    pub instance: Instance,
    /// The decision of the instance this group holds open for the producer, applied first.
    pub prior: Option<Decision>,
    pub appends: Vec<UnstampedAppend>,
}

impl RemoteAppends {
    /// Whether apply will take a batch of `id` as a write of the instance, once the prior
    /// decision (if any) is applied.
    pub(super) fn admits(&self, state: &BrokerState, id: ProducerIdEpoch) -> Result<(), TxnError> {
        let instance = self.instance;
        if (id.producer_id, id.producer_epoch) != (instance.producer_id, instance.epoch) {
            return Err(TxnError::Fenced);
        }
        match state.xgroup.check_write(instance) {
            Err(TxnError::PreviousUndecided) if self.prior_closes_open(state) => Ok(()),
            checked => checked,
        }
    }

    /// Whether the prior decision is of the instance open here and older than this one: its
    /// apply closes it (and fences it), which makes room for this instance.
    fn prior_closes_open(&self, state: &BrokerState) -> bool {
        let open = state.xgroup.open_instance(self.instance.producer_id);
        self.prior.is_some_and(|prior| Some(prior.instance) == open && prior.instance < self.instance)
    }
}

impl EntryBuilder<'_> {
    /// Adds one remote write: the partitions that pass become one `XOp::Produce`.
    pub(super) fn add_remote_produce(&mut self, remote: RemoteAppends) -> Vec<Slot> {
        let op = self.ops.len();
        let mut slots = Vec::with_capacity(remote.appends.len());
        let mut checked = Vec::new();
        let mut admitted = 0;
        for append in &remote.appends {
            match self.check(append, Some(&remote)) {
                Ok(seq) => {
                    // Its place among the partitions that go into the op, not among the appends.
                    slots.push(Slot::Appended { op, index: admitted });
                    admitted += 1;
                    checked.push(Some(seq));
                }
                Err(slot) => {
                    slots.push(slot);
                    checked.push(None);
                }
            }
        }
        let RemoteAppends { coordinator, instance, prior, appends } = remote;
        if checked.iter().all(Option::is_none) {
            return slots;
        }
        self.count_prior_markers(prior);
        let partitions = appends
            .into_iter()
            .zip(checked)
            .filter_map(|(append, seq)| seq.map(|seq| self.stamp_append(append, seq, op)))
            .collect();
        let produce = XProduceOp { coordinator, instance, prior, produce: ProduceOp { partitions } };
        self.ops.push(Op::CrossGroup(Box::new(XOp::Produce(produce))));
        slots
    }

    /// Apply writes the prior decision's markers first: one offset on each partition its
    /// instance wrote here, unless an earlier op of the entry applies that decision already.
    fn count_prior_markers(&mut self, prior: Option<Decision>) {
        let Some(prior) = prior else { return };
        let Some(remote) = self.state.xgroup.remote.get(&prior.instance.producer_id) else { return };
        let fenced = remote.fence.is_some_and(|fence| prior.instance <= fence);
        let Some(open) = remote.open.as_ref().filter(|o| o.instance == prior.instance && !fenced) else {
            return;
        };
        if !self.priors.insert(prior.instance) {
            return;
        }
        let partitions: BTreeSet<&(String, i32)> = open.partitions.keys().collect();
        for (topic, partition) in partitions {
            let end = self.state.partition(topic, *partition).map_or(0, |p| p.log_end_offset);
            *self.in_flight.next_offset.entry((topic.clone(), *partition)).or_insert(end) += 1;
        }
    }
}

#[cfg(test)]
#[path = "entry_remote_tests.rs"]
mod tests;

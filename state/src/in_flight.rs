//! The entries a leader has proposed and not yet seen applied: pipelined proposals (issue 31).
//!
//! The proposer used to keep one entry in flight and build the next against the applied state
//! once the last was applied. Now it builds the next as soon as the last is handed to Raft,
//! against the applied state plus this overlay: each partition's next offset and the
//! idempotent producers' sequences as the entries in flight will leave them. Entries apply in
//! log order, so an entry built this way applies as stamped as long as nothing but those
//! entries' own produce ops changes what stamping reads. Three rules keep that true:
//!
//! - **Barriers.** An entry holding an op that changes stamping or the produce checks in a
//!   way the overlay does not follow (`Op::is_pipeline_barrier`: markers, fencing and epoch
//!   bumps, topic deletion, expiry, limits, configs) holds the pipeline: nothing is built
//!   behind it until every entry in flight is applied.
//! - **Wrong predictions.** Apply checks every stamp (`apply::check_append`, the sequence
//!   checks) and refuses an op whose stamp it would not have given. If it ever does, or an
//!   entry fails (its outcome unknown: a new leader may still commit it), or a built entry is
//!   not proposed after all, the pipeline is held the same way.
//! - **Drained means empty.** Once nothing is in flight the overlay is dropped, so the next
//!   entry is built against the applied state alone, as before pipelining.
//!
//! A retry of an idempotent batch whose original is in an earlier entry still in flight cannot
//! be answered with the original's offsets yet (that entry may fail): it gets the retriable
//! NOT_ENOUGH_REPLICAS, and its next retry finds the original applied.
//!
//! Pure: the broker's proposer and the replay test (`tests/replay`) drive it alike.

use std::collections::{BTreeMap, VecDeque};

use crate::command::Command;
use crate::producers::Pending;

/// What the entries in flight will leave behind, and which entries those are.
#[derive(Debug, Default)]
pub struct InFlight {
    /// Next offset of each partition an entry in flight appends to.
    pub(crate) next_offset: BTreeMap<(String, i32), i64>,
    /// Producer state of each (producer, partition) an entry in flight appends to.
    pub(crate) producers: Pending,
    /// (topic, partition, base offset) of each idempotent batch appended by an entry still in
    /// flight or applied since the overlay was last dropped → that entry's number.
    pub(crate) batches: BTreeMap<(String, i32, i64), u64>,
    /// InitProducerId ops in the entries in flight: each may add a live producer id.
    pub(crate) producer_ids_allocated: u64,
    /// Number of the next entry built.
    next_entry: u64,
    /// Numbers of the entries proposed and not yet applied or failed, oldest first.
    proposed: VecDeque<u64>,
    /// Entries numbered below this are applied.
    applied_below: u64,
    /// Nothing is built until the pipeline is drained (a barrier, a refusal, a failure).
    held: bool,
}

impl InFlight {
    /// Entries proposed and not yet applied.
    pub fn len(&self) -> usize {
        self.proposed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.proposed.is_empty()
    }

    /// Whether the next entry may be built now, against the applied state and this overlay.
    pub fn may_build(&self) -> bool {
        !self.held
    }

    /// The number the entry being built gets.
    pub(crate) fn building(&self) -> u64 {
        self.next_entry
    }

    /// Whether idempotent batch `key` is appended by an entry that has not applied yet.
    pub(crate) fn batch_in_flight(&self, key: &(String, i32, i64)) -> bool {
        self.batches.get(key).is_some_and(|&n| n >= self.applied_below)
    }

    /// The entry just built (with ops) is handed to Raft.
    pub fn proposed(&mut self, command: &Command) {
        self.proposed.push_back(self.next_entry);
        self.next_entry += 1;
        if command.ops.iter().any(|op| op.is_pipeline_barrier()) {
            self.held = true;
        }
    }

    /// The entry just built (with ops) is not proposed after all: its stamps are in the
    /// overlay, so nothing more is built until the entries before it are applied.
    pub fn abandoned(&mut self) {
        self.next_entry += 1;
        self.held = true;
        self.drop_if_drained();
    }

    /// The oldest entry in flight was applied (`as_stamped`: apply refused none of its
    /// produce ops) or failed (`as_stamped` false: its outcome is unknown).
    pub fn settled(&mut self, as_stamped: bool) {
        if let Some(n) = self.proposed.pop_front() {
            self.applied_below = n + 1;
        }
        self.held |= !as_stamped;
        let applied_below = self.applied_below;
        self.batches.retain(|_, n| *n >= applied_below);
        self.drop_if_drained();
    }

    /// Every entry in flight is answered as failed at once (the leader lost its term or was cut
    /// off): what the overlay predicted is unknown now.
    pub fn clear(&mut self) {
        if let Some(&last) = self.proposed.back() {
            self.applied_below = last + 1;
        }
        self.proposed.clear();
        self.drop_if_drained();
    }

    fn drop_if_drained(&mut self) {
        if self.proposed.is_empty() {
            self.next_offset.clear();
            self.producers = Pending::default();
            self.batches.clear();
            self.producer_ids_allocated = 0;
            self.held = false;
        }
    }
}

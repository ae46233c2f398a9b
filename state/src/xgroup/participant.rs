//! A participant group's side of a cross-group transaction (SCALING.md §3.1, §3.2, §4): the
//! open instance of each producer coordinated elsewhere, the checks a write tagged with an
//! instance passes, and applying a decision.
//!
//! The fence is what log order gives a participant: once P applied an instance's decision,
//! no write of that instance or an older one applies here, whatever a leader thought when it
//! stamped it. A producer's next instance is admitted only after its previous one was decided
//! here, so that on every partition a producer's batches and markers keep Kafka's order (a
//! consumer skips an aborted transaction's records by producer id up to its marker).

use std::collections::BTreeMap;

use super::{CrossGroup, Decision, GroupId, Instance, OpenInstance, RemoteProducer};
use crate::apply_txn::write_end;
use crate::command::LeaderStamp;
use crate::effect::Effect;
use crate::groups::CommittedOffset;
use crate::txns::{Ended, TxnError};
use crate::BrokerState;

/// What applying one decision did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Applied {
    /// Markers written (or nothing of the instance was here); the instance is fenced.
    Done,
    /// Applied before, or older than the fence: nothing to do, confirmable.
    Already,
    /// An older instance of the producer is still open here: its decision comes first, so
    /// this one is neither applied nor confirmed yet.
    Deferred,
}

impl Applied {
    /// Whether C may forget this participant for the decision.
    pub fn confirmable(self) -> bool {
        self != Applied::Deferred
    }
}

impl CrossGroup {
    /// The instance of `producer_id` open here, if any.
    pub fn open_instance(&self, producer_id: i64) -> Option<Instance> {
        self.remote.get(&producer_id)?.open.as_ref().map(|o| o.instance)
    }

    /// Whether a batch of `instance` may be written here now.
    pub fn check_write(&self, instance: Instance) -> Result<(), TxnError> {
        let Some(remote) = self.remote.get(&instance.producer_id) else { return Ok(()) };
        if remote.fence.is_some_and(|fence| instance <= fence) {
            return Err(TxnError::Fenced);
        }
        match &remote.open {
            Some(open) if open.instance < instance => Err(TxnError::PreviousUndecided),
            Some(open) if open.instance > instance => Err(TxnError::Fenced),
            _ => Ok(()),
        }
    }

    /// The open instance a checked write joins, opened by it if need be.
    fn open_for_write(&mut self, coordinator: GroupId, instance: Instance, now_ms: i64) -> &mut OpenInstance {
        let fresh = RemoteProducer { coordinator, open: None, fence: None };
        let remote = self.remote.entry(instance.producer_id).or_insert(fresh);
        let open = remote.open.get_or_insert_with(|| OpenInstance {
            instance,
            partitions: BTreeMap::new(),
            offsets: BTreeMap::new(),
            start_ms: now_ms,
        });
        debug_assert_eq!(open.instance, instance, "checked by check_write");
        open
    }

    /// Records a checked write; true if it is the instance's first write to the partition.
    pub fn record_write(
        &mut self,
        coordinator: GroupId,
        instance: Instance,
        topic: &str,
        partition: i32,
        base_offset: i64,
        now_ms: i64,
    ) -> bool {
        let open = self.open_for_write(coordinator, instance, now_ms);
        let key = (topic.to_string(), partition);
        if open.partitions.contains_key(&key) {
            return false;
        }
        open.partitions.insert(key, base_offset);
        true
    }

    /// Records checked offsets of a TxnOffsetCommit: pending until the instance's decision.
    pub fn record_offsets(
        &mut self,
        coordinator: GroupId,
        instance: Instance,
        group_id: &str,
        offsets: impl IntoIterator<Item = ((String, i32), CommittedOffset)>,
        now_ms: i64,
    ) {
        let open = self.open_for_write(coordinator, instance, now_ms);
        open.offsets.entry(group_id.to_string()).or_default().extend(offsets);
    }

    /// The remote producer ids holding nothing open here, by coordinator, at most `max` of each
    /// (lowest first): what the participant's leader asks whether their coordinator still
    /// knows (`coordinator::gone`).
    pub fn idle_remote(&self, max: usize) -> BTreeMap<GroupId, Vec<i64>> {
        let mut out: BTreeMap<GroupId, Vec<i64>> = BTreeMap::new();
        for (producer_id, remote) in self.remote.iter().filter(|(_, r)| r.open.is_none()) {
            let ids = out.entry(remote.coordinator).or_default();
            if ids.len() < max {
                ids.push(*producer_id);
            }
        }
        out
    }

    /// Apply of `XOp::Forget`: drops each remote producer id that holds nothing open here. Its
    /// fence is no longer needed: its coordinator no longer knows it, so any later write of it
    /// is refused at JoinTxn or, if one joined before and lands after this entry, opens an
    /// instance the coordinator never registers and the pull aborts (SCALING.md §4).
    pub fn forget_remote(&mut self, producer_ids: &[i64]) {
        for producer_id in producer_ids {
            if self.remote.get(producer_id).is_some_and(|r| r.open.is_none()) {
                self.remote.remove(producer_id);
            }
        }
    }

    /// The open instances whose first write here is at least `age_ms` old at `now_ms`: what the
    /// participant's leader asks their coordinator about (SCALING.md §3.3).
    pub fn open_since(&self, now_ms: i64, age_ms: i64) -> Vec<(GroupId, Instance)> {
        let old = |open: &&OpenInstance| now_ms - open.start_ms >= age_ms;
        self.remote
            .values()
            .filter_map(|r| r.open.as_ref().filter(old).map(|open| (r.coordinator, open.instance)))
            .collect()
    }
}

/// Applies C's decision for one instance here: the markers on every partition the instance
/// wrote, and the fence. Idempotent.
pub fn apply_decision(
    state: &mut BrokerState,
    coordinator: GroupId,
    decision: Decision,
    stamp: LeaderStamp,
    effects: &mut Vec<Effect>,
) -> Applied {
    let Decision { instance, commit } = decision;
    let Some(remote) = state.xgroup.remote.get_mut(&instance.producer_id) else {
        // Nothing of the producer here: remember the fence against its late writes.
        let remote = RemoteProducer { coordinator, open: None, fence: Some(instance) };
        state.xgroup.remote.insert(instance.producer_id, remote);
        return Applied::Done;
    };
    if remote.fence.is_some_and(|fence| instance <= fence) {
        return Applied::Already;
    }
    match &remote.open {
        Some(open) if open.instance < instance => return Applied::Deferred,
        Some(open) if open.instance == instance => {
            let open = remote.open.take().expect("matched");
            remote.fence = Some(instance);
            let ended = Ended {
                producer_id: instance.producer_id,
                marker_epoch: instance.epoch,
                txn_commit: commit,
                partitions: open.partitions,
                offsets: open.offsets,
            };
            write_end(state, ended, stamp, effects);
        }
        // No data of this instance here (its write was lost, or a newer one is open).
        _ => remote.fence = Some(instance),
    }
    Applied::Done
}

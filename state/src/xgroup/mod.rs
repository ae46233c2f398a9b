//! Transactions across Raft groups (docs/SCALING.md, issue 32): the replicated state and the
//! pure transitions of the cross-group commit protocol, on both of its sides.
//!
//! With more than one group, a transaction's *coordinator group* C (the group of its
//! transactional id) decides it with one entry, and every other *participant* group P that
//! holds its data applies that decision in its own log order. Nothing here is proposed by the
//! broker yet: a cluster is one group, for which `CrossGroup` stays empty and every apply path
//! behaves as before. The steps are one op kind of the log, `Op::CrossGroup`, from
//! `onelog.version` 7; checkpoints carry [`CrossGroup`] from format 13. `state/tests/xgroup`
//! drives these transitions with several groups, lost and delayed messages and leader
//! changes, and checks the design's promises at every step.
//!
//! - [`coordinator`]: C's side. Which *instance* (producer id, epoch, n) is current, the
//!   participants registered for it, decisions not yet confirmed by every participant, and the
//!   answers C gives a participant's leader (JoinTxn, and the pull for data nobody decided).
//! - [`participant`]: P's side. The open instance of each remote producer, its fence (the
//!   newest instance whose decision P applied), writes tagged with an instance, decisions.
//! - [`ops`]: the five steps the protocol adds to the log and their apply.
//! - [`placement`]: each group's voters, and the group of a topic, a transactional id or a
//!   consumer group, with every setting an operator can get wrong refused by name.

pub mod coordinator;
pub mod ops;
pub mod participant;
pub mod placement;

pub use ops::{XOp, XResult};

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// A Raft group's number: 0 holds the cluster's metadata (SCALING.md §2).
pub type GroupId = u32;

/// How many producer ids each group's range holds: group g allocates from `g << 48`, so ids
/// never collide across coordinator groups and a batch's producer id names its coordinator
/// (SCALING.md §8). 64 groups of 2^48 ids stay far below `i64::MAX`.
const PRODUCER_ID_RANGE_BITS: u32 = 48;

/// The first producer id of `group`'s range.
pub fn producer_id_base(group: GroupId) -> i64 {
    i64::from(group) << PRODUCER_ID_RANGE_BITS
}

/// The group whose range holds `producer_id`: the group that allocated it.
pub fn producer_id_group(producer_id: i64) -> GroupId {
    GroupId::try_from(producer_id.max(0) >> PRODUCER_ID_RANGE_BITS).unwrap_or(GroupId::MAX)
}

/// One transaction of one producer, as the coordinator group numbers it. `n` counts the
/// decisions C recorded for the producer id before this one, so it moves at every transaction
/// also for transactions-v1 clients, whose epoch stays. Ordered within a producer id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Instance {
    pub producer_id: i64,
    pub epoch: i16,
    pub n: u32,
}

impl std::fmt::Display for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.producer_id, self.epoch, self.n)
    }
}

/// An outcome, for one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub instance: Instance,
    pub commit: bool,
}

/// The cross-group state of one group's replicated state (`BrokerState::xgroup`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CrossGroup {
    /// How many groups the cluster has; below 2 nothing here changes.
    pub groups: u32,
    /// As coordinator: producer id → its current instance's number and participants.
    pub coordinated: BTreeMap<i64, Coordinated>,
    /// As coordinator: decided instances some participant has not confirmed yet. Kept apart
    /// from the transactional ids so that an id's expiry cannot forget an undelivered commit.
    pub undelivered: BTreeMap<Instance, Undelivered>,
    /// As participant: producer id → what this group holds of its transactions.
    pub remote: BTreeMap<i64, RemoteProducer>,
}

/// C's view of a producer's current instance.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Coordinated {
    /// The current instance's `n`.
    pub n: u32,
    /// Groups registered as holding data of the current instance.
    pub participants: BTreeSet<GroupId>,
}

/// A decision C still delivers: the participants that have not confirmed applying it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Undelivered {
    pub commit: bool,
    pub waiting: BTreeSet<GroupId>,
}

/// P's view of one producer coordinated elsewhere.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RemoteProducer {
    pub coordinator: GroupId,
    /// The instance with data here and no decision yet.
    pub open: Option<OpenInstance>,
    /// The newest instance whose decision this group applied: it and every older instance of
    /// the producer are refused here from then on.
    pub fence: Option<Instance>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct OpenInstance {
    pub instance: Instance,
    /// (topic, partition) → the instance's first offset there.
    pub partitions: BTreeMap<(String, i32), i64>,
    /// Consumer group → (topic, partition) → the offset committed if the instance commits.
    pub offsets: BTreeMap<String, BTreeMap<(String, i32), crate::groups::CommittedOffset>>,
    /// Leader clock of the first write here (the pull's age).
    pub start_ms: i64,
}

impl CrossGroup {
    /// Whether the cluster has more than one group, so that the protocol's state is kept.
    pub fn enabled(&self) -> bool {
        self.groups > 1
    }

    /// Apply of `XOp::Identify`: this log is group `group`'s of a cluster of `groups`, so its
    /// producer ids come from the group's range from now on. Raising the counter only, so a
    /// repeated or late identification never hands out an id twice.
    pub fn identify(state: &mut crate::BrokerState, group: GroupId, groups: u32) {
        state.xgroup.groups = groups;
        let base = producer_id_base(group);
        if state.producers.next_producer_id < base {
            state.producers.next_producer_id = base;
        }
    }

    /// A deleted topic leaves the open instances: their markers would have nowhere to go, and
    /// its pending offsets would be stored for a topic that no longer exists at the decision
    /// (as `Transactions::forget_topic` drops this group's own).
    pub fn forget_topic(&mut self, topic: &str) {
        for open in self.remote.values_mut().filter_map(|r| r.open.as_mut()) {
            open.partitions.retain(|(t, _), _| t != topic);
            for offsets in open.offsets.values_mut() {
                offsets.retain(|(t, _), _| t != topic);
            }
            open.offsets.retain(|_, offsets| !offsets.is_empty());
        }
    }

    /// The partitions of `group` for which an open instance holds pending offsets (KIP-447
    /// `require_stable`, beside `Transactions::pending_offsets_of`).
    pub fn pending_offsets_of(&self, group: &str) -> BTreeSet<(String, i32)> {
        let open = self.remote.values().filter_map(|r| r.open.as_ref());
        open.filter_map(|o| o.offsets.get(group)).flat_map(|offsets| offsets.keys().cloned()).collect()
    }

    /// Whether another group's open instance holds offsets pending here.
    pub fn has_pending_offsets(&self) -> bool {
        self.remote.values().filter_map(|r| r.open.as_ref()).any(|o| !o.offsets.is_empty())
    }

    /// An expired producer id: its number is forgotten; undelivered decisions are not.
    pub fn forget_producers(&mut self, producer_ids: &BTreeSet<i64>) {
        self.coordinated.retain(|pid, _| !producer_ids.contains(pid));
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;

//! The replicated state of Streams groups: what a new leader needs to carry on where the old
//! one stopped (DESIGN §9) — per group the epochs, the topology, the target assignment and
//! the assignment configs it was computed with; per member its identity, process, endpoint,
//! epochs, reconciliation state and current tasks. Derived on every use, never stored: the
//! configured topology (from the topology and the topics), the group state, which process
//! runs which task, and all timers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::tasks::{Tasks, TasksTuple};
use super::topology::Topology;

/// Active tasks with the epoch each was assigned at (Kafka's `TasksTupleWithEpochs`).
pub type EpochTasks = BTreeMap<String, BTreeMap<i32, i32>>;

/// Every Streams group, by group id.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct StreamsGroups {
    pub groups: BTreeMap<String, StreamsGroup>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct StreamsGroup {
    /// Bumped whenever membership, a member's assignment-relevant metadata, the topics the
    /// topology reads or the assignment configs change.
    pub group_epoch: i32,
    /// Fingerprint of the topics the topology needs (name, id, partitions); a difference is
    /// a new assignment (Kafka's metadata hash).
    pub metadata_fingerprint: u64,
    /// The topology epoch the current configuration was validated at; -1 = not ready.
    pub validated_topology_epoch: i32,
    /// Set by the first member to join; `None` only before that.
    pub topology: Option<Topology>,
    /// The group epoch the target assignment was computed for.
    pub assignment_epoch: i32,
    /// Leader time of that computation; 0 = never (or the group emptied).
    pub assignment_time_ms: i64,
    /// No target is computed before this leader time (`streams.initial.rebalance.delay.ms`
    /// for a group's first member); 0 = no delay pending.
    pub assign_not_before_ms: i64,
    /// The assignment configs the target was computed with: a change is a new assignment.
    pub assignment_configs: BTreeMap<String, String>,
    /// Target assignment by member id.
    pub targets: BTreeMap<String, TasksTuple>,
    pub members: BTreeMap<String, Member>,
    /// Bumped when a member's endpoint or the tasks behind an endpoint change, so members
    /// learn the new endpoint → partitions map (interactive queries).
    pub endpoint_information_epoch: i32,
    /// A member asked the whole application to shut down (cleared when the group empties).
    pub shutdown_requested_by: Option<String>,
}

impl StreamsGroup {
    /// Kafka 4.4: a new group starts at epoch 1 with an empty target at epoch 1, so a first
    /// member held back by the initial rebalance delay still reconciles to epoch 1.
    pub fn new() -> Self {
        StreamsGroup {
            group_epoch: 1,
            assignment_epoch: 1,
            validated_topology_epoch: -1,
            ..Default::default()
        }
    }

    /// The member holding a static instance id, if any.
    pub fn member_by_instance(&self, instance_id: &str) -> Option<(&String, &Member)> {
        self.members.iter().find(|(_, m)| m.instance_id.as_deref() == Some(instance_id))
    }

    /// Kafka's `StreamsGroupState`, derived.
    pub fn state(&self) -> GroupState {
        let ready = self.topology.as_ref().is_some_and(|t| t.epoch == self.validated_topology_epoch);
        if self.members.is_empty() {
            GroupState::Empty
        } else if !ready {
            GroupState::NotReady
        } else if self.group_epoch > self.assignment_epoch {
            GroupState::Assigning
        } else if self.members.values().any(|m| !m.is_reconciled_to(self.assignment_epoch)) {
            GroupState::Reconciling
        } else {
            GroupState::Stable
        }
    }
}

impl StreamsGroups {
    /// Runs `f` on a copy holding only the group `group_id`: the leader's dry run of a
    /// request, answered without a log entry when it changes nothing.
    pub fn trial<T>(&self, group_id: &str, f: impl FnOnce(&mut StreamsGroups) -> T) -> (T, bool) {
        let before = self.groups.get(group_id);
        let mut copy = StreamsGroups::default();
        if let Some(group) = before {
            copy.groups.insert(group_id.to_string(), group.clone());
        }
        let result = f(&mut copy);
        (result, copy.groups.get(group_id) != before)
    }
}

/// Kafka's Streams group states, with the names ListGroups and describe print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    NotReady,
    Assigning,
    Reconciling,
    Stable,
}

impl GroupState {
    pub fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::NotReady => "NotReady",
            GroupState::Assigning => "Assigning",
            GroupState::Reconciling => "Reconciling",
            GroupState::Stable => "Stable",
        }
    }
}

/// Where a member is on its way to its target.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub enum MemberState {
    #[default]
    Stable,
    /// Waiting for the member to stop running `pending_revocation`, at its old epoch.
    UnrevokedTasks,
    /// At the new epoch, waiting for tasks other members still hold.
    UnreleasedTasks,
}

/// A member's tasks: active ones with their assignment epochs, standby and warm-up ones.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct AssignedTasks {
    pub active: EpochTasks,
    pub standby: Tasks,
    pub warmup: Tasks,
}

impl AssignedTasks {
    pub fn is_empty(&self) -> bool {
        self.active.is_empty() && self.standby.is_empty() && self.warmup.is_empty()
    }

    /// Without the epochs.
    pub fn tuple(&self) -> TasksTuple {
        let active = self.active.iter().map(|(s, ps)| (s.clone(), ps.keys().copied().collect())).collect();
        TasksTuple { active, standby: self.standby.clone(), warmup: self.warmup.clone() }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Member {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    /// The topology epoch the member last joined with.
    pub topology_epoch: i32,
    /// Members of one Streams process (its stream threads) share a process id.
    pub process_id: String,
    /// Host and port of the member's interactive-query endpoint.
    pub user_endpoint: Option<(String, u16)>,
    pub client_tags: BTreeMap<String, String>,
    /// 0 before the first reconcile, -2 while a static member is temporarily away.
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub assigned: AssignedTasks,
    pub pending_revocation: AssignedTasks,
    /// Offset sums the member reported per task (its local state), for standby placement.
    pub task_offsets: BTreeMap<String, BTreeMap<i32, i64>>,
    /// The leader's clock when the log last heard from the member (sessions survive a
    /// leader change from it, as for consumer groups).
    pub last_seen_ms: i64,
}

impl Member {
    /// A member as Kafka creates it on a first join (`withDefaults`): epochs 0, topology
    /// epoch -1, STABLE, nothing assigned.
    pub fn new() -> Self {
        Member { topology_epoch: -1, rebalance_timeout_ms: -1, ..Default::default() }
    }

    pub fn is_reconciled_to(&self, epoch: i32) -> bool {
        self.state == MemberState::Stable && self.member_epoch == epoch
    }
}

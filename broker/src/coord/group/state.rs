//! The classic group state machine's data, sans IO: every group and member this coordinator
//! knows, and the questions asked of them (protocol choice, KIP-345 static owners, the
//! commit and DescribeGroups views, adoption from the log).
//!
//! Nothing here reads a clock, locks, awaits or sends: time comes in as `now`, and a member's
//! parked JoinGroup or SyncGroup is only a flag (`awaiting_join`, `awaiting_sync`) whose
//! sender the shell keeps. The transitions live beside this file: `join` (JoinGroup, KIP-394
//! and KIP-345 member ids), `rebalance` (PreparingRebalance to CompletingRebalance, KIP-134
//! initial delay, leave and session expiry), `sync` (SyncGroup, heartbeat) and `deletion`
//! (DeleteGroups, OffsetDelete). They return what the shell must do (`effects`), so the
//! whole machine runs in a plain unit test with explicit times (`state_tests`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_compat::error_code;
use onelog_state::command::GenerationOp;

use super::messages::{CoordinatorConfig, GroupView, JoinRequest, MemberView};

/// Kafka's group states (`ClassicGroupState`), as DescribeGroups and ListGroups name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    /// Being deleted (DeleteGroups): joins answer COORDINATOR_NOT_AVAILABLE until the deletion
    /// is applied and the group forgotten, as Kafka's coordinator answers for a Dead group.
    Dead,
}

impl GroupState {
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

pub(super) struct Member {
    pub(super) group_instance_id: Option<String>,
    pub(super) client_id: String,
    pub(super) client_host: String,
    pub(super) session_timeout_ms: i32,
    pub(super) rebalance_timeout_ms: i32,
    pub(super) protocol_type: String,
    pub(super) protocols: Vec<(String, Bytes)>,
    pub(super) assignment: Bytes,
    /// Its JoinGroup is parked in the shell until the rebalance completes.
    pub(super) awaiting_join: bool,
    /// A follower's SyncGroup is parked in the shell until the leader's assignments arrive.
    pub(super) awaiting_sync: bool,
    pub(super) last_heartbeat: Instant,
}

impl Member {
    pub(super) fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols.iter().find(|(n, _)| n == protocol).map(|(_, m)| m.clone()).unwrap_or_default()
    }
}

pub(super) struct Group {
    pub(super) state: GroupState,
    pub(super) generation_id: i32,
    pub(super) protocol_type: Option<String>,
    pub(super) protocol_name: Option<String>,
    pub(super) leader: Option<String>,
    pub(super) members: BTreeMap<String, Member>,
    /// KIP-394: ids handed out with MEMBER_ID_REQUIRED, not yet joined.
    pub(super) pending_member_ids: BTreeSet<String>,
    /// Tells a stale rebalance timer from the current one.
    pub(super) rebalance_seq: u64,
    /// KIP-134: the first rebalance of an empty group waits for more members.
    pub(super) initial_delay: bool,
    /// Kafka's `InitialDelayedJoin`: a new member joined during the current initial delay, so
    /// it is extended once more, by at most what is left of the rebalance timeout.
    pub(super) new_member_added: bool,
    pub(super) initial_delay_remaining: Duration,
    /// The group emptied (a generation without members) and the log does not know yet.
    pub(super) empty_unrecorded: bool,
    /// CompletingRebalance with the leader's assignments in: the generation's log entry is on
    /// its way, and SyncGroups wait for it (see `sync`).
    pub(super) recording: bool,
}

impl Group {
    pub(super) fn new() -> Self {
        Group {
            state: GroupState::Empty,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            pending_member_ids: BTreeSet::new(),
            rebalance_seq: 0,
            initial_delay: false,
            new_member_added: false,
            initial_delay_remaining: Duration::ZERO,
            empty_unrecorded: false,
            recording: false,
        }
    }

    /// Protocols every member supports.
    fn candidate_protocols(&self) -> BTreeSet<String> {
        let mut members = self.members.values();
        let Some(first) = members.next() else { return BTreeSet::new() };
        let mut set: BTreeSet<String> = first.protocols.iter().map(|(n, _)| n.clone()).collect();
        for m in members {
            set.retain(|p| m.protocols.iter().any(|(n, _)| n == p));
        }
        set
    }

    /// Kafka's `selectProtocol`: each member votes for its most preferred candidate.
    pub(super) fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some((name, _)) = m.protocols.iter().find(|(n, _)| candidates.contains(n)) {
                *votes.entry(name).or_default() += 1;
            }
        }
        votes.into_iter().max_by_key(|(_, v)| *v).map(|(n, _)| n.to_string())
    }

    pub(super) fn supports(&self, req: &JoinRequest) -> bool {
        if self.members.is_empty() {
            return !req.protocol_type.is_empty() && !req.protocols.is_empty();
        }
        let same_type = self.members.values().next().is_some_and(|m| m.protocol_type == req.protocol_type);
        let candidates = self.candidate_protocols();
        same_type && req.protocols.iter().any(|(n, _)| candidates.contains(n))
    }

    /// KIP-345: the member id that holds a static member's instance id.
    pub(super) fn static_owner(&self, instance_id: &str) -> Option<String> {
        self.members
            .iter()
            .find(|(_, m)| m.group_instance_id.as_deref() == Some(instance_id))
            .map(|(id, _)| id.clone())
    }

    /// KIP-345: a request naming an instance id held by another member id comes from a fenced
    /// (replaced) static member.
    pub(super) fn fenced(&self, instance_id: Option<&str>, member_id: &str) -> bool {
        instance_id.and_then(|i| self.static_owner(i)).is_some_and(|owner| owner != member_id)
    }

    pub(super) fn rebalance_timeout(&self) -> Duration {
        let ms = self.members.values().map(|m| m.rebalance_timeout_ms.max(0)).max().unwrap_or(0);
        Duration::from_millis(ms as u64)
    }
}

/// Every group this coordinator knows, with the settings they run under.
pub(super) struct Groups {
    pub(super) config: CoordinatorConfig,
    pub(super) groups: BTreeMap<String, Group>,
}

impl Groups {
    pub(super) fn new(config: CoordinatorConfig) -> Self {
        Groups { config, groups: BTreeMap::new() }
    }

    /// A new leader takes over a group from its last completed generation in the log: the
    /// members are known and Stable, with session timers starting `now`, so they keep
    /// heartbeating and committing; assignments and metadata come again with the next
    /// rebalance. A group already known is left alone (it is newer than the log).
    pub(super) fn adopt(&mut self, record: &GenerationOp, now: Instant) {
        if self.groups.contains_key(&record.group_id) {
            return;
        }
        let mut group = Group::new();
        group.generation_id = record.generation_id;
        if !record.members.is_empty() {
            group.state = GroupState::Stable;
            group.protocol_type = Some(record.protocol_type.clone());
            group.protocol_name = Some(record.protocol_name.clone());
        }
        for m in &record.members {
            let member = Member {
                group_instance_id: m.group_instance_id.clone(),
                client_id: String::new(),
                client_host: String::new(),
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                protocol_type: record.protocol_type.clone(),
                // Only the name is known until the member rejoins with its metadata.
                protocols: vec![(record.protocol_name.clone(), Bytes::new())],
                assignment: Bytes::new(),
                awaiting_join: false,
                awaiting_sync: false,
                last_heartbeat: now,
            };
            group.members.insert(m.member_id.clone(), member);
        }
        group.leader = group.members.keys().next().cloned();
        self.groups.insert(record.group_id.clone(), group);
    }

    /// Forgets every group (this node stopped leading).
    pub(super) fn clear(&mut self) {
        self.groups.clear();
    }

    /// Generations that completed without members (every member left or expired), for the
    /// log: otherwise a new leader would adopt the last generation's members again. Each is
    /// returned once.
    pub(super) fn take_empty_generations(&mut self) -> Vec<GenerationOp> {
        self.groups
            .iter_mut()
            .filter_map(|(id, g)| {
                (g.state == GroupState::Empty && std::mem::take(&mut g.empty_unrecorded)).then_some((id, g))
            })
            .map(|(id, g)| GenerationOp {
                group_id: id.clone(),
                generation_id: g.generation_id,
                protocol_type: String::new(),
                protocol_name: String::new(),
                members: Vec::new(),
            })
            .collect()
    }

    /// OffsetCommit (generation -1 for a simple consumer): Some(code) when the group is known,
    /// None when it is not (the applied state decides).
    pub(super) fn check_commit(
        &self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Option<i16> {
        let group = self.groups.get(group_id)?;
        Some(if group.state == GroupState::Dead {
            error_code::COORDINATOR_NOT_AVAILABLE
        } else if generation_id < 0 {
            // A simple consumer or admin client may commit only while the group is Empty.
            if group.members.is_empty() {
                error_code::NONE
            } else {
                error_code::UNKNOWN_MEMBER_ID
            }
        } else if group.fenced(instance_id, member_id) {
            error_code::FENCED_INSTANCE_ID
        } else if !group.members.contains_key(member_id) {
            error_code::UNKNOWN_MEMBER_ID
        } else if generation_id != group.generation_id {
            error_code::ILLEGAL_GENERATION
        } else if group.state == GroupState::CompletingRebalance {
            error_code::REBALANCE_IN_PROGRESS
        } else {
            error_code::NONE
        })
    }

    pub(super) fn describe(&self, group_id: &str) -> Option<GroupView> {
        let group = self.groups.get(group_id)?;
        let protocol = group.protocol_name.clone().unwrap_or_default();
        let members = group
            .members
            .iter()
            .map(|(id, m)| MemberView {
                member_id: id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: m.metadata(&protocol),
                assignment: m.assignment.clone(),
            })
            .collect();
        Some(GroupView {
            state: group.state,
            protocol_type: group.protocol_type.clone().unwrap_or_default(),
            protocol_name: protocol,
            members,
        })
    }

    /// Every group but those being deleted: (group id, state, protocol type).
    pub(super) fn list(&self) -> Vec<(String, GroupState, String)> {
        self.groups
            .iter()
            .filter(|(_, g)| g.state != GroupState::Dead)
            .map(|(id, g)| (id.clone(), g.state, g.protocol_type.clone().unwrap_or_default()))
            .collect()
    }
}

//! The classic group coordinator: consumer-group membership, held in memory on the Raft leader.
//!
//! The leader coordinates every group (see handlers/find_coordinator). Live membership
//! (joins, heartbeats, parked requests, session timers) stays in memory; what the log holds is
//! each completed generation and its member ids (`Op::CompleteGeneration`, proposed by the
//! leader member's SyncGroup and when a group empties), so that commits are fenced alike on
//! every replica and a new leader adopts the group from it (`adopt`).
//!
//! This module runs Kafka's classic group state machine (`ClassicGroup`,
//! `GroupMetadataManager` in Kafka's group-coordinator): Empty → PreparingRebalance →
//! CompletingRebalance → Stable. A rebalance completes when every known member rejoined or
//! the rebalance timeout passed (members that did not rejoin are removed); the first join of
//! an empty group waits `group.initial.rebalance.delay.ms` (KIP-134). JoinGroup and a
//! follower's SyncGroup park a oneshot sender here and the handler awaits it.
//!
//! KIP-345 static members (`group.instance.id`): a restarted instance takes over its
//! instance id and assignment, and the old member id is FENCED_INSTANCE_ID.
//! Protocol metadata and assignment bytes are kept untouched. All state sits behind one
//! mutex that is never held across an await.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_compat::error_code;
use tokio::sync::oneshot;
use tokio::time::Instant;

use onelog_state::command::{GenerationMember, GenerationOp};

mod deletion;
pub mod duties;
pub use deletion::Subscriptions;

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

/// A JoinGroup request as the coordinator needs it.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    /// (name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// KIP-394: v4+ clients get MEMBER_ID_REQUIRED on their first join.
    pub require_known_member_id: bool,
}

/// A JoinGroup answer.
#[derive(Debug, Clone, Default)]
pub struct JoinResult {
    pub error_code: i16,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Only for the leader: (member id, instance id, metadata of the chosen protocol).
    pub members: Vec<(String, Option<String>, Bytes)>,
}

impl JoinResult {
    fn error(code: i16, member_id: &str) -> Self {
        JoinResult {
            error_code: code,
            generation_id: -1,
            member_id: member_id.to_string(),
            ..Default::default()
        }
    }
}

/// A SyncGroup answer.
#[derive(Debug, Clone, Default)]
pub struct SyncResult {
    pub error_code: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncResult {
    fn error(code: i16) -> Self {
        SyncResult { error_code: code, ..Default::default() }
    }
}

/// A member as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct MemberView {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// A group as DescribeGroups and ListGroups show it.
#[derive(Debug, Clone)]
pub struct GroupView {
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol_name: String,
    pub members: Vec<MemberView>,
}

/// Settings from broker configs.
pub use crate::config::GroupSettings as CoordinatorConfig;

struct Member {
    group_instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
    protocol_type: String,
    protocols: Vec<(String, Bytes)>,
    assignment: Bytes,
    join_waiter: Option<oneshot::Sender<JoinResult>>,
    sync_waiter: Option<oneshot::Sender<SyncResult>>,
    last_heartbeat: Instant,
}

impl Member {
    fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols.iter().find(|(n, _)| n == protocol).map(|(_, m)| m.clone()).unwrap_or_default()
    }
}

struct Group {
    state: GroupState,
    generation_id: i32,
    protocol_type: Option<String>,
    protocol_name: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// KIP-394: ids handed out with MEMBER_ID_REQUIRED, not yet joined.
    pending_member_ids: BTreeSet<String>,
    /// Tells a stale rebalance timer from the current one.
    rebalance_seq: u64,
    /// KIP-134: the first rebalance of an empty group waits for more members.
    initial_delay: bool,
    /// Kafka's `InitialDelayedJoin`: a new member joined during the current initial delay, so
    /// it is extended once more, by at most what is left of the rebalance timeout.
    new_member_added: bool,
    initial_delay_remaining: Duration,
    /// The group emptied (a generation without members) and the log does not know yet.
    empty_unrecorded: bool,
}

impl Group {
    fn new() -> Self {
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
    fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some((name, _)) = m.protocols.iter().find(|(n, _)| candidates.contains(n)) {
                *votes.entry(name).or_default() += 1;
            }
        }
        votes.into_iter().max_by_key(|(_, v)| *v).map(|(n, _)| n.to_string())
    }

    fn supports(&self, req: &JoinRequest) -> bool {
        if self.members.is_empty() {
            return !req.protocol_type.is_empty() && !req.protocols.is_empty();
        }
        let same_type = self.members.values().next().is_some_and(|m| m.protocol_type == req.protocol_type);
        let candidates = self.candidate_protocols();
        same_type && req.protocols.iter().any(|(n, _)| candidates.contains(n))
    }

    /// KIP-345: the member id that holds a static member's instance id.
    fn static_owner(&self, instance_id: &str) -> Option<String> {
        self.members
            .iter()
            .find(|(_, m)| m.group_instance_id.as_deref() == Some(instance_id))
            .map(|(id, _)| id.clone())
    }

    /// KIP-345: a request naming an instance id held by another member id comes from a fenced
    /// (replaced) static member.
    fn fenced(&self, instance_id: Option<&str>, member_id: &str) -> bool {
        instance_id.and_then(|i| self.static_owner(i)).is_some_and(|owner| owner != member_id)
    }

    fn rebalance_timeout(&self) -> Duration {
        let ms = self.members.values().map(|m| m.rebalance_timeout_ms.max(0)).max().unwrap_or(0);
        Duration::from_millis(ms as u64)
    }
}

/// The coordinator of every group while this node leads.
#[derive(Clone)]
pub struct Coordinator {
    inner: Arc<Mutex<BTreeMap<String, Group>>>,
    config: CoordinatorConfig,
    /// The Raft term the groups were served in; another term starts from the log again.
    term: Arc<AtomicU64>,
}

/// What a join or leave asks the caller to do after the lock is released.
enum Next {
    Nothing,
    /// Arm a rebalance timer for (group, seq) after the delay.
    Timer(String, u64, Duration),
}

impl Coordinator {
    pub fn new(config: CoordinatorConfig) -> Self {
        Coordinator {
            inner: Arc::new(Mutex::new(BTreeMap::new())),
            config,
            term: Arc::new(AtomicU64::new(0)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Group>> {
        self.inner.lock().expect("coordinator lock")
    }

    /// JoinGroup: answers at once with an error, or when the rebalance completes.
    pub async fn join(&self, req: JoinRequest) -> JoinResult {
        let (tx, rx) = oneshot::channel();
        let next = match self.join_locked(&req, tx) {
            Ok(next) => next,
            Err((code, member_id)) => return JoinResult::error(code, &member_id),
        };
        self.arm(next);
        rx.await.unwrap_or_else(|_| JoinResult::error(error_code::NOT_COORDINATOR, &req.member_id))
    }

    fn join_locked(&self, req: &JoinRequest, tx: oneshot::Sender<JoinResult>) -> Result<Next, (i16, String)> {
        let timeout_ok = (self.config.min_session_timeout_ms..=self.config.max_session_timeout_ms)
            .contains(&req.session_timeout_ms);
        if !timeout_ok {
            return Err((error_code::INVALID_SESSION_TIMEOUT, req.member_id.to_string()));
        }
        let mut groups = self.lock();
        let group = groups.entry(req.group_id.clone()).or_insert_with(Group::new);
        if group.state == GroupState::Dead {
            return Err((error_code::COORDINATOR_NOT_AVAILABLE, req.member_id.to_string()));
        }
        if !group.supports(req) {
            return Err((error_code::INCONSISTENT_GROUP_PROTOCOL, req.member_id.to_string()));
        }
        let owner = req.group_instance_id.as_deref().and_then(|i| group.static_owner(i));
        let member_id = if let (Some(old), true) = (&owner, req.member_id.is_empty()) {
            // KIP-345: a static member restarted; its new member id takes over the instance
            // id (and the assignment), and the old one is fenced.
            let id = format!("{}-{}", req.client_id, uuid::Uuid::new_v4());
            replace_static_member(group, old, &id);
            id
        } else if owner.as_ref().is_some_and(|o| *o != req.member_id) {
            return Err((error_code::FENCED_INSTANCE_ID, req.member_id.to_string()));
        } else if req.member_id.is_empty() {
            let id = format!("{}-{}", req.client_id, uuid::Uuid::new_v4());
            // KIP-394 asks only dynamic members to learn their id first.
            if req.require_known_member_id && req.group_instance_id.is_none() {
                // KIP-394: the member retries with this id; only then does it count.
                if group.pending_member_ids.len() >= crate::limits::GROUP_PENDING_MEMBERS_MAX {
                    return Err((error_code::GROUP_MAX_SIZE_REACHED, "".to_string()));
                }
                group.pending_member_ids.insert(id.clone());
                return Err((error_code::MEMBER_ID_REQUIRED, id.to_string()));
            }
            id
        } else {
            let known = group.members.contains_key(&req.member_id);
            if !known && !group.pending_member_ids.remove(&req.member_id) {
                return Err((error_code::UNKNOWN_MEMBER_ID, req.member_id.to_string()));
            }
            req.member_id.clone()
        };
        if !group.members.contains_key(&member_id) && group.members.len() >= self.config.max_size {
            return Err((error_code::GROUP_MAX_SIZE_REACHED, member_id.to_string()));
        }
        let assignment = group.members.get(&member_id).map(|m| m.assignment.clone()).unwrap_or_default();
        let member = Member {
            group_instance_id: req.group_instance_id.clone(),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            session_timeout_ms: req.session_timeout_ms,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            protocol_type: req.protocol_type.clone(),
            protocols: req.protocols.clone(),
            assignment,
            join_waiter: Some(tx),
            sync_waiter: None,
            last_heartbeat: Instant::now(),
        };
        let is_new = group.members.insert(member_id, member).is_none();
        // Kafka's `addMemberThenRebalanceOrCompleteJoin`: a new member of a new group extends
        // the initial delay.
        if is_new && group.state == GroupState::PreparingRebalance && group.generation_id == 0 {
            group.new_member_added = true;
        }
        let next = match group.state {
            GroupState::PreparingRebalance => Next::Nothing,
            _ => self.prepare_rebalance(&req.group_id, group),
        };
        try_complete_join(group, false);
        Ok(next)
    }

    /// Moves a group to PreparingRebalance: followers waiting for an assignment are told to
    /// rejoin, and a timer bounds how long the rebalance waits for members.
    fn prepare_rebalance(&self, group_id: &str, group: &mut Group) -> Next {
        let was_empty = group.state == GroupState::Empty;
        if group.state == GroupState::CompletingRebalance {
            for m in group.members.values_mut() {
                if let Some(tx) = m.sync_waiter.take() {
                    let _ = tx.send(SyncResult::error(error_code::REBALANCE_IN_PROGRESS));
                }
            }
        }
        group.state = GroupState::PreparingRebalance;
        group.rebalance_seq += 1;
        let delay = if was_empty {
            group.initial_delay = self.config.initial_rebalance_delay_ms > 0;
            group.new_member_added = false;
            let delay =
                Duration::from_millis(self.config.initial_rebalance_delay_ms).min(group.rebalance_timeout());
            group.initial_delay_remaining = group.rebalance_timeout().saturating_sub(delay);
            delay
        } else {
            group.rebalance_timeout()
        };
        Next::Timer(group_id.to_string(), group.rebalance_seq, delay)
    }

    fn arm(&self, next: Next) {
        let Next::Timer(group_id, seq, delay) = next else { return };
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            this.rebalance_timer_fired(&group_id, seq);
        });
    }

    /// The rebalance (or initial) delay passed: complete with the members that rejoined.
    /// Kafka's `InitialDelayedJoin`: if a new member joined during the initial delay and some
    /// of the rebalance timeout is left, wait another delay (at most what is left) instead.
    fn rebalance_timer_fired(&self, group_id: &str, seq: u64) {
        let next = {
            let mut groups = self.lock();
            let Some(group) = groups.get_mut(group_id) else { return };
            if group.rebalance_seq != seq || group.state != GroupState::PreparingRebalance {
                return;
            }
            if group.initial_delay && group.new_member_added && !group.initial_delay_remaining.is_zero() {
                group.new_member_added = false;
                let configured = Duration::from_millis(self.config.initial_rebalance_delay_ms);
                let delay = configured.min(group.initial_delay_remaining);
                group.initial_delay_remaining -= delay;
                Next::Timer(group_id.to_string(), seq, delay)
            } else {
                group.initial_delay = false;
                try_complete_join(group, true);
                Next::Nothing
            }
        };
        self.arm(next);
    }

    /// SyncGroup: the leader's carries the assignments; a follower's waits for them.
    pub async fn sync(
        &self,
        group_id: &str,
        generation_id: i32,
        member: (&str, Option<&str>),
        assignments: Vec<(String, Bytes)>,
    ) -> (SyncResult, Option<GenerationOp>) {
        let (member_id, instance_id) = member;
        let (tx, rx) = oneshot::channel();
        {
            let mut groups = self.lock();
            let Some(group) = groups.get_mut(group_id) else {
                return (SyncResult::error(error_code::UNKNOWN_MEMBER_ID), None);
            };
            if group.fenced(instance_id, member_id) {
                return (SyncResult::error(error_code::FENCED_INSTANCE_ID), None);
            }
            let Some(member) = group.members.get_mut(member_id) else {
                return (SyncResult::error(error_code::UNKNOWN_MEMBER_ID), None);
            };
            member.last_heartbeat = Instant::now();
            if generation_id != group.generation_id {
                return (SyncResult::error(error_code::ILLEGAL_GENERATION), None);
            }
            match group.state {
                GroupState::Empty => return (SyncResult::error(error_code::UNKNOWN_MEMBER_ID), None),
                GroupState::Dead => return (SyncResult::error(error_code::COORDINATOR_NOT_AVAILABLE), None),
                GroupState::PreparingRebalance => {
                    return (SyncResult::error(error_code::REBALANCE_IN_PROGRESS), None)
                }
                GroupState::Stable => return (stable_sync(group, member_id), None),
                GroupState::CompletingRebalance => {}
            }
            if group.leader.as_deref() != Some(member_id) {
                if let Some(m) = group.members.get_mut(member_id) {
                    m.sync_waiter = Some(tx);
                }
            } else {
                let completed = complete_sync(group_id, group, assignments);
                return (stable_sync(group, member_id), Some(completed));
            }
        }
        (rx.await.unwrap_or_else(|_| SyncResult::error(error_code::NOT_COORDINATOR)), None)
    }

    /// Heartbeat: Kafka's codes for a member out of step with its group.
    pub fn heartbeat(
        &self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> i16 {
        let mut groups = self.lock();
        let Some(group) = groups.get_mut(group_id) else { return error_code::UNKNOWN_MEMBER_ID };
        if group.fenced(instance_id, member_id) {
            return error_code::FENCED_INSTANCE_ID;
        }
        let Some(member) = group.members.get_mut(member_id) else { return error_code::UNKNOWN_MEMBER_ID };
        member.last_heartbeat = Instant::now();
        match group.state {
            GroupState::Empty => error_code::UNKNOWN_MEMBER_ID,
            GroupState::Dead => error_code::COORDINATOR_NOT_AVAILABLE,
            _ if generation_id != group.generation_id => error_code::ILLEGAL_GENERATION,
            GroupState::PreparingRebalance => error_code::REBALANCE_IN_PROGRESS,
            GroupState::CompletingRebalance | GroupState::Stable => error_code::NONE,
        }
    }

    /// LeaveGroup of one member: removed at once, and the others rebalance.
    /// KIP-345: a static member may leave by instance id alone (empty member id).
    pub fn leave(&self, group_id: &str, member_id: &str, instance_id: Option<&str>) -> i16 {
        let next = {
            let mut groups = self.lock();
            let Some(group) = groups.get_mut(group_id) else { return error_code::UNKNOWN_MEMBER_ID };
            let owner = instance_id.and_then(|i| group.static_owner(i));
            let member_id = match owner {
                Some(owner) if member_id.is_empty() || owner == member_id => owner,
                Some(_) => return error_code::FENCED_INSTANCE_ID,
                None => member_id.to_string(),
            };
            if !group.members.contains_key(&member_id) {
                return error_code::UNKNOWN_MEMBER_ID;
            }
            self.remove_member(group_id, group, &member_id)
        };
        self.arm(next);
        error_code::NONE
    }

    fn remove_member(&self, group_id: &str, group: &mut Group, member_id: &str) -> Next {
        if let Some(mut m) = group.members.remove(member_id) {
            if let Some(tx) = m.join_waiter.take() {
                let _ = tx.send(JoinResult::error(error_code::UNKNOWN_MEMBER_ID, member_id));
            }
            if let Some(tx) = m.sync_waiter.take() {
                let _ = tx.send(SyncResult::error(error_code::UNKNOWN_MEMBER_ID));
            }
        }
        if group.leader.as_deref() == Some(member_id) {
            group.leader = group.members.keys().next().cloned();
        }
        match group.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                let next = self.prepare_rebalance(group_id, group);
                // Kafka's `DelayedJoin.tryComplete`: with the last member gone every remaining
                // member has joined, so the group is Empty now, not after the rebalance timeout.
                try_complete_join(group, false);
                next
            }
            GroupState::PreparingRebalance => {
                try_complete_join(group, false);
                Next::Nothing
            }
            GroupState::Empty | GroupState::Dead => Next::Nothing,
        }
    }

    /// Removes members whose session passed without a heartbeat (members waiting in a join or
    /// sync are kept alive, as Kafka's `shouldKeepAlive`). Returns how many were removed.
    pub fn expire_sessions(&self) -> usize {
        let now = Instant::now();
        let mut nexts = Vec::new();
        {
            let mut groups = self.lock();
            for (group_id, group) in groups.iter_mut() {
                let expired: Vec<String> = group
                    .members
                    .iter()
                    .filter(|(_, m)| m.join_waiter.is_none() && m.sync_waiter.is_none())
                    .filter(|(_, m)| {
                        now.duration_since(m.last_heartbeat)
                            > Duration::from_millis(m.session_timeout_ms as u64)
                    })
                    .map(|(id, _)| id.clone())
                    .collect();
                for id in expired {
                    tracing::info!(group = %group_id, member = %id, "session expired; removing member");
                    nexts.push(self.remove_member(group_id, group, &id));
                }
            }
        }
        let n = nexts.len();
        nexts.into_iter().for_each(|next| self.arm(next));
        n
    }

    /// A new leader takes over a group from its last completed generation in the log: the
    /// members are known and Stable, with fresh session timers, so they keep heartbeating and
    /// committing; assignments and metadata come again with the next rebalance. A group this
    /// coordinator already knows is left alone (it is newer than the log).
    pub fn adopt(&self, record: &GenerationOp) {
        let mut groups = self.lock();
        if groups.contains_key(&record.group_id) {
            return;
        }
        let mut group = Group::new();
        group.generation_id = record.generation_id;
        if !record.members.is_empty() {
            group.state = GroupState::Stable;
            group.protocol_type = Some(record.protocol_type.clone());
            group.protocol_name = Some(record.protocol_name.clone());
        }
        let now = Instant::now();
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
                join_waiter: None,
                sync_waiter: None,
                last_heartbeat: now,
            };
            group.members.insert(m.member_id.clone(), member);
        }
        group.leader = group.members.keys().next().cloned();
        groups.insert(record.group_id.clone(), group);
    }

    /// Generations that completed without members (every member left or expired), for the
    /// log: otherwise a new leader would adopt the last generation's members again.
    pub fn take_empty_generations(&self) -> Vec<GenerationOp> {
        let mut groups = self.lock();
        groups
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

    /// Called with the current Raft term before serving: a node that lost and regained
    /// leadership in between may have missed generations recorded by another leader, so it
    /// forgets its groups and adopts them from the log again.
    pub fn observe_term(&self, term: u64) {
        if self.term.swap(term, Ordering::SeqCst) != term {
            self.clear();
        }
    }

    /// Forgets every group (this node stopped leading): parked requests answer NOT_COORDINATOR.
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// OffsetCommit (generation -1 for a simple consumer): Some(code) when the coordinator
    /// knows the group, None when it does not (the applied state decides).
    pub fn check_commit(
        &self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Option<i16> {
        let groups = self.lock();
        let group = groups.get(group_id)?;
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

    pub fn describe(&self, group_id: &str) -> Option<GroupView> {
        let groups = self.lock();
        let group = groups.get(group_id)?;
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

    /// Every group with members: (group id, state, protocol type).
    pub fn list(&self) -> Vec<(String, GroupState, String)> {
        let groups = self.lock();
        groups
            .iter()
            .filter(|(_, g)| g.state != GroupState::Dead)
            .map(|(id, g)| (id.clone(), g.state, g.protocol_type.clone().unwrap_or_default()))
            .collect()
    }
}

/// Completes the join phase when every member rejoined, or on `timed_out` with those that
/// did (the rest are removed). The leader gets every member's metadata.
fn try_complete_join(group: &mut Group, timed_out: bool) {
    if group.state != GroupState::PreparingRebalance || (group.initial_delay && !timed_out) {
        return;
    }
    let all_joined = group.members.values().all(|m| m.join_waiter.is_some());
    if !all_joined && !timed_out {
        return;
    }
    group.members.retain(|_, m| m.join_waiter.is_some());
    group.generation_id += 1;
    if group.members.is_empty() {
        group.empty_unrecorded = true;
        group.state = GroupState::Empty;
        group.protocol_name = None;
        group.protocol_type = None;
        group.leader = None;
        return;
    }
    group.state = GroupState::CompletingRebalance;
    group.protocol_type = group.members.values().next().map(|m| m.protocol_type.clone());
    group.protocol_name = group.select_protocol();
    if !group.leader.as_ref().is_some_and(|l| group.members.contains_key(l)) {
        group.leader = group.members.keys().next().cloned();
    }
    let protocol = group.protocol_name.clone().unwrap_or_default();
    let leader = group.leader.clone().unwrap_or_default();
    let all: Vec<(String, Option<String>, Bytes)> = group
        .members
        .iter()
        .map(|(id, m)| (id.clone(), m.group_instance_id.clone(), m.metadata(&protocol)))
        .collect();
    let now = Instant::now();
    for (id, m) in group.members.iter_mut() {
        m.last_heartbeat = now;
        let Some(tx) = m.join_waiter.take() else { continue };
        let result = JoinResult {
            error_code: error_code::NONE,
            generation_id: group.generation_id,
            protocol_type: group.protocol_type.clone(),
            protocol_name: group.protocol_name.clone(),
            leader: leader.clone(),
            member_id: id.clone(),
            members: if *id == leader { all.clone() } else { Vec::new() },
        };
        let _ = tx.send(result);
    }
}

/// The leader's assignments: stored, every waiting follower answered, the group Stable.
fn complete_sync(group_id: &str, group: &mut Group, assignments: Vec<(String, Bytes)>) -> GenerationOp {
    let mut assignments: BTreeMap<String, Bytes> = assignments.into_iter().collect();
    let protocol_type = group.protocol_type.clone();
    let protocol_name = group.protocol_name.clone();
    for (id, m) in group.members.iter_mut() {
        m.assignment = assignments.remove(id).unwrap_or_default();
        if let Some(tx) = m.sync_waiter.take() {
            let result = SyncResult {
                error_code: error_code::NONE,
                protocol_type: protocol_type.clone(),
                protocol_name: protocol_name.clone(),
                assignment: m.assignment.clone(),
            };
            let _ = tx.send(result);
        }
    }
    group.state = GroupState::Stable;
    GenerationOp {
        group_id: group_id.to_string(),
        generation_id: group.generation_id,
        protocol_type: protocol_type.unwrap_or_default(),
        protocol_name: protocol_name.unwrap_or_default(),
        members: group
            .members
            .iter()
            .map(|(id, m)| GenerationMember {
                member_id: id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
            })
            .collect(),
    }
}

/// KIP-345: `new_id` takes over the static member `old_id` (its assignment and leadership);
/// requests the old id still has parked are answered FENCED_INSTANCE_ID.
fn replace_static_member(group: &mut Group, old_id: &str, new_id: &str) {
    let Some(mut old) = group.members.remove(old_id) else { return };
    if let Some(tx) = old.join_waiter.take() {
        let _ = tx.send(JoinResult::error(error_code::FENCED_INSTANCE_ID, old_id));
    }
    if let Some(tx) = old.sync_waiter.take() {
        let _ = tx.send(SyncResult::error(error_code::FENCED_INSTANCE_ID));
    }
    if group.leader.as_deref() == Some(old_id) {
        group.leader = Some(new_id.to_string());
    }
    // The join that follows replaces this entry and keeps its assignment.
    group.members.insert(new_id.to_string(), old);
}

fn stable_sync(group: &Group, member_id: &str) -> SyncResult {
    SyncResult {
        error_code: error_code::NONE,
        protocol_type: group.protocol_type.clone(),
        protocol_name: group.protocol_name.clone(),
        assignment: group.members.get(member_id).map(|m| m.assignment.clone()).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests;

//! The classic group coordinator: consumer-group membership, held in memory on the Raft leader.
//!
//! The leader coordinates every group (see handlers/find_coordinator). Live membership
//! (joins, heartbeats, parked requests, session timers) stays in memory; what the log holds is
//! each completed generation and its member ids (`Op::CompleteGeneration`, proposed by the
//! leader member's SyncGroup and when a group empties), so that commits are fenced alike on
//! every replica and a new leader adopts the group from it (`adopt`).
//!
//! The folder is a sans-IO state machine and this async shell around it:
//! - `state`, `join`, `rebalance`, `sync`, `deletion`: Kafka's classic group state machine
//!   (`ClassicGroup`, `GroupMetadataManager` in Kafka's group-coordinator): Empty →
//!   PreparingRebalance → CompletingRebalance → Stable, KIP-394 member ids, KIP-345 static
//!   members, the KIP-134 initial delay. Pure: time is a parameter, and each transition
//!   returns what must happen (`effects`: answers to parked requests, timers to arm);
//! - `messages`: the requests, answers and views the handlers exchange with it;
//! - this file, `Coordinator`: holds the state behind one mutex that is never held across an
//!   await, reads the clock, keeps the parked requests' oneshot senders (`waiters`), answers
//!   them under the lock as the transitions say, and arms the timers they ask for with tokio.
//!
//! JoinGroup and a follower's SyncGroup park a sender here and the handler awaits it. Protocol
//! metadata and assignment bytes are kept untouched.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_compat::error_code;
use tokio::sync::oneshot;
use tokio::time::Instant;

use onelog_state::command::GenerationOp;

mod deletion;
pub mod duties;
mod effects;
mod join;
mod messages;
mod migration;
mod rebalance;
mod state;
mod sync;
mod waiters;

pub use deletion::Subscriptions;
pub use messages::{CoordinatorConfig, GroupView, JoinRequest, JoinResult, MemberView, SyncResult};
pub use migration::Snapshot;
pub use state::GroupState;

use effects::{Effects, Timer};
use state::Groups;
use sync::SyncStep;
use waiters::Waiters;

/// What a SyncGroup comes to in the shell.
pub enum SyncOutcome {
    Answered(SyncResult),
    /// The leader member completed this generation: put it in the log, then call
    /// [`Coordinator::recorded`] (whatever happens to the request meanwhile).
    Record(GenerationOp),
}

/// The coordinator of every group while this node leads.
#[derive(Clone)]
pub struct Coordinator {
    inner: Arc<Mutex<Shared>>,
    /// The Raft term the groups were served in; another term starts from the log again.
    term: Arc<AtomicU64>,
}

/// What the mutex guards: the state machine and the senders of the requests parked in it,
/// together so that a member's flag and its sender never disagree.
struct Shared {
    groups: Groups,
    waiters: Waiters,
}

impl Shared {
    /// Answers the parked requests a transition settled (under the lock, as the state they
    /// reflect) and hands back the timers to arm once the lock is released.
    fn settle(&mut self, effects: Effects) -> Vec<Timer> {
        self.waiters.deliver(effects.replies);
        effects.timers
    }
}

/// The clock the state machine is given: tokio's, so that paused test time drives it too.
fn now() -> std::time::Instant {
    Instant::now().into_std()
}

impl Coordinator {
    pub fn new(config: CoordinatorConfig) -> Self {
        let shared = Shared { groups: Groups::new(config), waiters: Waiters::default() };
        Coordinator { inner: Arc::new(Mutex::new(shared)), term: Arc::new(AtomicU64::new(0)) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.inner.lock().expect("coordinator lock")
    }

    /// JoinGroup: answers at once with an error, or when the rebalance completes.
    pub async fn join(&self, req: JoinRequest) -> JoinResult {
        let (tx, rx) = oneshot::channel();
        let timers = {
            let mut shared = self.lock();
            let joined = match shared.groups.join(&req, now()) {
                Ok(joined) => joined,
                Err((code, member_id)) => return JoinResult::error(code, &member_id),
            };
            // Parked before the replies go out: the rebalance may complete with this join.
            shared.waiters.park_join(&req.group_id, &joined.member_id, tx);
            shared.settle(joined.effects)
        };
        self.arm(timers);
        rx.await.unwrap_or_else(|_| JoinResult::error(error_code::NOT_COORDINATOR, &req.member_id))
    }

    /// SyncGroup: the leader's carries the assignments, and its caller puts the completed
    /// generation in the log and then calls [`Self::recorded`]; everyone else's waits for that.
    pub async fn sync(
        &self,
        group_id: &str,
        generation_id: i32,
        member: (&str, Option<&str>),
        assignments: Vec<(String, Bytes)>,
    ) -> SyncOutcome {
        let (tx, rx) = oneshot::channel();
        {
            let mut shared = self.lock();
            match shared.groups.sync(group_id, generation_id, member, assignments, now()) {
                SyncStep::Answer(result) => return SyncOutcome::Answered(result),
                SyncStep::Completed(generation) => return SyncOutcome::Record(generation),
                SyncStep::Park => shared.waiters.park_sync(group_id, member.0, tx),
            }
        }
        SyncOutcome::Answered(rx.await.unwrap_or_else(|_| SyncResult::error(error_code::NOT_COORDINATOR)))
    }

    /// The generation a [`SyncOutcome::Record`] handed out is in the log (`committed`), or
    /// could not be put there: the waiting members are answered; returns the leader's answer.
    pub fn recorded(&self, generation: &GenerationOp, leader: &str, committed: bool) -> SyncResult {
        let (result, timers) = {
            let mut shared = self.lock();
            let (group_id, generation_id) = (&generation.group_id, generation.generation_id);
            let (result, effects) = shared.groups.recorded(group_id, generation_id, leader, committed);
            (result, shared.settle(effects))
        };
        self.arm(timers);
        result
    }

    /// Heartbeat: Kafka's codes for a member out of step with its group.
    pub fn heartbeat(
        &self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> i16 {
        self.lock().groups.heartbeat(group_id, generation_id, (member_id, instance_id), now())
    }

    /// LeaveGroup of one member: removed at once, and the others rebalance.
    /// KIP-345: a static member may leave by instance id alone (empty member id).
    pub fn leave(&self, group_id: &str, member_id: &str, instance_id: Option<&str>) -> i16 {
        let (code, timers) = {
            let mut shared = self.lock();
            let (code, effects) = shared.groups.leave(group_id, member_id, instance_id, now());
            (code, shared.settle(effects))
        };
        self.arm(timers);
        code
    }

    /// Removes members whose session passed without a heartbeat (members waiting in a join or
    /// sync are kept alive, as Kafka's `shouldKeepAlive`). Returns how many were removed.
    pub fn expire_sessions(&self) -> usize {
        let (removed, timers) = {
            let mut shared = self.lock();
            let (removed, effects) = shared.groups.expire_sessions(now());
            (removed, shared.settle(effects))
        };
        for (group_id, member_id) in &removed {
            tracing::info!(group = %group_id, member = %member_id, "session expired; removing member");
        }
        self.arm(timers);
        removed.len()
    }

    /// A new leader takes over a group from its last completed generation in the log: the
    /// members are known and Stable, with fresh session timers, so they keep heartbeating and
    /// committing; assignments and metadata come again with the next rebalance. A group this
    /// coordinator already knows is left alone (it is newer than the log).
    pub fn adopt(&self, record: &GenerationOp) {
        self.lock().groups.adopt(record, now());
    }

    /// Online upgrade: the live group a consumer-protocol member's join converts (see
    /// `migration`); an upgradable group adopted without its members' metadata starts a
    /// rebalance.
    pub fn snapshot(&self, group_id: &str, max_members: Option<usize>) -> Snapshot {
        let (snapshot, timers) = {
            let mut shared = self.lock();
            let mut effects = Effects::default();
            let snapshot = shared.groups.snapshot(group_id, max_members, &mut effects);
            (snapshot, shared.settle(effects))
        };
        self.arm(timers);
        snapshot
    }

    /// The upgrade is in the log: the group is a consumer group's now.
    pub fn hand_over(&self, group_id: &str) {
        let mut shared = self.lock();
        let mut effects = Effects::default();
        shared.groups.hand_over(group_id, &mut effects);
        shared.settle(effects);
    }

    /// A downgrade recorded `record`: adopt the group and rebalance it.
    pub fn adopt_downgraded(&self, record: &GenerationOp) {
        let timers = {
            let mut shared = self.lock();
            let mut effects = Effects::default();
            shared.groups.adopt_downgraded(record, now(), &mut effects);
            shared.settle(effects)
        };
        self.arm(timers);
    }

    /// Generations that completed without members (every member left or expired), for the
    /// log: otherwise a new leader would adopt the last generation's members again.
    pub fn take_empty_generations(&self) -> Vec<GenerationOp> {
        self.lock().groups.take_empty_generations()
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
        let mut shared = self.lock();
        shared.groups.clear();
        shared.waiters.clear();
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
        self.lock().groups.check_commit(group_id, generation_id, member_id, instance_id)
    }

    pub fn describe(&self, group_id: &str) -> Option<GroupView> {
        self.lock().groups.describe(group_id)
    }

    /// Every group with members: (group id, state, protocol type).
    pub fn list(&self) -> Vec<(String, GroupState, String)> {
        self.lock().groups.list()
    }

    /// Whether a classic group with members or a rebalance under way holds the id.
    pub fn holds(&self, group_id: &str) -> bool {
        self.lock().groups.holds(group_id)
    }

    /// Whether this coordinator knows the group (in any state); cheaper than `describe`.
    pub fn knows(&self, group_id: &str) -> bool {
        self.lock().groups.knows(group_id)
    }

    /// A consumer group took over the id of this Empty classic group: forget it.
    pub fn forget_empty(&self, group_id: &str) {
        self.lock().groups.forget_empty(group_id)
    }

    /// DeleteGroups, first step (see `deletion`): the generation for the log op, or the error.
    pub fn begin_delete(&self, group_id: &str, in_log: bool) -> Result<i32, i16> {
        self.lock().groups.begin_delete(group_id, in_log)
    }

    /// DeleteGroups, last step: a deleted group is forgotten; one whose deletion failed is
    /// Empty again.
    pub fn finish_delete(&self, group_id: &str, deleted: bool) {
        self.lock().groups.finish_delete(group_id, deleted)
    }

    /// OffsetDelete (KIP-496, see `deletion`): None when the coordinator does not know the
    /// group, else the error or the topics its members subscribe to.
    pub fn offset_delete_check(&self, group_id: &str) -> Option<Result<Subscriptions, i16>> {
        self.lock().groups.offset_delete_check(group_id)
    }

    /// Arms the rebalance timers a transition asked for.
    fn arm(&self, timers: Vec<Timer>) {
        for Timer { group_id, seq, after } in timers {
            self.fire_after(group_id, seq, after);
        }
    }

    fn fire_after(&self, group_id: String, seq: u64, after: Duration) {
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            this.rebalance_timer_fired(&group_id, seq);
        });
    }

    /// A rebalance timer passed: the state machine decides whether it is stale, extends the
    /// KIP-134 initial delay, or completes the join phase.
    fn rebalance_timer_fired(&self, group_id: &str, seq: u64) {
        let timers = {
            let mut shared = self.lock();
            let effects = shared.groups.rebalance_timer_fired(group_id, seq, now());
            shared.settle(effects)
        };
        self.arm(timers);
    }
}

#[cfg(test)]
mod state_tests;
#[cfg(test)]
mod tests;

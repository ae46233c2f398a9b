//! Share groups' leader memory (KIP-932): each member's session deadline and whether this
//! term already released what the previous leader's sessions held, per Raft group; the share
//! sessions of ShareFetch (`sessions`), one cache per node shared by every group's
//! coordinator. Everything else is replicated state (`onelog_state::share_group`,
//! `share_states`): a passed member deadline becomes a `FenceShareGroupMember` op, a passed
//! acquisition lock a `ShareExpireLocks` op, a closed session a `ShareRelease` op.
//!
//! Member sessions are armed as for consumer groups (`coord::consumer`, whose header says why
//! the log records liveness): a new leader arms each from the member's last recorded liveness.

pub mod duties;
pub mod remote;
pub mod sessions;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use onelog_state::command::{FenceShareMemberOp, SeenMember, ShareLivenessOp};
use onelog_state::share_group::{ShareGroups, ShareSettings};
use onelog_state::share_partition::Limits;
use tokio::time::Instant;

use super::liveness::{millis, takeover_session, Heard, MemberKey};
use sessions::SessionCache;

#[derive(Default)]
struct Memory {
    /// The term this memory belongs to: another term starts it afresh.
    term: u64,
    members: BTreeMap<MemberKey, Instant>,
    heard: Heard,
    /// This term proposed the release of what earlier terms' sessions held.
    taken_over: bool,
}

/// What the duty proposes.
#[derive(Debug, Default)]
pub struct Due {
    pub fences: Vec<FenceShareMemberOp>,
    pub liveness: Option<ShareLivenessOp>,
}

/// Shared by the share handlers and the duty.
#[derive(Clone, Default)]
pub struct ShareCoordinator {
    memory: Arc<Mutex<Memory>>,
    /// The node's share sessions (the same cache in every group's coordinator).
    pub sessions: SessionCache,
    /// Held while a new term's takeover release is proposed, so that no acquisition of this
    /// term is proposed before it.
    takeover: Arc<tokio::sync::Mutex<()>>,
}

impl ShareCoordinator {
    /// The coordinator of one Raft group, with the node's sessions.
    pub fn new(sessions: SessionCache) -> Self {
        ShareCoordinator { sessions, ..ShareCoordinator::default() }
    }

    /// After a successful heartbeat (not a leave) at `now_ms`: a new member session.
    pub fn heartbeat(&self, term: u64, group: &str, member: &str, session_ms: i32, now_ms: i64) {
        let key = (group.to_string(), member.to_string());
        let mut memory = self.lock(term);
        memory.heard.heard(key.clone(), now_ms);
        memory.members.insert(key, Instant::now() + millis(session_ms));
    }

    /// Forgets a member that left. Its share session stays until the client ends it (epoch
    /// -1) or its connection closes, as Kafka's partition leader keeps it: librdkafka sends its
    /// final acknowledgements after the leave.
    pub fn left(&self, term: u64, group: &str, member: &str) {
        let key = (group.to_string(), member.to_string());
        let mut memory = self.lock(term);
        memory.members.remove(&key);
        memory.heard.forget(&key);
    }

    /// Runs `release` once per term, before this term's first acquisition: the sessions of
    /// earlier terms are gone, so what they held is released (`ShareRelease` of every member).
    /// Another caller waits until it is done.
    pub async fn take_over<F, Fut>(&self, term: u64, release: F)
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        if self.lock(term).taken_over {
            return;
        }
        let _guard = self.takeover.lock().await;
        if self.lock(term).taken_over {
            return;
        }
        if release().await {
            self.lock(term).taken_over = true;
        }
    }

    /// The fences and liveness due now (`now_ms`: the wall clock), given the applied groups,
    /// each group's settings and limits.
    pub fn due(
        &self,
        term: u64,
        groups: &ShareGroups,
        settings: impl Fn(&str) -> (ShareSettings, Limits),
        now_ms: i64,
    ) -> Due {
        let now = Instant::now();
        let by_group: BTreeMap<&str, (ShareSettings, Limits)> =
            groups.groups.keys().map(|g| (g.as_str(), settings(g))).collect();
        let mut memory = self.lock(term);
        let mut due = Due::default();
        let mut live = BTreeMap::new();
        let mut seen = Vec::new();
        for timers in groups.timers() {
            let key = (timers.group_id.clone(), timers.member_id.clone());
            let Some((s, limits)) = by_group.get(timers.group_id.as_str()) else { continue };
            let mut deadline = memory.members.get(&key).copied().unwrap_or_else(|| {
                now + takeover_session(
                    timers.last_seen_ms,
                    s.session_timeout_ms,
                    s.heartbeat_interval_ms,
                    now_ms,
                )
            });
            if deadline <= now {
                // Proposed once; looked at again a session later if the member is still there.
                deadline = now + millis(s.session_timeout_ms);
                self.sessions.with(|s| s.close(&key));
                let (group_id, member_id) = key.clone();
                due.fences.push(FenceShareMemberOp { group_id, member_id, limits: *limits });
            }
            if let Some(seen_ms) = memory.heard.due(&key, timers.last_seen_ms) {
                seen.push(SeenMember { group_id: key.0.clone(), member_id: key.1.clone(), seen_ms });
            }
            live.insert(key, deadline);
        }
        let proposed = seen.iter().map(|m| ((m.group_id.clone(), m.member_id.clone()), m.seen_ms));
        memory.heard.settle(&live.keys().collect(), proposed);
        memory.members = live;
        due.liveness = (!seen.is_empty()).then_some(ShareLivenessOp { members: seen });
        due
    }

    fn lock(&self, term: u64) -> std::sync::MutexGuard<'_, Memory> {
        // Deadlines and sessions only; a panic elsewhere cannot leave them half-updated.
        let mut memory = self.memory.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if memory.term != term {
            *memory = Memory { term, ..Memory::default() };
        }
        memory
    }
}

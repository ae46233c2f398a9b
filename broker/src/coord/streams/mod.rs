//! The Streams groups' clocks on the leader: each member's session deadline, its revocation
//! deadline while it gives up tasks, and each group's next target assignment when the
//! initial rebalance delay or the assignment interval held one back. Everything else about a
//! Streams group is replicated state (`onelog_state::streams_group`); a passed deadline
//! becomes a `FenceStreamsGroupMember` op and a due assignment a `StreamsGroupAssign` op.
//!
//! As for consumer groups (`coord::consumer`, whose header explains why), the log knows when
//! each member was last heard from, and a new leader arms each session from there, with at
//! least `CONSUMER_TAKEOVER_GRACE_HEARTBEATS` heartbeat intervals.

pub mod duties;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use onelog_state::command::{FenceStreamsMemberOp, SeenMember, StreamsLivenessOp};
use onelog_state::consumer_group::RevocationTimer;
use onelog_state::streams_group::{StreamsGroups, StreamsSettings};
use tokio::time::Instant;

use super::liveness::{millis, takeover_session, Heard, MemberKey};

#[derive(Debug, Clone, Copy)]
struct Deadlines {
    session: Instant,
    /// The revocation deadline and the member epoch it was armed at.
    revocation: Option<(Instant, i32)>,
}

#[derive(Default)]
struct Sessions {
    /// The term these deadlines were armed in: another term starts them afresh.
    term: u64,
    members: BTreeMap<MemberKey, Deadlines>,
    heard: Heard,
}

/// What the duty proposes.
#[derive(Debug, Default)]
pub struct Due {
    pub fences: Vec<FenceStreamsMemberOp>,
    pub liveness: Option<StreamsLivenessOp>,
    /// Groups whose target assignment is due now.
    pub assignments: Vec<String>,
}

/// Shared by the heartbeat handler (which re-arms) and the duty (which fences and assigns).
#[derive(Clone, Default)]
pub struct StreamsCoordinator {
    sessions: Arc<Mutex<Sessions>>,
}

impl StreamsCoordinator {
    /// After a successful heartbeat (not a leave) at `now_ms`: a new session, and the
    /// revocation timer as the heartbeat's reconciliation asked.
    pub fn heartbeat(&self, group: &str, member: &str, session_ms: i32, timer: RevocationTimer, now_ms: i64) {
        let now = Instant::now();
        let key = (group.to_string(), member.to_string());
        let mut sessions = self.lock();
        sessions.heard.heard(key.clone(), now_ms);
        let entry = sessions.members.entry(key).or_insert(Deadlines { session: now, revocation: None });
        entry.session = now + millis(session_ms);
        match timer {
            RevocationTimer::Keep => {}
            RevocationTimer::Cancel => entry.revocation = None,
            RevocationTimer::Arm(d) => {
                entry.revocation = Some((now + millis(d.rebalance_timeout_ms), d.member_epoch))
            }
        }
    }

    /// Forgets a member that left.
    pub fn left(&self, group: &str, member: &str) {
        let key = (group.to_string(), member.to_string());
        let mut sessions = self.lock();
        sessions.members.remove(&key);
        sessions.heard.forget(&key);
    }

    /// The fences, liveness and assignments due now (`now_ms`: the wall clock), given the
    /// applied groups and each group's settings.
    pub fn due(
        &self,
        term: u64,
        groups: &StreamsGroups,
        settings: impl Fn(&str) -> StreamsSettings,
        now_ms: i64,
    ) -> Due {
        let now = Instant::now();
        let by_group: BTreeMap<&str, StreamsSettings> =
            groups.groups.keys().map(|g| (g.as_str(), settings(g))).collect();
        let mut due = Due::default();
        for (id, group) in &groups.groups {
            let at = by_group.get(id.as_str()).and_then(|s| group.assignment_due_at(s));
            if at.is_some_and(|at| at <= now_ms) {
                due.assignments.push(id.clone());
            }
        }
        let mut sessions = self.lock();
        if sessions.term != term {
            *sessions = Sessions { term, ..Sessions::default() };
        }
        let mut live = BTreeMap::new();
        let mut seen = Vec::new();
        for timers in groups.timers() {
            let key = (timers.group_id.clone(), timers.member_id.clone());
            let Some(s) = by_group.get(timers.group_id.as_str()) else { continue };
            let mut armed = sessions.members.get(&key).copied().unwrap_or_else(|| Deadlines {
                session: now
                    + takeover_session(
                        timers.last_seen_ms,
                        s.session_timeout_ms,
                        s.heartbeat_interval_ms,
                        now_ms,
                    ),
                revocation: timers.revoking.map(|(ms, epoch)| (now + millis(ms), epoch)),
            });
            if let Some(fence) = fence_due(&key, &armed, now) {
                // Proposed once; looked at again a session later if the member is still there.
                armed = Deadlines { session: now + millis(s.session_timeout_ms), revocation: None };
                due.fences.push(fence);
            }
            if let Some(seen_ms) = sessions.heard.due(&key, timers.last_seen_ms) {
                seen.push(SeenMember { group_id: key.0.clone(), member_id: key.1.clone(), seen_ms });
            }
            live.insert(key, armed);
        }
        let proposed = seen.iter().map(|m| ((m.group_id.clone(), m.member_id.clone()), m.seen_ms));
        sessions.heard.settle(&live.keys().collect(), proposed);
        sessions.members = live;
        due.liveness = (!seen.is_empty()).then_some(StreamsLivenessOp { members: seen });
        due
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sessions> {
        // The map holds deadlines only; a panic elsewhere cannot leave it half-updated.
        self.sessions.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn fence_due(key: &MemberKey, armed: &Deadlines, now: Instant) -> Option<FenceStreamsMemberOp> {
    let (group_id, member_id) = key.clone();
    let fence = |expected_epoch| Some(FenceStreamsMemberOp { group_id, member_id, expected_epoch });
    if armed.session <= now {
        return fence(None);
    }
    match armed.revocation {
        Some((deadline, epoch)) if deadline <= now => fence(Some(epoch)),
        _ => None,
    }
}

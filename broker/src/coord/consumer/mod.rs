//! The KIP-848 consumer groups' clocks on the leader: each member's session deadline and,
//! while it revokes partitions, its revocation deadline (Kafka's session and rebalance
//! timers). Everything else about a consumer group is replicated state
//! (`onelog_state::consumer_group`); these deadlines are not, as DESIGN §9 has it: a new leader
//! gives every member a full session from when it took over, as a Kafka coordinator does when
//! it loads a group, and a passed deadline becomes a `FenceConsumerGroupMember` op.

pub mod duties;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use onelog_state::command::FenceMemberOp;
use onelog_state::consumer_group::{ConsumerGroups, RevocationTimer};
use tokio::time::Instant;

/// A member's deadlines, as this leader armed them.
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
    members: BTreeMap<(String, String), Deadlines>,
}

/// Shared by the heartbeat handler (which re-arms) and the duty (which fences).
#[derive(Clone, Default)]
pub struct ConsumerCoordinator {
    sessions: Arc<Mutex<Sessions>>,
}

impl ConsumerCoordinator {
    /// After a successful heartbeat (not a leave): a new session, and the revocation timer as
    /// the heartbeat's reconciliation asked.
    pub fn heartbeat(&self, group: &str, member: &str, session_ms: i32, timer: RevocationTimer) {
        let now = Instant::now();
        let mut sessions = self.lock();
        let entry = sessions
            .members
            .entry((group.to_string(), member.to_string()))
            .or_insert(Deadlines { session: now, revocation: None });
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
        self.lock().members.remove(&(group.to_string(), member.to_string()));
    }

    /// The fences due now, given the applied groups and each group's session timeout.
    /// Members this leader has not armed yet (it just took over, or they joined through
    /// another leader's entry) get full timers from now; members no longer in the state are
    /// forgotten.
    pub fn due(
        &self,
        term: u64,
        groups: &ConsumerGroups,
        session_timeout_ms: impl Fn(&str) -> i32,
    ) -> Vec<FenceMemberOp> {
        let now = Instant::now();
        let mut sessions = self.lock();
        if sessions.term != term {
            *sessions = Sessions { term, members: BTreeMap::new() };
        }
        let mut live = BTreeMap::new();
        let mut due = Vec::new();
        for timers in groups.timers(session_timeout_ms) {
            let key = (timers.group_id.clone(), timers.member_id.clone());
            let session = now + millis(timers.session_timeout_ms);
            let mut armed = sessions.members.get(&key).copied().unwrap_or(Deadlines {
                session,
                revocation: timers.revocation.map(|r| (now + millis(r.rebalance_timeout_ms), r.member_epoch)),
            });
            if let Some(fence) = fence_due(&key, &armed, now) {
                // Proposed once: if the member is still there a session later (the op was
                // lost with leadership, or it had moved past the epoch), it is looked at again.
                armed = Deadlines { session, revocation: None };
                due.push(fence);
            }
            live.insert(key, armed);
        }
        sessions.members = live;
        due
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sessions> {
        // The map holds deadlines only; a panic elsewhere cannot leave it half-updated.
        self.sessions.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn fence_due(key: &(String, String), armed: &Deadlines, now: Instant) -> Option<FenceMemberOp> {
    let (group_id, member_id) = key.clone();
    if armed.session <= now {
        return Some(FenceMemberOp { group_id, member_id, expected_epoch: None });
    }
    match armed.revocation {
        Some((deadline, epoch)) if deadline <= now => {
            Some(FenceMemberOp { group_id, member_id, expected_epoch: Some(epoch) })
        }
        _ => None,
    }
}

fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

//! The KIP-848 consumer groups' clocks on the leader: each member's session deadline and,
//! while it revokes partitions, its revocation deadline (Kafka's session and rebalance
//! timers). Everything else about a consumer group is replicated state
//! (`onelog_state::consumer_group`); these deadlines are the leader's memory, and a passed one
//! becomes a `FenceConsumerGroupMember` op.
//!
//! A Kafka coordinator that loads a group gives every member a full session. Under leaders
//! that change more often than once per session, a member that died without leaving would
//! then never be fenced, and its target partitions would wait for it forever (the chaos
//! copier stalled that way). So the log also knows when each member was last heard from
//! (`Member::last_seen_ms`: its last heartbeat that changed the group, and the leader's
//! `RecordConsumerLiveness` entries, written at most every `CONSUMER_LIVENESS_RECORD_MS` for
//! members whose steady heartbeats wrote nothing), and a new leader arms each session from
//! there: what is left of it, but at least `CONSUMER_TAKEOVER_GRACE_HEARTBEATS` heartbeat
//! intervals, the time a live member needs to find the new leader.

pub mod duties;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use onelog_state::command::{FenceMemberOp, LivenessOp, SeenMember};
use onelog_state::consumer_group::{ConsumerGroups, MemberTimers, Migration, RevocationTimer};
use tokio::time::Instant;

use super::liveness::{millis, takeover_session, Heard, MemberKey};

/// A member's deadlines, as this leader armed them.
#[derive(Debug, Clone, Copy)]
struct Deadlines {
    session: Instant,
    /// The revocation deadline and the member epoch it was armed at.
    revocation: Option<(Instant, i32)>,
    /// A classic member's sync deadline (from its JoinGroup) or join deadline (from a
    /// REBALANCE_IN_PROGRESS answer): Kafka's sync and join timeouts, a rebalance timeout each.
    classic: Option<Instant>,
}

#[derive(Default)]
struct Sessions {
    /// The term these deadlines were armed in: another term starts them afresh.
    term: u64,
    members: BTreeMap<MemberKey, Deadlines>,
    heard: Heard,
}

/// A group's session timeout and heartbeat interval (ms), with its own configs applied.
#[derive(Debug, Clone, Copy)]
pub struct GroupTimes {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
}

/// What the duty proposes: fences, and the liveness the log does not know yet.
#[derive(Debug, Default)]
pub struct Due {
    pub fences: Vec<FenceMemberOp>,
    pub liveness: Option<LivenessOp>,
}

/// Shared by the heartbeat handler (which re-arms) and the duty (which fences).
#[derive(Clone, Default)]
pub struct ConsumerCoordinator {
    sessions: Arc<Mutex<Sessions>>,
}

impl ConsumerCoordinator {
    /// After a successful heartbeat (not a leave) at `now_ms` (wall clock): a new session, and
    /// the revocation timer as the heartbeat's reconciliation asked.
    pub fn heartbeat(&self, group: &str, member: &str, session_ms: i32, timer: RevocationTimer, now_ms: i64) {
        self.heard((group, member), session_ms, timer, now_ms, |_, _| {});
    }

    /// A classic member's JoinGroup (online migration) at `now_ms`: its session, its
    /// revocation timer as for a heartbeat, and a sync deadline of its rebalance timeout in
    /// place of any join deadline.
    pub fn classic_joined(
        &self,
        key: (&str, &str),
        timeouts: (i32, i32),
        timer: RevocationTimer,
        now_ms: i64,
    ) {
        let (session_ms, rebalance_ms) = timeouts;
        self.heard(key, session_ms, timer, now_ms, |d, now| d.classic = Some(now + millis(rebalance_ms)));
    }

    /// A classic member's SyncGroup or Heartbeat was answered at `now_ms`: a new session;
    /// `synced` ends the sync (or join) deadline, `rejoin` (a REBALANCE_IN_PROGRESS answer)
    /// arms a join deadline of that many ms unless one is armed.
    pub fn classic_seen(
        &self,
        key: (&str, &str),
        session_ms: i32,
        synced: bool,
        rejoin: Option<i32>,
        now_ms: i64,
    ) {
        self.heard(key, session_ms, RevocationTimer::Keep, now_ms, |d, now| {
            if synced {
                d.classic = None;
            }
            if let Some(rebalance_ms) = rejoin {
                d.classic.get_or_insert(now + millis(rebalance_ms));
            }
        });
    }

    /// The member was heard from at `now_ms`: a new session, the revocation timer as asked,
    /// then `more` on its deadlines, all under one lock.
    fn heard(
        &self,
        (group, member): (&str, &str),
        session_ms: i32,
        timer: RevocationTimer,
        now_ms: i64,
        more: impl FnOnce(&mut Deadlines, Instant),
    ) {
        let now = Instant::now();
        let key = (group.to_string(), member.to_string());
        let mut sessions = self.lock();
        sessions.heard.heard(key.clone(), now_ms);
        let entry = sessions.members.entry(key).or_insert(Deadlines {
            session: now,
            revocation: None,
            classic: None,
        });
        entry.session = now + millis(session_ms);
        match timer {
            RevocationTimer::Keep => {}
            RevocationTimer::Cancel => entry.revocation = None,
            RevocationTimer::Arm(d) => {
                entry.revocation = Some((now + millis(d.rebalance_timeout_ms), d.member_epoch))
            }
        }
        more(entry, now);
    }

    /// Forgets a member that left.
    pub fn left(&self, group: &str, member: &str) {
        let key = (group.to_string(), member.to_string());
        let mut sessions = self.lock();
        sessions.members.remove(&key);
        sessions.heard.forget(&key);
    }

    /// The fences due now (`now_ms`: the wall clock), given the applied groups and each
    /// group's times, and the liveness to record. Members this leader has not armed yet (it
    /// just took over, or they joined through another leader's entry) get a session from
    /// their last recorded liveness (see the module header) and a full revocation timer;
    /// members no longer in the state are forgotten.
    pub fn due(
        &self,
        term: u64,
        groups: &ConsumerGroups,
        times: impl Fn(&str) -> GroupTimes,
        migration: Migration,
        now_ms: i64,
    ) -> Due {
        let now = Instant::now();
        let mut sessions = self.lock();
        if sessions.term != term {
            *sessions = Sessions { term, ..Sessions::default() };
        }
        let mut live = BTreeMap::new();
        let mut due = Due::default();
        let mut seen = Vec::new();
        // Each group's times once per tick, not once per member (its configs are parsed).
        let by_group: BTreeMap<&str, GroupTimes> =
            groups.groups.keys().map(|g| (g.as_str(), times(g))).collect();
        // `timers` yields members of these groups only.
        let times_of = |group: &str| by_group.get(group).copied().unwrap_or_else(|| times(group));
        for timers in groups.timers(|group| times_of(group).session_timeout_ms) {
            let key = (timers.group_id.clone(), timers.member_id.clone());
            let group_times = times_of(&timers.group_id);
            let mut armed = sessions.members.get(&key).copied().unwrap_or_else(|| Deadlines {
                session: now + takeover(&timers, group_times, now_ms),
                revocation: timers.revocation.map(|r| (now + millis(r.rebalance_timeout_ms), r.member_epoch)),
                classic: None,
            });
            if let Some(fence) = fence_due(&key, &armed, now, migration) {
                // Proposed once: if the member is still there a session later (the op was
                // lost with leadership, or it had moved past the epoch), it is looked at again.
                armed = Deadlines {
                    session: now + millis(timers.session_timeout_ms),
                    revocation: None,
                    classic: None,
                };
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
        due.liveness = (!seen.is_empty()).then_some(LivenessOp { members: seen });
        due
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sessions> {
        // The map holds deadlines only; a panic elsewhere cannot leave it half-updated.
        self.sessions.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// What is left of a member's session when a leader takes it over (`liveness`).
fn takeover(timers: &MemberTimers, times: GroupTimes, now_ms: i64) -> Duration {
    takeover_session(timers.last_seen_ms, timers.session_timeout_ms, times.heartbeat_interval_ms, now_ms)
}

fn fence_due(
    key: &MemberKey,
    armed: &Deadlines,
    now: Instant,
    migration: Migration,
) -> Option<FenceMemberOp> {
    let (group_id, member_id) = key.clone();
    let fence = |expected_epoch| Some(FenceMemberOp { group_id, member_id, expected_epoch, migration });
    if armed.session <= now || armed.classic.is_some_and(|deadline| deadline <= now) {
        return fence(None);
    }
    match armed.revocation {
        Some((deadline, epoch)) if deadline <= now => fence(Some(epoch)),
        _ => None,
    }
}

#[cfg(test)]
mod tests;

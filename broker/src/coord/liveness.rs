//! What the KIP-848 and Streams group coordinators share about their members' clocks on the
//! leader: when this leader last heard from each member and what of that it proposed, which
//! liveness the log does not know yet, and how much of a session is left when a leader takes
//! a member over (`coord::consumer`'s header says why the log records liveness at all).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::limits;

/// (group id, member id).
pub type MemberKey = (String, String);

/// When this leader heard from members, and the liveness it proposed for them.
#[derive(Default)]
pub struct Heard {
    /// When this leader last heard from each member (wall clock, ms).
    heard_ms: BTreeMap<MemberKey, i64>,
    /// The liveness this leader proposed, so it is not proposed again before it applies.
    recorded_ms: BTreeMap<MemberKey, i64>,
}

impl Heard {
    pub fn heard(&mut self, key: MemberKey, now_ms: i64) {
        self.heard_ms.insert(key, now_ms);
    }

    pub fn forget(&mut self, key: &MemberKey) {
        self.heard_ms.remove(key);
        self.recorded_ms.remove(key);
    }

    /// When this leader heard from the member, if the log's record of it (or what this leader
    /// already proposed) is more than `CONSUMER_LIVENESS_RECORD_MS` older.
    pub fn due(&self, key: &MemberKey, last_seen_ms: i64) -> Option<i64> {
        let heard = *self.heard_ms.get(key)?;
        let known = last_seen_ms.max(self.recorded_ms.get(key).copied().unwrap_or(0));
        (heard - known >= limits::CONSUMER_LIVENESS_RECORD_MS).then_some(heard)
    }

    /// Keeps only the members still in the state, and notes the liveness about to be proposed.
    pub fn settle(&mut self, live: &BTreeSet<&MemberKey>, proposed: impl Iterator<Item = (MemberKey, i64)>) {
        self.heard_ms.retain(|key, _| live.contains(key));
        self.recorded_ms.retain(|key, _| live.contains(key));
        self.recorded_ms.extend(proposed);
    }
}

/// What is left of a member's session when a leader takes it over: from its last recorded
/// liveness, at least `CONSUMER_TAKEOVER_GRACE_HEARTBEATS` heartbeat intervals, at most a
/// full session (a member never recorded gets one).
pub fn takeover_session(last_seen_ms: i64, session_ms: i32, heartbeat_ms: i32, now_ms: i64) -> Duration {
    let full = i64::from(session_ms);
    if last_seen_ms <= 0 {
        return millis(session_ms);
    }
    let grace = i64::from(heartbeat_ms) * limits::CONSUMER_TAKEOVER_GRACE_HEARTBEATS;
    let left = (last_seen_ms + full - now_ms).clamp(grace.min(full), full);
    Duration::from_millis(u64::try_from(left).unwrap_or(0))
}

pub fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

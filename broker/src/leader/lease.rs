//! The leader's read lease: whether a quorum acknowledged this node as leader recently
//! enough that no newer leader can exist (Raft §9's lease reads, with a pause detector).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// When this node last heard from a quorum as leader. A leader that was paused (SIGSTOP, a
/// long GC-like stall) may not know it was deposed; it serves reads only while a quorum
/// acknowledged it within the lease, shorter than the election timeout, so it can never serve
/// a read older than what a newer leader has acknowledged.
///
/// openraft's metrics carry no timestamp, so a value published just before a pause and read
/// just after it would look fresh. A pause is visible as a scheduling gap, though: after one,
/// the lease is `suspect` and reads are refused until a quorum round (ReadIndex) confirms
/// this node still leads.
pub struct LeaderLease {
    start: Instant,
    /// Milliseconds since `start` of the last quorum acknowledgement; u64::MAX: never.
    acked_at_ms: AtomicU64,
    suspect: AtomicBool,
    /// Milliseconds since `start` of the pause watcher's last wake-up: if it is late, this
    /// process may just have been resumed and the watcher has not yet noticed.
    tick_ms: AtomicU64,
    /// Milliseconds since `start` at which this node was seen to become leader (a quorum had
    /// just voted for it); u64::MAX while it does not lead.
    leader_since_ms: AtomicU64,
}

impl Default for LeaderLease {
    fn default() -> Self {
        LeaderLease {
            start: Instant::now(),
            acked_at_ms: AtomicU64::new(u64::MAX),
            suspect: AtomicBool::new(false),
            tick_ms: AtomicU64::new(0),
            leader_since_ms: AtomicU64::new(u64::MAX),
        }
    }
}

impl LeaderLease {
    /// Records openraft's `millis_since_quorum_ack` as seen now.
    pub fn observe(&self, millis_since_quorum_ack: Option<u64>) {
        let now = self.start.elapsed().as_millis() as u64;
        let at = millis_since_quorum_ack.map_or(u64::MAX, |ago| now.saturating_sub(ago));
        self.acked_at_ms.store(at, Ordering::Relaxed);
    }

    /// Whether this node leads now (`watch_raft` calls it on every metrics change): a new
    /// leader counts its election as a quorum's acknowledgement for check-quorum.
    pub fn set_leading(&self, leading: bool) {
        let since = self.leader_since_ms.load(Ordering::Relaxed);
        if leading && since == u64::MAX {
            self.leader_since_ms.store(self.now_ms(), Ordering::Relaxed);
        } else if !leading && since != u64::MAX {
            self.leader_since_ms.store(u64::MAX, Ordering::Relaxed);
        }
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// The pause watcher's heartbeat.
    pub fn tick(&self) {
        self.tick_ms.store(self.now_ms(), Ordering::SeqCst);
    }

    /// Called after the process did not run for a while (see `leader::duties::watch_pauses`).
    pub fn suspect(&self) {
        self.suspect.store(true, Ordering::SeqCst);
    }

    pub fn is_suspect(&self) -> bool {
        self.suspect.load(Ordering::SeqCst)
    }

    /// Called once a quorum round confirmed leadership after the gap.
    pub fn confirm(&self) {
        self.suspect.store(false, Ordering::SeqCst);
    }

    /// Whether the last quorum acknowledgement seen, or the election that made this node
    /// leader, is younger than `ms` (check-quorum, see `Leadership::leader_id`); no pause
    /// detection. Regression: a leader fresh from a whole-cluster restart had no
    /// acknowledgement in openraft's metrics yet and named no leader in Metadata for a moment,
    /// and a client asking right then got "unknown partition" (disk_footprint in CI).
    pub fn quorum_acked_within_ms(&self, ms: u64) -> bool {
        let acked = self.acked_at_ms.load(Ordering::Relaxed);
        let elected = self.leader_since_ms.load(Ordering::Relaxed);
        let last = [acked, elected].into_iter().filter(|at| *at != u64::MAX).max();
        last.is_some_and(|at| self.now_ms().saturating_sub(at) < ms)
    }

    pub fn is_valid(&self) -> bool {
        // Tests: a leader whose lease never holds, as on a machine too busy to keep it.
        if crate::fault::flag("lease.lapsed") {
            return false;
        }
        let watcher_late = self.now_ms().saturating_sub(self.tick_ms.load(Ordering::SeqCst))
            > crate::limits::PAUSE_CHECK_INTERVAL_MS + crate::limits::PAUSE_GAP_MS;
        if self.is_suspect() || watcher_late {
            return false;
        }
        let at = self.acked_at_ms.load(Ordering::Relaxed);
        at != u64::MAX
            && (self.start.elapsed().as_millis() as u64).saturating_sub(at) < crate::limits::LEADER_LEASE_MS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new leader is heard from for check-quorum from its election on, before openraft
    /// reports any acknowledgement; it stops being so once it no longer leads.
    #[test]
    fn a_new_leader_counts_its_election_as_heard() {
        let lease = LeaderLease::default();
        assert!(!lease.quorum_acked_within_ms(600), "not leading, nothing acknowledged");
        lease.set_leading(true);
        assert!(lease.quorum_acked_within_ms(600), "just elected");
        assert!(!lease.quorum_acked_within_ms(0));
        lease.set_leading(false);
        assert!(!lease.quorum_acked_within_ms(600), "no longer leads");
        lease.observe(Some(0));
        assert!(lease.quorum_acked_within_ms(600), "an acknowledgement counts as before");
    }
}

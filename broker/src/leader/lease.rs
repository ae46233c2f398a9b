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
}

impl Default for LeaderLease {
    fn default() -> Self {
        LeaderLease {
            start: Instant::now(),
            acked_at_ms: AtomicU64::new(u64::MAX),
            suspect: AtomicBool::new(false),
            tick_ms: AtomicU64::new(0),
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

    /// Whether the last quorum acknowledgement seen is younger than `ms` (check-quorum, see
    /// `Leadership::leader_id`); no pause detection.
    pub fn quorum_acked_within_ms(&self, ms: u64) -> bool {
        let at = self.acked_at_ms.load(Ordering::Relaxed);
        at != u64::MAX && self.now_ms().saturating_sub(at) < ms
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

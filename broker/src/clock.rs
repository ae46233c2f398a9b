//! The wall clock, in one place. Who may read it is in docs/ARCHITECTURE.md ("What may touch
//! what"): the proposer, once per entry (the entry's `LeaderStamp`, the only time that reaches
//! the log), and the coordinators and duties for what is due on the leader. Handlers and the
//! state machine never read it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn wall_clock_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

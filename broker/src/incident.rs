//! A kind of incident, counted and logged at a bounded rate: the counter for `GET /status`,
//! and at most one log line per `INCIDENT_LOG_INTERVAL_MS`, which says how many of its kind
//! were not logged since the previous one (the listener's malformed frames, `net::incidents`;
//! writes refused for disk space, `storage::free_space`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::limits::INCIDENT_LOG_INTERVAL_MS;

/// One kind of incident: its count and when it last logged.
pub struct Incident {
    total: AtomicU64,
    window: Mutex<Window>,
}

struct Window {
    last_logged: Option<Instant>,
    suppressed: u64,
}

/// What a logged line reports besides the incident itself.
#[derive(Debug, Clone, Copy)]
pub struct Tally {
    /// Incidents of this kind not logged since the previous line.
    pub suppressed: u64,
    /// Incidents of this kind since the process started, this one included.
    pub total: u64,
}

impl Incident {
    pub const fn new() -> Self {
        Incident { total: AtomicU64::new(0), window: Mutex::new(Window { last_logged: None, suppressed: 0 }) }
    }

    /// Counts one incident and calls `log` if this kind has not logged for an interval.
    pub fn record(&self, log: impl FnOnce(Tally)) {
        let total = self.total.fetch_add(1, Ordering::Relaxed) + 1;
        let now = Instant::now();
        let interval = Duration::from_millis(INCIDENT_LOG_INTERVAL_MS);
        let suppressed = {
            // A poisoned lock only means a logging closure panicked; the window stays usable.
            let mut window = self.window.lock().unwrap_or_else(|e| e.into_inner());
            if window.last_logged.is_some_and(|at| now.duration_since(at) < interval) {
                window.suppressed += 1;
                return;
            }
            window.last_logged = Some(now);
            std::mem::take(&mut window.suppressed)
        };
        log(Tally { suppressed, total });
    }

    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
}

impl Default for Incident {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn logs_once_per_interval_and_reports_what_it_suppressed() {
        let incident = Incident::new();
        let mut lines = Vec::new();
        for _ in 0..1_000 {
            incident.record(|t| lines.push(t));
        }
        tokio::time::advance(Duration::from_millis(INCIDENT_LOG_INTERVAL_MS)).await;
        incident.record(|t| lines.push(t));
        assert_eq!(incident.total(), 1_001);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!((lines[0].suppressed, lines[0].total), (0, 1));
        assert_eq!((lines[1].suppressed, lines[1].total), (999, 1_001));
    }
}

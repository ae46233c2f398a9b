//! What clients do wrong on the Kafka listener, counted and logged at a bounded rate.
//!
//! A fuzzer or a broken client can send thousands of malformed frames a second; one WARN line
//! each once filled the log (6,939 lines from one fuzz run, issue 13). Each kind of incident
//! has a counter, reported by the admin API's `GET /status` (`kafka_listener`), and logs at
//! most one line per `INCIDENT_LOG_INTERVAL_MS`; that line says how many of its kind were
//! not logged since the previous one. The counters are process-wide statics because the admin
//! API starts before the listener exists and a process runs one Kafka listener.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};
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
    const fn new() -> Self {
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

/// The listener's incidents and gauges.
pub struct ListenerStats {
    /// Frames with a bad length prefix, an unknown api key, a version not served, or a body
    /// that does not decode: the connection is closed.
    pub malformed_requests: Incident,
    /// Requests whose handler returned an error instead of a response: the connection is closed.
    pub request_failures: Incident,
    /// Handler tasks that panicked (a bug; the connection is closed, the node keeps running).
    pub handler_panics: Incident,
    /// Frames not complete within the request read timeout (`onelog.request.read.timeout.ms`).
    pub frame_read_timeouts: Incident,
    /// Connections closed after `connections.max.idle.ms` without a request in flight.
    pub idle_connections_closed: Incident,
    /// Connections closed at once for `max.connections` or `max.connections.per.ip`.
    pub connections_refused: Incident,
    /// Failed accepts (out of file descriptors, aborted handshakes).
    pub accept_errors: Incident,
    /// Client connections open now.
    pub connections_open: AtomicU64,
    /// Bytes of request memory (`queued.max.request.bytes`) reserved now.
    pub request_memory_bytes: AtomicU64,
}

pub static STATS: ListenerStats = ListenerStats {
    malformed_requests: Incident::new(),
    request_failures: Incident::new(),
    handler_panics: Incident::new(),
    frame_read_timeouts: Incident::new(),
    idle_connections_closed: Incident::new(),
    connections_refused: Incident::new(),
    accept_errors: Incident::new(),
    connections_open: AtomicU64::new(0),
    request_memory_bytes: AtomicU64::new(0),
};

impl ListenerStats {
    /// The `kafka_listener` object of `GET /status`.
    pub fn to_json(&self) -> Value {
        json!({
            "malformed_requests": self.malformed_requests.total(),
            "request_failures": self.request_failures.total(),
            "handler_panics": self.handler_panics.total(),
            "frame_read_timeouts": self.frame_read_timeouts.total(),
            "idle_connections_closed": self.idle_connections_closed.total(),
            "connections_refused": self.connections_refused.total(),
            "accept_errors": self.accept_errors.total(),
            "connections_open": self.connections_open.load(Ordering::Relaxed),
            "request_memory_bytes": self.request_memory_bytes.load(Ordering::Relaxed),
        })
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

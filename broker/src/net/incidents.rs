//! What clients do wrong on the Kafka listener, counted and logged at a bounded rate.
//!
//! A fuzzer or a broken client can send thousands of malformed frames a second; one WARN line
//! each once filled the log (6,939 lines from one fuzz run, issue 13). Each kind of incident
//! is an `incident::Incident` (a counter and a rate-limited log line), reported by the admin
//! API's `GET /status` (`kafka_listener`). The counters are process-wide statics because the admin
//! API starts before the listener exists and a process's listeners share them.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use crate::incident::{Incident, Tally};
use crate::limits::{ADDRESS_INCIDENT_LOG_INTERVAL_MS, INCIDENT_ADDRESSES_MAX};

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
    /// Connections closed after a Metadata or FindCoordinator response because this node is cut off from the quorum
    /// (`Leadership::is_cut_off`).
    pub cut_off_closes: Incident,
    /// SASL connections closed for a request out of turn, a malformed exchange, an expired
    /// session, or a failed legacy (v0) login.
    pub sasl_state_closes: Incident,
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
    cut_off_closes: Incident::new(),
    sasl_state_closes: Incident::new(),
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
            "cut_off_closes": self.cut_off_closes.total(),
            "sasl_state_closes": self.sasl_state_closes.total(),
            "connections_open": self.connections_open.load(Ordering::Relaxed),
            "request_memory_bytes": self.request_memory_bytes.load(Ordering::Relaxed),
            "tls_handshake_failures": ADDRESS_STATS.tls_handshake_failures.total(),
            "sasl_authentication_failures": ADDRESS_STATS.sasl_failures.total(),
        })
    }
}

/// An incident logged at most once per client address per interval: a client retrying a
/// failing TLS handshake or login is one line a minute, and another client's first failure
/// still shows.
pub struct AddressIncident {
    total: AtomicU64,
    last_logged: Mutex<BTreeMap<IpAddr, (Instant, u64)>>,
}

impl AddressIncident {
    pub const fn new() -> Self {
        AddressIncident { total: AtomicU64::new(0), last_logged: Mutex::new(BTreeMap::new()) }
    }

    /// Counts one incident from `ip` and calls `log` unless `ip` logged one within the interval.
    pub fn record(&self, ip: IpAddr, log: impl FnOnce(Tally)) {
        let total = self.total.fetch_add(1, Ordering::Relaxed) + 1;
        let now = Instant::now();
        let interval = Duration::from_millis(ADDRESS_INCIDENT_LOG_INTERVAL_MS);
        let suppressed = {
            let mut last = self.last_logged.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((at, suppressed)) = last.get_mut(&ip) {
                if now.duration_since(*at) < interval {
                    *suppressed += 1;
                    return;
                }
            }
            if last.len() >= INCIDENT_ADDRESSES_MAX {
                last.retain(|_, (at, _)| now.duration_since(*at) < interval);
                if last.len() >= INCIDENT_ADDRESSES_MAX {
                    // Too many addresses failing at once: count, do not log each.
                    return;
                }
            }
            last.insert(ip, (now, 0)).map_or(0, |(_, s)| s)
        };
        log(Tally { suppressed, total });
    }

    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
}

impl Default for AddressIncident {
    fn default() -> Self {
        Self::new()
    }
}

/// The listener's incidents logged per client address.
pub struct AddressStats {
    /// TLS handshakes that failed or did not finish within the request read timeout.
    pub tls_handshake_failures: AddressIncident,
    /// SASL logins that failed (wrong credentials, throttled, changed principal).
    pub sasl_failures: AddressIncident,
}

pub static ADDRESS_STATS: AddressStats =
    AddressStats { tls_handshake_failures: AddressIncident::new(), sasl_failures: AddressIncident::new() };

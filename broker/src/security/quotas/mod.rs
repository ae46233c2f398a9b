//! Client byte-rate quotas (`producer_byte_rate`, `consumer_byte_rate`), enforced as Kafka
//! enforces them: each node measures the bytes it serves per quota entity; a request that
//! takes the rate over the quota is still served, and its response carries the throttle time
//! the client must wait (KIP-219), after which the connection reads nothing more for that long
//! (`net::listener`). A throttled fetch returns no data (Kafka's `getThrottledResponse`).
//!
//! The quota table is replicated state (`onelog_state::quotas`); the measurement is this
//! node's, as in Kafka, where each broker throttles the traffic it leads. `request_percentage`
//! is enforced too (`request_time`). `controller_mutation_rate` and `connection_creation_rate`
//! are stored and described but not enforced: onelog has no controller mutation queue
//! separate from the log, and no per-IP connection-rate limiter beyond `max.connections.per.ip`
//! (README).
//!
//! The `user` entity is the request's principal name (`User:alice` → `alice`; a TLS
//! principal's whole mapped name), `ANONYMOUS` for a connection that did not authenticate, as
//! in Kafka.

mod rate;
pub mod request_time;

use std::collections::HashMap;
use std::sync::Mutex;

use onelog_state::quotas::{
    ClientQuotas, SensorKey, CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE,
};

use crate::clock::wall_clock_ms;
use crate::raft::applied::AppliedView;

use rate::Rate;

/// Sensors of entities idle this long are forgotten, so that many client ids under a default
/// quota cannot grow memory without bound.
const SWEEP_EVERY_MS: i64 = rate::SAMPLES as i64 * rate::WINDOW_MS;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    Produce,
    Fetch,
    /// Thread time, in percent of one thread (`request_time`).
    Request,
}

impl QuotaKind {
    fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => PRODUCER_BYTE_RATE,
            QuotaKind::Fetch => CONSUMER_BYTE_RATE,
            QuotaKind::Request => REQUEST_PERCENTAGE,
        }
    }
}

/// The quota that governs one request, looked up in the replicated table.
#[derive(Debug, Clone)]
pub struct Governing {
    kind: QuotaKind,
    bound: f64,
    sensor: SensorKey,
}

impl Governing {
    /// The most a response may carry without being throttled for certain (Kafka's
    /// `getMaxValueInQuotaWindow`), to cap a fetch's bytes.
    pub fn max_bytes_in_window(&self) -> usize {
        let bytes = self.bound * (rate::SAMPLES as f64 - 1.0) * (rate::WINDOW_MS as f64 / 1000.0);
        bytes.min(usize::MAX as f64) as usize
    }
}

#[derive(Default)]
pub struct QuotaManager {
    sensors: Mutex<Sensors>,
}

#[derive(Default)]
struct Sensors {
    rates: HashMap<(QuotaKind, SensorKey), Rate>,
    last_sweep_ms: i64,
}

impl QuotaManager {
    /// The quota of `kind` for this user and client id, if one applies.
    pub fn governing(
        quotas: &ClientQuotas,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
    ) -> Option<Governing> {
        if quotas.entities.is_empty() {
            return None;
        }
        let (bound, sensor) = quotas.lookup(kind.key(), user, client_id)?;
        Some(Governing { kind, bound, sensor })
    }

    /// Records `bytes` against the quota and returns the throttle time (0: within quota).
    pub fn record(&self, governing: &Governing, bytes: usize, now_ms: i64) -> i32 {
        self.record_value(governing, bytes as f64, now_ms)
    }

    /// Records a measurement in the quota's unit (bytes; percent-seconds of thread time).
    fn record_value(&self, governing: &Governing, value: f64, now_ms: i64) -> i32 {
        let mut sensors = self.sensors.lock().expect("quota sensors lock");
        sensors.sweep(now_ms);
        let rate = sensors.rates.entry((governing.kind, governing.sensor.clone())).or_default();
        rate.record(value, now_ms);
        let (observed, window_ms) = rate.measure(now_ms);
        rate::throttle_ms(observed, governing.bound, window_ms)
    }

    /// Takes back bytes recorded for a response that is not sent (a throttled fetch returns
    /// nothing, so what it would have carried must not count).
    pub fn unrecord(&self, governing: &Governing, bytes: usize, now_ms: i64) {
        let mut sensors = self.sensors.lock().expect("quota sensors lock");
        if let Some(rate) = sensors.rates.get_mut(&(governing.kind, governing.sensor.clone())) {
            rate.record(-(bytes as f64), now_ms);
        }
    }
}

impl Sensors {
    fn sweep(&mut self, now_ms: i64) {
        if now_ms - self.last_sweep_ms < SWEEP_EVERY_MS {
            return;
        }
        self.last_sweep_ms = now_ms;
        self.rates.retain(|_, rate| !rate.idle(now_ms));
    }
}

impl QuotaManager {
    /// The quota of `kind` governing a request of this user (the principal's name) and
    /// client id.
    pub fn governing_for(
        applied: &AppliedView,
        kind: QuotaKind,
        user: &str,
        client_id: Option<&str>,
    ) -> Option<Governing> {
        let client_id = client_id.unwrap_or("");
        applied.state(|state| Self::governing(&state.client_quotas, kind, user, client_id))
    }

    /// Records `bytes` for a request of this user and client id; the throttle time (0 when no
    /// quota applies or the rate stays within it).
    pub fn record_for(
        &self,
        applied: &AppliedView,
        kind: QuotaKind,
        user: &str,
        client_id: Option<&str>,
        bytes: usize,
    ) -> i32 {
        match Self::governing_for(applied, kind, user, client_id) {
            Some(governing) => self.record(&governing, bytes, wall_clock_ms()),
            None => 0,
        }
    }

    /// Records `busy_nanos` of thread time for a request of this user and client id against
    /// its `request_percentage`; the throttle time.
    pub fn record_request_time(
        &self,
        applied: &AppliedView,
        user: &str,
        client_id: Option<&str>,
        busy_nanos: u64,
    ) -> i32 {
        match Self::governing_for(applied, QuotaKind::Request, user, client_id) {
            Some(governing) => self.record_value(
                &governing,
                busy_nanos as f64 * request_time::NANOS_TO_PERCENT,
                wall_clock_ms(),
            ),
            None => 0,
        }
    }
}

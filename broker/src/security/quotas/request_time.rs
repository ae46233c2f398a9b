//! The request quota (`request_percentage`), as Kafka's `ClientRequestQuotaManager` meters it:
//! the time a principal's (and client id's) requests keep the broker's threads busy, as a
//! percentage of one thread per second. onelog has no request-handler pool: what it meters is
//! the time the runtime's threads spend polling a request's handler ([`Timed`]), which is the
//! CPU the request costs (a produce waiting for its Raft commit costs nothing while it waits).
//!
//! Over the quota, the response carries the throttle time (in `throttle_time_ms`, every
//! response type that has the field) and the connection reads nothing more for that long, as
//! Kafka mutes a throttled channel; older clients that do not wait themselves are held back by
//! the mute alone.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

/// Kafka's `NanosToPercentagePerSecond`: a nanosecond of thread time, in percent-seconds.
pub const NANOS_TO_PERCENT: f64 = 100.0 / 1e9;

/// A future that adds the time spent in its `poll` to a shared counter, in nanoseconds.
pub struct Timed<F> {
    inner: Pin<Box<F>>,
    busy_nanos: Arc<AtomicU64>,
}

impl<F: Future> Timed<F> {
    pub fn new(inner: F, busy_nanos: Arc<AtomicU64>) -> Self {
        Timed { inner: Box::pin(inner), busy_nanos }
    }
}

impl<F: Future> Future for Timed<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let started = Instant::now();
        let polled = self.inner.as_mut().poll(cx);
        let nanos = started.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        self.busy_nanos.fetch_add(nanos, Ordering::Relaxed);
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn timed_counts_the_time_spent_polling_not_waiting() {
        let busy = Arc::new(AtomicU64::new(0));
        Timed::new(
            async {
                // 200 ms asleep: not polled meanwhile, so not counted.
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                let spin = Instant::now();
                while spin.elapsed() < std::time::Duration::from_millis(5) {}
            },
            busy.clone(),
        )
        .await;
        let ms = busy.load(Ordering::Relaxed) as f64 / 1e6;
        assert!((5.0..150.0).contains(&ms), "polled for {ms} ms");
    }
}

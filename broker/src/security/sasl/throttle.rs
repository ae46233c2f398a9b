//! How many SASL authentication attempts one client address may make: a token bucket per
//! address (`limits::SASL_ATTEMPTS_*`), so a password cannot be guessed at wire speed. Over
//! the limit an attempt fails without its credentials being checked. The table is bounded:
//! when full, addresses whose bucket has refilled are forgotten (they lose nothing). One per
//! node, shared by its SASL listeners (`SaslView`), never a process global: two nodes in one
//! process count their attempts apart.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use tokio::time::Instant;

use crate::limits::{SASL_ATTEMPTS_BURST, SASL_ATTEMPTS_PER_SECOND, SASL_THROTTLED_ADDRESSES_MAX};

struct Bucket {
    tokens: f64,
    at: Instant,
}

pub struct Throttle {
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
    burst: f64,
    per_second: f64,
}

impl Throttle {
    pub fn new() -> Self {
        Self::with_rate(SASL_ATTEMPTS_BURST, SASL_ATTEMPTS_PER_SECOND)
    }

    fn with_rate(burst: u32, per_second: u32) -> Self {
        Throttle {
            buckets: Mutex::new(HashMap::new()),
            burst: f64::from(burst),
            per_second: f64::from(per_second),
        }
    }

    /// Takes one attempt for `ip`; false when it has none left.
    pub fn allow(&self, ip: IpAddr) -> bool {
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let refill = |b: &Bucket| {
            (b.tokens + now.duration_since(b.at).as_secs_f64() * self.per_second).min(self.burst)
        };
        if buckets.len() >= SASL_THROTTLED_ADDRESSES_MAX && !buckets.contains_key(&ip) {
            buckets.retain(|_, b| refill(b) < self.burst);
            if buckets.len() >= SASL_THROTTLED_ADDRESSES_MAX {
                // Every tracked address is mid-burst: forget the table rather than refuse
                // addresses never seen (which would let one attacker lock everyone out).
                buckets.clear();
            }
        }
        let bucket = buckets.entry(ip).or_insert(Bucket { tokens: self.burst, at: now });
        bucket.tokens = refill(bucket);
        bucket.at = now;
        if bucket.tokens < 1.0 {
            return false;
        }
        bucket.tokens -= 1.0;
        true
    }
}

impl Default for Throttle {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_then_the_refill_rate() {
        let throttle = Throttle::with_rate(3, 1);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        assert!((0..3).all(|_| throttle.allow(ip)));
        assert!(!throttle.allow(ip));
        assert!(throttle.allow("10.0.0.2".parse().unwrap()), "other addresses keep their own budget");
        tokio::time::advance(Duration::from_millis(1_100)).await;
        assert!(throttle.allow(ip));
        assert!(!throttle.allow(ip));
    }
}

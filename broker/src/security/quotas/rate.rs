//! A windowed rate, measured as Kafka's quota sensors measure it (`SampledStat` + `Rate`):
//! `SAMPLES` windows of `WINDOW_MS`, the rate being the sum over the live windows divided by
//! the time they span, never less than `SAMPLES - 1` whole windows (so a burst right after a
//! quiet period is not measured over a few milliseconds).

/// Kafka's `quota.window.num` and `quota.window.size.seconds` defaults.
pub const SAMPLES: usize = 11;
pub const WINDOW_MS: i64 = 1000;

#[derive(Debug, Clone, Copy)]
struct Sample {
    start_ms: i64,
    value: f64,
}

#[derive(Debug, Default)]
pub struct Rate {
    /// Oldest first; at most `SAMPLES`.
    samples: Vec<Sample>,
}

impl Rate {
    pub fn record(&mut self, value: f64, now_ms: i64) {
        self.purge(now_ms);
        match self.samples.last_mut() {
            Some(current) if now_ms < current.start_ms + WINDOW_MS => current.value += value,
            _ => {
                if self.samples.len() == SAMPLES {
                    self.samples.remove(0);
                }
                self.samples.push(Sample { start_ms: now_ms, value });
            }
        }
    }

    /// Per second, and the window (ms) it was measured over.
    pub fn measure(&mut self, now_ms: i64) -> (f64, i64) {
        self.purge(now_ms);
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        let oldest = self.samples.first().map_or(now_ms, |s| s.start_ms);
        let mut elapsed = (now_ms - oldest).max(0);
        let full_windows = elapsed / WINDOW_MS;
        let min_full_windows = SAMPLES as i64 - 1;
        if full_windows < min_full_windows {
            elapsed += (min_full_windows - full_windows) * WINDOW_MS;
        }
        (total * 1000.0 / elapsed as f64, elapsed)
    }

    /// Whether nothing was recorded in the live windows: the sensor may be forgotten.
    pub fn idle(&mut self, now_ms: i64) -> bool {
        self.purge(now_ms);
        self.samples.is_empty()
    }

    fn purge(&mut self, now_ms: i64) {
        let expire_before = now_ms - SAMPLES as i64 * WINDOW_MS;
        self.samples.retain(|s| s.start_ms > expire_before);
    }
}

/// Kafka's `QuotaUtils.throttleTime`: the delay that brings the observed rate `rate`, measured
/// over `window_ms`, back to `bound`, assuming nothing more is recorded: X = (O - T) / T * W.
pub fn throttle_ms(rate: f64, bound: f64, window_ms: i64) -> i32 {
    if rate <= bound || bound <= 0.0 {
        return 0;
    }
    let ms = (rate - bound) / bound * window_ms as f64;
    ms.round().min(i32::MAX as f64) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_measured_over_ten_windows_at_least() {
        let mut rate = Rate::default();
        rate.record(10_000.0, 0);
        let (per_s, window) = rate.measure(0);
        assert_eq!(window, 10_000);
        assert_eq!(per_s, 1000.0);
    }

    #[test]
    fn old_windows_expire() {
        let mut rate = Rate::default();
        rate.record(10_000.0, 0);
        assert!(!rate.idle(10_999));
        assert!(rate.idle(11_000));
    }

    #[test]
    fn throttle_brings_the_rate_back_to_the_bound() {
        // 2000/s observed over 10 s against 1000/s: wait another 10 s.
        assert_eq!(throttle_ms(2000.0, 1000.0, 10_000), 10_000);
        assert_eq!(throttle_ms(900.0, 1000.0, 10_000), 0);
    }
}

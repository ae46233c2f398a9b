//! Latency percentiles for benchmark reports.

use std::time::Duration;

/// p50 and p99 of a set of samples, in milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Percentiles {
    pub samples: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles; zeros for an empty set.
    pub fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        let at = |q: f64| -> f64 {
            if samples.is_empty() {
                return 0.0;
            }
            let rank = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
            samples[rank - 1].as_secs_f64() * 1e3
        };
        Self { samples: samples.len(), p50_ms: at(0.50), p99_ms: at(0.99) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let samples = (1..=100).map(Duration::from_millis).collect();
        let p = Percentiles::of(samples);
        assert_eq!((p.samples, p.p50_ms, p.p99_ms), (100, 50.0, 99.0));
        assert_eq!(Percentiles::of(Vec::new()).p99_ms, 0.0);
    }
}

//! Latency percentiles for benchmark reports (nearest rank, as the Java suite computes them).

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
        let at = |q: f64| nearest_rank(&samples, q).map_or(0.0, |d| d.as_secs_f64() * 1e3);
        Self { samples: samples.len(), p50_ms: at(0.50), p99_ms: at(0.99) }
    }
}

/// Nearest-rank percentile `q` (0 to 1) of an ascending slice; `None` when it is empty.
pub fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1));
    sorted.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples = (1..=100).map(Duration::from_millis).collect();
        let p = Percentiles::of(samples);
        assert_eq!((p.samples, p.p50_ms, p.p99_ms), (100, 50.0, 99.0));
        assert_eq!(Percentiles::of(Vec::new()).p99_ms, 0.0);
        assert_eq!(nearest_rank(&[1, 2, 3], 1.0), Some(3));
        assert_eq!(nearest_rank(&[1, 2, 3], 0.0), Some(1));
    }
}

//! Runs the workers of one bench as the Java suite's `Runner` does: PRODUCERS workers (one
//! unless PRODUCERS is set), each on its own thread with its own clients, run WARMUP
//! unrecorded iterations, then all start together and run TXES recorded ones. The sorted
//! latencies go to MEASURES (or stdout), one per line in nanoseconds, and, when asked, a
//! one-line JSON summary with the Java runner's keys goes to stderr (or SUMMARY_FILE).
//!
//! Iterations run one after another on each worker, with no compensation for coordinated
//! omission: the point is what one client gets from the protocol, not behaviour under a load.
//! A failing worker ends the process (exit 1), since the others would wait at the barrier.

use std::fmt::Write as _;
use std::sync::{Barrier, OnceLock};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::config::BenchConfig;
use crate::bench::stats::nearest_rank;

/// One worker's clients; `iteration(i)` runs iteration `i` and returns the time it measured.
pub trait Worker {
    fn iteration(&mut self, i: u64) -> Result<Duration>;
}

/// Runs `bench`: `open(i)` creates worker i on its own thread.
pub fn run<W: Worker>(
    bench: &str,
    cfg: &BenchConfig,
    open: impl Fn(usize) -> Result<W> + Sync,
) -> Result<()> {
    let barrier = Barrier::new(cfg.producers);
    let measure_start = OnceLock::new();
    let mut all: Vec<u64> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..cfg.producers)
            .map(|index| {
                let (open, barrier, measure_start) = (&open, &barrier, &measure_start);
                std::thread::Builder::new()
                    .name(format!("{bench}-{index}"))
                    .spawn_scoped(scope, move || {
                        work(cfg, open, index, barrier, measure_start).unwrap_or_else(|e| {
                            eprintln!("worker {index} failed: {e:#}");
                            std::process::exit(1)
                        })
                    })
                    .expect("spawning a worker thread")
            })
            .collect();
        threads.into_iter().flat_map(|t| t.join().expect("worker thread panicked")).collect()
    });
    let seconds = measure_start.get().map_or(0.0, |s: &Instant| s.elapsed().as_secs_f64());
    all.sort_unstable();
    write_measures(cfg, &all)?;
    if cfg.summary {
        write_summary(cfg, &summary(bench, cfg, &all, seconds))?;
    }
    Ok(())
}

fn work<W: Worker>(
    cfg: &BenchConfig,
    open: &impl Fn(usize) -> Result<W>,
    index: usize,
    barrier: &Barrier,
    measure_start: &OnceLock<Instant>,
) -> Result<Vec<u64>> {
    let mut worker = open(index)?;
    for i in 0..cfg.warmup {
        worker.iteration(i)?;
    }
    barrier.wait();
    // The first worker through the barrier starts the clock, as the Java barrier action does.
    measure_start.get_or_init(Instant::now);
    (0..cfg.txes).map(|i| Ok(worker.iteration(cfg.warmup + i)?.as_nanos() as u64)).collect()
}

fn write_measures(cfg: &BenchConfig, sorted: &[u64]) -> Result<()> {
    let mut text = String::with_capacity(sorted.len() * 10);
    for ns in sorted {
        writeln!(text, "{ns}")?;
    }
    match &cfg.measures {
        Some(path) => std::fs::write(path, text)?,
        None => std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes())?,
    }
    Ok(())
}

/// The Java runner's line, key for key; `kafka_clients` names librdkafka and its version.
fn summary(bench: &str, cfg: &BenchConfig, sorted: &[u64], seconds: f64) -> String {
    let ms = |q: f64| nearest_rank(sorted, q).unwrap_or(0) as f64 / 1e6;
    let payload = cfg.payload_bytes.map_or(-1, |n| n as i64);
    format!(
        "{{\"bench\":\"{bench}\",\"kafka_clients\":\"librdkafka {}\",\"producers\":{},\"payload_bytes\":{payload},\
         \"warmup\":{},\"count\":{},\"seconds\":{seconds:.3},\"tps\":{:.1},\
         \"p50_ms\":{:.3},\"p95_ms\":{:.3},\"p99_ms\":{:.3},\"p999_ms\":{:.3},\"max_ms\":{:.3}}}",
        rdkafka::util::get_rdkafka_version().1,
        cfg.producers,
        cfg.warmup,
        sorted.len(),
        sorted.len() as f64 / seconds,
        ms(0.50),
        ms(0.95),
        ms(0.99),
        ms(0.999),
        ms(1.0),
    )
}

fn write_summary(cfg: &BenchConfig, line: &str) -> Result<()> {
    match &cfg.summary_file {
        Some(path) => std::fs::write(path, format!("{line}\n"))?,
        None => eprintln!("{line}"),
    }
    Ok(())
}

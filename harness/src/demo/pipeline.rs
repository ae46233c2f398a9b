//! The exactly-once pipeline demo: the chaos copier (`chaos::copier`) under the demo's names,
//! without its churn and faults.
//!
//! - a feeder (idempotent producer, acks=all) writes numbered records `<run>/<p>-<seq>` to
//!   every partition `p` of `pipeline-in`;
//! - processors (read_committed consumers in the group `demo-pipeline`, each with a
//!   transactional producer) turn each input record into `<input>:processed` in the same
//!   partition of `pipeline-out`, with the consumed offsets in the same transaction
//!   (`send_offsets_to_transaction`, KIP-447); an abort rewinds to the committed offsets, a
//!   fenced or fatal producer is replaced;
//! - after `--seconds` the feeder stops, the processors drain the input and stop, and the
//!   verifier (`copier_check`) reads both topics under read_committed: this run's output is
//!   its input, transformed, each record exactly once and in input order per partition, and
//!   the group's committed offsets are the input's end offsets.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::{ensure_topics, fresh_run_id};
use crate::chaos::checker::{check_stable, txn_counts, FinalRead, QueueCounts, Violations};
use crate::chaos::copier::{Copier, CopierConfig, CopierCounts, CopierNames};
use crate::chaos::copier_check::{check_copier, final_read, CopierRead};
use crate::chaos::history::History;

pub const NAMES: CopierNames = CopierNames {
    input: "pipeline-in",
    output: "pipeline-out",
    observer: "pipeline-observer",
    group: "demo-pipeline",
    transactional_id_prefix: "demo-pipeline",
};

/// How long the processors may take to commit the whole input once the feeder stopped.
const DRAIN_WAIT: Duration = Duration::from_secs(90);
/// How long the final read may wait for open transactions to end.
const FINAL_READ_WAIT: Duration = Duration::from_secs(60);

/// The processing step: what an input record becomes in the output.
pub fn process(input: &str) -> String {
    format!("{input}:processed")
}

#[derive(Debug, Clone)]
pub struct PipelineConfig {
    pub bootstrap: String,
    /// How long the feeder writes.
    pub feed_for: Duration,
    pub partitions: i32,
    /// Processor instances in the group (at least 2).
    pub processors: usize,
    pub run_id: String,
}

impl PipelineConfig {
    pub fn new(bootstrap: &str, feed_for: Duration) -> PipelineConfig {
        PipelineConfig {
            bootstrap: bootstrap.to_string(),
            feed_for,
            partitions: 4,
            processors: 2,
            run_id: fresh_run_id(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct PipelineReport {
    pub config: PipelineConfig,
    pub copier: CopierCounts,
    pub txns: QueueCounts,
    /// This run's records in `pipeline-in` and `pipeline-out`.
    pub input_records: usize,
    pub output_records: usize,
    pub committed: Vec<Option<i64>>,
    pub input_ends: Vec<i64>,
    pub violations: Violations,
    /// When the feeder stopped.
    pub feeding_ended: Instant,
    pub elapsed: Duration,
}

impl PipelineReport {
    pub fn passed(&self) -> bool {
        self.violations.total() == 0
    }

    pub fn summary(&self) -> String {
        let (k, t) = (&self.copier, &self.txns);
        let drained = k
            .drained_ms
            .map_or("not drained".to_string(), |ms| format!("drained {ms} ms after the feeder stopped"));
        format!(
            "pipeline {}: run {}; {} input records ({} acknowledged) over {} partitions, {} output records; {} transactions: {} committed, {} aborted ({} on purpose), {} unknown; {} processor starts, {drained}; committed offsets {:?} = input ends {:?}: {}; {} violations; {:.1}s",
            if self.passed() { "PASS" } else { "FAIL" },
            self.config.run_id,
            self.input_records,
            k.input_acknowledged,
            self.config.partitions,
            self.output_records,
            t.txns,
            t.committed,
            t.aborted,
            t.aborted_on_purpose,
            t.unknown,
            k.instance_starts,
            self.committed.iter().map(|c| c.unwrap_or(0)).collect::<Vec<_>>(),
            self.input_ends,
            if self.committed.iter().map(|c| c.unwrap_or(0)).eq(self.input_ends.iter().copied()) { "yes" } else { "NO" },
            self.violations.total(),
            self.elapsed.as_secs_f64()
        )
    }
}

/// Creates the topics, feeds and processes for `feed_for`, drains, reads back and verifies.
pub fn run(config: &PipelineConfig) -> Result<PipelineReport> {
    let started = Instant::now();
    let p = config.partitions;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(ensure_topics(
        &config.bootstrap,
        &[(NAMES.input, p), (NAMES.output, p), (NAMES.observer, 1)],
    ))?;
    let history = History::new();
    let prefix = format!("{}/", config.run_id);
    let mut copier = Copier::start(
        CopierConfig {
            bootstrap: config.bootstrap.clone(),
            names: NAMES,
            partitions: p,
            instances: config.processors,
            seed: 0,
            bug: None,
            churn: false,
            value_prefix: prefix.clone(),
            transform: process,
            group_protocol: Default::default(),
        },
        history.clone(),
    );
    std::thread::sleep(config.feed_for);
    copier.stop_feeder();
    let feeding_ended = Instant::now();
    let mut counts = copier.drain_and_stop(DRAIN_WAIT);
    let read =
        final_read(&config.bootstrap, &NAMES, p, FINAL_READ_WAIT).context("reading the pipeline back")?;
    let read = this_run(read, &prefix);
    let snapshot = history.snapshot();
    counts.input_acknowledged = snapshot.inputs.len();
    // The checker pairs output with input by value: the input as it must come out.
    let expected: Vec<(i32, String)> = snapshot.inputs.iter().map(|(p, v)| (*p, process(v))).collect();
    let mut violations = check_copier(&expected, &read);
    violations.merge(check_stable(&read.unstable, FINAL_READ_WAIT));
    Ok(PipelineReport {
        config: config.clone(),
        copier: counts,
        txns: txn_counts(&snapshot),
        input_records: read.input.values().map(Vec::len).sum(),
        output_records: read.output.values().map(Vec::len).sum(),
        committed: read.committed,
        input_ends: read.input_ends,
        violations,
        feeding_ended,
        elapsed: started.elapsed(),
    })
}

/// This run's records only (an earlier run's stay in the topics), the input transformed as
/// the processors must have transformed it.
fn this_run(read: CopierRead, prefix: &str) -> CopierRead {
    let keep = |read: FinalRead, f: fn(&str) -> String| -> FinalRead {
        read.into_iter()
            .map(|(p, records)| {
                (
                    p,
                    records
                        .into_iter()
                        .filter(|(_, v)| v.starts_with(prefix))
                        .map(|(o, v)| (o, f(&v)))
                        .collect(),
                )
            })
            .collect()
    };
    CopierRead { input: keep(read.input, process), output: keep(read.output, |v| v.to_owned()), ..read }
}

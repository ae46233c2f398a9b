//! A chaos run's report: operations attempted / acknowledged / unknown, faults by kind,
//! violations by kind, recovery after each fault (a new leader, the next acknowledged
//! commit), written as `summary.txt`, `summary.json`, `timeline.csv` (commits per second) and
//! `faults.csv` (the fault windows) for `scripts/chaos-plot.py`, which draws `plot.png`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use super::checker::{QueueCounts, Violations};
use super::copier::CopierCounts;
use super::history::{Outcome, Snapshot};
use super::run::RunOptions;
use super::schedule::Planned;
use super::share_check::ShareCounts;

#[derive(Debug, Serialize)]
pub struct Recovery {
    pub kind: String,
    pub node: Option<u64>,
    pub began_s: f64,
    pub new_leader_ms: Option<u128>,
    pub first_commit_ms: Option<u128>,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub seed: u64,
    pub command: String,
    pub workload: String,
    pub nodes: u64,
    pub seconds: f64,
    pub broker_flags: Vec<String>,
    /// `RunOptions::txn_write_delay_ms`: the widened window of unwritten writes of open
    /// transactions.
    pub txn_write_delay_ms: Option<u64>,
    pub planned_faults: usize,
    pub counts: QueueCounts,
    pub client_errors: usize,
    pub cuts_observed: usize,
    pub faults_by_kind: BTreeMap<String, usize>,
    pub violations: Violations,
    /// Anomalies Kafka's protocol allows, found and reported but not violations (write
    /// cycles, see `checker::write_cycles`).
    pub allowed_anomalies: Violations,
    pub recovery: Vec<Recovery>,
    /// kind → (p50, max) in ms of the new-leader and first-commit times.
    pub recovery_summary: BTreeMap<String, RecoverySummary>,
    /// The copier workload's own figures (input, output, instances, rebalances).
    pub copier: Option<CopierCounts>,
    /// The share workload's own figures (deliveries, fates, consumer instances).
    pub share: Option<ShareCounts>,
    /// With `--groups N`: the placement rules and what ran where (`placement::describe`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub placement: Vec<String>,
    #[serde(skip)]
    snapshot: Snapshot,
}

#[derive(Debug, Serialize, Default)]
pub struct RecoverySummary {
    pub runs: usize,
    pub new_leader_p50_ms: Option<u128>,
    pub new_leader_max_ms: Option<u128>,
    pub first_commit_p50_ms: Option<u128>,
    pub first_commit_max_ms: Option<u128>,
}

fn p50_max(mut xs: Vec<u128>) -> (Option<u128>, Option<u128>) {
    xs.sort_unstable();
    (xs.get(xs.len().saturating_sub(1) / 2).copied(), xs.last().copied())
}

impl Report {
    pub fn new(
        options: &RunOptions,
        plan: &[Planned],
        snapshot: Snapshot,
        counts: QueueCounts,
        violations: Violations,
        allowed_anomalies: Violations,
    ) -> Report {
        // (started, ended) of every committed transaction: recovery is the first one begun
        // after the fault that committed (one already in flight says nothing).
        let mut commits: Vec<(Duration, Duration)> = snapshot
            .txns
            .iter()
            .filter(|t| t.outcome == Outcome::Committed)
            .map(|t| (t.started, t.ended))
            .collect();
        commits.sort_unstable_by_key(|(_, ended)| *ended);
        let mut faults_by_kind = BTreeMap::new();
        let recovery: Vec<Recovery> = snapshot
            .faults
            .iter()
            .map(|f| {
                *faults_by_kind.entry(f.kind.clone()).or_default() += 1;
                let next = commits.iter().find(|(started, _)| *started >= f.began).map(|(_, ended)| ended);
                Recovery {
                    kind: f.kind.clone(),
                    node: f.node,
                    began_s: f.began.as_secs_f64(),
                    new_leader_ms: f.new_leader_after.map(|d| d.as_millis()),
                    first_commit_ms: next.map(|at| (*at - f.began).as_millis()),
                }
            })
            .collect();
        let mut recovery_summary: BTreeMap<String, RecoverySummary> = BTreeMap::new();
        for kind in faults_by_kind.keys() {
            let of_kind: Vec<&Recovery> = recovery.iter().filter(|r| &r.kind == kind).collect();
            let (nl50, nlmax) = p50_max(of_kind.iter().filter_map(|r| r.new_leader_ms).collect());
            let (fc50, fcmax) = p50_max(of_kind.iter().filter_map(|r| r.first_commit_ms).collect());
            recovery_summary.insert(
                kind.clone(),
                RecoverySummary {
                    runs: of_kind.len(),
                    new_leader_p50_ms: nl50,
                    new_leader_max_ms: nlmax,
                    first_commit_p50_ms: fc50,
                    first_commit_max_ms: fcmax,
                },
            );
        }
        let seconds = snapshot.txns.iter().map(|t| t.ended).max().unwrap_or_default().as_secs_f64();
        Report {
            seed: options.seed,
            command: options.command.clone(),
            workload: options.workload.name().to_string(),
            nodes: options.nodes,
            seconds,
            broker_flags: options.broker_flags.clone(),
            txn_write_delay_ms: options.txn_write_delay_ms,
            planned_faults: plan.len(),
            counts,
            client_errors: snapshot.client_errors,
            cuts_observed: snapshot.cuts.len(),
            faults_by_kind,
            violations,
            allowed_anomalies,
            recovery,
            recovery_summary,
            copier: None,
            share: None,
            placement: Vec::new(),
            snapshot,
        }
    }

    pub fn text(&self) -> String {
        let mut s = String::new();
        let c = &self.counts;
        let _ = writeln!(
            s,
            "chaos {} on {} nodes, seed {}, {:.0} s",
            self.workload, self.nodes, self.seed, self.seconds
        );
        let _ = writeln!(s, "repeat: {}", self.command);
        if !self.broker_flags.is_empty() {
            let _ = writeln!(s, "broker flags (re-introduced bugs): {}", self.broker_flags.join(","));
        }
        if let Some(ms) = self.txn_write_delay_ms {
            let _ = writeln!(s, "the leader waits {ms} ms before appending writes of an open transaction");
        }
        for line in &self.placement {
            let _ = writeln!(s, "placement: {line}");
        }
        let _ = writeln!(
            s,
            "operations: {} attempted, {} acknowledged (committed), {} aborted ({} on purpose, {} after an error), {} unknown ({} of them visible); {} values acknowledged",
            c.txns, c.committed, c.aborted, c.aborted_on_purpose, c.aborted - c.aborted_on_purpose, c.unknown, c.unknown_visible, c.values_acknowledged
        );
        let _ = writeln!(
            s,
            "reads: {} polled, {} in the final read; {} consistent cuts; {} client errors (retried)",
            c.polled, c.final_read, self.cuts_observed, self.client_errors
        );
        if let Some(k) = &self.copier {
            let drained = k.drained_ms.map_or("not drained".to_string(), |ms| format!("drained in {ms} ms"));
            let _ = writeln!(
                s,
                "copier: {} input values acknowledged, {} in the input, {} in the output ({drained}); {} rebalances, {} assignments, {} instances started ({} closed on schedule, {} crashed, {} hijacked)",
                k.input_acknowledged,
                k.input_records,
                k.output_records,
                k.rebalances,
                k.assignments,
                k.instance_starts,
                k.instance_stops,
                k.crashes,
                k.hijacks
            );
        }
        if let Some(k) = &self.share {
            share_lines(&mut s, k);
        }
        let faults: Vec<String> = self.faults_by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let _ = writeln!(s, "faults: {}", if faults.is_empty() { "none".into() } else { faults.join(", ") });
        if self.violations.total() == 0 {
            let _ = writeln!(s, "violations: none");
        } else {
            let _ = writeln!(s, "violations: {}", self.violations.total());
            for (kind, n) in &self.violations.counts {
                let _ = writeln!(s, "  {kind}: {n}");
                for e in self.violations.examples.get(kind).into_iter().flatten() {
                    let _ = writeln!(s, "    e.g. {e}");
                }
            }
        }
        for (kind, n) in &self.allowed_anomalies.counts {
            let example = self.allowed_anomalies.examples.get(kind).and_then(|e| e.first());
            let _ = writeln!(
                s,
                "allowed by Kafka's protocol, not a violation: {kind}: {n}{}",
                example.map_or(String::new(), |e| format!(" (e.g. {e})"))
            );
        }
        let _ = writeln!(
            s,
            "recovery (ms, p50 / max): fault, runs, new leader, first acknowledged commit after the fault"
        );
        let ms = |x: Option<u128>| x.map_or("-".to_string(), |v| v.to_string());
        for (kind, r) in &self.recovery_summary {
            let _ = writeln!(
                s,
                "  {kind:<15} {:>3}  {:>6} / {:<6}  {:>6} / {:<6}",
                r.runs,
                ms(r.new_leader_p50_ms),
                ms(r.new_leader_max_ms),
                ms(r.first_commit_p50_ms),
                ms(r.first_commit_max_ms)
            );
        }
        s
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("summary.txt"), self.text())?;
        std::fs::write(dir.join("summary.json"), serde_json::to_string_pretty(self)?)?;
        let seconds = self.seconds.ceil() as usize + 1;
        let mut per_second = vec![[0usize; 3]; seconds];
        for t in &self.snapshot.txns {
            let bucket = (t.ended.as_secs() as usize).min(seconds - 1);
            let column = match t.outcome {
                Outcome::Committed => 0,
                Outcome::Aborted => 1,
                Outcome::Unknown => 2,
            };
            per_second[bucket][column] += 1;
        }
        let mut csv = String::from("second,committed,aborted,unknown\n");
        for (i, [c, a, u]) in per_second.iter().enumerate() {
            let _ = writeln!(csv, "{i},{c},{a},{u}");
        }
        std::fs::write(dir.join("timeline.csv"), csv)?;
        let mut faults = String::from("kind,node,began,ended\n");
        for f in &self.snapshot.faults {
            let node = f.node.map_or(String::new(), |n| n.to_string());
            let _ = writeln!(
                faults,
                "{},{node},{:.3},{:.3}",
                f.kind,
                f.began.as_secs_f64(),
                f.ended.as_secs_f64()
            );
        }
        std::fs::write(dir.join("faults.csv"), faults)?;
        Ok(())
    }
}

/// The share workload's figures: what was written, delivered, and what became of it.
fn share_lines(s: &mut String, k: &ShareCounts) {
    let drained = k.drained_ms.map_or("not drained".to_string(), |ms| format!("drained in {ms} ms"));
    let lag = k.final_lag.map_or("-".to_string(), |l| l.to_string());
    let _ = writeln!(
        s,
        "share: {} values acknowledged ({} unknown, {} aborted); {} deliveries of {} records, {} redeliveries; {} accepted (+{} in doubt), {} rejected, {} archived at the limit, {} lost ({drained}, final lag {lag})",
        k.values_acknowledged,
        k.values_unknown,
        k.values_aborted,
        k.deliveries,
        k.records_delivered,
        k.redeliveries,
        k.accepted,
        k.accepted_unknown,
        k.rejected,
        k.archived,
        k.lost
    );
    let _ = writeln!(
        s,
        "share: {} releases applied, {} deliveries left to their lock or session, {} acknowledgements refused, {} dropped with their session, {} gaps; {} fetches of unknown outcome; {} leader epochs; {} consumer instances ({} crashed), {} session ends",
        k.released,
        k.unacknowledged,
        k.refused_acks,
        k.dropped_acks,
        k.gaps,
        k.unknown_fetches,
        k.leader_epochs,
        k.instances,
        k.crashes,
        k.session_ends
    );
    if let Some(b) = &k.broker {
        let _ = writeln!(
            s,
            "share: the leader counts {} accepted, {} archived (rejected or at the limit), {} redelivered; the consumers saw {} accepts applied (+{} in doubt), {} rejects applied (+{} in doubt), {} values archived at the limit (+{} after deliveries nobody saw)",
            b.accepted,
            b.archived,
            b.redelivered,
            k.accept_acks_applied,
            k.accept_acks_unknown,
            k.reject_acks_applied,
            k.reject_acks_unknown,
            k.archived,
            k.archived_unseen
        );
    }
    let ends: Vec<String> = k.lock_ends.iter().map(|(why, n)| format!("{why} {n}")).collect();
    let _ = writeln!(s, "share: redeliveries by how the previous lock ended: {}", ends.join(", "));
}

//! Deterministic replay of the replicated state machine: three replicas apply one log and must
//! agree after every entry.
//!
//! `onelog-state` is pure (no clock, no randomness, no I/O): applying the same log gives the
//! same `BrokerState`, the same `Effect`s (every byte written to partition files) and the same
//! `CommandResponse`s on every replica. Anything else (an iteration over a `HashMap`, a clock
//! read, a field that does not survive a checkpoint, a result that depends on the node's own
//! settings) makes replicas diverge silently in production. This test looks for that.
//!
//! A seeded generator plays clients and the leader's duties: topics created, grown and
//! deleted; plain, idempotent (with retries, in-entry duplicates, sequence gaps and epoch
//! bumps) and transactional produce (transactions v1 and v2, commits, aborts, TxnOffsetCommit,
//! fencing by a second InitProducerId and the fenced instance's late requests); the broker's
//! aborts (timeout, takeover, admin); offset commits, generations, DeleteGroups, OffsetDelete;
//! retention; producer and transactional-id expiry; new terms whose leader has other limits
//! (SetLimits). Each entry is built as the leader builds it, `entry::build_entry_in_flight`
//! against the leader replica's applied state and the entries still in flight: like the
//! broker's pipelined proposer (issue 31), the simulated leader builds up to three entries
//! before the first applies, and nothing behind a barrier (`in_flight`). A new term first gets
//! its `entry::takeover_ops` entry. Entries are applied in order with `apply_command` on all
//! three replicas. After every entry the test compares
//! the replicas' `state_digest`, `EffectsDigest` and responses, and at random points sends one
//! replica's state through a bincode checkpoint. Occasionally the leader loses its term
//! with entries in flight: a prefix of them applies, the rest are lost (built and partly
//! answered, never applied), and a new leader takes over.
//!
//! On the leader it also checks what apply must keep, per entry: log start <= last stable
//! offset <= high watermark; the effects alone reproduce every partition's offsets and open
//! transactions (what the storage's materialized view will hold); apply reports the offsets
//! the leader stamped; a transactional write answered at stamping is applied; a retry is
//! answered with the offsets of the batch it repeats; each marker ends its transaction (an
//! abort is indexed, committed records are below the last stable offset); a committed
//! transaction's offsets are stored; a fenced instance never ends a transaction; a transaction
//! with an acknowledged write lost with its entry never commits.
//!
//! By default five fixed seeds and one from the clock (printed) run 10,000 ops each, in
//! parallel, and must reach minimum counts of everything above (`Stats::check_coverage`), so
//! that the test cannot pass by generating nothing. A failure prints the seed, the step (the
//! index of the entry in the log), what differed and the command that replays exactly that
//! run: `REPLAY_SEED=<seed> REPLAY_OPS=<ops> cargo test -p onelog-state --test replay --
//! --nocapture`. `REPLAY_SEED` runs one seed, `REPLAY_OPS` sets the ops per seed.
//! Apply must never refuse a produce op the entry builder stamped (a regression: it refused
//! ops writing a topic deleted, or a transactional id expired or fenced, earlier in the same
//! entry, after their transactional writes had been answered at stamping). The second test breaks one replica on purpose (a dropped effect, a skipped
//! op, a moved log end, a lossy checkpoint) and checks that the harness reports it, with the
//! seed, at the step it happened.
//!
//! This file holds the two tests, the environment they read and `run`, the loop that plays
//! one seed; the rest is split by what it owns: `faults` (the deliberate breakage), `stats`
//! (the counters and coverage minimums), `cluster` (the replicas and applying an entry on
//! each), `storage` (the partition files as the effects describe them), `checks` (the
//! per-entry rules on the leader), `report` (failure messages), `clients` (what the simulated
//! clients remember and send), `sim` (the seeded generator, its clock and terms), `producers`
//! and `duties` (the requests it generates), `answers` (delivering answers to the clients) and
//! `batches` (record batches as a client encodes them).

mod answers;
mod batches;
mod checks;
mod clients;
mod cluster;
mod duties;
mod faults;
mod producers;
mod report;
mod sim;
mod stats;
mod storage;

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use std::collections::VecDeque;

use onelog_state::command::Command;
use onelog_state::entry::{
    build_entry_in_flight, takeover_ops, writes_open_txn, Decision, Entry, InFlight, Proposal,
};
use onelog_state::BrokerState;
use rand::Rng;

use checks::check_entry;
use clients::EntryCtx;
use cluster::{Applied, Cluster};
use faults::Fault;
use report::{panic_message, summarize};
use sim::Sim;
use stats::Stats;

/// Ops applied per seed unless `REPLAY_OPS` says otherwise.
const DEFAULT_OPS: usize = 10_000;
/// Seeds of every default run; one more, from the clock, is added and printed.
const FIXED_SEEDS: [u64; 5] = [1, 42, 1234, 0x0e10_9e11, 20_261_130];
const REPLICAS: usize = 3;
/// The replica a `Fault` breaks.
const FAULTY: usize = 2;
const TOPICS: [&str; 6] = ["orders", "payments", "audit", "clicks", "metrics", "events"];
const TRANSACTIONAL_IDS: usize = 8;
const GROUPS: [&str; 4] = ["g0", "g1", "g2", "g3"];
const MEMBERS: [&str; 4] = ["m0", "m1", "m2", "m3"];
/// Idempotent clients alive at once; the oldest goes (its broker state stays until expiry).
const IDEMPOTENT_CLIENTS_MAX: usize = 6;
/// Sent batches an idempotent client keeps per partition for retries (more than the broker's 5).
const RETRY_HISTORY: usize = 8;

#[test]
fn replicas_replaying_one_log_agree_at_every_step() {
    let ops = env_usize("REPLAY_OPS").unwrap_or(DEFAULT_OPS);
    let seeds: Vec<u64> = match env_usize("REPLAY_SEED") {
        Some(seed) => vec![seed as u64],
        None => {
            let clock = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
            FIXED_SEEDS.iter().copied().chain([clock % 1_000_000_007]).collect()
        }
    };
    println!("replay: seeds {seeds:?}, {ops} ops each");
    let started = Instant::now();
    let results: Vec<(u64, Result<Stats, Divergence>, f64)> = std::thread::scope(|scope| {
        let runs: Vec<_> = seeds
            .iter()
            .map(|&seed| {
                scope.spawn(move || {
                    let t = Instant::now();
                    let result = run(seed, ops, Fault::None);
                    (seed, result, t.elapsed().as_secs_f64())
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().expect("a replay thread panicked outside the harness")).collect()
    });
    let mut failures = Vec::new();
    for (seed, result, secs) in results {
        match result {
            Ok(stats) => {
                println!("replay seed {seed}: {secs:.1} s, {}", stats.summary());
                // The fixed seeds are deterministic, so their coverage cannot flake; the clock
                // seed is there to find divergences, and a rare event it happens to miss (one
                // run in about 100 had no takeover abort) is worth a line, not a failure.
                let coverage = stats.check_coverage(ops);
                if let (Err(missing), false) = (&coverage, FIXED_SEEDS.contains(&seed)) {
                    println!("replay seed {seed} (from the clock) did not exercise: {missing}");
                } else if let Err(missing) = coverage {
                    failures.push(format!(
                        "seed {seed} did not exercise enough: {missing}\n{}\nreproduce: {}",
                        stats.summary(),
                        reproduce(seed, ops)
                    ));
                }
            }
            Err(divergence) => failures.push(divergence.to_string()),
        }
    }
    println!("replay: {} seeds in {:.1} s", seeds.len(), started.elapsed().as_secs_f64());
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

#[test]
fn a_broken_replica_is_caught_at_the_step_it_breaks() {
    const SEED: u64 = 7;
    const OPS: usize = 4_000;
    let faults = [
        (Fault::DropEffect { from_step: 150 }, "effects digests differ"),
        (Fault::SkipOp { from_step: 300 }, "responses differ"),
        (Fault::MoveLogEnd { from_step: 450 }, "state digests differ"),
        (Fault::LossyCheckpoint { from_step: 600 }, "state digests differ"),
    ];
    for (fault, expected) in faults {
        match run(SEED, OPS, fault) {
            Ok(stats) => panic!("the harness missed {fault:?}: {}", stats.summary()),
            Err(divergence) => {
                let message = divergence.to_string();
                let at =
                    divergence.fault_at.unwrap_or_else(|| panic!("{fault:?} was never injected: {message}"));
                assert!(at >= fault.first_step().expect("a fault"), "{fault:?} injected early: {message}");
                assert_eq!(divergence.step, at, "{fault:?} must be reported at its own step: {message}");
                assert_eq!(divergence.seed, SEED, "{message}");
                assert!(
                    message.contains(expected),
                    "{fault:?} should be reported as {expected:?}: {message}"
                );
                assert!(
                    message.contains(&format!("REPLAY_SEED={SEED} REPLAY_OPS={OPS} cargo test")),
                    "{message}"
                );
                println!("{fault:?} caught at step {at}");
            }
        }
    }
}

/// The leader-side check is not blind either (issue 17): leaders that answer writes of an
/// open transaction once stamped, with no takeover abort to cover for them, commit a
/// transaction without a write lost with its entry, and the harness says so.
#[test]
fn a_leader_answering_transactional_writes_before_commit_is_caught() {
    match run(7, 10_000, Fault::AckTxnAtStamping) {
        Ok(stats) => panic!("the harness missed writes answered at stamping and lost: {}", stats.summary()),
        Err(divergence) => {
            let message = divergence.to_string();
            assert!(message.contains("although a write it was told succeeded was lost"), "{message}");
            println!("caught at step {}", divergence.step);
        }
    }
}

fn env_usize(name: &str) -> Option<usize> {
    let value = std::env::var(name).ok()?;
    Some(value.trim().parse().unwrap_or_else(|_| panic!("{name}={value:?} is not a number")))
}

fn reproduce(seed: u64, ops: usize) -> String {
    format!("REPLAY_SEED={seed} REPLAY_OPS={ops} cargo test -p onelog-state --test replay -- --nocapture")
}

/// Replicas disagreed, or apply broke a rule it must keep.
#[derive(Debug)]
struct Divergence {
    seed: u64,
    ops: usize,
    /// Index of the entry in the log (takeover entries included).
    step: u64,
    what: String,
    entry: String,
    /// The step a `Fault` was injected at, if any.
    fault_at: Option<u64>,
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "replay failed: seed {} at step {} (entry {} of the log)",
            self.seed, self.step, self.step
        )?;
        writeln!(f, "entry: {}", self.entry)?;
        writeln!(f, "{}", self.what)?;
        if let Some(at) = self.fault_at {
            writeln!(f, "(fault injected into replica {FAULTY} at step {at})")?;
        }
        write!(f, "reproduce: {}", reproduce(self.seed, self.ops))
    }
}

// ---------------------------------------------------------------------------------------------
// The harness
// ---------------------------------------------------------------------------------------------

/// An entry the simulated leader built and proposed, not yet applied: a pipelined leader
/// (issue 31) builds up to three before the first applies.
struct InFlightEntry {
    command: Command,
    decisions: Vec<Decision>,
    sent: Vec<clients::Sent>,
}

/// Runs one seed until `target_ops` ops are applied; `fault` breaks replica `FAULTY`.
fn run(seed: u64, target_ops: usize, fault: Fault) -> Result<Stats, Divergence> {
    let mut sim = Sim::new(seed);
    sim.leader_bug = matches!(fault, Fault::AckTxnAtStamping);
    let mut run = Run { seed, target_ops, cluster: Cluster::new(fault), step: 0 };
    let mut in_flight = InFlight::default();
    let mut pending: VecDeque<InFlightEntry> = VecDeque::new();
    let mut takeover = true;
    while sim.stats.ops < target_ops {
        let step = run.step;
        if step > 0 && (sim.rng.gen_bool(0.02) || run.cluster.lossy_checkpoint_due(step)) {
            let replica =
                if run.cluster.lossy_checkpoint_due(step) { FAULTY } else { sim.rng.gen_range(0..REPLICAS) };
            run.cluster
                .checkpoint(replica, step)
                .map_err(|what| run.fail(what, "(between entries)".into()))?;
            sim.stats.checkpoints += 1;
        }
        if pending.is_empty() && (takeover || sim.rng.gen_bool(0.01)) {
            takeover = false;
            run.take_over(&mut sim)?;
        }
        // Behind a barrier (or a wrong prediction) the leader builds nothing until its entries
        // in flight are applied.
        while !in_flight.may_build() {
            let entry = pending.pop_front().expect("held only with entries in flight");
            run.apply(&mut sim, &mut in_flight, entry)?;
        }
        sim.advance_clock();
        let state = &run.cluster.replicas[sim.leader].state;
        sim.answers_pending = !pending.is_empty();
        let (proposals, sent) = sim.generate(state, run.step);
        let built = build_pipelined(&sim, state, &mut in_flight, proposals)
            .map_err(|what| run.fail(what, "(not built)".into()))?;
        if built.command.ops.is_empty() {
            let ctx = EntryCtx { before: state, command: &built.command, response: None, lost: false };
            sim.answer(run.step, built.decisions, sent, &ctx)
                .map_err(|what| run.fail(what, "(empty)".into()))?;
            continue;
        }
        in_flight.proposed(&built.command);
        sim.stats.pipelined_entries += u64::from(!pending.is_empty());
        pending.push_back(InFlightEntry { command: built.command, decisions: built.decisions, sent });
        if sim.rng.gen_bool(0.006) {
            // The leader loses its term: a prefix of its entries in flight commits, the rest
            // never reaches the next leader.
            for _ in 0..sim.rng.gen_range(0..pending.len()) {
                let entry = pending.pop_front().expect("counted");
                run.apply(&mut sim, &mut in_flight, entry)?;
            }
            run.lose(&mut sim, std::mem::take(&mut pending))?;
            in_flight.clear();
            takeover = true;
            continue;
        }
        let depth = sim.rng.gen_range(1..=3);
        while pending.len() >= depth {
            let entry = pending.pop_front().expect("counted");
            run.apply(&mut sim, &mut in_flight, entry)?;
        }
    }
    Ok(sim.stats)
}

/// The leader's build, `entry::build_entry_in_flight` against the leader replica's applied
/// state and the entries in flight; the leader fault `AckTxnAtStamping` answers as the broker's
/// `leader::bugs` does.
fn build_pipelined(
    sim: &Sim,
    state: &BrokerState,
    in_flight: &mut InFlight,
    proposals: Vec<Proposal>,
) -> Result<Entry, String> {
    let early: Vec<bool> = proposals
        .iter()
        .map(|p| {
            sim.leader_bug && matches!(p, Proposal::ProduceTransactional(a) if writes_open_txn(state, a))
        })
        .collect();
    let (stamp, options) = (sim.stamp(), sim.options);
    catch_unwind(AssertUnwindSafe(|| {
        let mut built = build_entry_in_flight(state, in_flight, stamp, &options, proposals);
        built.answer_as_stamped(state, &early);
        built
    }))
    .map_err(|panic| format!("the leader's build_entry panicked: {}", panic_message(&*panic)))
}

/// One seed's replicas and where in the log they are.
struct Run {
    seed: u64,
    target_ops: usize,
    cluster: Cluster,
    /// Index of the next entry in the log.
    step: u64,
}

impl Run {
    fn fail(&self, what: String, entry: String) -> Divergence {
        let (seed, ops, step, fault_at) = (self.seed, self.target_ops, self.step, self.cluster.fault_at);
        Divergence { seed, ops, step, what, entry, fault_at }
    }

    /// A new term; its leader's takeover entry, if it has one.
    fn take_over(&mut self, sim: &mut Sim) -> Result<(), Divergence> {
        sim.new_term();
        let ops = takeover_ops(&self.cluster.replicas[sim.leader].state, &sim.limits);
        if ops.is_empty() {
            return Ok(());
        }
        let command = Command { stamp: sim.stamp(), ops };
        let before = self.cluster.replicas[sim.leader].state.clone();
        let applied = self.applied(sim.leader, &command)?;
        sim.stats.takeover_entries += 1;
        sim.count_applied(&before, &command, &applied);
        self.step += 1;
        Ok(())
    }

    /// Applies `command` on every replica and checks the leader's result.
    fn applied(&mut self, leader: usize, command: &Command) -> Result<Applied, Divergence> {
        let step = self.step;
        let applied =
            self.cluster.apply(step, leader, command).map_err(|what| self.fail(what, summarize(command)))?;
        let after = &self.cluster.replicas[leader].state;
        check_entry(after, command, &applied)
            .and_then(|()| self.cluster.storage.check(after))
            .map_err(|what| self.fail(what, summarize(command)))?;
        Ok(applied)
    }

    /// Applies the oldest entry in flight and answers its proposals.
    fn apply(
        &mut self,
        sim: &mut Sim,
        in_flight: &mut InFlight,
        entry: InFlightEntry,
    ) -> Result<(), Divergence> {
        let before = self.cluster.replicas[sim.leader].state.clone();
        let command = entry.command;
        let applied = self.applied(sim.leader, &command)?;
        in_flight.settled(true);
        sim.count_applied(&before, &command, &applied);
        let ctx =
            EntryCtx { before: &before, command: &command, response: Some(&applied.response), lost: false };
        let after = &self.cluster.replicas[sim.leader].state;
        sim.answer(self.step, entry.decisions, entry.sent, &ctx)
            .and_then(|()| sim.check_txn_offsets(&before, after, &command, &applied))
            .map_err(|what| self.fail(what, summarize(&command)))?;
        self.step += 1;
        Ok(())
    }

    /// The leader loses its term before these entries commit: what it answered at stamping
    /// stands, the rest fails, and the next leader never sees them.
    fn lose(&mut self, sim: &mut Sim, lost: VecDeque<InFlightEntry>) -> Result<(), Divergence> {
        for entry in lost {
            let before = &self.cluster.replicas[sim.leader].state;
            let ctx = EntryCtx { before, command: &entry.command, response: None, lost: true };
            sim.answer(self.step, entry.decisions, entry.sent, &ctx)
                .map_err(|what| self.fail(what, format!("(lost) {}", summarize(&entry.command))))?;
            sim.stats.lost_entries += 1;
        }
        Ok(())
    }
}

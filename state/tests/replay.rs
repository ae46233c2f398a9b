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
//! (SetLimits). Each entry is built as the leader builds it, `entry::build_entry` against the
//! leader replica's applied state (a new term first gets its `entry::takeover_ops` entry), and
//! applied with `apply_command` on all three replicas. After every entry the test compares
//! the replicas' `state_digest`, `EffectsDigest` and responses, and at random points sends one
//! replica's state through a bincode checkpoint. Occasionally an entry is lost (built and
//! partly answered, never applied) and a new leader takes over.
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

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::convert::Infallible;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use kafka_compat::batch::{parse_header, validate_record_set, BatchHeader};
use kafka_compat::control::marker_is_commit;
use kafka_compat::error_code;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use onelog_state::command::{
    AbortTxnsOp, Command, CommandResponse, CreatePartitionsOp, CreateTopicsOp, DeleteGroupsOp,
    DeleteTopicsOp, EndTxnOp, ExpireProducersOp, ExpireTransactionalIdsOp, GenerationMember, GenerationOp,
    GroupDeletion, InitClusterOp, InitProducerIdOp, InitTxnProducerOp, LeaderStamp, NewPartitions, NewTopic,
    OffsetCommitEntry, OffsetCommitOp, OffsetDeleteOp, Op, OpResult, PartitionProduced, ReplicatedLimits,
    TrimLog, TrimLogOp, TxnOffsetCommitOp,
};
use onelog_state::digest::{state_digest, EffectsDigest};
use onelog_state::entry::{
    build_entry, takeover_ops, Answer, Decision, EntryOptions, Proposal, UnstampedAppend,
};
use onelog_state::txns::{BrokerAbort, ProducerIdEpoch, TxnError, TxnState};
use onelog_state::{apply_command, BrokerState, Effect};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

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
                if let Err(missing) = stats.check_coverage(ops) {
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

fn env_usize(name: &str) -> Option<usize> {
    let value = std::env::var(name).ok()?;
    Some(value.trim().parse().unwrap_or_else(|_| panic!("{name}={value:?} is not a number")))
}

fn reproduce(seed: u64, ops: usize) -> String {
    format!("REPLAY_SEED={seed} REPLAY_OPS={ops} cargo test -p onelog-state --test replay -- --nocapture")
}

// ---------------------------------------------------------------------------------------------
// Harness results
// ---------------------------------------------------------------------------------------------

/// A way to break replica `FAULTY`, from the first step at or after `from_step` where it can.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    /// Its storage misses one effect.
    DropEffect {
        from_step: u64,
    },
    /// It applies the entry without its last op.
    SkipOp {
        from_step: u64,
    },
    /// Its apply leaves one partition's log end one offset further.
    MoveLogEnd {
        from_step: u64,
    },
    /// A checkpoint of it loses the idempotent producers' partition state.
    LossyCheckpoint {
        from_step: u64,
    },
}

impl Fault {
    fn first_step(self) -> Option<u64> {
        match self {
            Fault::None => None,
            Fault::DropEffect { from_step }
            | Fault::SkipOp { from_step }
            | Fault::MoveLogEnd { from_step }
            | Fault::LossyCheckpoint { from_step } => Some(from_step),
        }
    }
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

/// What one run did; the default test asserts minimums so that it cannot pass vacuously.
#[derive(Debug, Default, Clone)]
struct Stats {
    ops: usize,
    entries: u64,
    terms: u64,
    takeover_entries: u64,
    lost_entries: u64,
    checkpoints: u64,
    set_limits: u64,
    topics_created: u64,
    topics_deleted: u64,
    partitions_added: u64,
    records: u64,
    partitions_written: BTreeSet<([u8; 16], i32)>,
    plain_batches: u64,
    idempotent_batches: u64,
    txn_batches: u64,
    duplicates: u64,
    duplicates_in_entry: u64,
    out_of_order: u64,
    early_txn_answers: u64,
    idempotent_inits: u64,
    txn_inits: u64,
    txn_commits: u64,
    txn_aborts: u64,
    v1_end_txns: u64,
    v2_end_txns: u64,
    fencing_aborts: u64,
    timeout_aborts: u64,
    takeover_aborts: u64,
    admin_aborts: u64,
    fenced: u64,
    aborted_by_broker: u64,
    commit_markers: u64,
    abort_markers: u64,
    txn_offsets_held: u64,
    txn_offsets_checked: u64,
    offsets_committed: u64,
    offset_commits_refused: u64,
    generations: u64,
    groups_deleted: u64,
    offsets_deleted: u64,
    trims: u64,
    producers_expired: u64,
    txn_ids_expired: u64,
}

impl Stats {
    fn summary(&self) -> String {
        format!(
            "{} ops in {} entries, {} terms ({} takeover entries, {} lost entries), {} checkpoints, \
             {} SetLimits; topics +{} -{} (+{} partitions); {} records on {} partitions \
             ({} plain, {} idempotent, {} transactional batches); {} duplicates answered from the \
             log, {} in-entry duplicates, {} out-of-order refused, \
             {} transactional writes answered at stamping; {} idempotent and {} transactional \
             InitProducerId; transactions: {} committed, {} aborted by clients, {} by fencing, \
             {} timed out, {} at takeover, {} by admin ({} v1 and {} v2 EndTxn, {} commit and \
             {} abort markers), {} fenced requests, {} told aborted by the broker, {} offsets held \
             ({} checked after commit); {} offsets committed, {} refused, {} generations, \
             {} groups deleted, {} offsets deleted; {} trims, {} producer ids expired, \
             {} transactional ids expired",
            self.ops,
            self.entries,
            self.terms,
            self.takeover_entries,
            self.lost_entries,
            self.checkpoints,
            self.set_limits,
            self.topics_created,
            self.topics_deleted,
            self.partitions_added,
            self.records,
            self.partitions_written.len(),
            self.plain_batches,
            self.idempotent_batches,
            self.txn_batches,
            self.duplicates,
            self.duplicates_in_entry,
            self.out_of_order,
            self.early_txn_answers,
            self.idempotent_inits,
            self.txn_inits,
            self.txn_commits,
            self.txn_aborts,
            self.fencing_aborts,
            self.timeout_aborts,
            self.takeover_aborts,
            self.admin_aborts,
            self.v1_end_txns,
            self.v2_end_txns,
            self.commit_markers,
            self.abort_markers,
            self.fenced,
            self.aborted_by_broker,
            self.txn_offsets_held,
            self.txn_offsets_checked,
            self.offsets_committed,
            self.offset_commits_refused,
            self.generations,
            self.groups_deleted,
            self.offsets_deleted,
            self.trims,
            self.producers_expired,
            self.txn_ids_expired,
        )
    }

    /// Minimums for a default-length run; a shorter one (`REPLAY_OPS`) is only checked for
    /// its op count.
    fn check_coverage(&self, ops: usize) -> Result<(), String> {
        if self.ops < ops {
            return Err(format!("{} ops applied, {ops} asked for", self.ops));
        }
        if ops < DEFAULT_OPS {
            return Ok(());
        }
        // About half the smallest value seen over 100 seeds, so the clock seed cannot flake.
        let minimums = [
            ("entries", self.entries, 800),
            ("terms", self.terms, 8),
            ("lost entries", self.lost_entries, 1),
            ("checkpoints", self.checkpoints, 10),
            ("SetLimits", self.set_limits, 3),
            ("topics created", self.topics_created, 8),
            ("topics deleted", self.topics_deleted, 5),
            ("records", self.records, 10_000),
            ("partitions written", self.partitions_written.len() as u64, 20),
            ("plain batches", self.plain_batches, 3_000),
            ("idempotent batches", self.idempotent_batches, 1_500),
            ("transactional batches", self.txn_batches, 1_000),
            ("duplicates answered from the log", self.duplicates, 80),
            ("in-entry duplicates", self.duplicates_in_entry, 60),
            ("out-of-order refusals", self.out_of_order, 20),
            ("writes answered at stamping", self.early_txn_answers, 500),
            ("idempotent InitProducerId", self.idempotent_inits, 50),
            ("transactional InitProducerId", self.txn_inits, 100),
            ("commits", self.txn_commits, 100),
            ("client aborts", self.txn_aborts, 40),
            ("v1 EndTxn", self.v1_end_txns, 150),
            ("v2 EndTxn", self.v2_end_txns, 150),
            ("fencing aborts", self.fencing_aborts, 30),
            ("timeout aborts", self.timeout_aborts, 40),
            ("takeover aborts", self.takeover_aborts, 15),
            ("admin aborts", self.admin_aborts, 1),
            ("fenced requests", self.fenced, 70),
            ("told aborted by the broker", self.aborted_by_broker, 50),
            ("offsets held by transactions", self.txn_offsets_held, 100),
            ("committed offsets checked", self.txn_offsets_checked, 30),
            ("offsets committed", self.offsets_committed, 400),
            ("generations", self.generations, 120),
            ("groups deleted", self.groups_deleted, 30),
            ("offsets deleted", self.offsets_deleted, 90),
            ("trims", self.trims, 130),
            ("producer ids expired", self.producers_expired, 20),
            ("transactional ids expired", self.txn_ids_expired, 1),
        ];
        let missing: Vec<String> = minimums
            .iter()
            .filter(|(_, got, min)| got < min)
            .map(|(name, got, min)| format!("{name}: {got} < {min}"))
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(missing.join(", "))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The harness
// ---------------------------------------------------------------------------------------------

/// Runs one seed until `target_ops` ops are applied; `fault` breaks replica `FAULTY`.
fn run(seed: u64, target_ops: usize, fault: Fault) -> Result<Stats, Divergence> {
    let mut sim = Sim::new(seed);
    let mut cluster = Cluster::new(fault);
    let mut step = 0u64;
    let mut takeover = true;
    while sim.stats.ops < target_ops {
        let fail = |cluster: &Cluster, step: u64, what: String, entry: String| Divergence {
            seed,
            ops: target_ops,
            step,
            what,
            entry,
            fault_at: cluster.fault_at,
        };
        if step > 0 && (sim.rng.gen_bool(0.02) || cluster.lossy_checkpoint_due(step)) {
            let replica =
                if cluster.lossy_checkpoint_due(step) { FAULTY } else { sim.rng.gen_range(0..REPLICAS) };
            cluster
                .checkpoint(replica, step)
                .map_err(|what| fail(&cluster, step, what, "(between entries)".into()))?;
            sim.stats.checkpoints += 1;
        }
        if takeover || sim.rng.gen_bool(0.01) {
            takeover = false;
            sim.new_term();
            let ops = takeover_ops(&cluster.replicas[sim.leader].state, &sim.limits);
            if !ops.is_empty() {
                let command = Command { stamp: sim.stamp(), ops };
                let before = cluster.replicas[sim.leader].state.clone();
                let applied = cluster
                    .apply(step, sim.leader, &command)
                    .map_err(|what| fail(&cluster, step, what, summarize(&command)))?;
                check_entry(&cluster.replicas[sim.leader].state, &command, &applied)
                    .and_then(|()| cluster.storage.check(&cluster.replicas[sim.leader].state))
                    .map_err(|what| fail(&cluster, step, what, summarize(&command)))?;
                sim.stats.takeover_entries += 1;
                sim.count_applied(&before, &command, &applied);
                step += 1;
            }
        }
        sim.advance_clock();
        let (proposals, sent) = sim.generate(&cluster.replicas[sim.leader].state, step);
        let stamp = sim.stamp();
        let before = cluster.replicas[sim.leader].state.clone();
        let options = sim.options;
        let built = catch_unwind(AssertUnwindSafe(|| build_entry(&before, stamp, &options, proposals)))
            .map_err(|panic| {
                let what = format!("the leader's build_entry panicked: {}", panic_message(&*panic));
                fail(&cluster, step, what, "(not built)".into())
            })?;
        let command = built.command;
        if command.ops.is_empty() {
            let ctx = EntryCtx { before: &before, command: &command, response: None, lost: false };
            sim.answer(step, built.decisions, sent, &ctx)
                .map_err(|what| fail(&cluster, step, what, "(empty)".into()))?;
            continue;
        }
        if sim.rng.gen_bool(0.006) {
            // The leader loses its term before the entry commits: what it answered at stamping
            // stands, the rest fails, and the next leader never sees the entry.
            let ctx = EntryCtx { before: &before, command: &command, response: None, lost: true };
            sim.answer(step, built.decisions, sent, &ctx)
                .map_err(|what| fail(&cluster, step, what, format!("(lost) {}", summarize(&command))))?;
            sim.stats.lost_entries += 1;
            takeover = true;
            continue;
        }
        let applied = cluster
            .apply(step, sim.leader, &command)
            .map_err(|what| fail(&cluster, step, what, summarize(&command)))?;
        let after = &cluster.replicas[sim.leader].state;
        check_entry(after, &command, &applied)
            .and_then(|()| cluster.storage.check(after))
            .map_err(|what| fail(&cluster, step, what, summarize(&command)))?;
        sim.count_applied(&before, &command, &applied);
        let ctx =
            EntryCtx { before: &before, command: &command, response: Some(&applied.response), lost: false };
        sim.answer(step, built.decisions, sent, &ctx)
            .map_err(|what| fail(&cluster, step, what, summarize(&command)))?;
        sim.check_txn_offsets(&before, &cluster.replicas[sim.leader].state, &command, &applied)
            .map_err(|what| fail(&cluster, step, what, summarize(&command)))?;
        step += 1;
    }
    Ok(sim.stats)
}

#[derive(Default)]
struct Replica {
    state: BrokerState,
    effects: EffectsDigest,
}

/// What the leader replica's apply of one entry returned.
struct Applied {
    response: CommandResponse,
    /// Its effects, one list per op.
    effects: Vec<Vec<Effect>>,
}

struct Cluster {
    replicas: Vec<Replica>,
    /// The partition files as the leader's effects describe them.
    storage: StorageModel,
    fault: Fault,
    fault_at: Option<u64>,
}

impl Cluster {
    fn new(fault: Fault) -> Self {
        Cluster {
            replicas: (0..REPLICAS).map(|_| Replica::default()).collect(),
            storage: StorageModel::default(),
            fault,
            fault_at: None,
        }
    }

    fn fault_due(&self, step: u64) -> bool {
        self.fault_at.is_none() && self.fault.first_step().is_some_and(|from| step >= from)
    }

    fn lossy_checkpoint_due(&self, step: u64) -> bool {
        matches!(self.fault, Fault::LossyCheckpoint { .. })
            && self.fault_due(step)
            && self.replicas[FAULTY].state.producers.live.values().any(|p| !p.topics.is_empty())
    }

    /// A checkpoint and restore of one replica: its state through bincode, as a snapshot.
    fn checkpoint(&mut self, replica: usize, step: u64) -> Result<(), String> {
        let lossy = replica == FAULTY && self.lossy_checkpoint_due(step);
        let state = &self.replicas[replica].state;
        let bytes = bincode::serialize(state).map_err(|e| format!("checkpoint of replica {replica}: {e}"))?;
        let mut restored: BrokerState =
            bincode::deserialize(&bytes).map_err(|e| format!("restore of replica {replica}: {e}"))?;
        if restored != *state {
            return Err(format!(
                "a checkpoint round trip changed replica {replica}'s state: {}",
                describe_state_diff(state, &restored)
            ));
        }
        if lossy {
            for producer in restored.producers.live.values_mut() {
                producer.topics.clear();
            }
            self.fault_at = Some(step);
        }
        self.replicas[replica].state = restored;
        Ok(())
    }

    /// Applies `command` on every replica and compares them.
    fn apply(&mut self, step: u64, leader: usize, command: &Command) -> Result<Applied, String> {
        let mut responses = Vec::with_capacity(REPLICAS);
        let mut leader_effects = Vec::new();
        let fault_due = self.fault_due(step);
        for (i, replica) in self.replicas.iter_mut().enumerate() {
            let faulty = i == FAULTY && fault_due;
            let skipped;
            let command = match self.fault {
                Fault::SkipOp { .. } if faulty => {
                    let mut shorter = command.clone();
                    shorter.ops.pop();
                    self.fault_at = Some(step);
                    skipped = shorter;
                    &skipped
                }
                _ => command,
            };
            let drop_one = faulty && matches!(self.fault, Fault::DropEffect { .. });
            let mut dropped = false;
            let mut per_op: Vec<Vec<Effect>> = Vec::with_capacity(command.ops.len());
            let digest = &mut replica.effects;
            let state = &mut replica.state;
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                apply_command(state, command, |_, effects: &[Effect]| {
                    for effect in effects {
                        if drop_one && !dropped {
                            dropped = true;
                            continue;
                        }
                        digest.add(effect);
                    }
                    per_op.push(effects.to_vec());
                    Ok::<(), Infallible>(())
                })
            }));
            let response = match outcome {
                Ok(Ok(response)) => response,
                Ok(Err(never)) => match never {},
                Err(panic) => {
                    return Err(format!("replica {i} panicked applying: {}", panic_message(&*panic)))
                }
            };
            if dropped {
                self.fault_at = Some(step);
            }
            if faulty && matches!(self.fault, Fault::MoveLogEnd { .. }) {
                if let Some(partition) =
                    replica.state.topics.values_mut().find_map(|t| t.partitions.first_mut())
                {
                    partition.log_end_offset += 1;
                    self.fault_at = Some(step);
                }
            }
            if i == leader {
                leader_effects = per_op;
            }
            responses.push(response);
        }
        let mut differences = Vec::new();
        let shown: Vec<String> = responses.iter().map(|r| format!("{r:?}")).collect();
        for (i, other) in shown.iter().enumerate().skip(1) {
            if *other != shown[0] {
                differences.push(format!(
                    "responses differ: replica 0 {} but replica {i} {}",
                    clip(&shown[0], 1500),
                    clip(other, 1500)
                ));
            }
        }
        for (i, replica) in self.replicas.iter().enumerate().skip(1) {
            if replica.effects != self.replicas[0].effects {
                differences.push(format!(
                    "effects digests differ: replica 0 {:?} but replica {i} {:?}",
                    self.replicas[0].effects, replica.effects
                ));
            }
        }
        let digests: Vec<u32> = self.replicas.iter().map(|r| state_digest(&r.state)).collect();
        for (i, digest) in digests.iter().enumerate().skip(1) {
            if *digest != digests[0] {
                differences.push(format!(
                    "state digests differ: replica 0 {:08x} but replica {i} {digest:08x}: {}",
                    digests[0],
                    describe_state_diff(&self.replicas[0].state, &self.replicas[i].state)
                ));
            }
        }
        if !differences.is_empty() {
            return Err(differences.join("\n"));
        }
        let response = responses.swap_remove(leader);
        if response.results.len() != command.ops.len() {
            return Err(format!("{} results for {} ops", response.results.len(), command.ops.len()));
        }
        self.storage.apply(command, &leader_effects)?;
        Ok(Applied { response, effects: leader_effects })
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else {
        "(no message)".into()
    }
}

fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &s[..end], s.len())
}

/// Where two states first differ, for the failure message.
fn describe_state_diff(a: &BrokerState, b: &BrokerState) -> String {
    let mut out = Vec::new();
    if a.cluster_id != b.cluster_id {
        out.push(format!("cluster_id {:?} vs {:?}", a.cluster_id, b.cluster_id));
    }
    if a.limits != b.limits {
        out.push(format!("limits {:?} vs {:?}", a.limits, b.limits));
    }
    let names: BTreeSet<&String> = a.topics.keys().chain(b.topics.keys()).collect();
    for name in names {
        match (a.topics.get(name), b.topics.get(name)) {
            (Some(ta), Some(tb)) if ta != tb => {
                if ta.partitions.len() != tb.partitions.len() {
                    out.push(format!(
                        "topic {name}: {} vs {} partitions",
                        ta.partitions.len(),
                        tb.partitions.len()
                    ));
                }
                for (i, (pa, pb)) in ta.partitions.iter().zip(&tb.partitions).enumerate() {
                    if pa != pb {
                        out.push(format!("{name}-{i}: {pa:?} vs {pb:?}"));
                    }
                }
                if ta.topic_id != tb.topic_id || ta.configs != tb.configs {
                    out.push(format!("topic {name}: id or configs differ"));
                }
            }
            (Some(_), None) | (None, Some(_)) => out.push(format!("topic {name} exists on one side only")),
            _ => {}
        }
    }
    if a.producers != b.producers {
        if a.producers.next_producer_id != b.producers.next_producer_id {
            out.push(format!(
                "next producer id {} vs {}",
                a.producers.next_producer_id, b.producers.next_producer_id
            ));
        }
        let ids: BTreeSet<&i64> = a.producers.live.keys().chain(b.producers.live.keys()).collect();
        if let Some(id) = ids.into_iter().find(|id| a.producers.live.get(*id) != b.producers.live.get(*id)) {
            out.push(format!(
                "producer {id}: {:?} vs {:?}",
                a.producers.live.get(id),
                b.producers.live.get(id)
            ));
        }
        if a.producers.idle_order != b.producers.idle_order {
            out.push("producers' idle order differs".into());
        }
    }
    if a.groups != b.groups {
        let ids: BTreeSet<&String> = a.groups.groups.keys().chain(b.groups.groups.keys()).collect();
        if let Some(id) = ids.into_iter().find(|id| a.groups.groups.get(*id) != b.groups.groups.get(*id)) {
            out.push(format!("group {id}: {:?} vs {:?}", a.groups.groups.get(id), b.groups.groups.get(id)));
        }
    }
    if a.txns != b.txns {
        let ids: BTreeSet<&String> = a.txns.by_id.keys().chain(b.txns.by_id.keys()).collect();
        if let Some(id) = ids.into_iter().find(|id| a.txns.by_id.get(*id) != b.txns.by_id.get(*id)) {
            out.push(format!(
                "transactional id {id}: {:?} vs {:?}",
                a.txns.by_id.get(id),
                b.txns.by_id.get(id)
            ));
        }
        if a.txns.by_producer_id != b.txns.by_producer_id {
            out.push("transactions' producer id index differs".into());
        }
    }
    if out.is_empty() {
        out.push("no field differs (the serialized bytes do)".into());
    }
    clip(&out.join("; "), 4000)
}

/// One line per entry for failure messages.
fn summarize(command: &Command) -> String {
    let ops: Vec<String> = command.ops.iter().map(summarize_op).collect();
    clip(&format!("term {} now_ms {}: {}", command.stamp.term, command.stamp.now_ms, ops.join(", ")), 3000)
}

fn summarize_op(op: &Op) -> String {
    match op {
        Op::Produce(produce) => {
            let parts: Vec<String> = produce
                .partitions
                .iter()
                .map(|a| {
                    let headers: Vec<String> = a
                        .batches
                        .iter()
                        .filter_map(|b| parse_header(b).ok())
                        .map(|h| {
                            let txn = if h.is_transactional() { " txn" } else { "" };
                            format!(
                                "@{}+{} pid {} e{} s{}{txn}",
                                h.base_offset,
                                h.record_count,
                                h.producer_id,
                                h.producer_epoch,
                                h.base_sequence
                            )
                        })
                        .collect();
                    format!("{}-{} {}", a.topic, a.partition, headers.join(" "))
                })
                .collect();
            format!("Produce[{}]", parts.join("; "))
        }
        Op::EndTxn(end) => format!(
            "EndTxn({} {} {}/{}{})",
            end.transactional_id,
            if end.txn_commit { "commit" } else { "abort" },
            end.producer.producer_id,
            end.producer.producer_epoch,
            if end.bump_epoch { " v2" } else { "" }
        ),
        other => clip(&format!("{other:?}"), 300),
    }
}

// ---------------------------------------------------------------------------------------------
// The partition files, as the effects describe them
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct StorageModel {
    partitions: BTreeMap<([u8; 16], i32), FilePartition>,
    /// Markers the last entry wrote, checked against the state after it.
    markers: Vec<MarkerSeen>,
}

#[derive(Default)]
struct FilePartition {
    log_start: i64,
    log_end: i64,
    /// Producer id → (first, last) offset of its transactional data since its last marker.
    open: BTreeMap<i64, (i64, i64)>,
}

struct MarkerSeen {
    topic_id: [u8; 16],
    partition: i32,
    producer_id: i64,
    offset: i64,
    commit: bool,
    /// The transaction's data on the partition.
    data: Option<(i64, i64)>,
}

impl StorageModel {
    /// Performs the leader's effects as a storage would, refusing any that a storage could
    /// not perform (an append not at the log end, a trim backwards).
    fn apply(&mut self, command: &Command, effects: &[Vec<Effect>]) -> Result<(), String> {
        self.markers.clear();
        for (index, effects) in effects.iter().enumerate() {
            for effect in effects {
                self.perform(effect)
                    .map_err(|e| format!("op {index} ({}): {e}", summarize_op(&command.ops[index])))?;
            }
        }
        Ok(())
    }

    fn perform(&mut self, effect: &Effect) -> Result<(), String> {
        match effect {
            Effect::CreatePartitionLog { topic_id, partition } => {
                if self.partitions.insert((*topic_id, *partition), FilePartition::default()).is_some() {
                    return Err(format!("CreatePartitionLog of existing {topic_id:?}-{partition}"));
                }
            }
            Effect::Append { topic_id, partition, batch } => {
                let file = self
                    .partitions
                    .get_mut(&(*topic_id, *partition))
                    .ok_or_else(|| format!("append to missing partition {partition} of {topic_id:?}"))?;
                let header =
                    parse_header(batch).map_err(|e| format!("appended batch does not parse: {e}"))?;
                if header.size_bytes != batch.len() || header.record_count != header.last_offset_delta + 1 {
                    return Err(format!("malformed appended batch {header:?} of {} bytes", batch.len()));
                }
                if header.base_offset != file.log_end {
                    return Err(format!(
                        "batch appended at {} to partition {partition} whose file ends at {}",
                        header.base_offset, file.log_end
                    ));
                }
                file.log_end = header.last_offset() + 1;
                if header.is_control() {
                    let commit = marker_is_commit(batch).ok_or("control batch is not a marker")?;
                    let data = file.open.remove(&header.producer_id);
                    self.markers.push(MarkerSeen {
                        topic_id: *topic_id,
                        partition: *partition,
                        producer_id: header.producer_id,
                        offset: header.base_offset,
                        commit,
                        data,
                    });
                } else if header.is_transactional() {
                    file.open.entry(header.producer_id).or_insert((header.base_offset, 0)).1 =
                        header.last_offset();
                }
            }
            Effect::DeleteTopicLogs { topic_id } => {
                let before = self.partitions.len();
                self.partitions.retain(|(id, _), _| id != topic_id);
                if self.partitions.len() == before {
                    return Err(format!("DeleteTopicLogs of unknown topic {topic_id:?}"));
                }
            }
            Effect::TrimLog { topic_id, partition, log_start_offset } => {
                let file = self
                    .partitions
                    .get_mut(&(*topic_id, *partition))
                    .ok_or_else(|| format!("trim of missing partition {partition} of {topic_id:?}"))?;
                if *log_start_offset <= file.log_start || *log_start_offset > file.log_end {
                    return Err(format!(
                        "trim to {log_start_offset} of a file spanning {}..{}",
                        file.log_start, file.log_end
                    ));
                }
                file.log_start = *log_start_offset;
            }
        }
        Ok(())
    }

    /// The state's offsets and open transactions must be what the files say, and each marker
    /// must have ended its transaction on its partition.
    fn check(&self, state: &BrokerState) -> Result<(), String> {
        let mut seen = 0;
        for (name, topic) in &state.topics {
            for (index, partition) in topic.partitions.iter().enumerate() {
                seen += 1;
                let file = self
                    .partitions
                    .get(&(topic.topic_id, index as i32))
                    .ok_or_else(|| format!("{name}-{index} exists but no effect created its log"))?;
                if (file.log_start, file.log_end) != (partition.log_start_offset, partition.log_end_offset) {
                    return Err(format!(
                        "{name}-{index}: state offsets {}..{} but the effects wrote {}..{}",
                        partition.log_start_offset, partition.log_end_offset, file.log_start, file.log_end
                    ));
                }
                let open: BTreeMap<i64, i64> =
                    file.open.iter().map(|(pid, (first, _))| (*pid, *first)).collect();
                if open != partition.open_txns {
                    return Err(format!(
                        "{name}-{index}: open transactions {:?} but the effects leave {open:?} open",
                        partition.open_txns
                    ));
                }
            }
        }
        if seen != self.partitions.len() {
            return Err(format!("{} partition logs for {seen} partitions", self.partitions.len()));
        }
        for marker in &self.markers {
            let Some((name, topic)) = state.topic_by_id(&marker.topic_id) else { continue };
            let Some(p) = topic.partitions.get(marker.partition as usize) else { continue };
            let at = format!(
                "{name}-{} marker at {} of producer {}",
                marker.partition, marker.offset, marker.producer_id
            );
            let Some((first, last)) = marker.data else {
                return Err(format!("{at}: the transaction wrote nothing there"));
            };
            if p.open_txns.contains_key(&marker.producer_id) {
                return Err(format!("{at}: the transaction is still open there"));
            }
            let indexed = p.aborted_txns.iter().find(|a| a.last_offset == marker.offset);
            if marker.commit {
                if indexed.is_some() {
                    return Err(format!("{at}: a commit is in the aborted index"));
                }
                let lso = p.last_stable_offset();
                let blocked = p.open_txns.values().any(|&f| f <= last);
                if lso <= last && !blocked {
                    return Err(format!("{at}: committed records up to {last} are not below the LSO {lso}"));
                }
            } else if indexed.is_none_or(|a| a.producer_id != marker.producer_id || a.first_offset != first) {
                return Err(format!(
                    "{at}: abort of {first}..={last} not indexed as such: {:?}",
                    p.aborted_txns
                ));
            }
        }
        Ok(())
    }
}

/// What must hold on the leader after every entry (see the module header).
fn check_entry(after: &BrokerState, command: &Command, applied: &Applied) -> Result<(), String> {
    for (index, (op, result)) in command.ops.iter().zip(&applied.response.results).enumerate() {
        let Op::Produce(produce) = op else { continue };
        match result {
            OpResult::Produced(Ok(parts)) => {
                if parts.len() != produce.partitions.len() {
                    return Err(format!(
                        "op {index}: {} results for {} partitions",
                        parts.len(),
                        produce.partitions.len()
                    ));
                }
                for (append, part) in produce.partitions.iter().zip(parts) {
                    let stamped = parse_header(&append.batches[0]).map_err(|e| e.to_string())?.base_offset;
                    if part.error_code != error_code::NONE
                        || part.base_offset != stamped
                        || part.append_time_ms != command.stamp.now_ms
                    {
                        return Err(format!(
                            "op {index}: {}-{} stamped at {stamped} by the leader, apply reports {part:?}",
                            append.topic, append.partition
                        ));
                    }
                }
            }
            // The builder runs apply's checks; a refusal here means they disagree, and writes
            // answered at stamping would be lost.
            OpResult::Produced(Err(refusal)) => {
                return Err(format!(
                    "op {index}: apply refused a produce op the entry builder stamped: {refusal:?}"
                ))
            }
            other => return Err(format!("op {index}: a produce op answered with {other:?}")),
        }
    }
    for (name, topic) in &after.topics {
        for (index, p) in topic.partitions.iter().enumerate() {
            let (start, lso, hw) = (p.log_start_offset, p.last_stable_offset(), p.high_watermark());
            if !(0 <= start && start <= lso && lso <= hw) {
                return Err(format!("{name}-{index}: log start {start}, LSO {lso}, high watermark {hw}"));
            }
            if p.aborted_txns.windows(2).any(|w| w[0].last_offset >= w[1].last_offset)
                || p.aborted_txns.iter().any(|a| a.first_offset > a.last_offset || a.last_offset >= hw)
            {
                return Err(format!("{name}-{index}: aborted index out of order: {:?}", p.aborted_txns));
            }
            for (pid, first) in &p.open_txns {
                let meta = after.txns.by_producer(*pid).map(|(_, m)| m);
                let registered = meta.is_some_and(|m| {
                    m.state == TxnState::Ongoing
                        && m.partitions.get(&(name.clone(), index as i32)) == Some(first)
                });
                if !registered {
                    return Err(format!(
                        "{name}-{index}: producer {pid} open from {first} but its transaction is {meta:?}"
                    ));
                }
            }
        }
    }
    for (tid, meta) in &after.txns.by_id {
        for ((topic, partition), first) in &meta.partitions {
            let open = after.partition(topic, *partition).and_then(|p| p.open_txns.get(&meta.producer_id));
            if meta.state != TxnState::Ongoing || open != Some(first) {
                return Err(format!(
                    "{tid} ({:?}) wrote {topic}-{partition} from {first}, the partition has it open from {open:?}",
                    meta.state
                ));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Clients and the leader's duties
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct SentBatch {
    epoch: i16,
    first_seq: i32,
    records: i32,
    bytes: Bytes,
}

/// An idempotent producer (KIP-98) as the client sees itself.
struct IdemClient {
    producer_id: i64,
    epoch: i16,
    next_seq: BTreeMap<(String, i32), i32>,
    history: BTreeMap<(String, i32), VecDeque<SentBatch>>,
}

impl IdemClient {
    fn bump_epoch(&mut self) {
        self.epoch += 1;
        self.next_seq.clear();
        self.history.clear();
    }
}

/// A transactional producer, one per transactional id; a fencing InitProducerId leaves the
/// previous instance behind as `zombie`.
struct TxnClient {
    tid: String,
    v2: bool,
    timeout_ms: i32,
    id: Option<ProducerIdEpoch>,
    zombie: Option<ProducerIdEpoch>,
    /// The step whose entry fenced `zombie`.
    fenced_at: u64,
    next_seq: BTreeMap<(String, i32), i32>,
    /// The client wrote (or holds offsets) in its current transaction.
    in_txn: bool,
    /// A write of the current transaction was answered at stamping and its entry lost.
    lost_ack: bool,
    needs_reinit: bool,
    must_abort: bool,
    last_end: Option<EndTxnOp>,
}

impl TxnClient {
    fn take_id(&mut self, id: ProducerIdEpoch) {
        if self.id != Some(id) {
            self.next_seq.clear();
        }
        self.id = Some(id);
        self.in_txn = false;
        self.lost_ack = false;
        self.needs_reinit = false;
        self.must_abort = false;
    }

    fn lose_id(&mut self) {
        self.id = None;
        self.in_txn = false;
        self.lost_ack = false;
        self.needs_reinit = false;
        self.must_abort = false;
        self.next_seq.clear();
    }

    fn on_error(&mut self, error: &TxnError, stats: &mut Stats) {
        match error {
            TxnError::Fenced => {
                stats.fenced += 1;
                self.lose_id();
            }
            // The transactional id expired (or moved to another producer id).
            TxnError::InvalidProducerIdMapping => self.lose_id(),
            TxnError::AbortedByBroker(_) => {
                stats.aborted_by_broker += 1;
                self.must_abort = true;
            }
            TxnError::InvalidState(_) => self.needs_reinit = true,
            TxnError::InvalidTimeout(_) => self.timeout_ms = 10_000,
            TxnError::ProducerIdsExhausted(_) | TxnError::CommitBeforeWrites => {}
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PartKind {
    Fresh,
    /// A deliberate sequence gap.
    Gap,
    /// A resend of a batch answered before.
    Retry,
    /// A resend queued in the same entry as the original (proposal, partition index).
    RetryInEntry(usize, usize),
}

#[derive(Debug, Clone)]
struct SentPart {
    topic: String,
    partition: i32,
    /// (producer id, epoch, first sequence), for idempotent and transactional batches.
    producer: Option<(i64, i16, i32)>,
    records: i32,
    bytes: Bytes,
    kind: PartKind,
}

/// Who sent a produce request.
#[derive(Debug, Clone, Copy)]
enum Who {
    Plain,
    Idempotent(usize),
    Txn(usize),
    /// The fenced instance of transactional client `usize`.
    Zombie(usize),
}

/// What a proposal was, to read its answer.
enum Sent {
    Duty,
    Items(ItemsKind),
    InitIdem,
    Produce { who: Who, parts: Vec<SentPart> },
    InitTxn { client: usize, fencing: bool },
    TxnOffsets { client: usize },
    EndTxn { client: usize, zombie: bool, retry: bool, commit: bool, v2: bool },
    OffsetDelete { offsets: u64 },
}

#[derive(Clone, Copy)]
enum ItemsKind {
    CreateTopics,
    DeleteTopics,
    CreatePartitions,
    OffsetCommit,
    DeleteGroups,
}

/// The proposals of the entry being generated.
#[derive(Default)]
struct Queue {
    proposals: Vec<Proposal>,
    sent: Vec<Sent>,
    busy_txn: BTreeSet<usize>,
    busy_zombie: BTreeSet<usize>,
    /// Sequences handed out in this entry: (idempotent client, topic, partition) → next.
    idem_next: BTreeMap<(usize, String, i32), i32>,
    txn_next: BTreeMap<(usize, String, i32), i32>,
}

impl Queue {
    fn push(&mut self, proposal: Proposal, sent: Sent) -> usize {
        self.proposals.push(proposal);
        self.sent.push(sent);
        self.proposals.len() - 1
    }

    fn duty(&mut self, op: Op) {
        self.push(Proposal::Op(op), Sent::Duty);
    }
}

/// What answering an entry's proposals needs from it.
struct EntryCtx<'a> {
    before: &'a BrokerState,
    command: &'a Command,
    /// None when the entry was not applied.
    response: Option<&'a CommandResponse>,
    lost: bool,
}

struct Sim {
    seed: u64,
    rng: StdRng,
    now_ms: i64,
    term: i32,
    leader: usize,
    limits: ReplicatedLimits,
    options: EntryOptions,
    topic_serial: u64,
    tag: u64,
    /// The clock moved far since the last entry: the leader's periodic duties are due.
    jumped: bool,
    idem: Vec<IdemClient>,
    txn: Vec<TxnClient>,
    stats: Stats,
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let mut rng = StdRng::seed_from_u64(seed);
        let txn = (0..TRANSACTIONAL_IDS)
            .map(|i| TxnClient {
                tid: format!("tx{i}"),
                v2: rng.gen_bool(0.5),
                timeout_ms: [2_000, 10_000, 30_000][i % 3],
                id: None,
                zombie: None,
                fenced_at: 0,
                next_seq: BTreeMap::new(),
                in_txn: false,
                lost_ack: false,
                needs_reinit: false,
                must_abort: false,
                last_end: None,
            })
            .collect();
        Sim {
            seed,
            rng,
            now_ms: 1_700_000_000_000,
            term: 0,
            leader: 0,
            limits: ReplicatedLimits::default(),
            options: EntryOptions::default(),
            topic_serial: 0,
            tag: 0,
            jumped: false,
            idem: Vec::new(),
            txn,
            stats: Stats::default(),
        }
    }

    fn stamp(&self) -> LeaderStamp {
        LeaderStamp { now_ms: self.now_ms, term: self.term }
    }

    /// A new leader: another replica perhaps, its own limits and entry options.
    fn new_term(&mut self) {
        self.term += self.rng.gen_range(1..=2);
        self.leader = self.rng.gen_range(0..REPLICAS);
        if self.term <= 2 || self.rng.gen_bool(0.6) {
            let previous = self.limits;
            while self.limits == previous {
                self.limits = limits_preset(&mut self.rng);
            }
        }
        self.options = EntryOptions { log_append_time_default: self.rng.gen_bool(0.25) };
        self.stats.terms += 1;
    }

    /// The leader's clock: mostly a few ms per entry, sometimes long enough for transaction
    /// timeouts, rarely long enough for producer and transactional-id expiry.
    fn advance_clock(&mut self) {
        let longest = self.limits.producer_id_expiration_ms.max(self.limits.transactional_id_expiration_ms);
        let elapsed = match self.rng.gen_range(0..1000) {
            // Long enough, about half the time, for idle ids to expire.
            0..=8 => self.rng.gen_range(longest / 2..longest * 3 / 2),
            9..=28 => self.rng.gen_range(20_000..120_000),
            29..=88 => self.rng.gen_range(1_000..5_000),
            _ => self.rng.gen_range(0..30),
        };
        self.now_ms += elapsed;
        self.jumped = elapsed >= 20_000;
    }

    /// Counts what an applied entry did (from the leader's effects and the state before it).
    fn count_applied(&mut self, before: &BrokerState, command: &Command, applied: &Applied) {
        self.stats.entries += 1;
        self.stats.ops += command.ops.len();
        let now = command.stamp.now_ms;
        for (op, effects) in command.ops.iter().zip(&applied.effects) {
            let pids: BTreeSet<i64> = effects
                .iter()
                .filter_map(|e| match e {
                    Effect::Append { batch, .. } => parse_header(batch).ok().filter(BatchHeader::is_control),
                    _ => None,
                })
                .map(|h| h.producer_id)
                .collect();
            match op {
                Op::SetLimits(_) => self.stats.set_limits += 1,
                Op::AbortTxns(abort) => {
                    let n = pids.len() as u64;
                    match abort.reason {
                        BrokerAbort::Timeout => self.stats.timeout_aborts += n,
                        BrokerAbort::Takeover => self.stats.takeover_aborts += n,
                        BrokerAbort::Admin => self.stats.admin_aborts += n,
                    }
                }
                Op::InitTxnProducer(_) if !pids.is_empty() => self.stats.fencing_aborts += 1,
                Op::EndTxn(end) if !pids.is_empty() => {
                    if end.txn_commit {
                        self.stats.txn_commits += 1;
                    } else {
                        self.stats.txn_aborts += 1;
                    }
                }
                Op::ExpireProducers(_) => {
                    self.stats.producers_expired +=
                        before.producers.expirable(now, before.limits.producer_id_expiration_ms) as u64;
                }
                Op::ExpireTransactionalIds(_) => {
                    let expiration = before.limits.transactional_id_expiration_ms;
                    self.stats.txn_ids_expired += before
                        .txns
                        .by_id
                        .values()
                        .filter(|m| m.state != TxnState::Ongoing && now - m.last_update_ms >= expiration)
                        .count() as u64;
                }
                _ => {}
            }
            for effect in effects {
                match effect {
                    Effect::Append { topic_id, partition, batch } => {
                        let Ok(header) = parse_header(batch) else { continue };
                        if header.is_control() {
                            if marker_is_commit(batch) == Some(true) {
                                self.stats.commit_markers += 1;
                            } else {
                                self.stats.abort_markers += 1;
                            }
                            continue;
                        }
                        self.stats.records += header.record_count as u64;
                        self.stats.partitions_written.insert((*topic_id, *partition));
                        if header.is_transactional() {
                            self.stats.txn_batches += 1;
                        } else if header.producer_id >= 0 {
                            self.stats.idempotent_batches += 1;
                        } else {
                            self.stats.plain_batches += 1;
                        }
                    }
                    Effect::TrimLog { .. } => self.stats.trims += 1,
                    Effect::CreatePartitionLog { .. } | Effect::DeleteTopicLogs { .. } => {}
                }
            }
        }
    }

    // --- generation ------------------------------------------------------------------------

    fn generate(&mut self, state: &BrokerState, step: u64) -> (Vec<Proposal>, Vec<Sent>) {
        let mut q = Queue::default();
        if self.idem.len() > IDEMPOTENT_CLIENTS_MAX {
            self.idem.remove(0);
        }
        if state.cluster_id.is_none() {
            q.duty(Op::InitCluster(InitClusterOp { cluster_id: format!("replay-{}", self.seed) }));
        }
        if state.topics.len() < 3 {
            self.create_topics(&mut q);
        }
        // Requests queued while the previous entry was in flight: a few, or many under load.
        let actions = match self.rng.gen_range(0..10) {
            0..=2 => self.rng.gen_range(1..=3),
            3..=7 => self.rng.gen_range(4..=9),
            _ => self.rng.gen_range(10..=20),
        };
        // After a long pause the leader's periodic duties (timeouts, expiry) come due together,
        // somewhere among the queued requests.
        let duties_at = if self.jumped { Some(self.rng.gen_range(0..=actions)) } else { None };
        for action in 0..=actions {
            if duties_at == Some(action) {
                self.abort_timed_out(state, &mut q);
                if self.rng.gen_bool(0.6) {
                    q.duty(Op::ExpireProducers(ExpireProducersOp {}));
                }
                if self.rng.gen_bool(0.6) {
                    q.duty(Op::ExpireTransactionalIds(ExpireTransactionalIdsOp {}));
                }
            }
            if action == actions {
                break;
            }
            match self.rng.gen_range(0..1000) {
                0..=119 => self.plain_produce(state, &mut q),
                120..=349 => self.idempotent_produce(state, &mut q),
                350..=379 => self.init_idempotent(&mut q),
                380..=779 => self.txn_action(state, &mut q),
                780..=799 => self.zombie_action(state, &mut q, step),
                800..=929 => self.group_action(state, &mut q),
                930..=949 => self.trim(state, &mut q),
                950..=969 => self.abort_timed_out(state, &mut q),
                970..=976 => q.duty(Op::ExpireProducers(ExpireProducersOp {})),
                977..=983 => q.duty(Op::ExpireTransactionalIds(ExpireTransactionalIdsOp {})),
                984..=988 => self.admin_abort(state, &mut q),
                989..=993 => self.create_topics(&mut q),
                994..=996 => self.create_partitions(state, &mut q),
                _ => self.delete_topic(state, &mut q),
            }
        }
        (q.proposals, q.sent)
    }

    fn next_tag(&mut self) -> u64 {
        self.tag += 1;
        self.tag
    }

    /// A partition of an existing topic; rarely one past the end or of a missing topic.
    fn pick_partition(&mut self, state: &BrokerState) -> Option<(String, i32)> {
        if state.topics.is_empty() {
            return None;
        }
        if self.rng.gen_bool(0.005) {
            return Some((TOPICS[self.rng.gen_range(0..TOPICS.len())].to_string(), 0));
        }
        let (name, topic) = state.topics.iter().nth(self.rng.gen_range(0..state.topics.len()))?;
        let count = topic.partitions.len() as i32;
        let partition = if self.rng.gen_bool(0.01) { count } else { self.rng.gen_range(0..count) };
        Some((name.clone(), partition))
    }

    fn pick_partitions(&mut self, state: &BrokerState, max: usize) -> Vec<(String, i32)> {
        let want = self.rng.gen_range(1..=max);
        let mut picked: Vec<(String, i32)> = Vec::new();
        for _ in 0..want {
            if let Some(p) = self.pick_partition(state) {
                if !picked.contains(&p) {
                    picked.push(p);
                }
            }
        }
        picked
    }

    fn batch(&mut self, records: i32, producer: Option<(i64, i16, i32)>, transactional: bool) -> Bytes {
        let tag = self.next_tag();
        let timestamp = self.now_ms - self.rng.gen_range(0..2_000);
        encode_batch(records, producer, transactional, timestamp, tag)
    }

    fn plain_produce(&mut self, state: &BrokerState, q: &mut Queue) {
        let mut parts = Vec::new();
        let mut appends = Vec::new();
        for (topic, partition) in self.pick_partitions(state, 3) {
            let mut bytes = BytesMut::new();
            let mut records = 0;
            for _ in 0..self.rng.gen_range(1..=2) {
                let n = self.rng.gen_range(1..=5);
                records += n;
                bytes.extend_from_slice(&self.batch(n, None, false));
            }
            let bytes = bytes.freeze();
            appends.push(unstamped(&topic, partition, &bytes));
            parts.push(SentPart { topic, partition, producer: None, records, bytes, kind: PartKind::Fresh });
        }
        if !appends.is_empty() {
            q.push(Proposal::Produce(appends), Sent::Produce { who: Who::Plain, parts });
        }
    }

    fn init_idempotent(&mut self, q: &mut Queue) {
        q.push(Proposal::Op(Op::InitProducerId(InitProducerIdOp {})), Sent::InitIdem);
    }

    fn idempotent_produce(&mut self, state: &BrokerState, q: &mut Queue) {
        if self.idem.is_empty() {
            return self.init_idempotent(q);
        }
        let c = self.rng.gen_range(0..self.idem.len());
        if self.rng.gen_bool(0.01) {
            // A client that lost track of its sequences (KIP-360): a new epoch from 0.
            self.idem[c].bump_epoch();
        }
        if self.rng.gen_bool(0.12) && !self.idem[c].history.is_empty() {
            // A retry of a batch sent before: the same bytes again.
            let client = &self.idem[c];
            let keys: Vec<&(String, i32)> = client.history.keys().collect();
            let key = keys[self.rng.gen_range(0..keys.len())].clone();
            let sent = &client.history[&key];
            let batch = sent[self.rng.gen_range(0..sent.len())].clone();
            let part = SentPart {
                topic: key.0.clone(),
                partition: key.1,
                producer: Some((client.producer_id, batch.epoch, batch.first_seq)),
                records: batch.records,
                bytes: batch.bytes.clone(),
                kind: PartKind::Retry,
            };
            let append = unstamped(&key.0, key.1, &batch.bytes);
            q.push(
                Proposal::Produce(vec![append]),
                Sent::Produce { who: Who::Idempotent(c), parts: vec![part] },
            );
            return;
        }
        let (pid, epoch) = (self.idem[c].producer_id, self.idem[c].epoch);
        let mut parts = Vec::new();
        let mut appends = Vec::new();
        for (topic, partition) in self.pick_partitions(state, 3) {
            let key = (c, topic.clone(), partition);
            let next = match q.idem_next.get(&key) {
                Some(next) => *next,
                None => self.idem[c].next_seq.get(&(topic.clone(), partition)).copied().unwrap_or(0),
            };
            let records = self.rng.gen_range(1..=4);
            let gap = self.rng.gen_bool(0.03);
            let first_seq = if gap { next + self.rng.gen_range(1..=3) } else { next };
            if !gap {
                q.idem_next.insert(key, first_seq + records);
            }
            let bytes = self.batch(records, Some((pid, epoch, first_seq)), false);
            appends.push(unstamped(&topic, partition, &bytes));
            let kind = if gap { PartKind::Gap } else { PartKind::Fresh };
            parts.push(SentPart {
                topic,
                partition,
                producer: Some((pid, epoch, first_seq)),
                records,
                bytes,
                kind,
            });
        }
        if appends.is_empty() {
            return;
        }
        let retry = self.rng.gen_bool(0.05).then(|| parts.clone());
        let index = q.push(Proposal::Produce(appends), Sent::Produce { who: Who::Idempotent(c), parts });
        if let Some(parts) = retry {
            // A retry queued behind its original, before either is answered.
            let appends = parts.iter().map(|p| unstamped(&p.topic, p.partition, &p.bytes)).collect();
            let parts = parts
                .into_iter()
                .enumerate()
                .map(|(k, p)| SentPart { kind: PartKind::RetryInEntry(index, k), ..p })
                .collect();
            q.push(Proposal::Produce(appends), Sent::Produce { who: Who::Idempotent(c), parts });
        }
    }

    fn txn_action(&mut self, state: &BrokerState, q: &mut Queue) {
        let c = self.rng.gen_range(0..self.txn.len());
        // The last two clients are mostly idle: their ids expire, and they come back to find it.
        if c + 2 >= self.txn.len() && self.rng.gen_bool(0.9) {
            return;
        }
        if !q.busy_txn.insert(c) {
            return;
        }
        let client = &self.txn[c];
        let tid = client.tid.clone();
        let Some(id) = client.id else {
            if self.rng.gen_bool(0.3) {
                self.txn[c].v2 = self.rng.gen_bool(0.5);
            }
            return self.init_txn(q, c, None);
        };
        if client.needs_reinit {
            return self.init_txn(q, c, Some(id));
        }
        if client.must_abort {
            return self.end_txn(q, c, id, false);
        }
        let in_txn = client.in_txn;
        match self.rng.gen_range(0..100) {
            0..=51 => {
                self.txn_produce(state, q, c, id);
                if in_txn && self.rng.gen_bool(0.05) {
                    // EndTxn queued behind the transaction's last write (kafka-clients 4.x).
                    let commit = self.rng.gen_bool(0.7);
                    self.end_txn(q, c, id, commit);
                }
            }
            52..=61 => self.txn_offset_commit(state, q, c, id, &tid),
            62..=88 => {
                if in_txn || self.rng.gen_bool(0.15) {
                    let commit = self.rng.gen_bool(0.7);
                    self.end_txn(q, c, id, commit);
                } else {
                    self.txn_produce(state, q, c, id);
                }
            }
            89..=91 => {
                // A retry of the last EndTxn, as after a lost answer: between transactions.
                if let Some(end) = self.txn[c].last_end.clone().filter(|_| !in_txn) {
                    let (commit, v2) = (end.txn_commit, end.bump_epoch);
                    q.push(
                        Proposal::Op(Op::EndTxn(end)),
                        Sent::EndTxn { client: c, zombie: false, retry: true, commit, v2 },
                    );
                }
            }
            92..=95 => {
                // A second instance with the same transactional id: fences this one.
                if self.rng.gen_bool(0.3) {
                    self.txn[c].v2 = !self.txn[c].v2;
                }
                self.init_txn(q, c, None);
            }
            96..=98 => self.init_txn(q, c, Some(id)),
            _ => {
                let timeout_ms = if self.rng.gen_bool(0.5) { 0 } else { self.limits.txn_timeout_ms_max + 1 };
                let op = InitTxnProducerOp { transactional_id: tid, timeout_ms, expected: Some(id) };
                q.push(Proposal::Op(Op::InitTxnProducer(op)), Sent::InitTxn { client: c, fencing: false });
            }
        }
    }

    fn init_txn(&mut self, q: &mut Queue, c: usize, expected: Option<ProducerIdEpoch>) {
        let client = &self.txn[c];
        let op = InitTxnProducerOp {
            transactional_id: client.tid.clone(),
            timeout_ms: client.timeout_ms,
            expected,
        };
        let fencing = expected.is_none() && client.id.is_some();
        q.push(Proposal::Op(Op::InitTxnProducer(op)), Sent::InitTxn { client: c, fencing });
    }

    fn end_txn(&mut self, q: &mut Queue, c: usize, id: ProducerIdEpoch, commit: bool) {
        let client = &mut self.txn[c];
        let op = EndTxnOp {
            transactional_id: client.tid.clone(),
            producer: id,
            txn_commit: commit,
            bump_epoch: client.v2,
        };
        client.last_end = Some(op.clone());
        let v2 = client.v2;
        q.push(
            Proposal::Op(Op::EndTxn(op)),
            Sent::EndTxn { client: c, zombie: false, retry: false, commit, v2 },
        );
    }

    /// A transactional write, admitted as the produce handler admits it: against the applied
    /// state, before the entry is built.
    fn txn_produce(&mut self, state: &BrokerState, q: &mut Queue, c: usize, id: ProducerIdEpoch) {
        if let Err(error) = state.txns.check_write(id) {
            self.txn[c].on_error(&error, &mut self.stats);
            return;
        }
        let mut parts = Vec::new();
        let mut appends = Vec::new();
        for (topic, partition) in self.pick_partitions(state, 3) {
            let key = (c, topic.clone(), partition);
            let seq = match q.txn_next.get(&key) {
                Some(next) => *next,
                None => self.txn[c].next_seq.get(&(topic.clone(), partition)).copied().unwrap_or(0),
            };
            let records = self.rng.gen_range(1..=4);
            q.txn_next.insert(key, seq + records);
            let producer = Some((id.producer_id, id.producer_epoch, seq));
            let bytes = self.batch(records, producer, true);
            appends.push(unstamped(&topic, partition, &bytes));
            parts.push(SentPart { topic, partition, producer, records, bytes, kind: PartKind::Fresh });
        }
        if !appends.is_empty() {
            q.push(Proposal::ProduceTransactional(appends), Sent::Produce { who: Who::Txn(c), parts });
        }
    }

    fn txn_offset_commit(
        &mut self,
        state: &BrokerState,
        q: &mut Queue,
        c: usize,
        id: ProducerIdEpoch,
        tid: &str,
    ) {
        let group = GROUPS[self.rng.gen_range(0..GROUPS.len())];
        let (generation_id, member_id) = self.member_of(state, group);
        let commits = self.commits(state);
        let op = TxnOffsetCommitOp {
            transactional_id: tid.to_string(),
            producer: id,
            group_id: group.into(),
            generation_id,
            member_id,
            commits,
        };
        q.push(Proposal::Op(Op::TxnOffsetCommit(op)), Sent::TxnOffsets { client: c });
    }

    /// The instance a fencing InitProducerId left behind sends late requests: its EndTxn
    /// reaches the log, its writes are refused by the produce handler, except one admitted
    /// just before the fencing entry applied.
    fn zombie_action(&mut self, state: &BrokerState, q: &mut Queue, step: u64) {
        let zombies: Vec<usize> = (0..self.txn.len()).filter(|&c| self.txn[c].zombie.is_some()).collect();
        if zombies.is_empty() {
            return;
        }
        let c = zombies[self.rng.gen_range(0..zombies.len())];
        if !q.busy_zombie.insert(c) {
            return;
        }
        let client = &self.txn[c];
        let zombie = client.zombie.expect("picked");
        let raced = client.fenced_at + 1 == step;
        if self.rng.gen_bool(0.5) && !raced {
            let commit = self.rng.gen_bool(0.5);
            let v2 = client.v2;
            let op = EndTxnOp {
                transactional_id: client.tid.clone(),
                producer: zombie,
                txn_commit: commit,
                bump_epoch: v2,
            };
            q.push(
                Proposal::Op(Op::EndTxn(op)),
                Sent::EndTxn { client: c, zombie: true, retry: false, commit, v2 },
            );
            return;
        }
        if !raced && state.txns.check_write(zombie).is_err() {
            self.stats.fenced += 1; // Refused by the handler.
            return;
        }
        let Some((topic, partition)) = self.pick_partition(state) else { return };
        let records = self.rng.gen_range(1..=3);
        let seq = self.rng.gen_range(0..20);
        let producer = Some((zombie.producer_id, zombie.producer_epoch, seq));
        let bytes = self.batch(records, producer, true);
        let append = unstamped(&topic, partition, &bytes);
        let part = SentPart { topic, partition, producer, records, bytes, kind: PartKind::Fresh };
        q.push(
            Proposal::ProduceTransactional(vec![append]),
            Sent::Produce { who: Who::Zombie(c), parts: vec![part] },
        );
    }

    /// A generation and member for a commit to `group`: mostly a simple consumer (-1), else
    /// the recorded generation with one of its members, a stale one, an unknown member or a
    /// generation the log has not seen yet.
    fn member_of(&mut self, state: &BrokerState, group: &str) -> (i32, String) {
        let recorded = state.groups.groups.get(group).and_then(|g| g.generation.as_ref());
        match (self.rng.gen_range(0..10), recorded) {
            (0..=3, _) | (_, None) => (-1, String::new()),
            (4..=6, Some(g)) => {
                let member = g.members.first().map_or("m0".to_string(), |m| m.member_id.clone());
                (g.generation_id, member)
            }
            (7, Some(g)) => (g.generation_id - 1, "m0".into()),
            (8, Some(g)) => (g.generation_id, "stranger".into()),
            (_, Some(g)) => (g.generation_id + 1, "m1".into()),
        }
    }

    fn commits(&mut self, state: &BrokerState) -> Vec<OffsetCommitEntry> {
        let metadata_max = self.limits.offset_metadata_bytes_max;
        self.pick_partitions(state, 3)
            .into_iter()
            .map(|(topic, partition)| {
                let end = state.partition(&topic, partition).map_or(0, |p| p.log_end_offset);
                let metadata = match self.rng.gen_range(0..10) {
                    0..=5 => None,
                    6..=8 => Some(format!("c{}", self.rng.gen_range(0..100))),
                    _ => Some("x".repeat(metadata_max + 1)),
                };
                OffsetCommitEntry {
                    topic,
                    partition,
                    offset: self.rng.gen_range(0..=end + 2),
                    leader_epoch: self.rng.gen_range(-1..=self.term),
                    metadata,
                }
            })
            .collect()
    }

    fn group_action(&mut self, state: &BrokerState, q: &mut Queue) {
        let group = GROUPS[self.rng.gen_range(0..GROUPS.len())];
        let recorded = state.groups.groups.get(group).and_then(|g| g.generation.as_ref());
        let recorded_id = recorded.map_or(0, |g| g.generation_id);
        match self.rng.gen_range(0..100) {
            0..=49 => {
                let (generation_id, member_id) = self.member_of(state, group);
                let commits = self.commits(state);
                let op = OffsetCommitOp { group_id: group.into(), generation_id, member_id, commits };
                q.push(Proposal::Op(Op::OffsetCommit(op)), Sent::Items(ItemsKind::OffsetCommit));
            }
            50..=71 => {
                let generation_id = if self.rng.gen_bool(0.1) { recorded_id - 1 } else { recorded_id + 1 };
                let members = (0..self.rng.gen_range(0..=3))
                    .map(|i| GenerationMember {
                        member_id: MEMBERS[(i + self.rng.gen_range(0..MEMBERS.len())) % MEMBERS.len()].into(),
                        group_instance_id: self.rng.gen_bool(0.3).then(|| format!("instance-{i}")),
                        session_timeout_ms: 45_000,
                        rebalance_timeout_ms: 300_000,
                    })
                    .collect();
                let op = GenerationOp {
                    group_id: group.into(),
                    generation_id,
                    protocol_type: "consumer".into(),
                    protocol_name: if self.rng.gen_bool(0.5) { "range" } else { "cooperative-sticky" }.into(),
                    members,
                };
                self.stats.generations += 1;
                q.duty(Op::CompleteGeneration(op));
            }
            72..=87 => {
                let committed: Vec<(String, i32)> = state
                    .groups
                    .groups
                    .get(group)
                    .map(|g| {
                        g.offsets.iter().flat_map(|(t, ps)| ps.keys().map(move |p| (t.clone(), *p))).collect()
                    })
                    .unwrap_or_default();
                let mut partitions: Vec<(String, i32)> = Vec::new();
                for _ in 0..self.rng.gen_range(1..=2) {
                    if !committed.is_empty() {
                        let p = committed[self.rng.gen_range(0..committed.len())].clone();
                        if !partitions.contains(&p) {
                            partitions.push(p);
                        }
                    }
                }
                if self.rng.gen_bool(0.2) {
                    if let Some(p) = self.pick_partition(state) {
                        if !partitions.contains(&p) {
                            partitions.push(p);
                        }
                    }
                }
                let offsets = partitions.iter().filter(|p| committed.contains(p)).count() as u64;
                let op = OffsetDeleteOp { group_id: group.into(), partitions };
                q.push(Proposal::Op(Op::OffsetDelete(op)), Sent::OffsetDelete { offsets });
            }
            _ => {
                let mut groups = vec![GroupDeletion {
                    group_id: group.into(),
                    generation_id: recorded_id + self.rng.gen_range(0..=1),
                }];
                if self.rng.gen_bool(0.3) {
                    let other = GROUPS[self.rng.gen_range(0..GROUPS.len())];
                    if other != group {
                        groups.push(GroupDeletion { group_id: other.into(), generation_id: 0 });
                    }
                }
                q.push(
                    Proposal::Op(Op::DeleteGroups(DeleteGroupsOp { groups })),
                    Sent::Items(ItemsKind::DeleteGroups),
                );
            }
        }
    }

    /// Retention: the leader moves log starts forward, sometimes past the last stable offset
    /// (apply holds them there) or backwards (apply ignores it).
    fn trim(&mut self, state: &BrokerState, q: &mut Queue) {
        let trims: Vec<TrimLog> = self
            .pick_partitions(state, 3)
            .into_iter()
            .map(|(topic, partition)| {
                let (start, end) = state
                    .partition(&topic, partition)
                    .map_or((0, 0), |p| (p.log_start_offset, p.log_end_offset));
                let log_start_offset = self.rng.gen_range(start.saturating_sub(2)..=end + 2);
                TrimLog { topic, partition, log_start_offset }
            })
            .collect();
        if !trims.is_empty() {
            q.duty(Op::TrimLog(TrimLogOp { trims }));
        }
    }

    /// The leader's timeout duty: every open transaction past its timeout, as it sees them.
    fn abort_timed_out(&mut self, state: &BrokerState, q: &mut Queue) {
        let now = self.now_ms;
        let due: Vec<(String, ProducerIdEpoch)> = state
            .txns
            .by_id
            .iter()
            .filter(|(_, m)| m.state == TxnState::Ongoing && now - m.start_ms > i64::from(m.timeout_ms))
            .map(|(id, m)| {
                (id.clone(), ProducerIdEpoch { producer_id: m.producer_id, producer_epoch: m.producer_epoch })
            })
            .collect();
        if !due.is_empty() {
            q.duty(Op::AbortTxns(AbortTxnsOp { reason: BrokerAbort::Timeout, transactions: due }));
        }
    }

    /// `kafka-transactions.sh abort`, sometimes naming an epoch that has moved on.
    fn admin_abort(&mut self, state: &BrokerState, q: &mut Queue) {
        if state.txns.by_id.is_empty() {
            return;
        }
        let (tid, meta) =
            state.txns.by_id.iter().nth(self.rng.gen_range(0..state.txns.by_id.len())).expect("in range");
        let stale = i16::from(self.rng.gen_bool(0.3));
        let seen =
            ProducerIdEpoch { producer_id: meta.producer_id, producer_epoch: meta.producer_epoch - stale };
        let reason = if self.rng.gen_bool(0.8) { BrokerAbort::Admin } else { BrokerAbort::Takeover };
        q.duty(Op::AbortTxns(AbortTxnsOp { reason, transactions: vec![(tid.clone(), seen)] }));
    }

    fn create_topics(&mut self, q: &mut Queue) {
        let topics = (0..self.rng.gen_range(1..=2))
            .map(|_| {
                self.topic_serial += 1;
                let mut topic_id = [0u8; 16];
                topic_id[..8].copy_from_slice(&self.seed.to_be_bytes());
                topic_id[8..].copy_from_slice(&self.topic_serial.to_be_bytes());
                let timestamp_type = match self.rng.gen_range(0..10) {
                    0..=2 => Some("LogAppendTime"),
                    3 => Some("CreateTime"),
                    _ => None,
                };
                let configs: BTreeMap<String, String> = timestamp_type
                    .map(|t| ("message.timestamp.type".to_string(), t.to_string()))
                    .into_iter()
                    .collect();
                NewTopic {
                    name: TOPICS[self.rng.gen_range(0..TOPICS.len())].into(),
                    topic_id,
                    partitions: if self.rng.gen_bool(0.03) { 0 } else { self.rng.gen_range(1..=4) },
                    replication_factor: 3,
                    configs,
                }
            })
            .collect();
        q.push(
            Proposal::Op(Op::CreateTopics(CreateTopicsOp { topics })),
            Sent::Items(ItemsKind::CreateTopics),
        );
    }

    fn create_partitions(&mut self, state: &BrokerState, q: &mut Queue) {
        let Some((topic, _)) = self.pick_partition(state) else { return };
        let current = state.topics.get(&topic).map_or(0, |t| t.partitions.len() as i32);
        let count = current + self.rng.gen_range(-1..=2);
        let op = CreatePartitionsOp { topics: vec![NewPartitions { topic, count }] };
        q.push(Proposal::Op(Op::CreatePartitions(op)), Sent::Items(ItemsKind::CreatePartitions));
    }

    fn delete_topic(&mut self, state: &BrokerState, q: &mut Queue) {
        if state.topics.len() < 4 {
            return;
        }
        let name =
            state.topics.keys().nth(self.rng.gen_range(0..state.topics.len())).expect("in range").clone();
        q.push(
            Proposal::Op(Op::DeleteTopics(DeleteTopicsOp { names: vec![name] })),
            Sent::Items(ItemsKind::DeleteTopics),
        );
    }

    // --- answers ---------------------------------------------------------------------------

    /// Delivers each proposal's answer to its client, checking what can be checked.
    fn answer(
        &mut self,
        step: u64,
        decisions: Vec<Decision>,
        sent: Vec<Sent>,
        ctx: &EntryCtx,
    ) -> Result<(), String> {
        if decisions.len() != sent.len() {
            return Err(format!("{} decisions for {} proposals", decisions.len(), sent.len()));
        }
        let answers: Vec<(bool, Option<Answer>)> = decisions
            .into_iter()
            .map(|d| match d {
                Decision::Answered(answer) => (true, Some(answer)),
                Decision::Waiting(w) => match ctx.response {
                    Some(response) => (false, Some(w.answer(&response.results))),
                    None => (false, w.failed(error_code::NOT_LEADER_OR_FOLLOWER, "the entry was lost")),
                },
            })
            .collect();
        for (index, (sent, (early, answer))) in sent.into_iter().zip(&answers).enumerate() {
            let answer = answer.as_ref();
            match sent {
                Sent::Produce { who, parts } => {
                    let results = produced(answer, parts.len(), index)?;
                    self.on_produced(ctx, &answers, *early, who, &parts, results)?;
                }
                Sent::Duty => {}
                Sent::Items(kind) => {
                    let items = match op_result(answer, index)? {
                        Some(OpResult::Items(items)) => items,
                        None => continue,
                        Some(other) => {
                            return Err(format!("proposal {index}: items answered with {other:?}"))
                        }
                    };
                    let ok = items.iter().filter(|(code, _)| *code == error_code::NONE).count() as u64;
                    match kind {
                        ItemsKind::CreateTopics => self.stats.topics_created += ok,
                        ItemsKind::DeleteTopics => self.stats.topics_deleted += ok,
                        ItemsKind::CreatePartitions => self.stats.partitions_added += ok,
                        ItemsKind::DeleteGroups => self.stats.groups_deleted += ok,
                        ItemsKind::OffsetCommit => {
                            self.stats.offsets_committed += ok;
                            self.stats.offset_commits_refused += items.len() as u64 - ok;
                        }
                    }
                }
                Sent::InitIdem => match op_result(answer, index)? {
                    Some(OpResult::ProducerId(Ok(id))) => {
                        self.stats.idempotent_inits += 1;
                        self.idem.push(IdemClient {
                            producer_id: id.producer_id,
                            epoch: id.producer_epoch,
                            next_seq: BTreeMap::new(),
                            history: BTreeMap::new(),
                        });
                    }
                    Some(OpResult::ProducerId(Err(_))) | None => {}
                    Some(other) => {
                        return Err(format!("proposal {index}: InitProducerId answered with {other:?}"))
                    }
                },
                Sent::InitTxn { client, fencing } => match op_result(answer, index)? {
                    Some(OpResult::Txn(Ok(id))) => {
                        self.stats.txn_inits += 1;
                        let c = &mut self.txn[client];
                        if fencing {
                            if let Some(old) = c.id.filter(|old| *old != id) {
                                c.zombie = Some(old);
                                c.fenced_at = step;
                            }
                        }
                        c.take_id(id);
                    }
                    Some(OpResult::Txn(Err(e))) => self.txn[client].on_error(&e, &mut self.stats),
                    None => {}
                    Some(other) => {
                        return Err(format!("proposal {index}: InitProducerId answered with {other:?}"))
                    }
                },
                Sent::TxnOffsets { client } => match op_result(answer, index)? {
                    Some(OpResult::TxnOffsets(Ok(results))) => {
                        let held =
                            results.iter().filter(|(code, _)| *code == error_code::NONE).count() as u64;
                        self.stats.txn_offsets_held += held;
                        if held > 0 {
                            self.txn[client].in_txn = true;
                        }
                    }
                    Some(OpResult::TxnOffsets(Err(e))) => self.txn[client].on_error(&e, &mut self.stats),
                    None => {}
                    Some(other) => {
                        return Err(format!("proposal {index}: TxnOffsetCommit answered with {other:?}"))
                    }
                },
                Sent::EndTxn { client, zombie, retry, commit, v2 } => {
                    let result = match op_result(answer, index)? {
                        Some(OpResult::Txn(result)) => result,
                        None => continue,
                        Some(other) => {
                            return Err(format!("proposal {index}: EndTxn answered with {other:?}"))
                        }
                    };
                    if v2 {
                        self.stats.v2_end_txns += 1;
                    } else {
                        self.stats.v1_end_txns += 1;
                    }
                    let c = &mut self.txn[client];
                    match result {
                        Ok(id) if zombie => {
                            return Err(format!(
                                "{}: the fenced instance {:?} ended a transaction ({}), answered {id:?}",
                                c.tid,
                                c.zombie,
                                if commit { "commit" } else { "abort" }
                            ))
                        }
                        Err(_) if zombie => self.stats.fenced += 1,
                        _ if retry => {}
                        Ok(id) => {
                            if commit && c.lost_ack {
                                return Err(format!(
                                    "{}: committed ({id:?}) although a write it was told succeeded was lost \
                                     with its entry",
                                    c.tid
                                ));
                            }
                            c.take_id(id);
                        }
                        Err(e) => c.on_error(&e, &mut self.stats),
                    }
                }
                Sent::OffsetDelete { offsets } => match op_result(answer, index)? {
                    Some(OpResult::Deleted(Ok(()))) => self.stats.offsets_deleted += offsets,
                    Some(OpResult::Deleted(Err(_))) | None => {}
                    Some(other) => {
                        return Err(format!("proposal {index}: OffsetDelete answered with {other:?}"))
                    }
                },
            }
        }
        Ok(())
    }

    /// One produce proposal's answers: the checks, then the client learns them.
    fn on_produced(
        &mut self,
        ctx: &EntryCtx,
        answers: &[(bool, Option<Answer>)],
        early: bool,
        who: Who,
        parts: &[SentPart],
        results: &[PartitionProduced],
    ) -> Result<(), String> {
        for (part, result) in parts.iter().zip(results) {
            let at = format!("{}-{}", part.topic, part.partition);
            let log_end = ctx.before.partition(&part.topic, part.partition).map(|p| p.log_end_offset);
            let stamped_now =
                result.error_code == error_code::NONE && log_end.is_some_and(|end| result.base_offset >= end);
            if early && stamped_now {
                // Answered before commit: only a transactional write of an open transaction.
                if matches!(who, Who::Plain | Who::Idempotent(_)) {
                    return Err(format!(
                        "{at}: a non-transactional write was answered before commit: {result:?}"
                    ));
                }
                self.stats.early_txn_answers += 1;
                if let Some(response) = ctx.response {
                    check_early_answer(ctx.command, response, part, result)?;
                }
            }
            let last_seq = part.producer.map(|(_, _, first)| first + part.records - 1);
            if result.error_code == error_code::NONE {
                match part.kind {
                    PartKind::Retry => {
                        let (pid, epoch, first) = part.producer.expect("retries are idempotent");
                        let original = ctx
                            .before
                            .producers
                            .partition(pid, &part.topic, part.partition)
                            .filter(|s| s.epoch == epoch)
                            .and_then(|s| {
                                s.batches
                                    .iter()
                                    .find(|m| m.first_seq == first && Some(m.last_seq) == last_seq)
                            });
                        if let Some(meta) = original {
                            if result.base_offset != meta.base_offset {
                                return Err(format!(
                                    "{at}: retry of producer {pid} seq {first} answered at {} but the batch is at {}",
                                    result.base_offset, meta.base_offset
                                ));
                            }
                            self.stats.duplicates += 1;
                        }
                    }
                    PartKind::RetryInEntry(proposal, k) => {
                        let original = match &answers[proposal].1 {
                            Some(Answer::Produced(parts)) => parts.get(k).cloned(),
                            _ => None,
                        };
                        let same = original.as_ref().is_some_and(|o| {
                            o.error_code == result.error_code && o.base_offset == result.base_offset
                        });
                        if !same {
                            return Err(format!(
                                "{at}: in-entry retry answered {result:?}, its original {original:?}"
                            ));
                        }
                        self.stats.duplicates_in_entry += 1;
                    }
                    PartKind::Fresh | PartKind::Gap => {}
                }
            } else if result.error_code == error_code::OUT_OF_ORDER_SEQUENCE_NUMBER {
                self.stats.out_of_order += 1;
            }
            let key = (part.topic.clone(), part.partition);
            if let Who::Idempotent(c) = who {
                let client = &mut self.idem[c];
                let (_, epoch, first) = part.producer.expect("an idempotent client's batch");
                if epoch != client.epoch {
                    continue;
                }
                match result.error_code {
                    error_code::NONE => {
                        let next = client.next_seq.entry(key.clone()).or_insert(0);
                        *next = (*next).max(first + part.records);
                        if matches!(part.kind, PartKind::Fresh | PartKind::Gap) {
                            let history = client.history.entry(key.clone()).or_default();
                            history.push_back(SentBatch {
                                epoch,
                                first_seq: first,
                                records: part.records,
                                bytes: part.bytes.clone(),
                            });
                            if history.len() > RETRY_HISTORY {
                                history.pop_front();
                            }
                        }
                    }
                    error_code::OUT_OF_ORDER_SEQUENCE_NUMBER | error_code::INVALID_PRODUCER_EPOCH
                        if part.kind == PartKind::Fresh =>
                    {
                        client.bump_epoch();
                    }
                    _ => {}
                }
            }
            if let Who::Zombie(c) = who {
                // A duplicate of a batch it wrote while current is answered from the log; a
                // new append would be a write of a fenced epoch.
                if stamped_now {
                    return Err(format!(
                        "{at}: a write of {}'s fenced instance {:?} was appended: {result:?}",
                        self.txn[c].tid, part.producer
                    ));
                }
                if result.error_code != error_code::NONE {
                    self.stats.fenced += 1;
                }
            }
            if let Who::Txn(c) = who {
                let client = &mut self.txn[c];
                let (pid, epoch, first) = part.producer.expect("a transactional batch");
                if client.id != Some(ProducerIdEpoch { producer_id: pid, producer_epoch: epoch }) {
                    continue;
                }
                match result.error_code {
                    error_code::NONE => {
                        let next = client.next_seq.entry(key).or_insert(0);
                        *next = (*next).max(first + part.records);
                        client.in_txn = true;
                        if early && ctx.lost {
                            client.lost_ack = true;
                        }
                    }
                    error_code::UNKNOWN_TOPIC_OR_PARTITION
                    | error_code::NOT_LEADER_OR_FOLLOWER
                    | error_code::NOT_ENOUGH_REPLICAS => {}
                    _ => client.needs_reinit = true,
                }
            }
        }
        Ok(())
    }

    /// A transaction that committed in this entry stored the offsets it held, when nothing
    /// else in the entry touched the group.
    fn check_txn_offsets(
        &mut self,
        before: &BrokerState,
        after: &BrokerState,
        command: &Command,
        applied: &Applied,
    ) -> Result<(), String> {
        let touched: BTreeSet<&str> = command
            .ops
            .iter()
            .filter_map(|op| match op {
                Op::OffsetCommit(c) => Some(vec![c.group_id.as_str()]),
                Op::TxnOffsetCommit(c) => Some(vec![c.group_id.as_str()]),
                Op::OffsetDelete(d) => Some(vec![d.group_id.as_str()]),
                Op::DeleteGroups(d) => Some(d.groups.iter().map(|g| g.group_id.as_str()).collect()),
                Op::DeleteTopics(_) => Some(GROUPS.to_vec()),
                _ => None,
            })
            .flatten()
            .collect();
        let mut committing: BTreeMap<&str, usize> = BTreeMap::new();
        let mut ended = Vec::new();
        for (op, result) in command.ops.iter().zip(&applied.response.results) {
            let Op::EndTxn(end) = op else { continue };
            if !end.txn_commit || !matches!(result, OpResult::Txn(Ok(_))) {
                continue;
            }
            let Some(meta) = before.txns.by_id.get(&end.transactional_id) else { continue };
            if meta.state != TxnState::Ongoing || meta.producer_id != end.producer.producer_id {
                continue;
            }
            for group in meta.pending_offsets.keys() {
                *committing.entry(group.as_str()).or_default() += 1;
            }
            ended.push(meta);
        }
        for meta in ended {
            for (group, offsets) in &meta.pending_offsets {
                if touched.contains(group.as_str()) || committing[group.as_str()] > 1 {
                    continue;
                }
                for ((topic, partition), offset) in offsets {
                    let stored = after.groups.committed(group, topic, *partition);
                    if stored != Some(offset) {
                        return Err(format!(
                            "producer {} committed {group} {topic}-{partition} at {offset:?}, the group has {stored:?}",
                            meta.producer_id
                        ));
                    }
                    self.stats.txn_offsets_checked += 1;
                }
            }
        }
        Ok(())
    }
}

/// A transactional write answered at stamping must be applied where it was stamped.
fn check_early_answer(
    command: &Command,
    response: &CommandResponse,
    part: &SentPart,
    answer: &PartitionProduced,
) -> Result<(), String> {
    for (index, (op, result)) in command.ops.iter().zip(&response.results).enumerate() {
        let Op::Produce(produce) = op else { continue };
        let Some(k) = produce.partitions.iter().position(|a| {
            a.topic == part.topic
                && a.partition == part.partition
                && parse_header(&a.batches[0]).is_ok_and(|h| h.base_offset == answer.base_offset)
        }) else {
            continue;
        };
        if matches!(result, OpResult::Produced(Ok(parts)) if parts[k].base_offset == answer.base_offset) {
            return Ok(());
        }
        return Err(format!(
            "{}-{}: a transactional write was answered at stamping with {answer:?}, but apply \
             answered its op {index} with {result:?}; {}",
            part.topic,
            part.partition,
            first_refusal(command, response)
        ));
    }
    Err(format!(
        "{}-{}: a transactional write was answered at stamping with {answer:?}, but no op of the entry holds it",
        part.topic, part.partition
    ))
}

/// The first produce op of the entry apply refused, and why: where a cascade of refusals began.
fn first_refusal(command: &Command, response: &CommandResponse) -> String {
    command
        .ops
        .iter()
        .zip(&response.results)
        .enumerate()
        .find_map(|(index, (op, result))| match (op, result) {
            (Op::Produce(_), OpResult::Produced(Err(refusal))) => {
                Some(format!("the first refused produce op is {index}: {refusal:?}, op {}", summarize_op(op)))
            }
            _ => None,
        })
        .unwrap_or_else(|| "no produce op of the entry was refused".into())
}

fn produced(answer: Option<&Answer>, parts: usize, index: usize) -> Result<&[PartitionProduced], String> {
    match answer {
        Some(Answer::Produced(results)) if results.len() == parts => Ok(results),
        other => Err(format!("proposal {index}: a produce of {parts} partitions answered with {other:?}")),
    }
}

fn op_result(answer: Option<&Answer>, index: usize) -> Result<Option<OpResult>, String> {
    match answer {
        Some(Answer::Op(result)) => Ok(Some(result.clone())),
        None => Ok(None),
        Some(other) => Err(format!("proposal {index}: an op answered with {other:?}")),
    }
}

fn limits_preset(rng: &mut StdRng) -> ReplicatedLimits {
    match rng.gen_range(0..4) {
        0 => ReplicatedLimits {
            producer_ids_live_max: 16,
            producer_id_eviction_idle_ms_min: 60_000,
            transactional_ids_max: 10,
            offset_metadata_bytes_max: 24,
            txn_timeout_ms_max: 60_000,
            producer_id_expiration_ms: 600_000,
            transactional_id_expiration_ms: 1_200_000,
        },
        1 => ReplicatedLimits {
            producer_ids_live_max: 40,
            producer_id_eviction_idle_ms_min: 300_000,
            transactional_ids_max: 6,
            offset_metadata_bytes_max: 64,
            txn_timeout_ms_max: 30_000,
            producer_id_expiration_ms: 300_000,
            transactional_id_expiration_ms: 900_000,
        },
        2 => ReplicatedLimits {
            producer_ids_live_max: 12,
            producer_id_eviction_idle_ms_min: 30_000,
            transactional_ids_max: 8,
            offset_metadata_bytes_max: 16,
            txn_timeout_ms_max: 20_000,
            producer_id_expiration_ms: 900_000,
            transactional_id_expiration_ms: 600_000,
        },
        _ => ReplicatedLimits {
            offset_metadata_bytes_max: 32,
            txn_timeout_ms_max: 45_000,
            producer_id_expiration_ms: 1_800_000,
            transactional_id_expiration_ms: 2_400_000,
            ..Default::default()
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Record batches, as a client sends them (built by kafka-protocol's encoder, as in
// `onelog_state::testing`, which integration tests cannot see)
// ---------------------------------------------------------------------------------------------

fn encode_batch(
    records: i32,
    producer: Option<(i64, i16, i32)>,
    transactional: bool,
    timestamp_ms: i64,
    tag: u64,
) -> Bytes {
    let (producer_id, producer_epoch, first_seq) = producer.unwrap_or((-1, -1, -1));
    let records: Vec<Record> = (0..records)
        .map(|i| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i64::from(i),
            sequence: if producer_id < 0 { -1 } else { first_seq.wrapping_add(i) },
            timestamp: timestamp_ms + i64::from(i),
            key: (i % 2 == 0).then(|| Bytes::from(format!("k{}", tag % 7))),
            value: Some(Bytes::from(format!("{tag}:{i}"))),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, &records, &options).expect("kafka-protocol encodes the batch");
    buf.freeze()
}

/// The client's record set as the produce handler hands it over: validated batches.
fn unstamped(topic: &str, partition: i32, bytes: &Bytes) -> UnstampedAppend {
    let batches = validate_record_set(bytes, usize::MAX).expect("the encoder's batches are valid");
    UnstampedAppend { topic: topic.to_string(), partition, batches }
}

//! Deterministic simulation of transactions across Raft groups (docs/SCALING.md §8, issue 32).
//!
//! Three groups, each a replicated state applied with `onelog-state`'s real apply functions
//! (today's transaction ops in the coordinator, the `xgroup` ops of the cross-group protocol,
//! the real produce checks and markers), and transactional clients of both transaction
//! versions whose transactions write one to three partitions spread over the groups. The
//! leaders' side of the protocol (JoinTxn, registration, delivery with resends, confirmations,
//! the pull, the timeout duty) runs over a network that delays, reorders, loses and duplicates
//! messages; leaders change and lose uncommitted entries and their memory; now and then every
//! node crashes at once; clients time out, bump their epoch, crash and are fenced by their
//! successors, and v1 clients now and then abort while their first writes linger (ended in
//! the coordinator's memory, the broker's rule); an operator deletes topics and creates them
//! again. After every entry, and over every write every 250 steps, it checks the design's
//! promises (`checks`); at the end faults stop and everything must settle (check 3).
//!
//! By default five fixed seeds and one from the clock (printed) run 10,000 steps each, in
//! parallel, and must reach minimum counts of what they exercise (`Stats::check_coverage`).
//! A failure prints the seed, the step and the command that replays exactly that run:
//! `XGROUP_SEED=<seed> XGROUP_STEPS=<steps> cargo test -p onelog-state --test xgroup -- --nocapture`.
//! The other tests put bugs back on purpose (`sim::Bug`) and require the checks to catch each.
//!
//! Files: `sim` (the world and its step), `world` (a group: state, uncommitted entries,
//! leader memory), `leaders` (what a leader does with each message, and its duties),
//! `answers` (an applied entry's answer, handed on),
//! `clients`, `net`, `checks`, `stats`; record batches come from the replay test's encoder.

// The replay test's client-side encoder; `unstamped`, its other half, is not needed here.
mod answers;
#[path = "../replay/batches.rs"]
#[allow(dead_code)]
mod batches;
mod checks;
mod clients;
mod leaders;
mod net;
mod sim;
mod stats;
mod world;

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use sim::{Bug, World};
use stats::Stats;

const DEFAULT_STEPS: usize = 10_000;
const FIXED_SEEDS: [u64; 5] = [1, 42, 1234, 0x0e10_9e11, 20_261_206];

#[test]
fn cross_group_transactions_keep_every_promise_under_faults() {
    let steps = env_usize("XGROUP_STEPS").unwrap_or(DEFAULT_STEPS);
    let seeds: Vec<u64> = match env_usize("XGROUP_SEED") {
        Some(seed) => vec![seed as u64],
        None => {
            let clock = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
            FIXED_SEEDS.iter().copied().chain([clock % 1_000_000_007]).collect()
        }
    };
    println!("xgroup: seeds {seeds:?}, {steps} steps each, {} groups", sim::GROUPS);
    let started = Instant::now();
    let results: Vec<(u64, Result<Stats, String>)> = std::thread::scope(|scope| {
        let runs: Vec<_> =
            seeds.iter().map(|&seed| scope.spawn(move || (seed, run(seed, steps, Bug::None)))).collect();
        runs.into_iter().map(|r| r.join().expect("a simulation thread panicked")).collect()
    });
    let mut failures = Vec::new();
    for (seed, result) in results {
        match result {
            Ok(stats) => {
                println!("xgroup seed {seed}: {}", stats.summary());
                if let Err(missing) = stats.check_coverage(steps) {
                    let message = format!("seed {seed} did not exercise enough: {missing}");
                    if FIXED_SEEDS.contains(&seed) || env_usize("XGROUP_SEED").is_some() {
                        failures.push(format!("{message}\nreproduce: {}", reproduce(seed, steps)));
                    } else {
                        println!("{message}");
                    }
                }
            }
            Err(failure) => failures.push(failure),
        }
    }
    println!("xgroup: {} seeds in {:.1} s", seeds.len(), started.elapsed().as_secs_f64());
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

/// Each bug put back is caught, with its seed, by the check the design names for it. Seeds
/// are tried from 1 on, and the first that catches it is printed.
#[test]
fn bugs_put_back_are_caught() {
    let bugs = [
        (Bug::ForgetAfterOneConfirmation, ["check 1", "check 2", "check 3"].as_slice(), DEFAULT_STEPS),
        (Bug::NoFenceInParticipant, ["check 4"].as_slice(), DEFAULT_STEPS),
        // A write C never listed: its transaction's EndTxn cannot decide it (check 5), and a
        // commit leaves it to be aborted (checks 1, 2).
        (Bug::AckBeforeRegistration, ["check 1", "check 2", "check 5"].as_slice(), DEFAULT_STEPS),
        (Bug::OffsetsBeforeDecision, ["check 1"].as_slice(), DEFAULT_STEPS),
        (Bug::KeepOffsetsOfDeletedTopic, ["check 1"].as_slice(), DEFAULT_STEPS),
        // A commit answered from memory, with no decision in the log.
        (Bug::AddedOnlyEndIgnoresLog, ["check 5", "check 1", "check 3"].as_slice(), DEFAULT_STEPS),
    ];
    for (bug, checks, steps) in bugs {
        let caught = (1..=20).find_map(|seed| run(seed, steps, bug).err().map(|e| (seed, e)));
        let Some((seed, message)) = caught else { panic!("{bug:?} was not caught by seeds 1 to 20") };
        assert!(
            checks.iter().any(|c| message.contains(c)),
            "{bug:?} caught, but not by {checks:?}: {message}"
        );
        assert!(message.contains(&format!("XGROUP_SEED={seed}")), "{message}");
        println!("{bug:?} caught with seed {seed}: {}", message.lines().next().unwrap_or_default());
    }
}

/// One seed: `steps` steps with faults, then the quiet phase.
fn run(seed: u64, steps: usize, bug: Bug) -> Result<Stats, String> {
    let mut world = World::new(seed, bug);
    let fail = |world: &World, message: String| {
        format!("seed {seed}, step {}: {message}\nreproduce: {}", world.now, reproduce(seed, steps))
    };
    for _ in 0..steps {
        if let Err(message) = world.step(false) {
            return Err(fail(&world, message));
        }
    }
    if let Err(message) = world.quiesce() {
        return Err(fail(&world, message));
    }
    Ok(std::mem::take(&mut world.stats))
}

fn reproduce(seed: u64, steps: usize) -> String {
    format!("XGROUP_SEED={seed} XGROUP_STEPS={steps} cargo test -p onelog-state --test xgroup -- --nocapture")
}

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

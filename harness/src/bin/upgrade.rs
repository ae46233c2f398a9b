//! `upgrade`: upgrades from an earlier onelog release (issue 33).
//!
//!   upgrade fixture --old-bin PATH --release 0.1.0 --commit HASH --out harness/fixtures/0.1.0
//!   upgrade roll --old-bin PATH [--new-bin PATH] [--release 0.1.0] [--seed N] [--out DIR]
//!
//! `fixture` runs three nodes of the old release on the fixture's fixed ports, writes the data
//! set with stock clients, restarts them, reads it all back into `manifest.json` (checked
//! against what was written, and against the logins and ACLs), stops them with SIGTERM and
//! archives each data directory. `scripts/upgrade-fixture.sh` builds the old release and
//! calls it. Needs `ONELOG_JAVA_CLASSPATH` (Kafka's command-line tools).
//!
//! `roll` starts three nodes of the old release on its fixture, runs the queue workload and a
//! consumer group, rolls the nodes to the current build one at a time (one back and forth),
//! prints the figures and the verdict (`harness::upgrade::roll`) and exits non-zero when
//! anything was lost, duplicated, torn, aborted by the roll or moved backwards.
//! `scripts/upgrade-roll.sh` builds both binaries and calls it.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use harness::upgrade::make::{make, MakeOptions};
use harness::upgrade::roll::{self, RollOptions};

#[derive(Parser, Debug)]
#[command(about = "Upgrades from an earlier onelog release: the golden fixture, the rolling upgrade")]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Makes the golden data set of an old release (its node archives and manifest).
    Fixture {
        /// The old release's onelog binary.
        #[arg(long)]
        old_bin: PathBuf,
        /// Its version, as scripts/release-binary.sh names it.
        #[arg(long)]
        release: String,
        /// Its commit.
        #[arg(long)]
        commit: String,
        /// The fixture directory to write.
        #[arg(long)]
        out: PathBuf,
    },
    /// Rolls three nodes of an old release (on its fixture) to the current build under load.
    Roll {
        /// The old release's onelog binary.
        #[arg(long)]
        old_bin: PathBuf,
        /// The current build (default: ONELOG_BIN, else target/debug/onelog).
        #[arg(long)]
        new_bin: Option<PathBuf>,
        /// The release whose fixture the cluster starts from.
        #[arg(long, default_value = "0.1.0")]
        release: String,
        /// The workload's seed (printed either way).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Seconds of load before the first restart and after each step.
        #[arg(long, default_value_t = 10)]
        settle_seconds: u64,
        /// Transactional writers of the queue workload (an idempotent writer and two readers
        /// run beside them).
        #[arg(long, default_value_t = 4)]
        writers: usize,
        #[arg(long, default_value_t = 4)]
        partitions: i32,
        /// Where to write summary.txt and summary.json.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

fn main() -> anyhow::Result<()> {
    match Args::parse().command {
        Command::Roll { old_bin, new_bin, release, seed, settle_seconds, writers, partitions, out } => {
            let settle = Duration::from_secs(settle_seconds);
            let options = RollOptions {
                old_binary: old_bin,
                new_binary: new_bin,
                release,
                warmup: settle,
                settle,
                seed,
                partitions,
                transactional_writers: writers,
                logs_to: out.clone(),
            };
            let report = roll::run(&options)?;
            let text = report.text();
            print!("{text}");
            if let Some(out) = out {
                std::fs::create_dir_all(&out)?;
                std::fs::write(out.join("summary.txt"), &text)?;
                std::fs::write(out.join("summary.json"), serde_json::to_string_pretty(&report)? + "\n")?;
                println!("report: {}", out.display());
            }
            if !report.failures().is_empty() {
                std::process::exit(1);
            }
        }
        Command::Fixture { old_bin, release, commit, out } => {
            let manifest = make(&MakeOptions { binary: old_bin, release, commit, out: out.clone() })?;
            let records: usize = manifest
                .state
                .topics
                .values()
                .flat_map(|t| t.partitions.values())
                .map(|p| p.records.len())
                .sum();
            println!(
                "fixture of onelog {} written to {}: {} topics, {records} records, {} groups, {} transactional ids, \
                 {} SCRAM users, {} ACL bindings, {} quota values",
                manifest.release,
                out.display(),
                manifest.state.topics.len(),
                manifest.state.groups.len(),
                manifest.state.transactions.len(),
                manifest.state.scram_users.len(),
                manifest.state.acls.len(),
                manifest.state.quotas.len()
            );
        }
    }
    Ok(())
}

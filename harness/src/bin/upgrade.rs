//! `upgrade`: upgrades from an earlier onelog release (issue 33).
//!
//!   upgrade fixture --old-bin PATH --release 0.1.0 --commit HASH --out harness/fixtures/0.1.0
//!
//! `fixture` runs three nodes of the old release on the fixture's fixed ports, writes the data
//! set with stock clients, restarts them, reads it all back into `manifest.json` (checked
//! against what was written, and against the logins and ACLs), stops them with SIGTERM and
//! archives each data directory. `scripts/upgrade-fixture.sh` builds the old release and
//! calls it. Needs `ONELOG_JAVA_CLASSPATH` (Kafka's command-line tools).

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use harness::upgrade::make::{make, MakeOptions};

#[derive(Parser, Debug)]
#[command(about = "Upgrades from an earlier onelog release: the golden fixture")]
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
}

fn main() -> anyhow::Result<()> {
    match Args::parse().command {
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

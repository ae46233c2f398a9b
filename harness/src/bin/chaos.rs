//! `chaos`: a seeded fault-injection run against a onelog cluster on 127.0.0.1 (issue 14).
//!
//!   chaos --workload queue --seconds 600 --seed 42
//!   chaos --workload bank --seconds 60 --faults kill-leader,pause-leader
//!   chaos --workload copier --seconds 90 --seed 7
//!   chaos --workload bank --seconds 120 --groups 3      (accounts in three Raft groups:
//!                                                        cross-group transactions)
//!   chaos --workload share --seconds 120 --seed 1
//!   chaos --workload share --seconds 60 --share-bug keep-unacquired    (its checker must catch it)
//!   chaos --workload copier --seconds 60 --copier-bug skip-rewind      (its checker must catch it)
//!   chaos --workload queue --seconds 60 --bug read-committed-to-hw    (the checker must catch it)
//!   chaos --workload queue --seconds 60 --faults kill-leader --writers 1 --plain-writers 0 \
//!         --txn-write-delay-ms 300 --bug ack-txn-before-commit           (likewise)
//!
//! Prints the seed and the exact command that repeats the run, stops by itself after
//! `--seconds` (or `--max-committed` committed transactions), writes the report under `--out`
//! (default `results/chaos/<workload>-seed<seed>`) and exits non-zero when the checker found a
//! violation. Needs the fault-injection build of onelog for `--bug` (`ONELOG_BIN`, see
//! `scripts/chaos.sh`, which also draws the plot).

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use harness::chaos::copier::CopierBug;
use harness::chaos::group_protocol::GroupProtocol;
use harness::chaos::run::{run, RunOptions, Workload};
use harness::chaos::schedule::{FaultKind, ALL_KINDS};
use harness::chaos::share::ShareBug;

#[derive(Parser, Debug)]
#[command(about = "A seeded chaos run against a onelog cluster, with a Jepsen-style checker")]
struct Args {
    /// queue, bank, copier or share.
    #[arg(long, default_value = "queue")]
    workload: String,
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// The run's seed; a fresh one when absent (printed either way).
    #[arg(long)]
    seed: Option<u64>,
    /// 3 or 5.
    #[arg(long, default_value_t = 3)]
    nodes: u64,
    /// Raft groups (`onelog.raft.groups`). With more than one, every workload spans groups
    /// (`chaos::placement`): the bank's accounts in one topic per group; the copier's input in
    /// group N-2, its output and consumer group in N-1; the queue's topic and readers in N-1;
    /// the share topic in N-1, its share group in 0; transactional ids coordinated in every
    /// group. After the faults every group must agree on every node (`chaos::raft_groups`).
    #[arg(long, default_value_t = 1)]
    groups: u32,
    /// Comma-separated fault kinds; all when absent.
    #[arg(long, value_delimiter = ',')]
    faults: Option<Vec<FaultKind>>,
    /// Transactional writers (queue, bank, share), or copier instances (copier; at least 2).
    #[arg(long, default_value_t = 3)]
    writers: usize,
    /// Idempotent non-transactional producers (queue, share).
    #[arg(long, default_value_t = 1)]
    plain_writers: usize,
    /// Readers (queue: read_committed sessions, default 2; share: share consumers, default 3).
    #[arg(long)]
    readers: Option<usize>,
    #[arg(long, default_value_t = 4)]
    partitions: i32,
    /// Stop after this many committed transactions.
    #[arg(long, default_value_t = 1_000_000)]
    max_committed: usize,
    /// Re-introduce a known bug in the broker (test-only flag of the fault-injection build):
    /// read-committed-to-hw, ack-txn-before-commit, ack-before-commit.
    #[arg(long, value_delimiter = ',')]
    bug: Vec<String>,
    /// Milliseconds the leader waits before appending an entry with writes of an open
    /// transaction (fault-injection build): leader faults then land while they are in flight.
    #[arg(long)]
    txn_write_delay_ms: Option<u64>,
    /// Break the copier on purpose (copier workload only): commit-offsets-outside-txn (the
    /// consumer commits the offsets, not the transaction) or skip-rewind (no rewind after an
    /// abort).
    #[arg(long)]
    copier_bug: Option<CopierBug>,
    /// The copier's consumer group protocol: classic (eager assignment) or consumer (KIP-848).
    #[arg(long, default_value = "classic")]
    group_protocol: GroupProtocol,
    /// Break the share consumer on purpose (share workload only): keep-unacquired (it hands
    /// out every record of the returned batches, not only the acquired ones).
    #[arg(long)]
    share_bug: Option<ShareBug>,
    #[arg(long)]
    out: Option<PathBuf>,
}

const BUGS: &[&str] = &["read-committed-to-hw", "ack-txn-before-commit", "ack-before-commit"];

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let workload = match args.workload.as_str() {
        "queue" => Workload::Queue,
        "bank" => Workload::Bank,
        "copier" => Workload::Copier,
        "share" => Workload::Share,
        other => anyhow::bail!("unknown workload {other:?}: queue, bank, copier or share"),
    };
    anyhow::ensure!(
        args.share_bug.is_none() || workload == Workload::Share,
        "--share-bug is for --workload share"
    );
    let readers = args.readers.unwrap_or(if workload == Workload::Share { 3 } else { 2 });
    anyhow::ensure!(
        args.copier_bug.is_none() || workload == Workload::Copier,
        "--copier-bug is for --workload copier"
    );
    anyhow::ensure!(
        args.group_protocol == GroupProtocol::Classic || workload == Workload::Copier,
        "--group-protocol is for --workload copier"
    );
    for bug in &args.bug {
        anyhow::ensure!(BUGS.contains(&bug.as_str()), "unknown bug {bug:?}; one of {}", BUGS.join(", "));
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64 % 1_000_000)
    });
    let faults = args.faults.clone().unwrap_or_else(|| ALL_KINDS.to_vec());
    let fault_names: Vec<&str> = faults.iter().map(|k| k.name()).collect();
    let mut command = format!(
        "chaos --workload {} --seconds {} --seed {seed} --nodes {} --faults {} --writers {} --plain-writers {} --readers {} --partitions {} --max-committed {}",
        workload.name(),
        args.seconds,
        args.nodes,
        fault_names.join(","),
        args.writers,
        args.plain_writers,
        readers,
        args.partitions,
        args.max_committed
    );
    if args.groups > 1 {
        command.push_str(&format!(" --groups {}", args.groups));
    }
    if let Some(ms) = args.txn_write_delay_ms {
        command.push_str(&format!(" --txn-write-delay-ms {ms}"));
    }
    if !args.bug.is_empty() {
        command.push_str(&format!(" --bug {}", args.bug.join(",")));
    }
    if let Some(bug) = args.copier_bug {
        command.push_str(&format!(" --copier-bug {}", bug.name()));
    }
    if args.group_protocol != GroupProtocol::Classic {
        command.push_str(&format!(" --group-protocol {}", args.group_protocol.name()));
    }
    if let Some(bug) = args.share_bug {
        command.push_str(&format!(" --share-bug {}", bug.name()));
    }
    let mut bugs = args.bug.clone();
    bugs.extend(args.copier_bug.map(|b| b.name().to_string()));
    bugs.extend(args.share_bug.map(|b| b.name().to_string()));
    let suffix = if bugs.is_empty() { String::new() } else { format!("-bug-{}", bugs.join("+")) };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("results/chaos/{}-seed{seed}{suffix}", workload.name())));
    let options = RunOptions {
        seed,
        length: Duration::from_secs(args.seconds),
        nodes: args.nodes,
        groups: args.groups,
        workload,
        faults,
        writers: args.writers,
        plain_writers: args.plain_writers,
        readers,
        partitions: args.partitions,
        max_committed: args.max_committed,
        copier_bug: args.copier_bug,
        group_protocol: args.group_protocol,
        share_bug: args.share_bug,
        broker_flags: args.bug.iter().map(|b| format!("bug.{b}")).collect(),
        txn_write_delay_ms: args.txn_write_delay_ms,
        out_dir: out.clone(),
        command,
        binary: std::env::var_os("ONELOG_BIN").map(PathBuf::from),
    };
    let report = run(&options)?;
    print!("{}", report.text());
    println!("report: {}", out.display());
    if report.violations.total() > 0 {
        std::process::exit(1);
    }
    Ok(())
}

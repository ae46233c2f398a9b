//! One chaos run end to end: a cluster, a workload, the seeded faults, then the cluster made
//! whole, a final read, the checkers, the replicas' digests, and the report.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::bank::{self, Bank};
use super::checker::{self, Violations};
use super::faults;
use super::history::History;
use super::queue::{self, ClientFaults, Queue, QueueConfig};
use super::report::Report;
use super::schedule::{self, FaultKind};
use crate::kafka::create_topics;
use crate::{Cluster, ClusterOptions};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    Queue,
    Bank,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Queue => "queue",
            Workload::Bank => "bank",
        }
    }
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub seed: u64,
    pub length: Duration,
    pub nodes: u64,
    pub workload: Workload,
    pub faults: Vec<FaultKind>,
    pub writers: usize,
    pub plain_writers: usize,
    pub readers: usize,
    pub partitions: i32,
    pub max_committed: usize,
    /// Test-only broker flags (`ONELOG_FAULT_FLAGS`), e.g. a re-introduced bug.
    pub broker_flags: Vec<String>,
    /// How long the leader waits between acknowledging transactional writes and appending
    /// their entry (the fault-injection build's `proposer.answered-before-write` delay point):
    /// widens the window in which a leader fault loses acknowledged writes of an open
    /// transaction, which only the takeover abort (DESIGN §4) keeps from committing.
    pub txn_write_delay_ms: Option<u64>,
    pub out_dir: PathBuf,
    /// The command line that repeats this run, printed first and kept in the report.
    pub command: String,
    /// The onelog binary (a fault-injection build when `broker_flags` is not empty).
    pub binary: Option<PathBuf>,
}

/// The `disk-full` fault's node runs on a tmpfs of this size, with this free-space reserve
/// (`log.dir.free.bytes.min`; the default, 1 GiB, is more than the tmpfs) on every node: room
/// for two preallocated 64 MiB Raft log segments, snapshots and a ten-minute run's records.
pub const DISK_TMPFS_BYTES: u64 = 1 << 30;
pub const DISK_RESERVE_BYTES: u64 = 64 << 20;

/// How long the final read may wait for transactions to end (longer than the writers'
/// transaction timeout, 30 s, after which the broker aborts a transaction left open).
const FINAL_READ_WAIT: Duration = Duration::from_secs(90);

/// The broker's delay point behind `RunOptions::txn_write_delay_ms` (broker/src/leader/proposer.rs).
pub const TXN_WRITE_DELAY_POINT: &str = "proposer.answered-before-write";

pub fn run(options: &RunOptions) -> Result<Report> {
    println!("chaos: seed {} — repeat with: {}", options.seed, options.command);
    let mut cluster_options = ClusterOptions::new(options.nodes)
        .config("log.segment.bytes", 1 << 20)
        .config("group.initial.rebalance.delay.ms", 0)
        .link_proxies();
    if !options.broker_flags.is_empty() {
        cluster_options.env.push(("ONELOG_FAULT_FLAGS".into(), options.broker_flags.join(",")));
    }
    if let Some(ms) = options.txn_write_delay_ms {
        cluster_options.env.push(("ONELOG_FAULT_DELAY".into(), format!("{TXN_WRITE_DELAY_POINT}:{ms}")));
    }
    cluster_options.binary = options.binary.clone();
    if options.faults.contains(&FaultKind::DiskFull) {
        // One node, drawn from the seed; it is the leader for some of the faults, a follower for others.
        let node = 1 + options.seed % options.nodes;
        cluster_options = cluster_options
            .data_tmpfs(node, DISK_TMPFS_BYTES)
            .config("log.dir.free.bytes.min", DISK_RESERVE_BYTES);
    }
    let mut cluster = Cluster::start_with(cluster_options).context("starting the cluster")?;
    let result = drive(&mut cluster, options);
    if result.is_err() {
        eprintln!("{}", cluster.log_tails());
    }
    result
}

fn drive(cluster: &mut Cluster, options: &RunOptions) -> Result<Report> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let topic = format!("chaos-{}", options.workload.name());
    let bootstrap = cluster.bootstrap();
    rt.block_on(create_topics(&bootstrap, &[(&topic, options.partitions)]))?;
    let config = QueueConfig {
        bootstrap: bootstrap.clone(),
        topic: topic.clone(),
        partitions: options.partitions,
        writers: options.writers,
        plain_writers: if options.workload == Workload::Queue { options.plain_writers } else { 0 },
        readers: options.readers,
        abort_one_in: if options.workload == Workload::Bank { 3 } else { 5 },
        max_committed: options.max_committed,
        seed: options.seed,
    };
    let history = History::new();
    // The bank's cut reader observes the log directly, not through the client links it may cut.
    let kafka_addrs: Vec<_> = cluster.ids().into_iter().map(|id| cluster.kafka_listen_addr(id)).collect();
    let (queue, bank, client_faults) = match options.workload {
        Workload::Queue => {
            let q = Queue::start(config.clone(), history.clone());
            let faults = q.faults.clone();
            (Some(q), None, faults)
        }
        Workload::Bank => (
            None,
            Some(Bank::start(config.clone(), kafka_addrs, history.clone())),
            std::sync::Arc::new(ClientFaults::default()),
        ),
    };

    // The faults, on schedule; the bank has no client-side faults (its writers are simpler).
    let kinds: Vec<FaultKind> = options
        .faults
        .iter()
        .copied()
        .filter(|k| options.workload == Workload::Queue || !k.is_client_side())
        .collect();
    let plan = schedule::plan(options.seed, options.length, &kinds);
    let mut rng = StdRng::seed_from_u64(options.seed ^ 0x5eed);
    let started = Instant::now();
    let mut fault_error = None;
    for planned in &plan {
        if history.committed() >= options.max_committed {
            break;
        }
        if let Some(wait) = planned.at.checked_sub(started.elapsed()) {
            std::thread::sleep(wait);
        }
        println!("chaos: {:>7.1}s {} ({:?})", history.now().as_secs_f64(), planned.kind, planned.length);
        match faults::inject(cluster, planned, &history, &client_faults, &mut rng) {
            Ok(Some(window)) => history.fault(window),
            Ok(None) => {}
            Err(e) => {
                fault_error = Some(e);
                break;
            }
        }
    }
    while fault_error.is_none()
        && started.elapsed() < options.length
        && history.committed() < options.max_committed
    {
        std::thread::sleep(Duration::from_millis(200));
    }

    // Whole again: every node running, a leader, the workload stopped, then the final read.
    if let Some(q) = queue {
        q.stop();
    }
    if let Some(b) = bank {
        b.stop();
    }
    if let Some(e) = fault_error {
        return Err(e.context("injecting a fault"));
    }
    cluster.heal()?;
    cluster.start_all()?;
    cluster.wait_for_leader(faults::RECOVERY_TIMEOUT)?;
    let (final_read, unstable) = queue::final_read(&bootstrap, &topic, options.partitions, FINAL_READ_WAIT)?;
    let snapshot = history.snapshot();
    let (mut violations, counts) = checker::check_queue(&snapshot, &final_read);
    violations.merge(checker::check_stable(&unstable, FINAL_READ_WAIT));
    if options.workload == Workload::Bank {
        violations.merge(bank::check_bank(&snapshot.cuts, &final_read));
    }
    violations.merge(replicas_agree(cluster));
    let allowed = checker::write_cycles(&snapshot, &final_read);
    let report = Report::new(options, &plan, snapshot, counts, violations, allowed);
    report.write(&options.out_dir)?;
    Ok(report)
}

/// Every replica's digest equal once the cluster is whole and quiet (the harness waits for
/// them to apply the same index).
fn replicas_agree(cluster: &mut Cluster) -> Violations {
    let mut v = Violations::default();
    if let Err(e) = cluster.assert_digests_equal() {
        v.add("replica divergence", format!("{e:#}"));
    }
    v
}

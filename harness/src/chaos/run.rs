//! One chaos run end to end: a cluster, a workload, the seeded faults, then the cluster made
//! whole, a final read, the checkers, the replicas' digests, and the report.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rdkafka::consumer::{BaseConsumer, Consumer};

use super::bank::{self, Bank};
use super::checker::{self, QueueCounts, Violations};
use super::copier::{self, Copier, CopierBug, CopierConfig, CopierCounts, CopierNames};
use super::copier_check;
use super::faults;
use super::group_protocol::GroupProtocol;
use super::history::{History, Snapshot};
use super::placement::{self, Accounts};
use super::queue::{self, ClientFaults, Queue, QueueConfig};
use super::report::Report;
use super::schedule::{self, FaultKind};
use super::share::{self, ShareBug, ShareConfig, ShareWorkload};
use super::share_check::{self, ShareCounts};
use super::share_history::{self, ShareHistory};
use crate::kafka::{client_config, create_topics_with};
use crate::{Cluster, ClusterOptions};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    Queue,
    Bank,
    Copier,
    /// KIP-932 share groups (`share`).
    Share,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Queue => "queue",
            Workload::Bank => "bank",
            Workload::Copier => "copier",
            Workload::Share => "share",
        }
    }
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub seed: u64,
    pub length: Duration,
    pub nodes: u64,
    /// `onelog.raft.groups` (issue 32). With more than one, every workload's topics, groups
    /// and transactional ids are spread over the groups (`placement`): transactions across
    /// groups, and a share group apart from its topic.
    pub groups: u32,
    pub workload: Workload,
    pub faults: Vec<FaultKind>,
    pub writers: usize,
    pub plain_writers: usize,
    pub readers: usize,
    pub partitions: i32,
    pub max_committed: usize,
    /// A deliberately broken copier (copier workload only), to show its checker sees it.
    pub copier_bug: Option<CopierBug>,
    /// The copier's group protocol (copier workload only).
    pub group_protocol: GroupProtocol,
    /// A deliberately broken share consumer (share workload only), to show its checker sees it.
    pub share_bug: Option<ShareBug>,
    /// Test-only broker flags (`ONELOG_FAULT_FLAGS`), e.g. a re-introduced bug.
    pub broker_flags: Vec<String>,
    /// How long the leader waits before appending an entry with writes of an open transaction
    /// (the fault-injection build's `proposer.before-txn-write` delay point): widens the window
    /// in which a leader fault finds them in flight. Their producers must then carry the
    /// transaction on with the next leader; with `--bug ack-txn-before-commit` they were
    /// already acknowledged, and the checker must see them lost.
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
/// How long the copiers may take to commit the whole input once the feeder stopped.
const COPIER_DRAIN_WAIT: Duration = Duration::from_secs(90);
/// How long the share consumers may take to settle every acknowledged value once the writers
/// stopped: several lock durations, for records whose lock must expire first.
const SHARE_DRAIN_WAIT: Duration = Duration::from_secs(120);

/// The workload running during the faults.
enum Running {
    Queue(Queue),
    Bank(Bank),
    Copier(Copier),
    Share(ShareWorkload),
}

impl Running {
    fn client_faults(&self) -> std::sync::Arc<ClientFaults> {
        match self {
            Running::Queue(q) => q.faults.clone(),
            Running::Copier(c) => c.faults.clone(),
            Running::Share(s) => s.faults.clone(),
            // The bank has no client-side faults (its writers are simpler).
            Running::Bank(_) => std::sync::Arc::new(ClientFaults::default()),
        }
    }

    /// Stops the writers once the faults are over; the copiers and share consumers drain
    /// once the cluster is whole.
    fn stop(self) -> Draining {
        match self {
            Running::Queue(q) => {
                q.stop();
                Draining::Stopped
            }
            Running::Bank(b) => {
                b.stop();
                Draining::Stopped
            }
            Running::Copier(mut c) => {
                c.stop_feeder();
                Draining::Copier(c)
            }
            Running::Share(mut s) => {
                s.stop_writers();
                Draining::Share(s)
            }
        }
    }
}

/// A workload whose writers stopped: done, or readers still to drain.
enum Draining {
    Stopped,
    Copier(Copier),
    Share(ShareWorkload),
}

impl Draining {
    /// Stops what still runs, without draining (the run failed).
    fn abandon(self) {
        match self {
            Draining::Stopped => {}
            Draining::Copier(c) => drop(c.drain_and_stop(Duration::ZERO)),
            Draining::Share(s) => drop(s.drain_and_stop(Duration::ZERO)),
        }
    }
}

/// What the checkers found.
struct Checked {
    violations: Violations,
    allowed: Violations,
    counts: QueueCounts,
    copier: Option<CopierCounts>,
    share: Option<ShareCounts>,
}

/// The broker's delay point behind `RunOptions::txn_write_delay_ms` (broker/src/leader/proposer.rs).
pub const TXN_WRITE_DELAY_POINT: &str = "proposer.before-txn-write";

pub fn run(options: &RunOptions) -> Result<Report> {
    println!("chaos: seed {} — repeat with: {}", options.seed, options.command);
    let mut cluster_options = ClusterOptions::new(options.nodes)
        .config("log.segment.bytes", 1 << 20)
        .config("group.initial.rebalance.delay.ms", 0)
        .link_proxies();
    if options.groups > 1 {
        // Groups go back to their preferred leaders between faults, not once a run is over.
        // The workloads' topics and transactional ids are placed by name (`placement`).
        cluster_options = cluster_options
            .config("onelog.raft.groups", options.groups)
            .config("leader.imbalance.check.interval.seconds", 2)
            .config("onelog.placement.rules", placement::run_rules(options));
    }
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
    // A run that failed or found violations keeps its nodes' logs for the diagnosis, and so
    // does any run with ONELOG_CHAOS_KEEP set.
    let keep = std::env::var_os("ONELOG_CHAOS_KEEP").is_some();
    if keep || result.as_ref().map_or(true, |r| r.violations.total() > 0) {
        if let Some(dir) = cluster.keep_dir() {
            eprintln!("kept the cluster directory {}", dir.display());
        }
    }
    result
}

fn drive(cluster: &mut Cluster, options: &RunOptions) -> Result<Report> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let topic = format!("chaos-{}", options.workload.name());
    let bootstrap = cluster.bootstrap();
    // With several groups each topic is placed by the rules the nodes were given.
    let topics = placement::topics(options.workload, options.groups, options.partitions);
    let named: Vec<(&str, i32)> = topics.iter().map(|(t, p)| (t.as_str(), *p)).collect();
    rt.block_on(create_topics_with(&bootstrap, &named, &[]))?;
    if options.groups > 1 {
        wait_until_placed(&bootstrap, &topics)?;
    }
    let history = History::new();
    let share = ShareHistory::default();
    let running = start_workload(cluster, options, &topic, (&history, &share))?;
    let client_faults = running.client_faults();
    let plan = schedule::plan(options.seed, options.length, &fault_kinds(options));
    let fault_error = inject_plan(cluster, options, &plan, &history, &client_faults);

    // Whole again: every node running, a leader, the writers stopped, then the readers drain
    // (copier, share) and the final read.
    let draining = running.stop();
    if let Some(e) = fault_error {
        draining.abandon();
        return Err(e.context("injecting a fault"));
    }
    cluster.heal()?;
    cluster.start_all()?;
    cluster.wait_for_leader(faults::RECOVERY_TIMEOUT)?;
    let mut checked = check_run(cluster, options, &topic, (&history, &share), draining)?;
    checked.violations.merge(replicas_agree(cluster));
    checked.violations.merge(super::raft_groups::groups_agree(cluster, options.groups));
    let mut report =
        Report::new(options, &plan, history.snapshot(), checked.counts, checked.violations, checked.allowed);
    report.copier = checked.copier;
    report.share = checked.share;
    report.placement = placement::describe(options, &history.snapshot());
    report.write(&options.out_dir)?;
    Ok(report)
}

/// The fault kinds the workload can take: the bank has no client-side faults, and the share
/// workload hijacks only a transactional writer.
fn fault_kinds(options: &RunOptions) -> Vec<FaultKind> {
    let takes = |k: &FaultKind| match options.workload {
        Workload::Bank => !k.is_client_side(),
        Workload::Share => *k != FaultKind::TxnHijack || options.writers > 0,
        Workload::Queue | Workload::Copier => true,
    };
    options.faults.iter().copied().filter(takes).collect()
}

/// Drains what still reads, then the workload's checkers.
fn check_run(
    cluster: &mut Cluster,
    options: &RunOptions,
    topic: &str,
    (history, share): (&History, &ShareHistory),
    draining: Draining,
) -> Result<Checked> {
    let none =
        |violations, allowed, counts| Checked { violations, allowed, counts, copier: None, share: None };
    match draining {
        Draining::Copier(c) => {
            let k = c.drain_and_stop(COPIER_DRAIN_WAIT);
            let snapshot = history.snapshot();
            let (violations, counts, copier) = check_copier_run(&cluster.bootstrap(), options, &snapshot, k)?;
            Ok(Checked { copier, ..none(violations, Violations::default(), counts) })
        }
        Draining::Share(s) => {
            let drain = s.drain_and_stop(SHARE_DRAIN_WAIT);
            let totals = share_totals(cluster);
            let (snapshot, share) = (history.snapshot(), share.snapshot());
            let (violations, mut k) =
                share_check::check_share(&snapshot, &share, &share::rules(), totals.as_ref());
            (k.drained_ms, k.final_lag) = (drain.drained_ms, drain.final_lag);
            if violations.total() > 0 || std::env::var_os("ONELOG_CHAOS_KEEP").is_some() {
                save_share_history(&options.out_dir, &share)?;
            }
            let counts = checker::txn_counts(&snapshot);
            Ok(Checked { share: Some(k), ..none(violations, Violations::default(), counts) })
        }
        Draining::Stopped if options.workload == Workload::Bank => {
            check_bank_run(&cluster.bootstrap(), options, &history.snapshot())
        }
        Draining::Stopped => {
            let bootstrap = &cluster.bootstrap();
            let snapshot = history.snapshot();
            let p = options.partitions;
            let (final_read, unstable) = queue::final_read(bootstrap, topic, p, FINAL_READ_WAIT)?;
            let (mut violations, counts) = checker::check_queue(&snapshot, &final_read);
            violations.merge(checker::check_stable(&unstable, FINAL_READ_WAIT));
            Ok(none(violations, checker::write_cycles(&snapshot, &final_read), counts))
        }
    }
}

/// The bank's final read of every account (over every group's topic with `--groups`), the
/// queue checker on it (torn, lost, aborted read across the accounts), hanging transactions
/// named by topic, and the bank sums.
fn check_bank_run(bootstrap: &str, options: &RunOptions, snapshot: &Snapshot) -> Result<Checked> {
    let accounts = Accounts::new(options.groups, options.partitions);
    let (final_read, unstable) = bank::final_read(bootstrap, &accounts, FINAL_READ_WAIT)?;
    let (mut violations, counts) = checker::check_queue(snapshot, &final_read);
    violations.merge(checker::check_stable_named(&unstable, FINAL_READ_WAIT, |a| accounts.name(a)));
    violations.merge(bank::check_bank(&snapshot.cuts, &final_read));
    let allowed = checker::write_cycles(snapshot, &final_read);
    Ok(Checked { violations, allowed, counts, copier: None, share: None })
}

/// How long the topics of a run of several groups may take to reach their groups' logs.
const PLACED_WAIT: Duration = Duration::from_secs(30);

/// With several groups a new topic reaches its group's log within a pass of group 0's apply
/// (docs/OPERATIONS.md, "Raft groups"): the workload starts once every partition has an end
/// in its group, so its first seconds are not spent on partitions nobody leads yet.
fn wait_until_placed(bootstrap: &str, topics: &[(String, i32)]) -> Result<()> {
    let consumer: BaseConsumer = client_config(bootstrap).set("group.id", "chaos-placed").create()?;
    let started = Instant::now();
    for (topic, partitions) in topics {
        for p in 0..*partitions {
            while let Err(e) = consumer.fetch_watermarks(topic, p, Duration::from_secs(5)) {
                if started.elapsed() > PLACED_WAIT {
                    let leaders = partition_leaders(&consumer, topic);
                    anyhow::bail!("{topic}/{p} not served after {PLACED_WAIT:?}: {e}; leaders {leaders}");
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
    println!(
        "chaos: every topic served by its group's leader {:.1} s after creation",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `topic`'s partition leaders as Metadata names them, for a report.
fn partition_leaders(consumer: &BaseConsumer, topic: &str) -> String {
    match consumer.fetch_metadata(Some(topic), Duration::from_secs(5)) {
        Ok(metadata) => metadata
            .topics()
            .iter()
            .flat_map(|t| t.partitions().iter().map(|p| format!("{}:{} ", p.id(), p.leader())))
            .collect(),
        Err(e) => format!("unknown ({e})"),
    }
}

fn start_workload(
    cluster: &Cluster,
    options: &RunOptions,
    topic: &str,
    (history, share): (&History, &ShareHistory),
) -> Result<Running> {
    let bootstrap = cluster.bootstrap();
    let config = QueueConfig {
        bootstrap: bootstrap.clone(),
        topic: topic.to_string(),
        partitions: options.partitions,
        writers: options.writers,
        plain_writers: if options.workload == Workload::Queue { options.plain_writers } else { 0 },
        readers: options.readers,
        abort_one_in: if options.workload == Workload::Bank { 3 } else { 5 },
        max_committed: options.max_committed,
        seed: options.seed,
    };
    Ok(match options.workload {
        Workload::Queue => Running::Queue(Queue::start(config, history.clone())),
        Workload::Bank => {
            // The bank's cut reader observes the log directly, not through the client links
            // it may cut.
            let kafka_addrs = cluster.ids().into_iter().map(|id| cluster.kafka_listen_addr(id)).collect();
            let accounts = Accounts::new(options.groups, options.partitions);
            Running::Bank(Bank::start(config, accounts, kafka_addrs, history.clone()))
        }
        Workload::Copier => Running::Copier(Copier::start(
            CopierConfig {
                bootstrap,
                names: CopierNames::CHAOS,
                partitions: options.partitions,
                instances: placement::copier_slots(options.writers),
                seed: options.seed,
                bug: options.copier_bug,
                churn: true,
                value_prefix: String::new(),
                transform: copier::copy_unchanged,
                group_protocol: options.group_protocol,
            },
            history.clone(),
        )),
        Workload::Share => Running::Share(ShareWorkload::start(
            ShareConfig {
                bootstrap,
                topic: topic.to_string(),
                partitions: options.partitions,
                writers: options.writers,
                plain_writers: options.plain_writers,
                consumers: options.readers,
                seed: options.seed,
                bug: options.share_bug,
            },
            history.clone(),
            share.clone(),
        )?),
    })
}

/// The faults, on schedule, until the run's length or operation bound; the first failure to
/// inject one ends the run.
fn inject_plan(
    cluster: &mut Cluster,
    options: &RunOptions,
    plan: &[schedule::Planned],
    history: &History,
    client_faults: &ClientFaults,
) -> Option<anyhow::Error> {
    let mut rng = StdRng::seed_from_u64(options.seed ^ 0x5eed);
    let started = Instant::now();
    for planned in plan {
        if history.committed() >= options.max_committed {
            break;
        }
        if let Some(wait) = planned.at.checked_sub(started.elapsed()) {
            std::thread::sleep(wait);
        }
        println!("chaos: {:>7.1}s {} ({:?})", history.now().as_secs_f64(), planned.kind, planned.length);
        match faults::inject(cluster, planned, history, client_faults, &mut rng) {
            Ok(Some(window)) => history.fault(window),
            Ok(None) => {}
            Err(e) => return Some(e),
        }
    }
    while started.elapsed() < options.length && history.committed() < options.max_committed {
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

/// The share group's running totals from the leader's `/metrics` (the cluster is whole and
/// quiet), or None if it could not tell them (no admin API, the scrape failed, or a broker
/// without the series).
fn share_totals(cluster: &mut Cluster) -> Option<share_check::BrokerTotals> {
    if !cluster.has_admin_api() {
        return None;
    }
    let leader = cluster.leader().ok()?;
    let scrape = crate::scrape::Scrape::of(cluster.admin_addr(leader)).ok()?;
    let group = [("group", share::GROUP)];
    let total = |name: &str| {
        let name = format!("onelog_share_group_records_{name}_total");
        let samples: Vec<f64> = scrape.matching(&name, &group).map(|s| s.value).collect();
        samples.first().map(|v| *v as u64)
    };
    Some(share_check::BrokerTotals {
        accepted: total("accepted")?,
        archived: total("archived")?,
        redelivered: total("redelivered")?,
    })
}

/// The share consumers' whole history, for the diagnosis of a violation.
fn save_share_history(dir: &std::path::Path, share: &share_history::ShareSnapshot) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let file = std::fs::File::create(dir.join("share-history.json"))?;
    serde_json::to_writer(std::io::BufWriter::new(file), share)?;
    Ok(())
}

/// The copier's final read and its checker; its figures completed with what the read holds.
fn check_copier_run(
    bootstrap: &str,
    options: &RunOptions,
    snapshot: &Snapshot,
    mut k: CopierCounts,
) -> Result<(Violations, QueueCounts, Option<CopierCounts>)> {
    let read = copier_check::final_read(bootstrap, &CopierNames::CHAOS, options.partitions, FINAL_READ_WAIT)?;
    let mut violations = copier_check::check_copier(&snapshot.inputs, &read);
    violations.merge(checker::check_stable(&read.unstable, FINAL_READ_WAIT));
    let mut counts = checker::txn_counts(snapshot);
    k.input_acknowledged = snapshot.inputs.len();
    k.input_records = read.input.values().map(Vec::len).sum();
    k.output_records = read.output.values().map(Vec::len).sum();
    counts.final_read = k.output_records;
    Ok((violations, counts, Some(k)))
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

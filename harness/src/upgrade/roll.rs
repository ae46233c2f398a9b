//! The rolling upgrade under load (issue 33): three nodes of an old release on its golden
//! fixture's data, rolled one node at a time to the current build while the chaos runner's
//! queue workload (transactional writers, an idempotent writer, read_committed readers) and a
//! consumer group (`roll_group`) run; one node goes back to the old build mid-roll (a rollback
//! before any feature level is finalized) and forward again.
//!
//! Each restart is SIGTERM (a leader hands its leadership over first), the same data directory
//! and configs on the other binary, then waiting until the node serves Kafka and has applied
//! what the leader had applied when it came up, and then what the leader had applied once it
//! committed more (`GET /status` of both: `last_applied`, the figure `onelog admin status`
//! prints as APPLIED; the second round proves the cluster commits with the node back, which a
//! restarted leader resuming its old term for a moment cannot fake). While the rolled-back
//! node runs the old build, `kafka-features.sh upgrade` must be refused, naming it. Once every
//! node runs the current build, [`finalize_feature_level`] finalizes `onelog.version` 2 with
//! `kafka-features.sh` and checks that the old build then refuses to start on a node's data;
//! [`finalize_consumer_groups`], [`finalize_streams_groups`] and [`finalize_share_groups`] then
//! show a KIP-848 join, a KIP-1071 Streams join and a KIP-932 share join each refused until its
//! level is finalized (`onelog.version` 3 with `group.version` 1, `onelog.version` 4 with
//! `streams.version` 1, then `onelog.version` 5 with `share.version` 1), and served after;
//! `onelog.version` 6 then has every node journal its partition segments (issue 31) after a
//! SIGTERM restart, the load still running; `onelog.version` 7 (cross-group transaction
//! state, issue 32) has a follower restart from a format-13 checkpoint;
//! the load stops, and the run is checked: the queue checker (every acknowledged
//! record present exactly once, no aborted or torn read), transactions aborted without the
//! workload asking, committed offsets that went backwards, the fixture's manifest on the new
//! build as on the old one, equal replica digests; and the longest write stall (the largest gap
//! between two successful acknowledgements) is measured, during each step and over the roll.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use serde::Serialize;

use super::fixture::{self, fixture_dir, reader_configs};
use super::make::unpack_into;
use super::manifest::{Manifest, MANIFEST_FILE};
use super::roll_group::{GroupFigures, RollGroup};
use super::verify::verify;
use crate::admin_api;
use crate::chaos::checker::{self, QueueCounts, Violations};
use crate::chaos::history::{History, Outcome, Snapshot};
use crate::chaos::queue::{self, Queue, QueueConfig};
use crate::kafka::create_topics;
use crate::{java, Cluster, RawClient};
use kafka_compat::error_code::UNSUPPORTED_VERSION;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, GroupId, ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse, StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

/// The workload's topic.
pub const ROLL_TOPIC: &str = "upgrade-roll";
/// How long a restarted node may take to apply what the leader had.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the final read may wait for open transactions (past the writers' 30 s timeout).
const FINAL_READ_WAIT: Duration = Duration::from_secs(90);
/// Longest wait for an agreed leader after a step.
const LEADER_WAIT: Duration = Duration::from_secs(30);
/// How long the old build may take to stop on a checkpoint it cannot read.
const OLD_BUILD_EXIT_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct RollOptions {
    pub old_binary: PathBuf,
    /// The current build; `None`: `ONELOG_BIN`, else the debug build.
    pub new_binary: Option<PathBuf>,
    /// The release whose fixture the cluster starts from (`harness/fixtures/<release>`).
    pub release: String,
    /// Load on the old build before the first restart, and after each step.
    pub warmup: Duration,
    pub settle: Duration,
    pub seed: u64,
    pub partitions: i32,
    pub transactional_writers: usize,
    /// Where to copy every node's log at the end (`node-<id>.log`), pass or fail.
    pub logs_to: Option<PathBuf>,
}

/// Which binary a node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Build {
    Old,
    New,
}

/// One step of the roll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// SIGTERM the node, start it on `to`, wait until it has caught up.
    Restart { node: u64, to: Build },
    /// Move the leadership (`POST /leader/transfer`) to a node of this build, if the leader
    /// runs the other one: so the new build leads while an old node follows.
    LeadOn(Build),
    /// `kafka-features.sh upgrade` while `old` runs the old build: refused, naming it.
    FinalizeRefused { old: u64 },
}

/// What one step did and how long each part took.
#[derive(Debug, Clone, Serialize)]
pub struct StepRecord {
    pub step: String,
    pub leader_before: Option<u64>,
    pub leader_after: Option<u64>,
    /// The Raft term before and after (as the leader reports it).
    pub term_before: Option<u64>,
    pub term_after: Option<u64>,
    /// Seconds from the start of the load: the step's start, and the end of the load after
    /// it (the settle period), when `leader_after` and `term_after` are read.
    pub began_s: f64,
    pub ended_s: f64,
    /// SIGTERM to exit; spawn to serving Kafka; serving to caught up (restarts only).
    pub exit_ms: Option<u128>,
    pub exit_status: Option<String>,
    pub serving_ms: Option<u128>,
    pub catch_up_ms: Option<u128>,
    /// The leader's applied index the node had to reach (`wait_caught_up`'s second round).
    pub caught_up_to: Option<u64>,
    /// Largest gap between two acknowledged writes overlapping the step and its settle period.
    pub longest_ack_gap_ms: u128,
    /// What each node runs after the step.
    pub builds: Vec<(u64, Build)>,
}

/// The run's figures and verdicts.
#[derive(Debug, Clone, Serialize)]
pub struct RollReport {
    pub release: String,
    pub old_binary: String,
    pub new_binary: String,
    pub seed: u64,
    pub seconds: f64,
    pub steps: Vec<StepRecord>,
    pub counts: QueueCounts,
    /// Aborted transactions the workload did not plan (after an error the client saw).
    pub unplanned_aborts: usize,
    pub client_errors: usize,
    pub violations: Violations,
    /// Write cycles, which Kafka's protocol allows (see `chaos::checker::write_cycles`).
    pub allowed_anomalies: Violations,
    pub group: GroupFigures,
    /// Largest gap between two acknowledged writes from the first SIGTERM to the last
    /// catch-up, where it began, and over the whole run.
    pub longest_stall_ms: u128,
    pub longest_stall_at_s: f64,
    pub longest_stall_overall_ms: u128,
    pub acknowledged_writes: usize,
    /// Of those, transactions committed (by the transactional writers, `w…`) and single
    /// writes of the idempotent writer (`p…`), which the counts take as one-write transactions.
    pub transactions_committed: usize,
    pub idempotent_acknowledged: usize,
    /// What [`finalize_feature_level`] did.
    pub feature_level: String,
}

impl RollReport {
    /// Violations of the run: the checker's, unplanned aborts, unknown outcomes, offsets that
    /// went backwards, a group that ends elsewhere than its member.
    pub fn failures(&self) -> Vec<String> {
        let mut out: Vec<String> =
            self.violations.counts.iter().map(|(kind, n)| format!("{n} {kind}")).collect();
        if self.unplanned_aborts > 0 {
            out.push(format!("{} transactions aborted without the workload asking", self.unplanned_aborts));
        }
        if self.counts.unknown > 0 {
            out.push(format!("{} writes whose outcome the client could not tell", self.counts.unknown));
        }
        out.extend(self.group.went_backwards.iter().map(|b| format!("committed offset went backwards: {b}")));
        if self.group.last_committed != self.group.last_watched {
            out.push(format!(
                "the group's committed offsets {:?} are not the member's last commit {:?}",
                self.group.last_watched, self.group.last_committed
            ));
        }
        out
    }
}

/// The default plan for nodes `followers` (two, ascending) and `leader`: a follower to the
/// new build (old leader, new follower); the leader (it hands over); leadership onto the new
/// build (a new leader with an old follower); the first follower back to the old build and
/// forward again (a rollback, on a data directory the new build wrote); the last old node.
pub fn plan(leader: u64, followers: [u64; 2]) -> Vec<Step> {
    let [a, b] = followers;
    vec![
        Step::Restart { node: a, to: Build::New },
        Step::Restart { node: leader, to: Build::New },
        Step::LeadOn(Build::New),
        Step::Restart { node: a, to: Build::Old },
        Step::FinalizeRefused { old: a },
        Step::Restart { node: a, to: Build::New },
        Step::Restart { node: b, to: Build::New },
    ]
}

/// The binaries of a roll, and which is which.
struct Binaries {
    old: PathBuf,
    new: PathBuf,
}

impl Binaries {
    fn path(&self, build: Build) -> &Path {
        match build {
            Build::Old => &self.old,
            Build::New => &self.new,
        }
    }

    fn of(&self, cluster: &Cluster, id: u64) -> Build {
        if cluster.node_binary(id) == self.old {
            Build::Old
        } else {
            Build::New
        }
    }
}

/// Runs the whole roll; the report says what failed (`RollReport::failures`).
pub fn run(options: &RollOptions) -> Result<RollReport> {
    let dir = fixture_dir(&options.release);
    let manifest = Manifest::read(&dir.join(MANIFEST_FILE))?;
    let new = match &options.new_binary {
        Some(b) => b.clone(),
        None => crate::process::onelog_binary("debug")?,
    };
    let binaries = Binaries { old: options.old_binary.clone(), new };
    let mut configs: Vec<(String, String)> = manifest.node_configs.clone().into_iter().collect();
    configs.extend(reader_configs());
    let mut cluster_options = fixture::cluster_options(Some(&binaries.old), &configs);
    for id in fixture::node_ids() {
        cluster_options = cluster_options.node_binary(id, &binaries.old);
    }
    let mut cluster = Cluster::prepare(cluster_options)?;
    unpack_into(&cluster, &dir, &manifest)?;
    cluster.start_all().context("three nodes of the old release on its fixture")?;
    let result = drive(&mut cluster, options, &binaries, &manifest);
    if let Some(dir) = &options.logs_to {
        std::fs::create_dir_all(dir)?;
        for id in cluster.ids() {
            std::fs::copy(cluster.log_path(id), dir.join(format!("node-{id}.log")))?;
        }
    }
    Ok(cluster.unwrap_or_dump(result))
}

fn drive(
    cluster: &mut Cluster,
    options: &RollOptions,
    binaries: &Binaries,
    manifest: &Manifest,
) -> Result<RollReport> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(verify(cluster, manifest)).context("the old release on its own fixture, before the roll")?;
    println!("roll: the old release serves its fixture as its manifest says");
    let bootstrap = cluster.bootstrap();
    rt.block_on(create_topics(&bootstrap, &[(ROLL_TOPIC, options.partitions)]))?;
    let history = History::new();
    let queue = Queue::start(queue_config(&bootstrap, options), history.clone());
    let group = RollGroup::start(&bootstrap, ROLL_TOPIC, options.partitions);
    std::thread::sleep(options.warmup);

    let leader = cluster.leader()?;
    let followers: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != leader).collect();
    let steps = plan(leader, [followers[0], followers[1]]);
    let mut records = Vec::new();
    let mut failure = None;
    for step in steps {
        match run_step(cluster, binaries, step, &history) {
            Ok(mut record) => {
                // The step's figures include the load after it: an election it caused may
                // come once the node is back (a restarted leader resumes its term first).
                std::thread::sleep(options.settle);
                record.ended_s = history.now().as_secs_f64();
                record.leader_after = cluster.leader().ok();
                record.term_after = record.leader_after.and_then(|l| cluster.status(l).ok()).map(|s| s.term);
                println!("roll: {}", step_line(&record));
                records.push(record);
            }
            Err(e) => {
                failure = Some(e.context(format!("{step:?}")));
                break;
            }
        }
        if let Err(e) = cluster.check_none_exited() {
            failure = Some(e);
            break;
        }
    }
    let feature_level = match failure {
        None => {
            let finalized = finalize_feature_level(cluster, binaries, followers[0])?;
            let gated = rt.block_on(finalize_consumer_groups(cluster))?;
            let streams = rt.block_on(finalize_streams_groups(cluster))?;
            let share = rt.block_on(finalize_share_groups(cluster))?;
            let journaled = finalize_journaled_segments(cluster)?;
            let cross_group = finalize_cross_group_state(cluster)?;
            let coordinators = finalize_group_coordinators(cluster)?;
            let forget = finalize_forget_remote(cluster)?;
            format!("{finalized}; {gated}; {streams}; {share}; {journaled}; {cross_group}; {coordinators}; {forget}")
        }
        Some(_) => "not reached".to_string(),
    };
    std::thread::sleep(options.settle);
    queue.stop();
    let group = group.stop();
    if let Some(e) = failure {
        return Err(e);
    }
    let report = check(cluster, options, binaries, &history, records, group, feature_level)?;
    rt.block_on(verify(cluster, manifest)).context("the fixture on the current build, after the roll")?;
    println!("roll: the current build serves the old release's fixture as its manifest says");
    Ok(report)
}

fn queue_config(bootstrap: &str, options: &RollOptions) -> QueueConfig {
    QueueConfig {
        bootstrap: bootstrap.to_string(),
        topic: ROLL_TOPIC.to_string(),
        partitions: options.partitions,
        writers: options.transactional_writers,
        plain_writers: 1,
        readers: 2,
        abort_one_in: 5,
        max_committed: usize::MAX,
        seed: options.seed,
    }
}

/// The operator's last step (docs/OPERATIONS.md, Upgrades): once every node runs the current
/// build, `kafka-features.sh upgrade --feature onelog.version=2` finalizes the new level, which
/// every node then describes. After it there is no way back: node `back` is stopped (its
/// checkpoint is then written in format 8) and started on the old build, which must stop on
/// that checkpoint instead of serving, and then on the current build again, catching up.
fn finalize_feature_level(cluster: &mut Cluster, binaries: &Binaries, back: u64) -> Result<String> {
    let (ok, text) =
        java::feature_command(&cluster.bootstrap(), &["upgrade", "--feature", "onelog.version=2"])?;
    ensure!(ok && text.contains("onelog.version was upgraded to 2."), "kafka-features upgrade: {text}");
    let deadline = Instant::now() + CATCH_UP_TIMEOUT;
    for id in cluster.ids() {
        let addr = cluster.kafka_addr(id).to_string();
        while java::described_feature(&addr, "onelog.version")?.2 != 2 {
            ensure!(Instant::now() < deadline, "node {id} does not describe onelog.version 2");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    println!(
        "roll: kafka-features.sh upgrade --feature onelog.version=2: finalized, every node describes it"
    );
    let refused = old_build_refused(cluster, binaries, back)?;
    println!("roll: node {back} on the old build after finalization: {refused}");
    Ok(format!("onelog.version 2 finalized; node {back} on the old build then: {refused}"))
}

/// The feature onelog.version 3 gates (issue 28): before it a KIP-848 join is refused as on a
/// cluster without the protocol (UNSUPPORTED_VERSION); `kafka-features.sh upgrade` of
/// `onelog.version` 3 and `group.version` 1 together finalizes both, and then the same join is
/// served.
async fn finalize_consumer_groups(cluster: &mut Cluster) -> Result<String> {
    let before = consumer_protocol_join(cluster).await?;
    ensure!(before.error_code == UNSUPPORTED_VERSION, "a KIP-848 join at onelog.version 2: {before:?}");
    let upgrade = ["upgrade", "--feature", "onelog.version=3", "--feature", "group.version=1"];
    let bootstrap = cluster.bootstrap();
    let (ok, text) = tokio::task::block_in_place(|| java::feature_command(&bootstrap, &upgrade))?;
    ensure!(ok && text.contains("group.version was upgraded to 1."), "kafka-features upgrade: {text}");
    let deadline = Instant::now() + CATCH_UP_TIMEOUT;
    loop {
        let after = consumer_protocol_join(cluster).await?;
        if after.error_code == 0 && after.member_epoch > 0 {
            println!("roll: onelog.version 3 and group.version 1 finalized; a KIP-848 join is served");
            return Ok(format!("a KIP-848 join refused (UNSUPPORTED_VERSION) until onelog.version 3 and group.version 1 were finalized, then served at member epoch {}", after.member_epoch));
        }
        ensure!(Instant::now() < deadline, "a KIP-848 join after finalizing: {after:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The feature onelog.version 4 gates (issue 30): a KIP-1071 Streams join is refused
/// (UNSUPPORTED_VERSION) until `onelog.version` 4 and `streams.version` 1 are finalized
/// together, then served; from there checkpoints are format 10, which the roll's later checks
/// and the fixture's verification read back.
async fn finalize_streams_groups(cluster: &mut Cluster) -> Result<String> {
    let before = streams_protocol_join(cluster).await?;
    ensure!(before.error_code == UNSUPPORTED_VERSION, "a Streams join at onelog.version 3: {before:?}");
    let upgrade = ["upgrade", "--feature", "onelog.version=4", "--feature", "streams.version=1"];
    let bootstrap = cluster.bootstrap();
    let (ok, text) = tokio::task::block_in_place(|| java::feature_command(&bootstrap, &upgrade))?;
    ensure!(ok && text.contains("streams.version was upgraded to 1."), "kafka-features upgrade: {text}");
    let deadline = Instant::now() + CATCH_UP_TIMEOUT;
    loop {
        let after = streams_protocol_join(cluster).await?;
        if after.error_code == 0 && after.member_epoch > 0 {
            println!("roll: onelog.version 4 and streams.version 1 finalized; a Streams join is served");
            return Ok(format!("a Streams join refused (UNSUPPORTED_VERSION) until onelog.version 4 and streams.version 1 were finalized, then served at member epoch {}", after.member_epoch));
        }
        ensure!(Instant::now() < deadline, "a Streams join after finalizing: {after:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The feature onelog.version 5 gates (issue 29): a KIP-932 share join is refused
/// (UNSUPPORTED_VERSION) until `onelog.version` 5 and `share.version` 1 are finalized
/// together, then served; from there checkpoints are format 11.
async fn finalize_share_groups(cluster: &mut Cluster) -> Result<String> {
    let before = share_join(cluster).await?;
    ensure!(before.error_code == UNSUPPORTED_VERSION, "a share join at onelog.version 4: {before:?}");
    let upgrade = ["upgrade", "--feature", "onelog.version=5", "--feature", "share.version=1"];
    let bootstrap = cluster.bootstrap();
    let (ok, text) = tokio::task::block_in_place(|| java::feature_command(&bootstrap, &upgrade))?;
    ensure!(ok && text.contains("share.version was upgraded to 1."), "kafka-features upgrade: {text}");
    let deadline = Instant::now() + CATCH_UP_TIMEOUT;
    loop {
        let after = share_join(cluster).await?;
        if after.error_code == 0 && after.member_epoch > 0 {
            println!("roll: onelog.version 5 and share.version 1 finalized; a share join is served");
            return Ok(format!("a share join refused (UNSUPPORTED_VERSION) until onelog.version 5 and share.version 1 were finalized, then served at member epoch {}", after.member_epoch));
        }
        ensure!(Instant::now() < deadline, "a share join after finalizing: {after:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The level onelog.version 6 gates (issue 31): partitions leave produced batches in the Raft
/// log. A node journals once its newest checkpoint is format 12, so after finalizing, each
/// node is restarted with SIGTERM (which writes one), followers first, the load running; what
/// it writes from then on is checked with everything else at the end.
fn finalize_journaled_segments(cluster: &mut Cluster) -> Result<String> {
    let upgrade = ["upgrade", "--feature", "onelog.version=6"];
    let (ok, text) = java::feature_command(&cluster.bootstrap(), &upgrade)?;
    ensure!(ok && text.contains("onelog.version was upgraded to 6."), "kafka-features upgrade: {text}");
    let mut order = cluster.followers()?;
    order.push(cluster.leader()?);
    for id in order {
        let deadline = Instant::now() + CATCH_UP_TIMEOUT;
        while java::described_feature(&cluster.kafka_addr(id).to_string(), "onelog.version")?.2 != 6 {
            ensure!(Instant::now() < deadline, "node {id} does not describe onelog.version 6");
            std::thread::sleep(Duration::from_millis(100));
        }
        let status = cluster.terminate(id)?;
        ensure!(status.success(), "node {id} exited with {status} on SIGTERM");
        cluster.start_node(id)?;
        wait_caught_up(cluster, id)?;
        let status = cluster.status(id)?;
        ensure!(status.journaled_segments, "node {id} does not journal after its restart: {status:?}");
    }
    println!("roll: onelog.version 6 finalized; every node journals after a SIGTERM restart");
    Ok("onelog.version 6 finalized; every node journals its partition segments after a SIGTERM restart"
        .into())
}

/// The level onelog.version 7 gates (issue 32): cross-group transaction entries, and their
/// state in checkpoints (format 13). Finalized under load; a follower restarted with SIGTERM
/// writes a format-13 checkpoint and comes back from it.
fn finalize_cross_group_state(cluster: &mut Cluster) -> Result<String> {
    finalize_onelog_version(cluster, 7)?;
    let follower = cluster.followers()?[0];
    let status = cluster.terminate(follower)?;
    ensure!(status.success(), "node {follower} exited with {status} on SIGTERM");
    let format = checkpoint_format(&cluster.data_dir(follower))?;
    ensure!(format == 13, "node {follower}'s checkpoint after onelog.version 7 is format {format}");
    cluster.start_node(follower)?;
    wait_caught_up(cluster, follower)?;
    println!(
        "roll: onelog.version 7 finalized; node {follower}'s checkpoint is format 13 and it restarts from it"
    );
    Ok(format!("onelog.version 7 finalized; node {follower} restarted from a format-13 checkpoint"))
}

/// The level onelog.version 8 gates (issue 32): a Raft group of several identifies itself and
/// coordinates its transactional ids. A one-group cluster writes nothing new for it; finalized
/// under load, every node describes it and the workload carries on.
fn finalize_group_coordinators(cluster: &mut Cluster) -> Result<String> {
    finalize_onelog_version(cluster, 8)?;
    println!("roll: onelog.version 8 finalized on every node");
    Ok("onelog.version 8 finalized".into())
}

/// The level onelog.version 9 gates (issue 32): a participant group forgets the remote
/// producer ids their coordinator no longer knows. A one-group cluster has none; finalized
/// under load, every node describes it and the workload carries on.
fn finalize_forget_remote(cluster: &mut Cluster) -> Result<String> {
    finalize_onelog_version(cluster, 9)?;
    println!("roll: onelog.version 9 finalized on every node");
    Ok("onelog.version 9 finalized".into())
}

/// `kafka-features.sh upgrade --feature onelog.version=LEVEL`, then waits until every node
/// describes it.
fn finalize_onelog_version(cluster: &Cluster, level: i16) -> Result<()> {
    let upgrade = ["upgrade".to_string(), "--feature".to_string(), format!("onelog.version={level}")];
    let (ok, text) = java::feature_command(&cluster.bootstrap(), &upgrade.each_ref().map(String::as_str))?;
    let done = format!("onelog.version was upgraded to {level}.");
    ensure!(ok && text.contains(&done), "kafka-features upgrade: {text}");
    for id in cluster.ids() {
        let deadline = Instant::now() + CATCH_UP_TIMEOUT;
        while java::described_feature(&cluster.kafka_addr(id).to_string(), "onelog.version")?.2 != level {
            ensure!(Instant::now() < deadline, "node {id} does not describe onelog.version {level}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(())
}

/// The format number of a node's current checkpoint (`state/CURRENT` names the generation;
/// the file starts with "OLCP" and the format as a big-endian u32).
fn checkpoint_format(data_dir: &Path) -> Result<u32> {
    let state = data_dir.join("state");
    let generation = std::fs::read_to_string(state.join("CURRENT")).unwrap_or_else(|_| "gen-0".into());
    let path = state.join(generation.trim()).join("checkpoint");
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    ensure!(bytes.len() >= 8 && &bytes[..4] == b"OLCP", "{} is not a checkpoint", path.display());
    Ok(u32::from_be_bytes(bytes[4..8].try_into().expect("4 bytes")))
}

/// A ShareGroupHeartbeat join sent to the leader, subscribing to nothing that exists.
async fn share_join(cluster: &mut Cluster) -> Result<ShareGroupHeartbeatResponse> {
    let leader = cluster.leader()?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    let join = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("roll-kip-932")))
        .with_member_id(StrBytes::from_static_str("roll-share-member"))
        .with_subscribed_topic_names(Some(vec![TopicName(StrBytes::from_static_str("roll-kip-932-input"))]));
    client.request(1, &join).await
}

/// A StreamsGroupHeartbeat join sent to the leader: one subtopology reading a topic that does
/// not exist (served with MISSING_SOURCE_TOPICS, which creates nothing).
async fn streams_protocol_join(cluster: &mut Cluster) -> Result<StreamsGroupHeartbeatResponse> {
    use kafka_protocol::messages::streams_group_heartbeat_request::{Subtopology, Topology};
    let leader = cluster.leader()?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    let subtopology = Subtopology::default()
        .with_subtopology_id(StrBytes::from_static_str("0"))
        .with_source_topics(vec![TopicName(StrBytes::from_static_str("roll-kip-1071-input"))]);
    let join = StreamsGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("roll-kip-1071")))
        .with_member_id(StrBytes::from_static_str("roll-member"))
        .with_rebalance_timeout_ms(30_000)
        .with_topology(Some(Topology::default().with_subtopologies(vec![subtopology])))
        .with_active_tasks(Some(Vec::new()))
        .with_standby_tasks(Some(Vec::new()))
        .with_warmup_tasks(Some(Vec::new()));
    client.request(1, &join).await
}

/// A ConsumerGroupHeartbeat join (no subscription) sent to the leader.
async fn consumer_protocol_join(cluster: &mut Cluster) -> Result<ConsumerGroupHeartbeatResponse> {
    let leader = cluster.leader()?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    let join = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("roll-kip-848")))
        .with_member_id(StrBytes::from_static_str("roll-member"))
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(Vec::new()))
        .with_topic_partitions(Some(Vec::new()));
    client.request(1, &join).await
}

/// Starts node `id` on the old build after finalization: it must exit non-zero on the format-8
/// checkpoint; then the current build serves it again. Returns what the old build said.
fn old_build_refused(cluster: &mut Cluster, binaries: &Binaries, id: u64) -> Result<String> {
    let status = cluster.terminate(id)?;
    ensure!(status.success(), "node {id} exited with {status} after SIGTERM");
    cluster.set_node_binary(id, binaries.path(Build::Old));
    cluster.spawn_node(id)?;
    let exit = cluster.wait_exit(id, OLD_BUILD_EXIT_TIMEOUT)?;
    let log = std::fs::read_to_string(cluster.log_path(id)).unwrap_or_default();
    let said = log.lines().rev().find(|l| l.contains("format version")).unwrap_or("").trim().to_string();
    ensure!(
        exit.is_some_and(|s| !s.success()) && said.contains("unknown format version 8"),
        "the old build on node {id} after finalization: exit {exit:?}, log says {said:?}"
    );
    cluster.set_node_binary(id, binaries.path(Build::New));
    cluster.start_node(id)?;
    wait_caught_up(cluster, id)?;
    Ok(format!("exited with {}, \"{said}\"", exit.expect("checked above")))
}

/// `kafka-features.sh upgrade` while node `old` runs the old build: refused with Kafka's
/// INVALID_UPDATE_VERSION, naming the node that could not say which levels it supports.
fn finalize_refused(cluster: &mut Cluster, old: u64) -> Result<String> {
    let (ok, text) =
        java::feature_command(&cluster.bootstrap(), &["upgrade", "--feature", "onelog.version=2"])?;
    let want = format!("Broker {old} did not say which feature levels it supports");
    ensure!(!ok && text.contains(&want), "kafka-features upgrade with node {old} on the old build: {text}");
    Ok(format!("kafka-features upgrade refused while node {old} runs the old build"))
}

/// One step, timed; the node's exit status must be 0.
fn run_step(cluster: &mut Cluster, binaries: &Binaries, step: Step, history: &History) -> Result<StepRecord> {
    let leader_before = cluster.leader().ok();
    let term_before = leader_before.and_then(|l| cluster.status(l).ok()).map(|s| s.term);
    let began = history.now();
    let mut record = StepRecord {
        step: String::new(),
        leader_before,
        leader_after: None,
        term_before,
        term_after: None,
        began_s: began.as_secs_f64(),
        ended_s: 0.0,
        exit_ms: None,
        exit_status: None,
        serving_ms: None,
        catch_up_ms: None,
        caught_up_to: None,
        longest_ack_gap_ms: 0,
        builds: Vec::new(),
    };
    match step {
        Step::Restart { node, to } => {
            let was = if leader_before == Some(node) { " (the leader)" } else { "" };
            record.step = format!("node {node}{was}: {:?} → {to:?}", binaries.of(cluster, node));
            restart(cluster, binaries, node, to, &mut record)?;
        }
        Step::LeadOn(build) => record.step = lead_on(cluster, binaries, build)?,
        Step::FinalizeRefused { old } => record.step = finalize_refused(cluster, old)?,
    }
    cluster.wait_for_leader(LEADER_WAIT)?;
    record.builds = cluster.ids().into_iter().map(|id| (id, binaries.of(cluster, id))).collect();
    Ok(record)
}

fn restart(
    cluster: &mut Cluster,
    binaries: &Binaries,
    node: u64,
    to: Build,
    record: &mut StepRecord,
) -> Result<()> {
    let t = Instant::now();
    let status = cluster.terminate(node)?;
    record.exit_ms = Some(t.elapsed().as_millis());
    record.exit_status = Some(status.to_string());
    ensure!(status.success(), "node {node} exited with {status} after SIGTERM");
    cluster.set_node_binary(node, binaries.path(to));
    let t = Instant::now();
    cluster.start_node(node).with_context(|| format!("node {node} on the {to:?} build"))?;
    record.serving_ms = Some(t.elapsed().as_millis());
    let t = Instant::now();
    record.caught_up_to = Some(wait_caught_up(cluster, node)?);
    record.catch_up_ms = Some(t.elapsed().as_millis());
    Ok(())
}

/// Waits until node `id` has caught up, in two rounds: it has applied what the agreed leader
/// had applied when the wait began (T1), and then, once that leader has committed past T1
/// (the cluster makes progress: a leader that only claims a stale term cannot), what it had
/// applied then (T2). Returns T2.
fn wait_caught_up(cluster: &mut Cluster, id: u64) -> Result<u64> {
    let deadline = Instant::now() + CATCH_UP_TIMEOUT;
    let (leader, _) = cluster.wait_for_leader(LEADER_WAIT)?;
    let first = applied(cluster, leader)?;
    reach(cluster, id, first, deadline)?;
    let second = loop {
        let (leader, _) = cluster.wait_for_leader(LEADER_WAIT)?;
        let now = applied(cluster, leader)?;
        if now > first {
            break now;
        }
        if Instant::now() > deadline {
            bail!("the leader's applied index stayed at {first} for {CATCH_UP_TIMEOUT:?} after node {id} restarted");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    reach(cluster, id, second, deadline)?;
    Ok(second)
}

/// Waits until node `id` names a leader and has applied `target`.
fn reach(cluster: &mut Cluster, id: u64, target: u64, deadline: Instant) -> Result<()> {
    loop {
        let status = cluster.status(id)?;
        if status.leader.is_some() && status.last_applied.as_u64().unwrap_or(0) >= target {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "node {id} applied {} of the leader's {target} within {CATCH_UP_TIMEOUT:?}",
                status.last_applied
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn applied(cluster: &Cluster, id: u64) -> Result<u64> {
    let status = cluster.status(id)?;
    status.last_applied.as_u64().with_context(|| format!("node {id} reports no applied index"))
}

/// Moves the leadership to the lowest node running `build`, unless the leader already does.
fn lead_on(cluster: &mut Cluster, binaries: &Binaries, build: Build) -> Result<String> {
    let leader = cluster.leader()?;
    if binaries.of(cluster, leader) == build {
        return Ok(format!("leadership on the {build:?} build: node {leader} already leads"));
    }
    let to = cluster.ids().into_iter().find(|id| binaries.of(cluster, *id) == build);
    let to = to.with_context(|| format!("no node runs the {build:?} build"))?;
    let response = admin_api::post(cluster.admin_addr(leader), &format!("/leader/transfer?to={to}"))?;
    ensure!(
        response.status == 200,
        "POST /leader/transfer?to={to} on node {leader}: {} {}",
        response.status,
        response.text()
    );
    Ok(format!(
        "leadership on the {build:?} build: node {leader} ({:?}) transferred it to node {to}",
        binaries.of(cluster, leader)
    ))
}

fn step_line(r: &StepRecord) -> String {
    let node = |id: Option<u64>, term: Option<u64>| match (id, term) {
        (Some(id), Some(term)) => format!("{id} (term {term})"),
        (Some(id), None) => id.to_string(),
        _ => "none".to_string(),
    };
    let (before, after) = (node(r.leader_before, r.term_before), node(r.leader_after, r.term_after));
    let mut line = format!("{:>6.1}s {} — leader {before} → {after}", r.began_s, r.step);
    if let (Some(exit), Some(serving), Some(catch_up)) = (r.exit_ms, r.serving_ms, r.catch_up_ms) {
        let _ = write!(line, "; exited in {exit} ms, serving in {serving} ms, caught up in {catch_up} ms");
    }
    line
}

/// The checks and figures once the load has stopped.
fn check(
    cluster: &mut Cluster,
    options: &RollOptions,
    binaries: &Binaries,
    history: &History,
    mut steps: Vec<StepRecord>,
    group: GroupFigures,
    feature_level: String,
) -> Result<RollReport> {
    let snapshot = history.snapshot();
    let bootstrap = cluster.bootstrap();
    let (final_read, unstable) =
        queue::final_read(&bootstrap, ROLL_TOPIC, options.partitions, FINAL_READ_WAIT)?;
    let (mut violations, counts) = checker::check_queue(&snapshot, &final_read);
    violations.merge(checker::check_stable(&unstable, FINAL_READ_WAIT));
    if let Err(e) = cluster.assert_digests_equal() {
        violations.add("replica divergence", format!("{e:#}"));
    }
    let acks = acknowledgements(&snapshot);
    for s in &mut steps {
        s.longest_ack_gap_ms = longest_gap(&acks, secs(s.began_s), secs(s.ended_s)).0.as_millis();
    }
    let (roll_start, roll_end) =
        (steps.first().map_or(0.0, |s| s.began_s), steps.last().map_or(0.0, |s| s.ended_s));
    let (stall, stall_at) = longest_gap(&acks, secs(roll_start), secs(roll_end));
    let overall = longest_gap(&acks, Duration::ZERO, history.now()).0;
    Ok(RollReport {
        release: options.release.clone(),
        old_binary: binaries.old.display().to_string(),
        new_binary: binaries.new.display().to_string(),
        seed: options.seed,
        seconds: history.now().as_secs_f64(),
        steps,
        unplanned_aborts: counts.aborted - counts.aborted_on_purpose,
        counts,
        client_errors: snapshot.client_errors,
        violations,
        allowed_anomalies: checker::write_cycles(&snapshot, &final_read),
        group,
        longest_stall_ms: stall.as_millis(),
        longest_stall_at_s: stall_at.as_secs_f64(),
        longest_stall_overall_ms: overall.as_millis(),
        acknowledged_writes: acks.len(),
        transactions_committed: committed_by(&snapshot, "w"),
        idempotent_acknowledged: committed_by(&snapshot, "p"),
        feature_level,
    })
}

/// Committed "transactions" of the writers whose names start with `prefix`.
fn committed_by(snapshot: &Snapshot, prefix: &str) -> usize {
    snapshot.txns.iter().filter(|t| t.outcome == Outcome::Committed && t.writer.starts_with(prefix)).count()
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// When each acknowledged write was acknowledged (a committed transaction's commit, an
/// idempotent write's delivery), ascending.
pub fn acknowledgements(snapshot: &Snapshot) -> Vec<Duration> {
    let mut acks: Vec<Duration> =
        snapshot.txns.iter().filter(|t| t.outcome == Outcome::Committed).map(|t| t.ended).collect();
    acks.sort();
    acks
}

/// The largest gap between consecutive `acks` that overlaps `from..to` (a gap that began
/// before `from` or ended after `to` counts), and where it began.
pub fn longest_gap(acks: &[Duration], from: Duration, to: Duration) -> (Duration, Duration) {
    let mut best = (Duration::ZERO, from);
    for pair in acks.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if b >= from && a <= to && b - a > best.0 {
            best = (b - a, a);
        }
    }
    best
}

impl RollReport {
    /// The report as text: the steps, then the figures, then the verdict.
    pub fn text(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "rolling upgrade from onelog {} to the current build, seed {}",
            self.release, self.seed
        );
        let _ = writeln!(t, "  old: {}\n  new: {}", self.old_binary, self.new_binary);
        for s in &self.steps {
            let _ = writeln!(
                t,
                "  {} (longest gap between acknowledgements {} ms)",
                step_line(s),
                s.longest_ack_gap_ms
            );
        }
        let c = &self.counts;
        let _ = writeln!(
            t,
            "load over {:.0} s: {} transactions committed, {} aborted ({} on purpose, {} not planned), {} idempotent writes acknowledged, {} outcomes unknown; {} values acknowledged, {} read back",
            self.seconds,
            self.transactions_committed,
            c.aborted,
            c.aborted_on_purpose,
            self.unplanned_aborts,
            self.idempotent_acknowledged,
            c.unknown,
            c.values_acknowledged,
            c.final_read
        );
        let g = &self.group;
        let _ = writeln!(
            t,
            "consumer group: {} records processed, {} commits acknowledged, {} failed; watcher {} reads, {} failed; offsets went backwards {} times",
            g.records_processed, g.commits_acknowledged, g.commit_failures, g.watcher_reads, g.watcher_failures, g.went_backwards.len()
        );
        let _ = writeln!(
            t,
            "longest write stall during the roll: {} ms (at {:.1} s); over the whole run: {} ms",
            self.longest_stall_ms, self.longest_stall_at_s, self.longest_stall_overall_ms
        );
        let _ = writeln!(t, "write cycles (allowed by Kafka's protocol): {}", self.allowed_anomalies.total());
        let _ = writeln!(t, "feature level: {}", self.feature_level);
        match self.failures() {
            f if f.is_empty() => {
                let _ = writeln!(t, "verdict: nothing lost, duplicated, torn or aborted by the roll");
            }
            f => {
                let _ = writeln!(t, "verdict: FAILED\n  {}", f.join("\n  "));
                for (kind, examples) in &self.violations.examples {
                    let _ = writeln!(t, "  {kind}: {}", examples.join("; "));
                }
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn the_longest_gap_overlapping_a_window_counts_gaps_across_its_edges() {
        let acks = [ms(0), ms(100), ms(900), ms(1000), ms(3000), ms(3100)];
        assert_eq!(longest_gap(&acks, ms(950), ms(2000)), (ms(2000), ms(1000)));
        assert_eq!(longest_gap(&acks, ms(50), ms(500)), (ms(800), ms(100)));
        assert_eq!(longest_gap(&acks, ms(3050), ms(3060)), (ms(100), ms(3000)));
    }

    #[test]
    fn the_plan_rolls_back_a_node_the_new_build_ran() {
        let steps = plan(2, [1, 3]);
        assert_eq!(steps[0], Step::Restart { node: 1, to: Build::New });
        assert_eq!(steps[1], Step::Restart { node: 2, to: Build::New });
        assert_eq!(steps[3], Step::Restart { node: 1, to: Build::Old });
        assert_eq!(steps[4], Step::FinalizeRefused { old: 1 });
        assert_eq!(steps.last(), Some(&Step::Restart { node: 3, to: Build::New }));
    }
}

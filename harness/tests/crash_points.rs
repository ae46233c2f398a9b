//! Crash consistency at every fault point of the apply path (issue 14): between two partitions
//! of one entry, during a checkpoint, during a segment roll, during a snapshot install (before
//! and after the switch to the new generation); and of the Raft log's recycling of purged
//! segments (issue 31): while purged segments are renamed, and right after a recycled one is
//! put in place, before anything of its new life is written; and of the copier that moves
//! what partitions keep of mostly dead parked Raft log segments into their own files (issue
//! 31): after the copies are durable but before the journal is switched to them, and right
//! after the switch, before a checkpoint releases the parked segments.
//!
//! Each case runs three nodes; ONE follower is restarted with `ONELOG_FAULT=<point>` (a
//! fault-injection build aborts there, like a kill -9), the load that reaches the point is
//! driven through the leader, the follower is seen to die at that point (its log names it),
//! is restarted without the fault, and must catch up to digests identical to the two replicas
//! that never crashed, holding every acknowledged record. Under `cargo test` the cases run one
//! at a time (each is a whole cluster on two shared cores); nextest gives each its own process,
//! as it does every scenario, so the load rides out leader changes.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use harness::admin_api;
use harness::atomic::now_ms;
use harness::batch::{encode_batch, TestRecord};
use harness::raw_ops::{create_topics_ok, delete_records_of, produce, produce_results, BatchFor};
use harness::{Cluster, ClusterOptions, RawClient};

const TOPIC: &str = "crash-points";
const PARTITIONS: i32 = 4;
/// Small segments, so a few dozen requests roll every partition.
const SEGMENT_BYTES: u64 = 16 * 1024;
const VALUE_BYTES: usize = 200;
/// Requests written before the faulty follower is restarted, and after it died.
const REQUESTS_AROUND: usize = 20;
/// Most requests the load sends waiting for the follower to reach its point.
const REQUESTS_TO_REACH_MAX: usize = 1_000;
/// The broker's `LOG_ENTRIES_KEPT_BELOW_CHECKPOINT` (broker/src/limits.rs): a follower further
/// behind than this past a checkpoint can only catch up from a snapshot.
const LOG_ENTRIES_KEPT_BELOW_CHECKPOINT: u64 = 2_000;
/// Entries written while the follower is down, beyond the above, before the checkpoint.
const SNAPSHOT_LAG_MARGIN_ENTRIES: u64 = 200;
/// Raft log segments of the recycling cases: a few hundred entries each, so that a checkpoint
/// purges (and recycles) whole segments within seconds of load.
const RAFT_SEGMENT_BYTES: u64 = 256 * 1024;
/// The recycling cases ask the follower for a checkpoint every this many requests.
const REQUESTS_PER_CHECKPOINT: usize = 400;
/// Most requests the load sends for a recycling point: the first purge needs more entries than
/// a node keeps below a checkpoint.
const REQUESTS_TO_RECYCLE_MAX: usize = 8_000;
/// Longest wait for a node to reach a point or for the leader to purge its log.
const REACH_TIMEOUT: Duration = Duration::from_secs(60);
/// The partition whose records `Reach::LoadAndCheckpointsKeepingOne` never deletes.
const KEPT_PARTITION: i32 = 0;

/// One cluster at a time within this test binary (see the module documentation).
static SERIAL: Mutex<()> = Mutex::new(());

/// What makes the follower reach its point.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Reach {
    /// Multi-partition produce requests through the leader.
    Load,
    /// The same, and a checkpoint asked of the follower (`POST /checkpoint`).
    LoadAndCheckpoint,
    /// The same with small Raft log segments and a checkpoint asked every
    /// `REQUESTS_PER_CHECKPOINT` requests: each purges, and so recycles, whole segments.
    LoadAndCheckpoints,
    /// The same, but `KEPT_PARTITION` keeps its records: the segments purged are parked for
    /// it, about a quarter live, and the checkpoint after copies its batches out of them.
    LoadAndCheckpointsKeepingOne,
    /// The follower is down while the leader writes and checkpoints past its log; on restart
    /// it receives a snapshot.
    SnapshotInstall,
}

impl Reach {
    /// Small Raft log segments and frequent checkpoints, so that whole segments are purged.
    fn checkpoints_often(self) -> bool {
        matches!(self, Reach::LoadAndCheckpoints | Reach::LoadAndCheckpointsKeepingOne)
    }

    /// The partition whose records the load never deletes.
    fn kept_partition(self) -> Option<i32> {
        (self == Reach::LoadAndCheckpointsKeepingOne).then_some(KEPT_PARTITION)
    }
}

#[test]
fn crash_between_two_partitions_of_one_entry() {
    run("crash-between-partitions-of-an-entry", Reach::Load);
}

#[test]
fn crash_during_a_segment_roll() {
    run("crash-mid-segment-roll", Reach::Load);
}

#[test]
fn crash_during_a_checkpoint() {
    run("crash-mid-checkpoint", Reach::LoadAndCheckpoint);
}

#[test]
fn crash_during_a_snapshot_install_before_the_switch() {
    run("crash-mid-snapshot-install", Reach::SnapshotInstall);
}

#[test]
fn crash_during_a_snapshot_install_after_the_switch() {
    run("crash-after-snapshot-install-switch", Reach::SnapshotInstall);
}

#[test]
fn crash_while_purged_raft_segments_are_recycled() {
    run("crash-mid-segment-recycle", Reach::LoadAndCheckpoints);
}

#[test]
fn crash_in_a_recycled_raft_segment_before_its_first_record() {
    run("crash-in-recycled-segment", Reach::LoadAndCheckpoints);
}

#[test]
fn crash_while_batches_are_copied_out_of_parked_segments_before_the_switch() {
    run("crash-mid-segment-copy", Reach::LoadAndCheckpointsKeepingOne);
}

#[test]
fn crash_while_batches_are_copied_out_of_parked_segments_after_the_switch() {
    run("crash-after-segment-copy-switch", Reach::LoadAndCheckpointsKeepingOne);
}

fn run(point: &str, reach: Reach) {
    let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let mut options = ClusterOptions::new(3).config("log.segment.bytes", SEGMENT_BYTES);
    if reach.checkpoints_often() {
        options = options.config("onelog.raft.segment.bytes", RAFT_SEGMENT_BYTES);
    }
    let mut cluster = Cluster::start_with(options).expect("starting 3 nodes");
    let started = Instant::now();
    let result = runtime.block_on(scenario(&mut cluster, point, reach));
    println!("{point}: {:.1} s", started.elapsed().as_secs_f64());
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster, point: &str, reach: Reach) -> Result<()> {
    let leader = cluster.leader()?;
    let faulty = cluster.followers()?[0];
    let mut load = Load::connect(cluster, leader).await?;
    load.kept = reach.kept_partition();
    load.send(REQUESTS_AROUND).await?;

    // Phase 1: the follower restarts with the fault and reaches the point.
    cluster.kill9(faulty)?;
    let status = match reach {
        Reach::SnapshotInstall => {
            lag_past_a_checkpoint(cluster, leader, &mut load).await?;
            cluster.set_node_env(faulty, fault_env(point, None));
            cluster.spawn_node(faulty)?;
            cluster
                .wait_exit(faulty, REACH_TIMEOUT)?
                .with_context(|| format!("node {faulty} did not reach {point} within {REACH_TIMEOUT:?}"))?
        }
        _ => {
            let arm_file = cluster.dir(faulty).join("arm-fault");
            cluster.set_node_env(faulty, fault_env(point, Some(&arm_file)));
            cluster.start_node(faulty)?;
            std::fs::write(&arm_file, b"")?;
            if reach == Reach::LoadAndCheckpoint {
                load.send(REQUESTS_AROUND).await?;
                ask_checkpoint(cluster, faulty)?;
            }
            load.until_exit(cluster, faulty, reach.checkpoints_often()).await?
        }
    };
    ensure!(!status.success(), "node {faulty} exited cleanly ({status}) instead of crashing at {point}");
    let tail = cluster.log_tail(faulty, 50);
    ensure!(
        tail.lines().any(|l| l.contains("fault injection: aborting") && l.contains(point)),
        "node {faulty} died ({status}) but not at {point}:\n{tail}"
    );
    let crashed_after = load.started.elapsed();
    println!(
        "{point}: node {faulty} crashed there ({status}) after {} requests, {crashed_after:.1?} into the load",
        load.requests
    );

    // Phase 2: more writes while it is down, then a restart without the fault.
    load.send(REQUESTS_AROUND).await?;
    cluster.set_node_env(faulty, Vec::new());
    cluster.start_node(faulty)?;
    load.send(REQUESTS_AROUND).await?;
    let restarted_after = load.started.elapsed();

    // Phase 3: every replica holds the same partitions, with every acknowledged record.
    let digests = cluster.assert_digests_equal()?;
    for (id, digest) in &digests {
        for (partition, acked_end) in &load.acked_end {
            let p = digest
                .partitions
                .iter()
                .find(|p| p.topic == TOPIC && p.partition == *partition)
                .with_context(|| format!("node {id}: digest lacks {TOPIC}/{partition}"))?;
            // Exact unless a request failed: its records may be there or not.
            let holds_every_ack = match load.failed {
                0 => p.log_end_offset == *acked_end,
                _ => p.log_end_offset >= *acked_end,
            };
            ensure!(
                holds_every_ack,
                "node {id}: {TOPIC}/{partition} ends at {} but records were acknowledged up to {acked_end} \
                 ({} requests failed)",
                p.log_end_offset,
                load.failed
            );
        }
    }
    println!(
        "{point}: {} nodes agree on {} requests' records ({} failed); restarted and written to by {restarted_after:.1?}, \
         digests equal by {:.1?}",
        digests.len(),
        load.requests,
        load.failed,
        load.started.elapsed()
    );
    Ok(())
}

fn fault_env(point: &str, arm_file: Option<&std::path::Path>) -> Vec<(String, String)> {
    let mut env = vec![("ONELOG_FAULT".to_owned(), point.to_owned())];
    if let Some(file) = arm_file {
        env.push(("ONELOG_FAULT_ARMED_BY".to_owned(), file.display().to_string()));
    }
    env
}

/// `POST /checkpoint` on `id`; the checkpoint is written in the background.
fn ask_checkpoint(cluster: &Cluster, id: u64) -> Result<()> {
    let response = admin_api::post(cluster.admin_addr(id), "/checkpoint")?;
    ensure!(response.status == 202, "POST /checkpoint on node {id}: {} {}", response.status, response.text());
    Ok(())
}

/// With the follower down, writes entries until the follower's log lies below what a node
/// keeps after a checkpoint, then checkpoints both live nodes and waits until each purged that
/// far: whichever leads when the follower returns can only send it a snapshot.
async fn lag_past_a_checkpoint(cluster: &mut Cluster, leader: u64, load: &mut Load) -> Result<()> {
    let index = |cluster: &Cluster| -> Result<u64> {
        let status = admin_api::status(cluster.admin_addr(leader))?;
        status.last_log_index.as_u64().context("leader has no last log index")
    };
    let follower_end = index(cluster)?;
    let needed = follower_end + LOG_ENTRIES_KEPT_BELOW_CHECKPOINT + SNAPSHOT_LAG_MARGIN_ENTRIES;
    // acks=1: the leader answers after its own append, so the entries go out faster; they
    // are committed by the two live nodes all the same, and checked by the digests.
    load.acks = 1;
    while index(cluster)? < needed {
        load.send(50).await?;
    }
    load.acks = -1;
    println!(
        "{} entries written past the follower's end by {:.1?}",
        needed - follower_end,
        load.started.elapsed()
    );
    for id in cluster.live_ids() {
        let addr = cluster.admin_addr(id);
        let status = tokio::task::block_in_place(|| {
            admin_api::checkpoint_and_purge_past(addr, follower_end, REACH_TIMEOUT)
        })?;
        println!(
            "node {id}: checkpoint at {}, log purged to {} past the follower's end {follower_end}",
            status.checkpoint_index, status.purged_index
        );
    }
    Ok(())
}

/// Produce requests through the leader, each ONE record to every partition. Counts where each
/// partition's acknowledged records end. A request that fails (a leader change on these busy
/// cores) is an unknown outcome: counted, and the load goes on through the new leader.
struct Load {
    client: RawClient,
    kafka: BTreeMap<u64, SocketAddr>,
    admin: BTreeMap<u64, SocketAddr>,
    /// Per partition: the offset after the last acknowledged record.
    acked_end: BTreeMap<i32, i64>,
    requests: usize,
    failed: usize,
    started: Instant,
    /// -1 (all) unless a phase only needs entries quickly.
    acks: i16,
    /// A partition `delete_acknowledged` leaves alone.
    kept: Option<i32>,
}

impl Load {
    async fn connect(cluster: &Cluster, leader: u64) -> Result<Self> {
        let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
        create_topics_ok(&mut client, &[(TOPIC, PARTITIONS)]).await?;
        Ok(Load {
            client,
            kafka: cluster.ids().into_iter().map(|id| (id, cluster.kafka_addr(id))).collect(),
            admin: cluster.ids().into_iter().map(|id| (id, cluster.admin_addr(id))).collect(),
            acked_end: (0..PARTITIONS).map(|p| (p, 0)).collect(),
            requests: 0,
            failed: 0,
            started: Instant::now(),
            acks: -1,
            kept: None,
        })
    }

    async fn send(&mut self, requests: usize) -> Result<()> {
        for _ in 0..requests {
            self.send_one().await?;
        }
        Ok(())
    }

    async fn send_one(&mut self) -> Result<()> {
        let n = self.requests;
        self.requests += 1;
        let mut batches = Vec::new();
        for partition in 0..PARTITIONS {
            let key = format!("r{n}-p{partition}");
            let record = TestRecord::new(key.into_bytes(), vec![b'v'; VALUE_BYTES], now_ms());
            batches.push(BatchFor { topic: TOPIC.to_owned(), partition, records: encode_batch(&[record])? });
        }
        let results = match produce(&mut self.client, self.acks, &batches).await {
            Ok(response) => produce_results(&response),
            Err(e) => return self.failed_request(n, &format!("{e:#}")).await,
        };
        if let Some((_, partition, code, _)) = results.iter().find(|r| r.2 != 0) {
            return self.failed_request(n, &format!("{TOPIC}/{partition} error {code}")).await;
        }
        for (_, partition, _, base_offset) in results {
            let end = self.acked_end.get_mut(&partition).context("a partition not asked for")?;
            ensure!(base_offset >= *end, "request {n}: {TOPIC}/{partition} at {base_offset}, below {end}");
            *end = base_offset + 1;
        }
        Ok(())
    }

    async fn failed_request(&mut self, n: usize, why: &str) -> Result<()> {
        self.failed += 1;
        println!("request {n} failed ({why}); an unknown outcome, going on through the leader");
        let deadline = Instant::now() + REACH_TIMEOUT;
        loop {
            for id in self.admin.keys() {
                let Ok(status) = admin_api::status(self.admin[id]) else { continue };
                let Some(addr) = status.leader.and_then(|leader| self.kafka.get(&leader)) else { continue };
                if let Ok(client) = RawClient::connect_negotiated(*addr).await {
                    self.client = client;
                    return Ok(());
                }
            }
            ensure!(Instant::now() < deadline, "no leader to produce to within {REACH_TIMEOUT:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Deletes every partition's records up to what was acknowledged (DeleteRecords; best
    /// effort: with acks=1 the high watermark may lag, and then nothing is deleted). Partitions
    /// then point into no purged Raft log segment, which are recycled rather than kept for
    /// them (journaled segments, issue 31), except the `kept` one's: it keeps them parked,
    /// mostly dead, for the copier. The digests and acknowledged ends are unchanged.
    async fn delete_acknowledged(&mut self) {
        let deleted = self.acked_end.iter().filter(|(p, _)| Some(**p) != self.kept);
        let upto: Vec<(i32, i64)> = deleted.map(|(p, end)| (*p, *end)).collect();
        let _ = delete_records_of(&mut self.client, TOPIC, &upto).await;
    }

    /// Sends until node `id` exits; its exit status. `checkpoints`: also asks it for a
    /// checkpoint every `REQUESTS_PER_CHECKPOINT` requests, with acks=1 as in
    /// `lag_past_a_checkpoint` (only entries are needed, and the digests check them), for up to
    /// `REQUESTS_TO_RECYCLE_MAX` requests and twice the time.
    async fn until_exit(
        &mut self,
        cluster: &mut Cluster,
        id: u64,
        checkpoints: bool,
    ) -> Result<std::process::ExitStatus> {
        let (requests_max, load_time) = match checkpoints {
            true => (REQUESTS_TO_RECYCLE_MAX, 2 * REACH_TIMEOUT),
            false => (REQUESTS_TO_REACH_MAX, REACH_TIMEOUT),
        };
        let deadline = Instant::now() + load_time;
        self.acks = if checkpoints { 1 } else { -1 };
        let exited = self.until_exit_within(cluster, id, requests_max, deadline, checkpoints).await;
        self.acks = -1;
        match exited? {
            Some(status) => Ok(status),
            // The last requests may still be on their way to the follower.
            None => match cluster.wait_exit(id, REACH_TIMEOUT)? {
                Some(status) => Ok(status),
                None => bail!("node {id} still running after {requests_max} requests"),
            },
        }
    }

    /// `until_exit`'s load: `None` once `requests_max` requests are sent and the node still runs.
    async fn until_exit_within(
        &mut self,
        cluster: &mut Cluster,
        id: u64,
        requests_max: usize,
        deadline: Instant,
        checkpoints: bool,
    ) -> Result<Option<std::process::ExitStatus>> {
        for n in 1..=requests_max {
            if let Some(status) = cluster.wait_exit(id, Duration::ZERO)? {
                return Ok(Some(status));
            }
            ensure!(Instant::now() < deadline, "node {id} still running at the end of its load time");
            self.send_one().await?;
            if checkpoints
                && n % REQUESTS_PER_CHECKPOINT == 0
                && cluster.wait_exit(id, Duration::ZERO)?.is_none()
            {
                self.delete_acknowledged().await;
                // The node may die between the check and the request: then the post fails.
                let _ = ask_checkpoint(cluster, id);
            }
        }
        Ok(None)
    }
}

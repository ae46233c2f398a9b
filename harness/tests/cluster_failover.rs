//! Failover of a three-node cluster under a steady acks=all producer, one fault per test:
//! kill -9 of the leader, kill -9 of a follower, SIGSTOP of the leader, kill -9 of every node,
//! a follower whose disk is wiped, the lowest-id node wiped, SIGTERM of the leader.
//!
//! After each fault: every live node agrees on a leader (the time is printed), production goes
//! on, every acknowledged record is read back exactly once at its acknowledged offset and in
//! send order (duplicates are counted, not failed, while idempotence is off), and every replica
//! reports the same digest. Writes whose send failed are unknown outcomes, present or not.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use bytes::Bytes;
use harness::batch::{decode_batches, encode_batch, TestRecord};
use harness::cluster::ELECTION_TIMEOUT_MAX;
use harness::kafka::{create_topics, read_partitions, PartitionRecords};
use harness::load::{
    broker_supports_idempotence, check_acked_exactly_once, key_of, value_of, Acked, LoadOptions, ProduceLoad,
};
use harness::raw_ops::{
    fetch_request, fetch_results, produce, produce_request, produce_results, BatchFor, FETCH_VERSION_CAP,
    PRODUCE_VERSION_CAP,
};
use harness::{admin_api, Cluster, RawClient};
use kafka_compat::error_code::NOT_LEADER_OR_FOLLOWER;
use kafka_protocol::messages::{FetchRequest, ProduceRequest};

const TOPIC: &str = "failover";
const PARTITIONS: i32 = 3;
const SENDERS: usize = 6;
/// Acknowledged records before the fault, so there is history to lose.
const ACKS_BEFORE_FAULT: usize = 600;
/// Acknowledged records sent after the fault: production goes on.
const ACKS_AFTER_FAULT: usize = 300;
const ACK_TIMEOUT: Duration = Duration::from_secs(60);
/// A new leader must be agreed on within this; the measured time is printed.
const NEW_LEADER_TIMEOUT: Duration = Duration::from_secs(15);
const READ_TIMEOUT: Duration = Duration::from_secs(120);
/// Raw records written outside the load use these sender numbers (the load uses 0..SENDERS).
const RAW_SENDER_NEW_LEADER: usize = 90;
const RAW_SENDER_OLD_LEADER: usize = 91;

/// One cluster at a time: five three-node clusters at once on two cores would measure the
/// machine, not failover.
static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Creates the topic and starts the load; returns once `ACKS_BEFORE_FAULT` are acknowledged.
async fn start_load(cluster: &mut Cluster) -> Result<(ProduceLoad, bool)> {
    let leader = cluster.leader()?;
    let idempotence = broker_supports_idempotence(cluster.kafka_addr(leader))?;
    println!(
        "producer: acks=all, enable.idempotence={idempotence} (on when the broker advertises InitProducerId)"
    );
    create_topics(&cluster.bootstrap(), &[(TOPIC, PARTITIONS)]).await?;
    let options =
        LoadOptions { topic: TOPIC.to_owned(), partitions: PARTITIONS, senders: SENDERS, idempotence };
    let load = ProduceLoad::start(&cluster.bootstrap(), options)?;
    load.wait_for_acks(ACKS_BEFORE_FAULT, ACK_TIMEOUT).await?;
    Ok((load, idempotence))
}

/// After the fault at `at`: waits for an agreed leader and for production to go on, and
/// prints both times. Returns the leader.
async fn leader_and_production_after(
    cluster: &mut Cluster,
    load: &ProduceLoad,
    fault: &str,
    at: Instant,
) -> Result<u64> {
    let (leader, _) = cluster.wait_for_leader(NEW_LEADER_TIMEOUT)?;
    println!(
        "{fault}: leader {leader} agreed on by every live node {:.3} s after the fault",
        at.elapsed().as_secs_f64()
    );
    production_after(load, fault, at).await?;
    Ok(leader)
}

/// Waits until records sent after the fault at `at` are acknowledged; prints when the first was.
async fn production_after(load: &ProduceLoad, fault: &str, at: Instant) -> Result<()> {
    let first_ack = load.wait_for_acks_sent_after(at, ACKS_AFTER_FAULT, ACK_TIMEOUT).await?;
    println!(
        "{fault}: first acknowledgement of a record sent after the fault at +{:.3} s",
        first_ack.as_secs_f64()
    );
    Ok(())
}

/// Stops the load, reads every partition back through the cluster, checks it against the
/// acknowledgements (plus `extra_acked`), restarts `restart` if given, and compares digests.
/// Returns what was read back.
async fn verify(
    cluster: &mut Cluster,
    load: ProduceLoad,
    idempotence: bool,
    extra_acked: Vec<Acked>,
    restart: Option<u64>,
) -> Result<PartitionRecords> {
    let report = load.stop().await?;
    let mut acked = report.acked;
    acked.extend(extra_acked);
    let consumed = read_back(cluster).await?;
    let check = check_acked_exactly_once(&acked, &consumed, !idempotence)?;
    println!(
        "read back {} records: {} acknowledged, each present at its offset and in send order; \
         {} duplicates (idempotence {}); {} failed or timed-out sends, {} of them present (last error: {:?})",
        check.records,
        check.acked,
        check.duplicates,
        if idempotence { "on" } else { "off: at-least-once" },
        report.failures,
        check.unacked_present,
        report.last_failure
    );
    if let Some(id) = restart {
        cluster.start_node(id)?;
    }
    let started = Instant::now();
    let digests = cluster.assert_digests_match_read_back(TOPIC, &consumed)?;
    ensure!(digests.len() == cluster.ids().len(), "digests from nodes {:?} only", digests.keys());
    println!(
        "digests equal on nodes {:?} after {:.3} s",
        digests.keys().collect::<Vec<_>>(),
        started.elapsed().as_secs_f64()
    );
    Ok(consumed)
}

async fn read_back(cluster: &mut Cluster) -> Result<PartitionRecords> {
    let bootstrap = cluster.live_bootstrap();
    let partitions: Vec<(String, i32)> = (0..PARTITIONS).map(|p| (TOPIC.to_owned(), p)).collect();
    tokio::task::spawn_blocking(move || read_partitions(&bootstrap, &partitions, READ_TIMEOUT)).await?
}

// ---- (a) kill -9 of the leader ---------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_kill_9() {
    let _serial = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = Cluster::start(3).expect("starting 3 nodes");
    let result = leader_kill_9_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn leader_kill_9_scenario(cluster: &mut Cluster) -> Result<()> {
    let (load, idempotence) = start_load(cluster).await?;
    let old = cluster.leader()?;

    let fault = Instant::now();
    cluster.kill9(old)?;
    let new = leader_and_production_after(cluster, &load, "kill -9 of leader", fault).await?;
    ensure!(new != old, "killed leader {old} still named leader");

    // The old leader comes back as a follower and converges with the others.
    verify(cluster, load, idempotence, Vec::new(), Some(old)).await?;
    Ok(())
}

// ---- (b) kill -9 of a follower ---------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn follower_kill_9() {
    let _serial = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = Cluster::start(3).expect("starting 3 nodes");
    let result = follower_kill_9_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn follower_kill_9_scenario(cluster: &mut Cluster) -> Result<()> {
    let (load, idempotence) = start_load(cluster).await?;
    let leader = cluster.leader()?;
    let follower = cluster.followers()?[0];

    let fault = Instant::now();
    cluster.kill9(follower)?;
    let after = leader_and_production_after(cluster, &load, "kill -9 of follower", fault).await?;
    ensure!(after == leader, "losing follower {follower} moved leadership from {leader} to {after}");

    verify(cluster, load, idempotence, Vec::new(), Some(follower)).await?;
    Ok(())
}

// ---- (c) SIGSTOP of the leader ---------------------------------------------------------------

/// Leaders paused, one after another, in the SIGSTOP scenario.
const SIGSTOP_ROUNDS: u64 = 3;

/// How long the leader stays paused: twice the longest election timeout, at least 1.5 s.
fn pause() -> Duration {
    (2 * ELECTION_TIMEOUT_MAX).max(Duration::from_millis(1500))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_sigstop() {
    let _serial = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = Cluster::start(3).expect("starting 3 nodes");
    let result = leader_sigstop_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn leader_sigstop_scenario(cluster: &mut Cluster) -> Result<()> {
    let (load, idempotence) = start_load(cluster).await?;
    let mut served = Vec::new();
    let mut extra_acked = Vec::new();
    // Each round pauses whoever leads then: the stale-read window, if any, is narrow.
    for round in 0..SIGSTOP_ROUNDS {
        let (s, a) = pause_leader_round(cluster, &load, round).await?;
        served.extend(s);
        extra_acked.extend(a);
    }
    let consumed = verify(cluster, load, idempotence, extra_acked, None).await?;
    check_served(&served, &consumed)
}

/// One SIGSTOP of the current leader for [`pause`], with requests queued on it, then
/// SIGCONT; returns the records it served and the raw writes acknowledged meanwhile.
async fn pause_leader_round(
    cluster: &mut Cluster,
    load: &ProduceLoad,
    round: u64,
) -> Result<(Served, Vec<Acked>)> {
    let old = cluster.leader()?;
    // Connections to the old leader, opened while it serves: requests written to them while it
    // is paused wait in its socket buffer and are the first thing it reads on SIGCONT.
    let mut fetcher = RawClient::connect_negotiated(cluster.kafka_addr(old)).await?;
    let mut writer = RawClient::connect_negotiated(cluster.kafka_addr(old)).await?;

    let fault = Instant::now();
    cluster.sigstop(old)?;
    let (new, _) = cluster.wait_for_leader(NEW_LEADER_TIMEOUT)?;
    println!(
        "round {round}: SIGSTOP of leader {old}: leader {new} agreed on {:.3} s after the pause",
        fault.elapsed().as_secs_f64()
    );
    ensure!(new != old, "paused leader {old} still named leader");
    // Writes the paused node cannot have: one acknowledged by the new leader per partition.
    let mut extra_acked = produce_one_per_partition(cluster, new, RAW_SENDER_NEW_LEADER, round).await?;
    tokio::time::sleep(pause().saturating_sub(fault.elapsed())).await;

    let acked_before = max_offsets(load.max_acked_offsets(), &extra_acked);
    let fetch_id = send_fetch(&mut fetcher).await?;
    let produce_version = writer.version::<ProduceRequest>(PRODUCE_VERSION_CAP)?;
    let batch = raw_batch(RAW_SENDER_OLD_LEADER, round, 0)?;
    let produce_id = writer.send_request(produce_version, &produce_request(-1, &[batch])).await?;
    cluster.sigcont(old)?;
    let resumed = Instant::now();
    println!("round {round}: leader {old} paused for {:.3} s", fault.elapsed().as_secs_f64());

    // A paused and resumed leader must not serve what it has as if it were current.
    let fetch_version = fetcher.version::<FetchRequest>(FETCH_VERSION_CAP)?;
    let first = fetcher.receive_response::<FetchRequest>(fetch_id, fetch_version).await?;
    let answers: Vec<(i32, i16, i64)> =
        fetch_results(&first).iter().map(|r| (r.partition, r.error_code, r.high_watermark)).collect();
    println!(
        "round {round}: fetch queued on the paused leader: acknowledged before {acked_before:?}, \
         answered (partition, error, hw) {answers:?}"
    );
    let mut served = check_fetch_not_stale(&first, &acked_before, "queued before SIGCONT")?;
    let (more, stepped_down) =
        fetch_repeatedly(cluster, &mut fetcher, (old, new, resumed), load, &extra_acked).await?;
    served.extend(more);
    let produced = writer.receive_response::<ProduceRequest>(produce_id, produce_version).await?;
    let results = produce_results(&produced);
    println!("round {round}: produce queued on the paused leader answered {results:?}");
    if let [(_, partition, 0, offset)] = results.as_slice() {
        // Acknowledged: then it must be readable like any acknowledged write.
        extra_acked.push(acked_now(RAW_SENDER_OLD_LEADER, round, *partition, *offset));
    }

    let stepped_down = match stepped_down {
        Some(after) => after,
        None => wait_stepped_down(cluster, old, new, resumed).await?,
    };
    println!(
        "round {round}: old leader {old} follows {new} {:.3} s after SIGCONT",
        stepped_down.as_secs_f64()
    );
    production_after(load, &format!("round {round}: SIGSTOP of leader {old}"), fault).await?;
    Ok((served, extra_acked))
}

/// The largest acknowledged offset per partition from the load and the raw writes.
fn max_offsets(mut from_load: BTreeMap<i32, i64>, raw: &[Acked]) -> BTreeMap<i32, i64> {
    for a in raw {
        let max = from_load.entry(a.partition).or_insert(a.offset);
        *max = (*max).max(a.offset);
    }
    from_load
}

fn acked_now(sender: usize, seq: u64, partition: i32, offset: i64) -> Acked {
    let now = Instant::now();
    Acked { sender, seq, partition, offset, sent: now, acked: now }
}

fn raw_batch(sender: usize, seq: u64, partition: i32) -> Result<BatchFor> {
    let key = key_of(sender, seq);
    let record = TestRecord::new(key.clone(), value_of(&key), harness::atomic::now_ms());
    Ok(BatchFor { topic: TOPIC.to_owned(), partition, records: encode_batch(&[record])? })
}

/// One raw acks=all write per partition to `leader`, retried while it is not yet serving as
/// leader (bounded); returns the acknowledgements.
async fn produce_one_per_partition(
    cluster: &Cluster,
    leader: u64,
    sender: usize,
    round: u64,
) -> Result<Vec<Acked>> {
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    let mut acked = Vec::new();
    for partition in 0..PARTITIONS {
        let seq = round * PARTITIONS as u64 + partition as u64;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let response = produce(&mut client, -1, &[raw_batch(sender, seq, partition)?]).await?;
            match produce_results(&response).as_slice() {
                [(_, p, 0, offset)] => {
                    acked.push(acked_now(sender, seq, *p, *offset));
                    break;
                }
                [(_, _, NOT_LEADER_OR_FOLLOWER, _)] if attempts < 100 => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                other => bail!("raw produce to new leader {leader}: {other:?} after {attempts} attempts"),
            }
        }
    }
    Ok(acked)
}

async fn send_fetch(client: &mut RawClient) -> Result<i32> {
    let version = client.version::<FetchRequest>(FETCH_VERSION_CAP)?;
    let partitions: Vec<(&str, i32, i64)> = (0..PARTITIONS).map(|p| (TOPIC, p, 0)).collect();
    client.send_request(version, &fetch_request(&partitions, 64 * 1024)).await
}

/// Records a Fetch answer served, as (partition, offset, key).
type Served = Vec<(i32, i64, Bytes)>;

/// Each partition is NOT_LEADER_OR_FOLLOWER, or served with a high watermark above every
/// offset acknowledged before the request was sent.
fn check_fetch_not_stale(
    response: &kafka_protocol::messages::FetchResponse,
    acked_before: &BTreeMap<i32, i64>,
    when: &str,
) -> Result<Served> {
    ensure!(response.error_code == 0, "Fetch {when}: top-level error {}", response.error_code);
    let mut served = Vec::new();
    for r in fetch_results(response) {
        let acked = acked_before.get(&r.partition).copied().unwrap_or(-1);
        match r.error_code {
            NOT_LEADER_OR_FOLLOWER => {}
            0 => {
                ensure!(
                    r.high_watermark > acked,
                    "stale read {when}: {}/{} answered with high watermark {} although offset {acked} \
                     was already acknowledged",
                    r.topic,
                    r.partition,
                    r.high_watermark
                );
                for stored in decode_batches(r.records)? {
                    served.push((r.partition, stored.offset, stored.record.key.unwrap_or_default()));
                }
            }
            code => bail!("Fetch {when}: {}/{} error {code}", r.topic, r.partition),
        }
    }
    Ok(served)
}

/// Fetches from the resumed node for a second, each time against the acknowledgements made
/// before the request was sent; meanwhile notes when, after `resumed`, it first names `new`
/// as leader (and, with the admin API, no longer says it leads). Returns what it served and
/// that time.
async fn fetch_repeatedly(
    cluster: &mut Cluster,
    client: &mut RawClient,
    (old, new, resumed): (u64, u64, Instant),
    load: &ProduceLoad,
    raw: &[Acked],
) -> Result<(Served, Option<Duration>)> {
    let version = client.version::<FetchRequest>(FETCH_VERSION_CAP)?;
    let started = Instant::now();
    let mut served = Vec::new();
    let mut stepped_down = None;
    let mut rounds = 0;
    while started.elapsed() < Duration::from_secs(1) && rounds < 200 {
        rounds += 1;
        let acked_before = max_offsets(load.max_acked_offsets(), raw);
        let id = send_fetch(client).await?;
        let response = client.receive_response::<FetchRequest>(id, version).await?;
        let when = format!("after SIGCONT, round {rounds}");
        served.extend(check_fetch_not_stale(&response, &acked_before, &when)?);
        if stepped_down.is_none() && follows(cluster, old, new) {
            stepped_down = Some(resumed.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok((served, stepped_down))
}

/// Whether `old` names `new` as leader and (with the admin API) does not say it leads.
fn follows(cluster: &Cluster, old: u64, new: u64) -> bool {
    let leads = cluster.has_admin_api() && cluster.status(old).is_ok_and(|s| s.is_leader());
    matches!(cluster.leader_seen_by(old), Ok(Some(l)) if l == new) && !leads
}

/// The resumed node follows the new leader within a few election timeouts of `resumed`.
async fn wait_stepped_down(cluster: &mut Cluster, old: u64, new: u64, resumed: Instant) -> Result<Duration> {
    loop {
        if follows(cluster, old, new) {
            return Ok(resumed.elapsed());
        }
        if resumed.elapsed() > 10 * ELECTION_TIMEOUT_MAX {
            let seen = cluster.leader_seen_by(old);
            bail!(
                "old leader {old} has not stepped down {:?} after SIGCONT: it sees leader {seen:?}",
                resumed.elapsed()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every record the resumed node served is the record the cluster holds at that offset.
fn check_served(served: &Served, consumed: &PartitionRecords) -> Result<()> {
    for (partition, offset, key) in served {
        let held = consumed
            .get(&(TOPIC.to_owned(), *partition))
            .and_then(|records| records.get(*offset as usize))
            .and_then(|r| r.key.clone());
        ensure!(
            held.as_deref() == Some(key.as_ref()),
            "the resumed node served {:?} at {TOPIC}/{partition}@{offset}, the cluster holds {:?}",
            String::from_utf8_lossy(key),
            held.map(|k| String::from_utf8_lossy(&k).into_owned())
        );
    }
    println!("the resumed node served {} records, all as the cluster holds them", served.len());
    Ok(())
}

// ---- (d) kill -9 of every node ---------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn all_nodes_kill_9() {
    let _serial = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = Cluster::start(3).expect("starting 3 nodes");
    let result = all_nodes_kill_9_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn all_nodes_kill_9_scenario(cluster: &mut Cluster) -> Result<()> {
    let (load, idempotence) = start_load(cluster).await?;

    let fault = Instant::now();
    for id in cluster.ids() {
        cluster.kill9(id)?;
    }
    let restart = Instant::now();
    cluster.start_all()?;
    println!("all 3 nodes killed, restarted and serving after {:.3} s", restart.elapsed().as_secs_f64());
    leader_and_production_after(cluster, &load, "kill -9 of all nodes", fault).await?;

    verify(cluster, load, idempotence, Vec::new(), None).await?;
    Ok(())
}

// ---- (e) a follower's data directory wiped ---------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wiped_follower_catches_up() {
    let _serial = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = Cluster::start(3).expect("starting 3 nodes");
    let result = wiped_follower_catches_up_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn wiped_follower_catches_up_scenario(cluster: &mut Cluster) -> Result<()> {
    let (load, idempotence) = start_load(cluster).await?;
    let leader = cluster.leader()?;
    let follower = cluster.followers()?[0];

    let fault = Instant::now();
    cluster.kill9(follower)?;
    cluster.wipe(follower)?;
    cluster.start_node(follower)?;
    println!("node {follower} wiped and serving again after {:.3} s", fault.elapsed().as_secs_f64());
    let after = leader_and_production_after(cluster, &load, "wiped follower", fault).await?;
    println!("leader before {leader}, after {after}");

    // Catching up is checked by the digests: the wiped node must hold everything again.
    verify(cluster, load, idempotence, Vec::new(), None).await?;
    Ok(())
}

// ---- (f) the lowest-id node's data directory wiped -------------------------------------------

/// Regression guard: a node that starts with an empty log and the lowest id initializes a
/// fresh cluster (node.rs). Wiped, it must rejoin the existing one instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wiped_lowest_id_node_rejoins() {
    let _serial = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = Cluster::start(3).expect("starting 3 nodes");
    let result = wiped_lowest_id_node_rejoins_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn wiped_lowest_id_node_rejoins_scenario(cluster: &mut Cluster) -> Result<()> {
    let (load, idempotence) = start_load(cluster).await?;
    let lowest = cluster.ids()[0];
    let leader = cluster.leader()?;
    println!("wiping node {lowest} (leader before: {leader})");

    let fault = Instant::now();
    cluster.kill9(lowest)?;
    cluster.wipe(lowest)?;
    cluster.start_node(lowest)?;
    println!("node {lowest} wiped and serving again after {:.3} s", fault.elapsed().as_secs_f64());
    leader_and_production_after(cluster, &load, "wiped lowest-id node", fault).await?;

    verify(cluster, load, idempotence, Vec::new(), None).await?;
    Ok(())
}

// ---- (g) SIGTERM of the leader ---------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_sigterm() {
    let _serial = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = Cluster::start(3).expect("starting 3 nodes");
    let result = leader_sigterm_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn leader_sigterm_scenario(cluster: &mut Cluster) -> Result<()> {
    let (load, idempotence) = start_load(cluster).await?;
    let old = cluster.leader()?;

    let fault = Instant::now();
    let status = cluster.terminate(old)?;
    println!("SIGTERM of leader {old}: exited with {status} after {:.3} s", fault.elapsed().as_secs_f64());
    ensure!(status.success(), "leader {old} exited with {status} on SIGTERM");
    let new = leader_and_production_after(cluster, &load, "SIGTERM of leader", fault).await?;
    ensure!(new != old, "terminated leader {old} still named leader");

    verify(cluster, load, idempotence, Vec::new(), Some(old)).await?;
    Ok(())
}

// ---- (h) leadership transferred on request -----------------------------------------------------

/// `POST /leader/transfer?to=N` (`onelog admin transfer-leader`): the leader stays up, a
/// follower takes over under load, nothing acknowledged is lost; refusals for a follower, a
/// non-voter and the leader itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_transfer_on_request() {
    let _serial = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = Cluster::start(3).expect("starting 3 nodes");
    let result = leader_transfer_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn leader_transfer_scenario(cluster: &mut Cluster) -> Result<()> {
    let (load, idempotence) = start_load(cluster).await?;
    let old = cluster.leader()?;
    let target = cluster.followers()?[0];
    let transfer =
        |at: u64, to: u64| admin_api::post(cluster.admin_addr(at), &format!("/leader/transfer?to={to}"));

    let refused = transfer(target, old)?;
    ensure!(
        refused.status == 421,
        "a follower answered a transfer with {}: {}",
        refused.status,
        refused.text()
    );
    for (to, why) in [(old, "the leader itself"), (42, "a non-member")] {
        let refused = transfer(old, to)?;
        ensure!(refused.status == 409, "a transfer to {why}: {} {}", refused.status, refused.text());
    }

    let fault = Instant::now();
    let moved = transfer(old, target)?;
    println!(
        "transfer {old} → {target}: HTTP {} after {:.3} s: {}",
        moved.status,
        fault.elapsed().as_secs_f64(),
        moved.text()
    );
    ensure!(moved.status == 200, "transfer to {target}: {} {}", moved.status, moved.text());
    let new = leader_and_production_after(cluster, &load, "leadership transfer", fault).await?;
    ensure!(new != old, "leader {old} still leads after the transfer");
    ensure!(cluster.is_running(old), "the old leader {old} stopped");
    let named: serde_json::Value = serde_json::from_slice(&moved.body)?;
    ensure!(named["leader"] == new, "the answer named {} but {new} leads", named["leader"]);

    verify(cluster, load, idempotence, Vec::new(), None).await?;
    Ok(())
}

//! Availability under network partitions, through the harness's link proxies
//! (`ClusterOptions::link_proxies`): every Raft link and every Kafka listener of a three-node
//! cluster goes through a fault-injecting proxy, and the scenario cuts links at run time.
//!
//! `isolated_leader_steps_down` (issue 14, check-quorum): the leader is cut from both peers
//! while its clients still reach it. Within the election timeout (plus slack; the time is
//! printed, the bound is generous) its own Metadata, DescribeCluster and FindCoordinator stop
//! naming it; the majority elects a new leader; an acks=all librdkafka producer bootstrapped
//! with every node goes on being acknowledged during the partition (the time from isolation
//! to its first acknowledgement is printed). After the heal the old leader follows the new
//! one, every acknowledged record is read back once at its offset, and the digests are equal.
//! Before the fix the isolated leader named itself for the whole partition.
//!
//! `isolated_leader_transactions_go_on`: the same isolation under a librdkafka transactional
//! producer (one record per transaction, committed one after another; an abortable failure
//! is aborted, a fatal one starts a new producer). Transactions commit again while the old
//! leader is still cut off (the first commit after the isolation and the longest commit gap
//! are printed; the first must come well before the client's own 30 s call timeout, which
//! is what released it before the proposer stopped waiting on a cut-off leader), and every
//! committed record is read back once under read_committed.
//!
//! `link_faults_cut_what_they_name`: the harness API itself, end to end. A partition
//! {leader, follower} | {other} moves no Raft byte across it (the proxies' counters stay put)
//! while the majority keeps its leader and the cut-off node loses it; after `heal` the node
//! follows again. `client_link(id)` set to Refuse cuts that node's clients off (its advertised
//! address resets connections) while its own listener still answers.
//!
//! `removed_nodes_exit` (issue 14: "after POST /members/remove the removed nodes stayed up as
//! permanent candidates"): a follower is cut off, removed through the leader's admin API
//! while cut off (so it cannot see the membership that drops it: the leader no longer
//! replicates to it once that membership commits), and the network heals: it exits with
//! status 0 by itself (the leader tells it over the Raft transport), the other two keep
//! serving and list two voters. Then the leader removes itself: it exits with status 0 and
//! the last node leads alone. Exit times are printed; the bounds are generous.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use harness::admin_api;
use harness::kafka::{create_topics, read_partitions, PartitionRecords};
use harness::load::{check_acked_exactly_once, LoadOptions, ProduceLoad};
use harness::probe::{blocking_request, probe_api_versions};
use harness::txn::{read_values, send_sync, transactional_producer, READ_COMMITTED, TXN_CALL_TIMEOUT};
use harness::{Cluster, ClusterOptions, ProxyMode};
use kafka_compat::error_code::COORDINATOR_NOT_AVAILABLE;
use kafka_protocol::messages::{DescribeClusterRequest, FindCoordinatorRequest, MetadataRequest};
use kafka_protocol::protocol::StrBytes;
use rdkafka::producer::{FutureProducer, Producer};

const TOPIC: &str = "partitions";
const TXN_TOPIC: &str = "partitioned-txns";
const TXNS_BEFORE: usize = 30;
const TXNS_DURING: usize = 20;
const PARTITIONS: i32 = 3;
const SENDERS: usize = 4;
const SEGMENT_BYTES: u32 = 1024 * 1024;
const ACKS_BEFORE: usize = 300;
const ACKS_DURING: usize = 200;
const ACK_TIMEOUT: Duration = Duration::from_secs(60);
/// Generous bound on the isolated leader's step-down; the measured time is printed. Raft
/// needs the election timeout (600 ms at most) to decide it is cut off.
const STEP_DOWN_TIMEOUT: Duration = Duration::from_secs(15);
const NEW_LEADER_TIMEOUT: Duration = Duration::from_secs(15);
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
const READ_TIMEOUT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(20);
/// A removed node must exit within this after the removal (or the heal); measured and printed.
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);

/// One cluster at a time: two three-node clusters at once on two cores would measure the
/// machine.
static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Three nodes behind link proxies, a topic, and an idempotent acks=all producer
/// bootstrapped through the client proxies (what the nodes advertise), past `ACKS_BEFORE`.
async fn start(cluster: &mut Cluster) -> Result<ProduceLoad> {
    create_topics(&cluster.bootstrap(), &[(TOPIC, PARTITIONS)]).await?;
    let options =
        LoadOptions { topic: TOPIC.to_owned(), partitions: PARTITIONS, senders: SENDERS, idempotence: true };
    let load = ProduceLoad::start(&cluster.bootstrap(), options)?;
    load.wait_for_acks(ACKS_BEFORE, ACK_TIMEOUT).await?;
    Ok(load)
}

fn cluster() -> Cluster {
    let options = ClusterOptions::new(3).config("log.segment.bytes", SEGMENT_BYTES).link_proxies();
    Cluster::start_with(options).expect("cluster")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn isolated_leader_steps_down() {
    let _serial = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = cluster();
    let result = isolated_leader_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn isolated_leader_transactions_go_on() {
    let _serial = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = cluster();
    let result = isolated_transactions_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

/// Keys of committed transactions and when each commit returned.
type Commits = Arc<Mutex<Vec<(String, Instant)>>>;

async fn isolated_transactions_scenario(cluster: &mut Cluster) -> Result<()> {
    let old = cluster.leader()?;
    create_topics(&cluster.bootstrap(), &[(TXN_TOPIC, 1)]).await?;
    let commits: Commits = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let task = tokio::spawn(transactions(cluster.bootstrap(), commits.clone(), stop.clone()));
    let committed_since =
        |since: Instant| commits.lock().expect("commits").iter().filter(|c| c.1 >= since).count();
    wait_until(|| committed_since(Instant::now() - ACK_TIMEOUT) >= TXNS_BEFORE, "transactions before")
        .await?;

    let isolated = Instant::now();
    cluster.isolate(old)?;
    wait_until(|| committed_since(isolated) >= TXNS_DURING, "transactions during the partition").await?;
    let first = commits.lock().expect("commits").iter().find(|c| c.1 >= isolated).map(|c| c.1 - isolated);
    let first = first.expect("TXNS_DURING > 0");
    // Generous: the client's own call timeout would release a commit stuck on the old
    // leader at TXN_CALL_TIMEOUT (30 s, what happened before the fix).
    ensure!(first < TXN_CALL_TIMEOUT / 2, "first commit {first:?} after the isolation");
    cluster.heal()?;
    let healed = Instant::now();
    wait_until(|| committed_since(healed) >= TXNS_DURING, "transactions after the heal").await?;
    stop.store(true, Ordering::SeqCst);
    let failures = task.await??;

    let commits = commits.lock().expect("commits").clone();
    let gap = commits.windows(2).map(|w| w[1].1 - w[0].1).max().unwrap_or_default();
    println!(
        "transactions: {} committed, {failures} failed and retried; first commit after isolating leader {old} at +{:.3} s (still cut off); longest commit gap {:.3} s",
        commits.len(),
        first.as_secs_f64(),
        gap.as_secs_f64()
    );
    let bootstrap = cluster.bootstrap();
    let values =
        tokio::task::spawn_blocking(move || read_values(&bootstrap, TXN_TOPIC, 1, READ_COMMITTED)).await??;
    for (key, _) in &commits {
        let found = values.iter().filter(|v| *v == key).count();
        ensure!(found == 1, "committed {key} read back {found} times under read_committed");
    }
    cluster.assert_digests_equal()?;
    Ok(())
}

/// Commits one-record transactions until `stop`; returns how many attempts failed.
async fn transactions(bootstrap: String, commits: Commits, stop: Arc<AtomicBool>) -> Result<usize> {
    let mut producer: Option<FutureProducer> = None;
    let (mut seq, mut failures) = (0u64, 0usize);
    while !stop.load(Ordering::SeqCst) {
        let p = match producer.take() {
            Some(p) => p,
            None => {
                let b = bootstrap.clone();
                match tokio::task::spawn_blocking(move || transactional_producer(&b, "partitioned")).await? {
                    Ok(p) => p,
                    Err(_) => {
                        failures += 1;
                        continue;
                    }
                }
            }
        };
        let key = format!("txn-{seq}");
        seq += 1;
        let attempt = async {
            p.begin_transaction()?;
            send_sync(&p, TXN_TOPIC, Some(0), &key, &key).await?;
            tokio::task::block_in_place(|| p.commit_transaction(TXN_CALL_TIMEOUT))?;
            anyhow::Ok(())
        };
        match attempt.await {
            Ok(()) => commits.lock().expect("commits").push((key, Instant::now())),
            Err(_) => {
                failures += 1;
                // Abortable: abort and go on; fatal (abort fails too): a new producer.
                if tokio::task::block_in_place(|| p.abort_transaction(TXN_CALL_TIMEOUT)).is_err() {
                    continue;
                }
            }
        }
        producer = Some(p);
    }
    Ok(failures)
}

async fn wait_until(done: impl Fn() -> bool, what: &str) -> Result<()> {
    let started = Instant::now();
    while !done() {
        ensure!(started.elapsed() < ACK_TIMEOUT, "no {what} within {ACK_TIMEOUT:?}");
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn link_faults_cut_what_they_name() {
    let _serial = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = cluster();
    let result = link_faults_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn link_faults_scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let followers = cluster.followers()?;
    let (kept, cut) = (followers[0], followers[1]);
    cluster.partition(&[&[leader, kept], &[cut]])?;
    let across = [(leader, cut), (cut, leader), (kept, cut), (cut, kept)];
    let bytes = |c: &Cluster| -> Result<Vec<(u64, u64)>> {
        across
            .iter()
            .map(|(from, to)| {
                Ok((c.raft_link(*from, *to)?.to_target_bytes(), c.raft_link(*from, *to)?.to_client_bytes()))
            })
            .collect()
    };
    let started = Instant::now();
    // The cut-off node loses its leader after an election timeout; the majority keeps its own.
    loop {
        let status = cluster.status(cut)?;
        if status.leader.is_none() {
            break;
        }
        ensure!(
            started.elapsed() < NEW_LEADER_TIMEOUT,
            "node {cut} still follows across the partition: {status:?}"
        );
        tokio::time::sleep(POLL).await;
    }
    println!(
        "partition {{{leader}, {kept}}} | {{{cut}}}: {cut} lost its leader after {:.3} s",
        started.elapsed().as_secs_f64()
    );
    // Meanwhile the leader sends heartbeats and the cut-off node campaigns: none may cross.
    let before = bytes(cluster)?;
    tokio::time::sleep(2 * harness::cluster::ELECTION_TIMEOUT_MAX).await;
    for id in [leader, kept] {
        ensure!(cluster.status(id)?.leader == Some(leader), "node {id} lost leader {leader}");
    }
    ensure!(bytes(cluster)? == before, "bytes crossed the partition: {before:?} -> {:?}", bytes(cluster)?);
    ensure!(cluster.raft_link(leader, kept)?.to_target_bytes() > 0, "inside the group links pass");

    cluster.heal()?;
    let healed = Instant::now();
    let (now, _) = cluster.wait_for_leader(NEW_LEADER_TIMEOUT)?;
    println!("healed: every node follows {now} after {:.3} s", healed.elapsed().as_secs_f64());
    ensure!(bytes(cluster)? != before, "no byte crossed after the heal");

    cluster.client_link(cut)?.set(ProxyMode::Refuse);
    ensure!(
        probe_api_versions(cluster.kafka_addr(cut), PROBE_TIMEOUT).is_err(),
        "node {cut}'s advertised address must refuse its clients"
    );
    probe_api_versions(cluster.kafka_listen_addr(cut), PROBE_TIMEOUT)?;
    cluster.client_link(cut)?.set(ProxyMode::Pass);
    probe_api_versions(cluster.kafka_addr(cut), PROBE_TIMEOUT)?;
    println!("client link of {cut}: refused, its own listener answered, then passed again");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn removed_nodes_exit() {
    let _serial = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = cluster();
    let result = removal_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn isolated_leader_scenario(cluster: &mut Cluster) -> Result<()> {
    let old = cluster.leader()?;
    let load = start(cluster).await?;
    let view = kafka_view(cluster.kafka_listen_addr(old))?;
    ensure!(view.names(old), "before the partition leader {old} must name itself: {view:?}");

    let isolated = Instant::now();
    cluster.isolate(old)?;
    println!("isolated leader {old} from its peers (its clients still reach it)");

    let stepped_down = loop {
        let view = kafka_view(cluster.kafka_listen_addr(old))?;
        if !view.names_anyone_as(old) {
            break (isolated.elapsed(), view);
        }
        if isolated.elapsed() > STEP_DOWN_TIMEOUT {
            bail!("isolated leader {old} still names itself {STEP_DOWN_TIMEOUT:?} after isolation: {view:?}");
        }
        tokio::time::sleep(POLL).await;
    };
    println!(
        "isolated leader {old} stopped naming itself after {:.3} s (election timeout max {:?}): {:?}",
        stepped_down.0.as_secs_f64(),
        harness::cluster::ELECTION_TIMEOUT_MAX,
        stepped_down.1
    );

    let majority: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != old).collect();
    let new = loop {
        let views: Vec<Option<u64>> =
            majority.iter().map(|id| cluster.leader_seen_by(*id).ok().flatten()).collect();
        match views.as_slice() {
            [Some(a), Some(b)] if a == b && *a != old => break *a,
            _ if isolated.elapsed() > NEW_LEADER_TIMEOUT => bail!("majority {majority:?} views {views:?}"),
            _ => tokio::time::sleep(POLL).await,
        }
    };
    println!(
        "majority {majority:?} elected leader {new} {:.3} s after isolation",
        isolated.elapsed().as_secs_f64()
    );

    let first_ack = load.wait_for_acks_sent_after(isolated, ACKS_DURING, ACK_TIMEOUT).await?;
    println!(
        "producer (bootstrap: every node): first acknowledgement of a record sent after the isolation at +{:.3} s",
        first_ack.as_secs_f64()
    );
    let view = kafka_view(cluster.kafka_listen_addr(old))?;
    ensure!(!view.names_anyone_as(old), "still partitioned, {old} names itself again: {view:?}");

    cluster.heal()?;
    let healed = Instant::now();
    let (leader, _) = cluster.wait_for_leader(NEW_LEADER_TIMEOUT)?;
    println!("healed: every node names leader {leader} after {:.3} s", healed.elapsed().as_secs_f64());
    ensure!(!cluster.status(old)?.is_leader() || leader == old, "old leader {old} is not a follower");
    load.wait_for_acks_sent_after(healed, ACKS_DURING, ACK_TIMEOUT).await?;
    verify(cluster, load, 3).await
}

/// Every acknowledged record is read back once at its offset, and the live nodes' digests
/// (`nodes` of them) are equal and match what was read.
async fn verify(cluster: &mut Cluster, load: ProduceLoad, nodes: usize) -> Result<()> {
    let report = load.stop().await?;
    let consumed = read_back(cluster).await?;
    let check = check_acked_exactly_once(&report.acked, &consumed, false)?;
    println!(
        "read back {} records: {} acknowledged, each once at its offset; {} failed or timed-out sends",
        check.records, check.acked, report.failures
    );
    let digests = cluster.assert_digests_match_read_back(TOPIC, &consumed)?;
    ensure!(digests.len() == nodes, "digests from nodes {:?} only", digests.keys());
    println!("digests equal on nodes {:?}", digests.keys().collect::<Vec<_>>());
    Ok(())
}

/// Who one node names, asked on its own listener: Metadata's controller and partition
/// leaders, DescribeCluster's controller, FindCoordinator's coordinator (or error code).
#[derive(Debug)]
struct KafkaView {
    metadata_controller: i32,
    partition_leaders: Vec<i32>,
    describe_cluster_controller: i32,
    coordinator: Result<i32, i16>,
}

impl KafkaView {
    /// Names `id` as controller, leader of every partition and coordinator.
    fn names(&self, id: u64) -> bool {
        let id = id as i32;
        self.metadata_controller == id
            && !self.partition_leaders.is_empty()
            && self.partition_leaders.iter().all(|l| *l == id)
            && self.describe_cluster_controller == id
            && self.coordinator == Ok(id)
    }

    /// Names `id` anywhere.
    fn names_anyone_as(&self, id: u64) -> bool {
        let id = id as i32;
        self.metadata_controller == id
            || self.partition_leaders.contains(&id)
            || self.describe_cluster_controller == id
            || self.coordinator == Ok(id)
    }
}

fn kafka_view(addr: SocketAddr) -> Result<KafkaView> {
    let metadata = blocking_request(addr, 1, &MetadataRequest::default().with_topics(None), PROBE_TIMEOUT)?;
    let partition_leaders = metadata
        .topics
        .iter()
        .filter(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == TOPIC))
        .flat_map(|t| t.partitions.iter().map(|p| p.leader_id.0))
        .collect();
    let cluster = blocking_request(addr, 0, &DescribeClusterRequest::default(), PROBE_TIMEOUT)?;
    let find = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_static_str("partitions-group"))
        .with_key_type(0);
    let found = blocking_request(addr, 1, &find, PROBE_TIMEOUT)?;
    let coordinator = match found.error_code {
        0 => Ok(found.node_id.0),
        code => {
            ensure!(code == COORDINATOR_NOT_AVAILABLE, "FindCoordinator error {code}");
            Err(code)
        }
    };
    Ok(KafkaView {
        metadata_controller: metadata.controller_id.0,
        partition_leaders,
        describe_cluster_controller: cluster.controller_id.0,
        coordinator,
    })
}

async fn removal_scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let load = start(cluster).await?;

    // 1. a follower removed while cut off.
    let removed = cluster.followers()?[0];
    let other = cluster.ids().into_iter().find(|id| *id != leader && *id != removed).expect("3 nodes");
    cluster.isolate(removed)?;
    let started = Instant::now();
    let answer = admin_api::post(cluster.admin_addr(leader), &format!("/members/remove?id={removed}"))?;
    ensure!(answer.status == 200, "remove {removed}: HTTP {} {}", answer.status, answer.text());
    println!(
        "removed follower {removed} (cut off) on leader {leader} in {:.3} s",
        started.elapsed().as_secs_f64()
    );
    let status = cluster.status(removed)?;
    ensure!(status.voters.contains(&removed), "cut off, {removed} cannot have seen its removal: {status:?}");
    cluster.heal()?;
    let healed = Instant::now();
    let Some(exit) = cluster.wait_exit(removed, EXIT_TIMEOUT)? else {
        bail!(
            "removed node {removed} still running {EXIT_TIMEOUT:?} after the heal: {:?}",
            cluster.status(removed)
        );
    };
    ensure!(exit.success(), "removed node {removed} exited with {exit}");
    println!("removed node {removed} exited ({exit}) {:.3} s after the heal", healed.elapsed().as_secs_f64());
    for id in [leader, other] {
        let status = cluster.status(id)?;
        ensure!(status.voters == vec![leader.min(other), leader.max(other)], "node {id}: {status:?}");
    }
    let (now, _) = cluster.wait_for_leader(NEW_LEADER_TIMEOUT)?;
    ensure!(now == leader, "leadership moved from {leader} to {now}");
    load.wait_for_acks_sent_after(healed, ACKS_DURING, ACK_TIMEOUT).await?;

    // 2. the leader removes itself.
    let started = Instant::now();
    let answer = admin_api::post(cluster.admin_addr(leader), &format!("/members/remove?id={leader}"))?;
    ensure!(answer.status == 200, "remove {leader}: HTTP {} {}", answer.status, answer.text());
    let Some(exit) = cluster.wait_exit(leader, EXIT_TIMEOUT)? else {
        bail!("leader {leader} removed itself but is still running after {EXIT_TIMEOUT:?}");
    };
    ensure!(exit.success(), "removed leader {leader} exited with {exit}");
    println!(
        "leader {leader} removed itself and exited ({exit}) after {:.3} s",
        started.elapsed().as_secs_f64()
    );
    let (last, _) = cluster.wait_for_leader(NEW_LEADER_TIMEOUT)?;
    ensure!(last == other, "node {other} must lead alone, {last} does");
    load.wait_for_acks_sent_after(started, ACKS_DURING, ACK_TIMEOUT).await?;

    verify(cluster, load, 1).await
}

async fn read_back(cluster: &mut Cluster) -> Result<PartitionRecords> {
    let bootstrap = cluster.live_bootstrap();
    let partitions: Vec<(String, i32)> = (0..PARTITIONS).map(|p| (TOPIC.to_owned(), p)).collect();
    tokio::task::spawn_blocking(move || read_partitions(&bootstrap, &partitions, READ_TIMEOUT)).await?
}

//! Membership changes of a running three-node cluster under a steady idempotent acks=all
//! producer, through the admin API, as one linear scenario:
//!
//! 1. a follower answers a membership change with 421 and names the leader;
//! 2. node 4 starts with `--peers` listing the voters, is added as a learner by the leader
//!    and catches up (it serves Kafka only then);
//! 3. node 4 is promoted: every node's `/status` lists voters [1,2,3,4] and every node's
//!    Metadata lists the four brokers;
//! 4. a follower is removed: the others list it neither as a voter nor as a broker; it stops
//!    by itself if it learned of its removal, else it is stopped; production goes on;
//! 5. the leader removes itself: the remaining voters elect a new leader among themselves,
//!    the removed node shuts itself down (exit status 0: it would otherwise keep telling
//!    clients an outdated view), and production goes on;
//! 6. every acknowledged record is read back exactly once, at its offset and in send order,
//!    and the remaining voters report identical digests.
//!
//! Each step prints what it measured. Nothing is skipped: a broker without the admin API or
//! without idempotent producers fails the test.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use harness::admin_api::{self, Status, STATUS_MISDIRECTED};
use harness::kafka::{create_topics, read_partitions, PartitionRecords};
use harness::load::{broker_supports_idempotence, check_acked_exactly_once, LoadOptions, ProduceLoad};
use harness::probe::blocking_request;
use harness::Cluster;
use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
use serde_json::Value;

const TOPIC: &str = "membership";
const PARTITIONS: i32 = 3;
/// Closed-loop senders: few, the machine has two cores for four brokers and the test.
const SENDERS: usize = 4;
/// Acknowledged records before the first membership change, so the learner has a history
/// to catch up on.
const ACKS_BEFORE: usize = 600;
/// Acknowledged records sent after each change: production goes on.
const ACKS_AFTER_CHANGE: usize = 200;
const ACK_TIMEOUT: Duration = Duration::from_secs(60);
/// The node that joins.
const NEW_NODE: u64 = 4;
/// Longest one membership request may take: adding a learner waits for it to catch up.
const MEMBERSHIP_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest every node may take to apply a committed membership (status and Metadata).
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(20);
/// A new leader must be agreed on within this; the measured time is printed.
const NEW_LEADER_TIMEOUT: Duration = Duration::from_secs(15);
/// A node that removed itself must stop leading within this after the new leader is agreed on.
const STEP_DOWN_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest the joining node's admin API may take to answer after its spawn.
const ADMIN_UP_TIMEOUT: Duration = Duration::from_secs(30);
const METADATA_TIMEOUT: Duration = Duration::from_secs(2);
const READ_TIMEOUT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(50);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn learner_joins_then_follower_and_leader_leave() {
    let mut cluster = Cluster::start(3).expect("starting 3 nodes");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    ensure!(cluster.has_admin_api(), "the broker has no --admin-listen: membership cannot be changed");
    let load = start_load(cluster).await?;
    let leader = cluster.leader()?;
    println!("3 voters up, leader {leader}; {} records acknowledged", load.acked_len());

    follower_refuses_changes(cluster, leader)?;
    add_learner(cluster, &load, leader).await?;
    promote(cluster, &load, leader).await?;
    let voters = remove_follower(cluster, &load, leader).await?;
    let (new_leader, voters) = remove_leader(cluster, &load, leader, &voters).await?;
    verify(cluster, load, new_leader, &voters).await
}

/// Creates the topic, starts the idempotent load and waits for `ACKS_BEFORE` acknowledgements.
async fn start_load(cluster: &mut Cluster) -> Result<ProduceLoad> {
    let leader = cluster.leader()?;
    let idempotence = broker_supports_idempotence(cluster.kafka_addr(leader))?;
    ensure!(idempotence, "the broker does not advertise InitProducerId: no idempotent producer");
    println!("producer: acks=all, enable.idempotence=true, {SENDERS} senders, {PARTITIONS} partitions");
    create_topics(&cluster.bootstrap(), &[(TOPIC, PARTITIONS)]).await?;
    let options =
        LoadOptions { topic: TOPIC.to_owned(), partitions: PARTITIONS, senders: SENDERS, idempotence };
    let load = ProduceLoad::start(&cluster.bootstrap(), options)?;
    load.wait_for_acks(ACKS_BEFORE, ACK_TIMEOUT).await?;
    Ok(load)
}

// ---- 1. leader-only endpoints on a follower ----------------------------------------------------

fn follower_refuses_changes(cluster: &mut Cluster, leader: u64) -> Result<()> {
    let follower = cluster.followers()?[0];
    // Any well-formed addresses: the request is refused before they are used.
    let (raft, kafka) = (cluster.raft_addr(follower), cluster.kafka_addr(follower));
    let paths = [
        format!("/members/add-learner?id={NEW_NODE}&raft={raft}&kafka={kafka}"),
        format!("/members/promote?id={follower}"),
        format!("/members/remove?id={leader}"),
    ];
    for path in &paths {
        let response = admin_api::post(cluster.admin_addr(follower), path)?;
        ensure!(
            response.status == STATUS_MISDIRECTED,
            "POST {path} on follower {follower}: HTTP {} {} (expected {STATUS_MISDIRECTED})",
            response.status,
            response.text()
        );
        let body: Value = serde_json::from_slice(&response.body).context("421 body")?;
        ensure!(
            body["leader"].as_u64() == Some(leader),
            "POST {path} on follower {follower}: 421 names leader {} instead of {leader}",
            body["leader"]
        );
    }
    let status = cluster.status(leader)?;
    ensure!(
        (status.voters.as_slice(), status.learners.as_slice()) == (&[1, 2, 3][..], &[][..]),
        "membership changed after refused requests: voters {:?}, learners {:?}",
        status.voters,
        status.learners
    );
    println!("follower {follower}: add-learner, promote and remove each answered 421 naming leader {leader}");
    Ok(())
}

// ---- 2. node 4 joins as a learner --------------------------------------------------------------

async fn add_learner(cluster: &mut Cluster, load: &ProduceLoad, leader: u64) -> Result<()> {
    let spawned = Instant::now();
    cluster.spawn_joining_node(NEW_NODE)?;
    let before = wait_admin_up(cluster, NEW_NODE).await?;
    println!(
        "node {NEW_NODE} spawned; admin API up after {:.3} s: role {}, leader {:?}, voters {:?}, last_applied {}",
        spawned.elapsed().as_secs_f64(),
        before.role,
        before.leader,
        before.voters,
        before.last_applied
    );
    ensure!(before.leader.is_none(), "node {NEW_NODE} names leader {:?} before it was added", before.leader);

    let (raft, kafka) = (cluster.raft_addr(NEW_NODE), cluster.kafka_addr(NEW_NODE));
    let path = format!("/members/add-learner?id={NEW_NODE}&raft={raft}&kafka={kafka}");
    let started = Instant::now();
    let membership = change(cluster, leader, &path).await?;
    let leader_status = cluster.status(leader)?;
    println!(
        "add-learner {NEW_NODE} on leader {leader}: 200 after {:.3} s: {membership}",
        started.elapsed().as_secs_f64()
    );
    ensure!(
        ids(&membership["voters"]) == [1, 2, 3] && ids(&membership["learners"]) == [NEW_NODE],
        "add-learner answered membership {membership}"
    );

    // Caught up: it applied everything the leader had when add-learner returned, and serves.
    let target = leader_status.last_log_index.as_u64().context("leader has no last_log_index")?;
    let caught_up = poll(CONVERGE_TIMEOUT, || {
        let s = cluster.status(NEW_NODE)?;
        Ok((s.last_applied.as_u64() >= Some(target)).then_some(s))
    })
    .await
    .with_context(|| format!("node {NEW_NODE} applying up to the leader's index {target}"))?;
    cluster.wait_serving(NEW_NODE)?;
    println!(
        "node {NEW_NODE} caught up {:.3} s after add-learner: applied {} (leader's last index {target} then), \
         role {}, leader {:?}, serving Kafka",
        started.elapsed().as_secs_f64(),
        caught_up.last_applied,
        caught_up.role,
        caught_up.leader
    );
    ensure!(caught_up.role == "learner", "node {NEW_NODE} is {} before its promotion", caught_up.role);
    ensure!(caught_up.leader == Some(leader), "node {NEW_NODE} names leader {:?}", caught_up.leader);
    production_after(load, &format!("learner {NEW_NODE} added"), started).await
}

/// Polls the joining node's `/status` until it answers.
async fn wait_admin_up(cluster: &mut Cluster, id: u64) -> Result<Status> {
    let started = Instant::now();
    loop {
        cluster.check_none_exited()?;
        match cluster.status(id) {
            Ok(status) => return Ok(status),
            Err(e) if started.elapsed() > ADMIN_UP_TIMEOUT => {
                bail!("node {id}'s admin API not answering within {ADMIN_UP_TIMEOUT:?}: {e:#}")
            }
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}

// ---- 3. node 4 promoted ------------------------------------------------------------------------

async fn promote(cluster: &mut Cluster, load: &ProduceLoad, leader: u64) -> Result<()> {
    let started = Instant::now();
    let membership = change(cluster, leader, &format!("/members/promote?id={NEW_NODE}")).await?;
    println!(
        "promote {NEW_NODE} on leader {leader}: 200 after {:.3} s: {membership}",
        started.elapsed().as_secs_f64()
    );
    let all = [1, 2, 3, NEW_NODE];
    ensure!(
        ids(&membership["voters"]) == all
            && ids(&membership["learners"]).is_empty()
            && membership["joint"] == false,
        "promote answered membership {membership}"
    );
    let applied = wait_voters(cluster, &all, &all).await?;
    let brokers = wait_brokers(cluster, &all, &all).await?;
    println!(
        "every node lists voters {all:?} {:.3} s and Metadata brokers {:?} {:.3} s after the promotion",
        applied.as_secs_f64(),
        brokers.0,
        brokers.1.as_secs_f64()
    );
    production_after(load, &format!("node {NEW_NODE} promoted"), started).await
}

// ---- 4. a follower removed ---------------------------------------------------------------------

/// Removes the lowest-id original follower, stops it; returns the voters left.
async fn remove_follower(cluster: &mut Cluster, load: &ProduceLoad, leader: u64) -> Result<Vec<u64>> {
    let removed = [1, 2, 3].into_iter().find(|id| *id != leader).expect("two followers");
    let voters: Vec<u64> = [1, 2, 3, NEW_NODE].into_iter().filter(|id| *id != removed).collect();
    let started = Instant::now();
    let membership = change(cluster, leader, &format!("/members/remove?id={removed}")).await?;
    println!(
        "remove {removed} (a follower) on leader {leader}: 200 after {:.3} s: {membership}",
        started.elapsed().as_secs_f64()
    );
    check_removed(&membership, removed, &voters)?;
    let applied = wait_voters(cluster, &voters, &voters).await?;
    let brokers = wait_brokers(cluster, &voters, &voters).await?;
    println!(
        "nodes {voters:?} list voters {voters:?} {:.3} s and Metadata brokers {:?} (no {}) {:.3} s after the removal",
        applied.as_secs_f64(),
        brokers.0,
        cluster.kafka_addr(removed),
        brokers.1.as_secs_f64()
    );
    let again = admin_api::post(cluster.admin_addr(leader), &format!("/members/remove?id={removed}"))?;
    ensure!(again.status == 404, "removing {removed} twice: HTTP {} {}", again.status, again.text());
    match cluster.status(removed) {
        Ok(s) => println!(
            "removed node {removed} says: role {}, leader {:?}, term {}, voters {:?}",
            s.role, s.leader, s.term, s.voters
        ),
        Err(e) => println!("removed node {removed} does not answer /status: {e:#}"),
    }

    // A removed node that learned of its removal shuts itself down; one that did not (the
    // leader stops replicating to it) is stopped here.
    let stopped = Instant::now();
    let (how, status) = match cluster.wait_exit(removed, Duration::from_secs(3))? {
        Some(status) => ("by itself", status),
        None => ("SIGTERM", cluster.terminate(removed)?),
    };
    ensure!(status.success(), "removed node {removed} exited with {status} ({how})");
    println!("removed node {removed} stopped ({how}: {status}) in {:.3} s", stopped.elapsed().as_secs_f64());
    let (now, _) = leader_among(cluster, &voters, NEW_LEADER_TIMEOUT).await?;
    ensure!(now == leader, "removing follower {removed} moved leadership from {leader} to {now}");
    production_after(load, &format!("follower {removed} removed and stopped"), started).await?;
    Ok(voters)
}

// ---- 5. the leader removes itself --------------------------------------------------------------

/// Removes the leader through its own admin API; returns the new leader and the voters left.
async fn remove_leader(
    cluster: &mut Cluster,
    load: &ProduceLoad,
    leader: u64,
    voters: &[u64],
) -> Result<(u64, Vec<u64>)> {
    let rest: Vec<u64> = voters.iter().copied().filter(|id| *id != leader).collect();
    let started = Instant::now();
    let membership = change(cluster, leader, &format!("/members/remove?id={leader}")).await?;
    println!(
        "remove {leader} (the leader itself) on {leader}: 200 after {:.3} s: {membership}",
        started.elapsed().as_secs_f64()
    );
    check_removed(&membership, leader, &rest)?;
    let (new, _) = leader_among(cluster, &rest, NEW_LEADER_TIMEOUT).await?;
    let elected_at = Instant::now();
    let elected = started.elapsed();
    ensure!(new != leader, "removed leader {leader} still named leader by {rest:?}");
    println!("leader {new} agreed on by {rest:?} {:.3} s after the removal request", elected.as_secs_f64());

    // The removed node knows it was removed (it committed that membership): it shuts itself
    // down rather than keep telling clients (Metadata) an outdated view of the cluster.
    let status = cluster.wait_exit(leader, STEP_DOWN_TIMEOUT)?.with_context(|| {
        format!("removed leader {leader} still running {STEP_DOWN_TIMEOUT:?} after {rest:?} elected {new}")
    })?;
    ensure!(status.success(), "removed leader {leader} exited with {status}");
    println!(
        "removed node {leader} shut itself down ({status}) {:.3} s after the new leader",
        elected_at.elapsed().as_secs_f64()
    );
    let applied = wait_voters(cluster, &rest, &rest).await?;
    let brokers = wait_brokers(cluster, &rest, &rest).await?;
    println!(
        "nodes {rest:?} list voters {rest:?} {:.3} s and Metadata brokers {:?} {:.3} s after the removal",
        applied.as_secs_f64(),
        brokers.0,
        brokers.1.as_secs_f64()
    );
    // Production goes on under the new leader.
    production_after(load, &format!("leader {leader} removed, {new} elected"), elected_at).await?;
    Ok((new, rest))
}

// ---- 6. read back and digests ------------------------------------------------------------------

async fn verify(cluster: &mut Cluster, load: ProduceLoad, leader: u64, voters: &[u64]) -> Result<()> {
    let (now, _) = leader_among(cluster, voters, NEW_LEADER_TIMEOUT).await?;
    ensure!(now == leader, "leadership moved from {leader} to {now} with no fault");
    let report = load.stop().await?;
    let live = cluster.live_ids();
    ensure!(live == voters, "nodes {live:?} run, expected only the voters {voters:?}");
    let consumed = read_back(cluster).await?;
    let check = check_acked_exactly_once(&report.acked, &consumed, false)?;
    println!(
        "read back {} records: {} acknowledged, each exactly once at its offset and in send order; \
         {} failed or timed-out sends, {} of them present (last error: {:?})",
        check.records, check.acked, report.failures, check.unacked_present, report.last_failure
    );
    let started = Instant::now();
    let digests = cluster.assert_digests_match_read_back(TOPIC, &consumed)?;
    ensure!(digests.keys().copied().collect::<Vec<_>>() == voters, "digests from nodes {:?}", digests.keys());
    let applied = digests.values().next().map(|d| d.last_applied.clone()).unwrap_or_default();
    println!(
        "digests equal on voters {voters:?} at last_applied {applied} after {:.3} s",
        started.elapsed().as_secs_f64()
    );
    cluster.check_none_exited()
}

async fn read_back(cluster: &mut Cluster) -> Result<PartitionRecords> {
    let bootstrap = cluster.live_bootstrap();
    let partitions: Vec<(String, i32)> = (0..PARTITIONS).map(|p| (TOPIC.to_owned(), p)).collect();
    tokio::task::spawn_blocking(move || read_partitions(&bootstrap, &partitions, READ_TIMEOUT)).await?
}

// ---- helpers -----------------------------------------------------------------------------------

/// Waits until records sent after `at` are acknowledged; prints when the first was.
async fn production_after(load: &ProduceLoad, what: &str, at: Instant) -> Result<()> {
    let first = load.wait_for_acks_sent_after(at, ACKS_AFTER_CHANGE, ACK_TIMEOUT).await?;
    println!(
        "{what}: first acknowledgement of a record sent after the change at +{:.3} s; {} acknowledged, {} failed so far",
        first.as_secs_f64(),
        load.acked_len(),
        load.failures()
    );
    Ok(())
}

/// A membership `POST` on `node` that must answer 200; returns the membership it answers.
async fn change(cluster: &Cluster, node: u64, path: &str) -> Result<Value> {
    let addr = cluster.admin_addr(node);
    let owned = path.to_owned();
    let (status, body) = tokio::task::spawn_blocking(move || post_waiting(addr, &owned)).await??;
    ensure!(status == 200, "POST {path} on node {node}: HTTP {status}: {body}");
    Ok(body)
}

/// `POST path` with `MEMBERSHIP_REQUEST_TIMEOUT` to read the answer (`admin_api::post` allows
/// two seconds; adding a learner waits until it has caught up). The broker answers with a
/// Content-Length and closes the connection.
fn post_waiting(addr: SocketAddr, path: &str) -> Result<(u16, Value)> {
    let mut stream = TcpStream::connect_timeout(&addr, admin_api::ADMIN_REQUEST_TIMEOUT)
        .with_context(|| format!("connecting to admin API {addr}"))?;
    stream.set_read_timeout(Some(MEMBERSHIP_REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(admin_api::ADMIN_REQUEST_TIMEOUT))?;
    let head =
        format!("POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes())?;
    let mut raw = Vec::new();
    stream
        .take(admin_api::ADMIN_RESPONSE_BYTES_MAX)
        .read_to_end(&mut raw)
        .with_context(|| format!("POST {path} on {addr}: no answer within {MEMBERSHIP_REQUEST_TIMEOUT:?}"))?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").context("no end of headers")?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("bad status line in {head:?}"))?;
    let body = serde_json::from_slice(&raw[split + 4..])
        .with_context(|| format!("POST {path}: body {:?}", String::from_utf8_lossy(&raw[split + 4..])))?;
    Ok((status, body))
}

/// Ids in a JSON array, in order.
fn ids(value: &Value) -> Vec<u64> {
    value.as_array().map(|a| a.iter().filter_map(Value::as_u64).collect()).unwrap_or_default()
}

/// A removal's answer: `voters` and no other member, `removed` nowhere, not joint.
fn check_removed(membership: &Value, removed: u64, voters: &[u64]) -> Result<()> {
    let nodes: Vec<u64> = membership["nodes"]
        .as_array()
        .map(|a| a.iter().filter_map(|n| n["id"].as_u64()).collect())
        .unwrap_or_default();
    ensure!(
        ids(&membership["voters"]) == voters
            && ids(&membership["learners"]).is_empty()
            && nodes == voters
            && membership["joint"] == false,
        "removing {removed} answered membership {membership}, expected voters and nodes {voters:?}"
    );
    Ok(())
}

/// Calls `f` every `POLL` until it returns `Some` or `timeout` passes; the last error, if any,
/// explains the timeout.
async fn poll<T>(timeout: Duration, mut f: impl FnMut() -> Result<Option<T>>) -> Result<T> {
    let started = Instant::now();
    loop {
        let last = match f() {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => String::from("not yet"),
            Err(e) => format!("{e:#}"),
        };
        if started.elapsed() > timeout {
            bail!("not within {timeout:?}; last: {last}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until every node of `nodes` reports exactly `voters` as voters and no learner;
/// returns the time taken.
async fn wait_voters(cluster: &mut Cluster, nodes: &[u64], voters: &[u64]) -> Result<Duration> {
    let started = Instant::now();
    let mut seen = BTreeMap::new();
    let result = poll(CONVERGE_TIMEOUT, || {
        cluster.check_none_exited()?;
        for &id in nodes {
            let s = cluster.status(id)?;
            seen.insert(id, (s.voters.clone(), s.learners.clone()));
        }
        Ok(seen.values().all(|(v, l)| v == voters && l.is_empty()).then_some(()))
    })
    .await;
    result.with_context(|| {
        format!("nodes {nodes:?} listing voters {voters:?}: (voters, learners) seen {seen:?}")
    })?;
    Ok(started.elapsed())
}

/// What one node's Metadata says: brokers as (id, address), the controller id, and the
/// distinct leaders and replica lists of `TOPIC`'s partitions.
#[derive(Debug)]
struct Metadata {
    brokers: BTreeMap<u64, String>,
    controller: i32,
    leaders: BTreeSet<i32>,
    replicas: BTreeSet<Vec<i32>>,
}

fn metadata(addr: SocketAddr) -> Result<Metadata> {
    let request = MetadataRequest::default().with_topics(None);
    let response: MetadataResponse = blocking_request(addr, 1, &request, METADATA_TIMEOUT)?;
    let brokers = response
        .brokers
        .iter()
        .map(|b| (b.node_id.0 as u64, format!("{}:{}", b.host.as_str(), b.port)))
        .collect();
    let partitions: Vec<_> = response
        .topics
        .iter()
        .filter(|t| t.name.as_ref().is_some_and(|n| n.as_str() == TOPIC))
        .flat_map(|t| t.partitions.iter())
        .collect();
    let leaders = partitions.iter().map(|p| p.leader_id.0).collect();
    let replicas = partitions.iter().map(|p| p.replica_nodes.iter().map(|r| r.0).collect()).collect();
    Ok(Metadata { brokers, controller: response.controller_id.0, leaders, replicas })
}

/// Waits until every node of `nodes` lists exactly `brokers` (each at its Kafka address) in
/// Metadata, with `brokers` as the replicas of every partition; returns them and the time.
async fn wait_brokers(
    cluster: &mut Cluster,
    nodes: &[u64],
    brokers: &[u64],
) -> Result<(BTreeMap<u64, String>, Duration)> {
    let expected: BTreeMap<u64, String> =
        brokers.iter().map(|id| (*id, cluster.kafka_addr(*id).to_string())).collect();
    let replicas: BTreeSet<Vec<i32>> = [brokers.iter().map(|id| *id as i32).collect()].into();
    let started = Instant::now();
    let mut seen = BTreeMap::new();
    let result = poll(CONVERGE_TIMEOUT, || {
        for &id in nodes {
            let m = metadata(cluster.kafka_addr(id))?;
            seen.insert(id, (m.brokers, m.replicas));
        }
        Ok(seen
            .values()
            .all(|(listed, partitions)| *listed == expected && *partitions == replicas)
            .then_some(()))
    })
    .await;
    result.with_context(|| {
        format!("nodes {nodes:?} listing brokers {expected:?} and replicas {replicas:?}: seen {seen:?}")
    })?;
    Ok((expected, started.elapsed()))
}

/// Waits until every node of `nodes` names the same leader, one of `nodes`, which says it
/// leads and whose Metadata names it as controller and leader of every partition; returns it
/// and the time taken.
async fn leader_among(cluster: &mut Cluster, nodes: &[u64], timeout: Duration) -> Result<(u64, Duration)> {
    let started = Instant::now();
    let mut views = BTreeMap::new();
    let result = poll(timeout, || {
        cluster.check_none_exited()?;
        for &id in nodes {
            views.insert(id, cluster.status(id).map(|s| (s.leader, s.role)).map_err(|e| format!("{e:#}")));
        }
        let named: BTreeSet<Option<u64>> =
            views.values().map(|v| v.as_ref().ok().and_then(|(leader, _)| *leader)).collect();
        let [Some(leader)] = named.into_iter().collect::<Vec<_>>()[..] else { return Ok(None) };
        let leads = matches!(&views.get(&leader), Some(Ok((_, role))) if role == "leader");
        if !leads || views.values().any(Result::is_err) {
            return Ok(None);
        }
        let m = metadata(cluster.kafka_addr(leader))?;
        let leader_i32 = leader as i32;
        Ok((m.controller == leader_i32 && m.leaders == BTreeSet::from([leader_i32])).then_some(leader))
    })
    .await;
    let leader = result.with_context(|| format!("a leader among {nodes:?}; views {views:?}"))?;
    Ok((leader, started.elapsed()))
}

//! Consumer groups end to end with librdkafka: JoinGroup, SyncGroup, Heartbeat, LeaveGroup
//! and member commits (OffsetCommit with a real generation).
//!
//! Three StreamConsumers with one group.id subscribe to a 6-partition topic; each partition is
//! owned by exactly one member. 20,000 messages are produced and consumed, offsets stored
//! after processing and auto-committed; then one consumer closes (LeaveGroup) and its
//! partitions move to the other two within the session timeout; 10,000 more are produced.
//! Every one of the 30,000 messages is consumed exactly once across the group.
//! In a three-node cluster, a generation completed on the leader is a log entry: the new
//! leader after a kill keeps the member and fences an older generation's commits.
//! A raw client walks every served version of the group APIs, and a member that stops
//! heartbeating is removed once its session passes. A follower that has its assignment can
//! commit with the new generation at once, however slowly the generation reaches the log.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use harness::cluster::ELECTION_TIMEOUT_MAX;
use harness::kafka::{client_config, create_topics, group_member_config, produce_numbered};
use harness::raw_ops::topic_name;
use harness::{Broker, BrokerOptions, Cluster, ClusterOptions, RawClient};
use kafka_compat::error_code::{ILLEGAL_GENERATION, MEMBER_ID_REQUIRED, NOT_COORDINATOR, UNKNOWN_MEMBER_ID};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    DescribeGroupsRequest, GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
    OffsetCommitRequest, OffsetCommitResponse, SyncGroupRequest,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::TopicPartitionList;
use tokio::sync::watch;

const TOPIC: &str = "grouped";
const GROUP: &str = "three-members";
const PARTITIONS: i32 = 6;
const CONSUMERS: usize = 3;
const FIRST_BATCH: usize = 20_000;
const SECOND_BATCH: usize = 10_000;
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);
const TIMEOUT: Duration = Duration::from_secs(60);

/// What every consumer task reports: its assignment, and each message value it processed.
#[derive(Default)]
struct Seen {
    assignments: Vec<BTreeSet<i32>>,
    consumed: BTreeMap<u64, u32>,
    per_consumer: Vec<usize>,
}

#[tokio::test(flavor = "multi_thread")]
async fn three_consumers_share_partitions_and_a_leaver_s_partitions_move() {
    let broker = Broker::start(BrokerOptions::default().config("group.initial.rebalance.delay.ms", 0))
        .expect("starting onelog");
    let result = scenario(&broker).await;
    broker.unwrap_or_dump(result);
}

async fn scenario(broker: &Broker) -> Result<()> {
    let bootstrap = broker.bootstrap();
    create_topics(&bootstrap, &[(TOPIC, PARTITIONS)]).await?;
    let seen = Arc::new(Mutex::new(Seen {
        assignments: vec![BTreeSet::new(); CONSUMERS],
        per_consumer: vec![0; CONSUMERS],
        ..Default::default()
    }));
    let mut stops = Vec::new();
    let mut tasks = Vec::new();
    for i in 0..CONSUMERS {
        let (stop, stopped) = watch::channel(false);
        stops.push(stop);
        tasks.push(tokio::spawn(consume(bootstrap.clone(), i, seen.clone(), stopped)));
    }

    let started = Instant::now();
    wait_for(&seen, "three members own every partition", |s| owners_ok(&s.assignments, CONSUMERS)).await?;
    println!("group formed: {:?} after {:?}", seen.lock().unwrap().assignments, started.elapsed());

    let started = Instant::now();
    produce_numbered(&bootstrap, TOPIC, 0..FIRST_BATCH).await?;
    wait_for(&seen, "20,000 consumed", |s| s.consumed.len() == FIRST_BATCH).await?;
    println!("{FIRST_BATCH} produced and consumed by three members in {:?}", started.elapsed());

    // One member leaves; its partitions go to the other two.
    let left = CONSUMERS - 1;
    let closed_at = Instant::now();
    stops[left].send(true)?;
    tasks.pop().expect("task").await??;
    seen.lock().unwrap().assignments[left].clear();
    wait_for(&seen, "two members own every partition", |s| owners_ok(&s.assignments, CONSUMERS - 1)).await?;
    let moved = closed_at.elapsed();
    println!("after close: {:?}, partitions moved in {moved:?}", seen.lock().unwrap().assignments);
    ensure!(moved < SESSION_TIMEOUT, "partitions moved after {moved:?}, session timeout {SESSION_TIMEOUT:?}");

    produce_numbered(&bootstrap, TOPIC, FIRST_BATCH..FIRST_BATCH + SECOND_BATCH).await?;
    wait_for(&seen, "30,000 consumed", |s| s.consumed.len() == FIRST_BATCH + SECOND_BATCH).await?;
    // Let any duplicate delivery show up before counting.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for stop in &stops[..left] {
        stop.send(true)?;
    }
    for task in tasks {
        task.await??;
    }
    let (distinct, duplicates, per_consumer) = {
        let seen = seen.lock().unwrap();
        let duplicates = seen.consumed.values().filter(|n| **n > 1).count();
        (seen.consumed.len(), duplicates, seen.per_consumer.clone())
    };
    println!("consumed per member: {per_consumer:?}; distinct {distinct}, duplicated {duplicates}");
    ensure!(distinct == FIRST_BATCH + SECOND_BATCH, "distinct {distinct}");
    ensure!(duplicates == 0, "{duplicates} messages consumed more than once");
    // The members' commits (OffsetCommit with their generation) were stored: together they
    // cover every message.
    let committed = committed_total(&bootstrap).await?;
    println!("committed offsets sum to {committed}");
    ensure!(committed == (FIRST_BATCH + SECOND_BATCH) as i64, "committed offsets sum to {committed}");
    Ok(())
}

async fn committed_total(bootstrap: &str) -> Result<i64> {
    let consumer: BaseConsumer = client_config(bootstrap).set("group.id", GROUP).create()?;
    let mut partitions = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        partitions.add_partition(TOPIC, p);
    }
    let committed =
        tokio::task::spawn_blocking(move || consumer.committed_offsets(partitions, TIMEOUT)).await??;
    Ok(committed.elements().iter().map(|e| e.offset().to_raw().unwrap_or(0).max(0)).sum())
}

/// Every partition owned by exactly one of `members` non-empty assignments.
fn owners_ok(assignments: &[BTreeSet<i32>], members: usize) -> bool {
    let owning = assignments.iter().filter(|a| !a.is_empty()).count();
    let total: usize = assignments.iter().map(|a| a.len()).sum();
    let union: BTreeSet<i32> = assignments.iter().flatten().copied().collect();
    owning == members && total == PARTITIONS as usize && union.len() == PARTITIONS as usize
}

async fn wait_for(seen: &Mutex<Seen>, what: &str, ok: impl Fn(&Seen) -> bool) -> Result<()> {
    let deadline = Instant::now() + TIMEOUT;
    while Instant::now() < deadline {
        if ok(&seen.lock().unwrap()) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let s = seen.lock().unwrap();
    bail!("timed out waiting for {what}: assignments {:?}, consumed {}", s.assignments, s.consumed.len())
}

/// One group member: records each message, then stores its offset (committed by auto-commit,
/// on revocation and on close: commits after processing).
async fn consume(
    bootstrap: String,
    i: usize,
    seen: Arc<Mutex<Seen>>,
    mut stop: watch::Receiver<bool>,
) -> Result<()> {
    let consumer: StreamConsumer = group_member_config(
        &bootstrap,
        GROUP,
        &format!("member-{i}"),
        Duration::from_millis(200),
        SESSION_TIMEOUT,
    )
    .create()?;
    consumer.subscribe(&[TOPIC])?;
    loop {
        if *stop.borrow() {
            break;
        }
        let assignment: BTreeSet<i32> =
            consumer.assignment()?.elements().iter().map(|e| e.partition()).collect();
        seen.lock().unwrap().assignments[i] = assignment;
        tokio::select! {
            _ = stop.changed() => break,
            received = tokio::time::timeout(Duration::from_millis(100), consumer.recv()) => {
                let Ok(received) = received else { continue };
                let m = received?;
                let value: u64 = std::str::from_utf8(m.payload().unwrap_or_default())?.parse()?;
                {
                    let mut s = seen.lock().unwrap();
                    *s.consumed.entry(value).or_default() += 1;
                    s.per_consumer[i] += 1;
                }
                consumer.store_offset_from_message(&m)?;
            }
        }
    }
    // Dropping closes the consumer: it commits the stored offsets and sends LeaveGroup.
    drop(consumer);
    Ok(())
}

/// The completed generation is a log entry: after the leader is killed, the new leader knows
/// the member (its heartbeat is answered NONE, its commit stored) and still fences a zombie
/// (an older generation is ILLEGAL_GENERATION, a stranger UNKNOWN_MEMBER_ID).
#[tokio::test(flavor = "multi_thread")]
async fn a_completed_generation_survives_failover_and_fences_zombies() {
    let options = ClusterOptions::new(3).config("group.initial.rebalance.delay.ms", 0);
    let mut cluster = Cluster::start_with(options).expect("starting 3 nodes");
    let result = failover_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

fn gid(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_string()))
}

async fn failover_scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    create_topics(&cluster.bootstrap(), &[(TOPIC, PARTITIONS)]).await?;
    let mut client = RawClient::connect(cluster.kafka_addr(leader)).await?;
    let join = JoinGroupRequest::default()
        .with_group_id(gid("failover"))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(bytes::Bytes::from_static(b"meta"))]);
    // KIP-394: the first join of a v4+ client learns its member id.
    let first = client.request(9, &join).await?;
    ensure!(first.error_code == MEMBER_ID_REQUIRED, "first join: {first:?}");
    let member = first.member_id.clone();
    let joined = client.request(9, &join.clone().with_member_id(member.clone())).await?;
    ensure!(joined.error_code == 0 && joined.leader == member && joined.members.len() == 1, "{joined:?}");
    let generation = joined.generation_id;
    let assignment = SyncGroupRequestAssignment::default()
        .with_member_id(member.clone())
        .with_assignment(bytes::Bytes::from_static(b"all"));
    let sync = SyncGroupRequest::default()
        .with_group_id(gid("failover"))
        .with_generation_id(generation)
        .with_member_id(member.clone())
        .with_assignments(vec![assignment]);
    let synced = client.request(5, &sync).await?;
    ensure!(synced.error_code == 0 && &synced.assignment[..] == b"all", "{synced:?}");
    let described =
        client.request(5, &DescribeGroupsRequest::default().with_groups(vec![gid("failover")])).await?;
    let group = &described.groups[0];
    ensure!(group.group_state.as_str() == "Stable" && group.protocol_data.as_str() == "range", "{group:?}");
    println!("generation {generation} of member {member} completed on leader {leader}");

    cluster.kill9(leader)?;
    let (new_leader, _) = cluster.wait_for_leader(ELECTION_TIMEOUT_MAX * 20)?;
    ensure!(new_leader != leader, "killed leader {leader} still leads");
    let mut client = RawClient::connect(cluster.kafka_addr(new_leader)).await?;
    let heartbeat = HeartbeatRequest::default()
        .with_group_id(gid("failover"))
        .with_generation_id(generation)
        .with_member_id(member.clone());
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        // The new leader may still be taking its lease; NOT_COORDINATOR is retried as clients do.
        let code = client.request(4, &heartbeat).await?.error_code;
        if code == 0 {
            break;
        }
        ensure!(code == NOT_COORDINATOR && Instant::now() < deadline, "heartbeat on the new leader: {code}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let commit = |generation: i32, member: &StrBytes| {
        OffsetCommitRequest::default()
            .with_group_id(gid("failover"))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(member.clone())
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(topic_name(TOPIC))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(5)])])
    };
    let code = |r: OffsetCommitResponse| r.topics[0].partitions[0].error_code;
    let own = code(client.request(8, &commit(generation, &member)).await?);
    let zombie = code(client.request(8, &commit(generation - 1, &member)).await?);
    let stranger =
        code(client.request(8, &commit(generation, &StrBytes::from_static_str("stranger"))).await?);
    println!(
        "on new leader {new_leader}: member commit {own}, older generation {zombie}, stranger {stranger}"
    );
    ensure!(own == 0, "member's commit on the new leader: {own}");
    ensure!(zombie == ILLEGAL_GENERATION, "older generation: {zombie}");
    ensure!(stranger == UNKNOWN_MEMBER_ID, "stranger: {stranger}");
    Ok(())
}

/// Every served version of JoinGroup (v0–v9), SyncGroup, Heartbeat, DescribeGroups and
/// LeaveGroup, one member per group, with Kafka's codes along the way.
#[tokio::test(flavor = "multi_thread")]
async fn every_version_of_the_group_apis_walks_one_member_through_a_generation() {
    let broker = Broker::start(BrokerOptions::default().config("group.initial.rebalance.delay.ms", 0))
        .expect("starting onelog");
    let result = version_walk(&broker).await;
    broker.unwrap_or_dump(result);
}

async fn version_walk(broker: &Broker) -> Result<()> {
    let mut client = RawClient::connect(broker.addr()).await?;
    for v in 0..=9i16 {
        let group = gid(&format!("walk-v{v}"));
        let join = JoinGroupRequest::default()
            .with_group_id(group.clone())
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(if v >= 1 { 10_000 } else { -1 })
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str("range"))
                .with_metadata(bytes::Bytes::from_static(b"meta"))]);
        let mut joined = client.request(v, &join).await?;
        if v >= 4 {
            ensure!(joined.error_code == MEMBER_ID_REQUIRED, "JoinGroup v{v}: {joined:?}");
            joined = client.request(v, &join.clone().with_member_id(joined.member_id)).await?;
        }
        ensure!(joined.error_code == 0 && joined.generation_id == 1, "JoinGroup v{v}: {joined:?}");
        ensure!(joined.members.len() == 1 && &joined.members[0].metadata[..] == b"meta", "v{v}: {joined:?}");
        let member = joined.member_id.clone();
        let sync_v = v.min(5);
        let sync = SyncGroupRequest::default()
            .with_group_id(group.clone())
            .with_generation_id(1)
            .with_member_id(member.clone())
            .with_assignments(vec![SyncGroupRequestAssignment::default()
                .with_member_id(member.clone())
                .with_assignment(bytes::Bytes::from_static(b"assigned"))]);
        let sync = if sync_v >= 5 {
            sync.with_protocol_type(Some(StrBytes::from_static_str("consumer")))
                .with_protocol_name(Some(StrBytes::from_static_str("range")))
        } else {
            sync
        };
        let synced = client.request(sync_v, &sync).await?;
        ensure!(
            synced.error_code == 0 && &synced.assignment[..] == b"assigned",
            "SyncGroup v{sync_v}: {synced:?}"
        );
        let heartbeat =
            HeartbeatRequest::default().with_group_id(group.clone()).with_member_id(member.clone());
        let hb_v = v.min(4);
        let ok = client.request(hb_v, &heartbeat.clone().with_generation_id(1)).await?.error_code;
        let stale = client.request(hb_v, &heartbeat.clone().with_generation_id(0)).await?.error_code;
        ensure!((ok, stale) == (0, ILLEGAL_GENERATION), "Heartbeat v{hb_v}: {ok} {stale}");
        let described = client
            .request(v.min(5), &DescribeGroupsRequest::default().with_groups(vec![group.clone()]))
            .await?;
        let g = &described.groups[0];
        ensure!(
            g.error_code == 0 && g.group_state.as_str() == "Stable" && g.members.len() == 1,
            "DescribeGroups v{}: {g:?}",
            v.min(5)
        );
        ensure!(&g.members[0].member_assignment[..] == b"assigned", "DescribeGroups: {g:?}");
        // Kafka reports where the member connected from; kafka-consumer-groups prints it as HOST.
        ensure!(g.members[0].client_host.as_str() == "/127.0.0.1", "DescribeGroups host: {g:?}");
        let leave_v = v.min(5);
        let leave = LeaveGroupRequest::default().with_group_id(group.clone());
        let code = if leave_v >= 3 {
            let leave = leave.with_members(vec![MemberIdentity::default().with_member_id(member.clone())]);
            let left = client.request(leave_v, &leave).await?;
            ensure!(left.error_code == 0, "LeaveGroup v{leave_v}: {left:?}");
            left.members[0].error_code
        } else {
            client.request(leave_v, &leave.with_member_id(member.clone())).await?.error_code
        };
        ensure!(code == 0, "LeaveGroup v{leave_v}: {code}");
        let gone = client.request(hb_v, &heartbeat.with_generation_id(1)).await?.error_code;
        ensure!(gone == UNKNOWN_MEMBER_ID, "Heartbeat after leaving: {gone}");
    }
    let unknown =
        client.request(5, &DescribeGroupsRequest::default().with_groups(vec![gid("never")])).await?;
    ensure!(unknown.groups[0].group_state.as_str() == "Dead", "{unknown:?}");
    println!("JoinGroup v0–v9, SyncGroup v0–v5, Heartbeat v0–v4, DescribeGroups v0–v5, LeaveGroup v0–v5: ok");
    Ok(())
}

/// A member that stops heartbeating is removed once its session (6 s, Kafka's minimum) passes:
/// its heartbeat then gets UNKNOWN_MEMBER_ID and the group is Empty.
#[tokio::test(flavor = "multi_thread")]
async fn a_silent_member_is_removed_when_its_session_expires() {
    let broker = Broker::start(BrokerOptions::default().config("group.initial.rebalance.delay.ms", 0))
        .expect("starting onelog");
    let result = session_expiry(&broker).await;
    broker.unwrap_or_dump(result);
}

async fn session_expiry(broker: &Broker) -> Result<()> {
    let mut client = RawClient::connect(broker.addr()).await?;
    let session = Duration::from_secs(6);
    let join = JoinGroupRequest::default()
        .with_group_id(gid("silent"))
        .with_session_timeout_ms(session.as_millis() as i32)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default().with_name(StrBytes::from_static_str("range"))
        ]);
    let joined = client.request(3, &join).await?;
    ensure!(joined.error_code == 0, "{joined:?}");
    let sync = SyncGroupRequest::default()
        .with_group_id(gid("silent"))
        .with_generation_id(joined.generation_id)
        .with_member_id(joined.member_id.clone());
    ensure!(client.request(3, &sync).await?.error_code == 0, "SyncGroup");
    let heartbeat = HeartbeatRequest::default()
        .with_group_id(gid("silent"))
        .with_generation_id(joined.generation_id)
        .with_member_id(joined.member_id.clone());
    let silent_from = Instant::now();
    let describe = DescribeGroupsRequest::default().with_groups(vec![gid("silent")]);
    loop {
        let state = client.request(5, &describe).await?.groups[0].group_state.to_string();
        if state == "Empty" {
            break;
        }
        ensure!(silent_from.elapsed() < session * 2, "still {state} after {:?}", silent_from.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let removed_after = silent_from.elapsed();
    println!("silent member removed after {removed_after:?} (session {session:?})");
    ensure!(removed_after >= session, "removed after {removed_after:?}, before its session passed");
    let code = client.request(3, &heartbeat).await?.error_code;
    ensure!(code == UNKNOWN_MEMBER_ID, "heartbeat after expiry: {code}");
    Ok(())
}

/// Regression (franz-go's TestGroupETL, cooperative-sticky, failed in CI with "unable to
/// commit: ILLEGAL_GENERATION"): the follower's SyncGroup was answered as soon as the leader
/// member handed in the assignments, before the generation's `CompleteGeneration` entry was
/// queued, so the follower's first commit with the new generation could reach the log first
/// and be fenced by apply. A fault point holds the generation back 1.5 s: the follower must
/// not hear of its assignment before the log has the generation, and its commit right after
/// must be accepted.
#[tokio::test(flavor = "multi_thread")]
async fn a_follower_commits_with_its_new_generation_however_slowly_it_is_recorded() {
    // KIP-134's initial delay lets both members into generation 1.
    let options = BrokerOptions::default()
        .config("group.initial.rebalance.delay.ms", 1_000)
        .env("ONELOG_FAULT_DELAY", "group.record_generation:1500");
    let broker = Broker::start(options).expect("starting onelog");
    let result = slow_record(&broker).await;
    broker.unwrap_or_dump(result);
}

async fn slow_record(broker: &Broker) -> Result<()> {
    create_topics(&broker.bootstrap(), &[("slow-record", 1)]).await?;
    // Two members: each learns its id (KIP-394).
    let mut ids = Vec::new();
    for _ in 0..2 {
        let mut client = RawClient::connect(broker.addr()).await?;
        let first = client.request(9, &slow_join(&StrBytes::default())).await?;
        ensure!(first.error_code == MEMBER_ID_REQUIRED, "first join: {first:?}");
        ids.push(first.member_id);
    }
    // Generation 1 is the first the log records; generation 2 is checked against it (the
    // case that failed: apply fenced the commit with generation 1 still in the log).
    let mut leader = None;
    let mut waits = Vec::new();
    for generation in 1..=2 {
        let (led, waited) = slow_generation(broker, &ids, leader, generation).await?;
        (leader, waits) = (Some(led), [waits, vec![waited]].concat());
    }
    let early = waits.iter().any(|w| *w < Duration::from_millis(1_400));
    ensure!(!early, "a follower heard of its generation before the log had it: {waits:?}");
    Ok(())
}

fn slow_join(member: &StrBytes) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(gid("slow"))
        .with_member_id(member.clone())
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(bytes::Bytes::from_static(b"meta"))])
}

/// Both members join `generation` (the leader of the last one first: a Stable group's leader
/// rejoining starts a rebalance, where a follower's unchanged rejoin would just get the current
/// generation back); the follower's SyncGroup waits, the leader's hands in the assignments,
/// and the follower commits with the new generation as soon as it is answered. Returns the
/// leader and how long after the leader's SyncGroup the follower was answered.
async fn slow_generation(
    broker: &Broker,
    ids: &[StrBytes],
    last_leader: Option<StrBytes>,
    generation: i32,
) -> Result<(StrBytes, Duration)> {
    let mut order = ids.to_vec();
    order.sort_by_key(|id| Some(id) != last_leader.as_ref());
    let mut joins = Vec::new();
    for id in order {
        let (addr, request) = (broker.addr(), slow_join(&id));
        joins.push(tokio::spawn(async move { RawClient::connect(addr).await?.request(9, &request).await }));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut joined = Vec::new();
    for handle in joins {
        joined.push(handle.await??);
    }
    ensure!(joined.iter().all(|j| j.error_code == 0 && j.generation_id == generation), "{joined:?}");
    let leader = joined[0].leader.clone();
    let follower = ids.iter().find(|id| **id != leader).expect("two members").clone();
    let sync = |member: &StrBytes, assignments: Vec<SyncGroupRequestAssignment>| {
        SyncGroupRequest::default()
            .with_group_id(gid("slow"))
            .with_generation_id(generation)
            .with_member_id(member.clone())
            .with_assignments(assignments)
    };
    let commit = OffsetCommitRequest::default()
        .with_group_id(gid("slow"))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(follower.clone())
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name("slow-record"))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(generation as i64)])]);
    // The follower commits the moment it has its assignment, as a consumer may.
    let follower_sync = {
        let (addr, request) = (broker.addr(), sync(&follower, Vec::new()));
        tokio::spawn(async move {
            let mut client = RawClient::connect(addr).await?;
            let synced = client.request(5, &request).await?;
            let answered_at = Instant::now();
            let code = client.request(8, &commit).await?.topics[0].partitions[0].error_code;
            anyhow::Ok((synced, answered_at, code))
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let assignments = [(&leader, b"L"), (&follower, b"F")]
        .map(|(id, bytes)| {
            SyncGroupRequestAssignment::default()
                .with_member_id(id.clone())
                .with_assignment(bytes::Bytes::from_static(bytes))
        })
        .to_vec();
    let leader_sent = Instant::now();
    let mut leader_client = RawClient::connect(broker.addr()).await?;
    let leader_sync = leader_client.request(5, &sync(&leader, assignments)).await?;
    ensure!(leader_sync.error_code == 0 && &leader_sync.assignment[..] == b"L", "{leader_sync:?}");
    let (synced, answered_at, code) = follower_sync.await??;
    ensure!(synced.error_code == 0 && &synced.assignment[..] == b"F", "{synced:?}");
    let waited = answered_at.saturating_duration_since(leader_sent);
    println!(
        "generation {generation}: follower answered {waited:?} after the leader's SyncGroup \
         (held back 1.5 s); its commit: error {code}"
    );
    ensure!(code == 0, "generation {generation}: the follower's commit: error {code}");
    Ok((leader, waited))
}

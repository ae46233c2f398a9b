//! KIP-1071 Streams groups on the wire (issue 30), against three nodes: a member's join makes
//! the broker create the topology's changelog topic and hand out every task; a kill -9 of the
//! Raft leader changes neither the member's epoch nor its tasks (the group is in the log); bad
//! input gets Kafka 4.4's codes with the group unchanged; OffsetCommit is checked against the
//! member epoch; and `kafka-streams-groups.sh` lists,
//! describes, resets the offsets of and deletes the group.
//! (Kafka Streams itself with `group.protocol=streams` runs in the compatibility matrix,
//! `scripts/compat.sh --clients kafka-streams-4.4.0-streams`.)

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use harness::kafka::create_topics;
use harness::{java, Cluster, ClusterOptions, RawClient};
use kafka_compat::error_code::{
    COORDINATOR_NOT_AVAILABLE, FENCED_MEMBER_EPOCH, INVALID_REQUEST, NOT_COORDINATOR, STALE_MEMBER_EPOCH,
    STREAMS_INVALID_TOPOLOGY, UNSUPPORTED_VERSION,
};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::streams_group_heartbeat_request::{Subtopology, TaskIds, TopicInfo, Topology};
use kafka_protocol::messages::{
    GroupId, OffsetCommitRequest, StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const GROUP: &str = "word-counter";
const INPUT: &str = "words";
const CHANGELOG: &str = "word-counter-counts-changelog";
const PARTITIONS: i32 = 4;
/// Kafka's status code for MISSING_INTERNAL_TOPICS.
const MISSING_INTERNAL_TOPICS: i8 = 3;
const STREAMS_TOOL: &str = "org.apache.kafka.tools.streams.StreamsGroupCommand";

#[tokio::test(flavor = "multi_thread")]
async fn a_streams_group_survives_a_leader_kill_and_answers_the_tools() {
    // Targets as soon as they are owed: no initial delay, no interval between two.
    let options = ClusterOptions::new(3)
        .config("group.streams.initial.rebalance.delay.ms", 0)
        .config("group.streams.assignment.interval.ms", 0);
    let mut cluster = Cluster::start_with(options).expect("starting three onelog nodes");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    create_topics(&cluster.bootstrap(), &[(INPUT, PARTITIONS)]).await?;
    let joined = call(cluster, &join("m1")).await?;
    ensure!(joined.error_code == 0, "join refused: {joined:?}");
    let statuses: Vec<i8> = joined.status.iter().flatten().map(|s| s.status_code).collect();
    ensure!(statuses.contains(&MISSING_INTERNAL_TOPICS), "the changelog is missing at first: {statuses:?}");
    let (epoch, tasks) = until_running(cluster, joined.member_epoch).await?;
    ensure!(tasks == (0..PARTITIONS).collect::<Vec<_>>(), "one member runs every task: {tasks:?}");

    // The group is in the log: a new leader knows the member at its epoch with its tasks.
    let leader = cluster.leader()?;
    cluster.kill9(leader)?;
    let steady = call(cluster, &beat("m1", epoch, &tasks)).await?;
    ensure!(steady.error_code == 0, "heartbeat after the leader kill: {steady:?}");
    ensure!(steady.member_epoch == epoch, "epoch {} after the kill, {epoch} before", steady.member_epoch);
    ensure!(steady.active_tasks.is_none(), "no new assignment after the kill: {steady:?}");
    cluster.start_node(leader)?;

    bad_input(cluster, epoch, &tasks).await?;
    tools(cluster, epoch, &tasks).await
}

/// Kafka 4.4's refusals, each leaving the member where it was.
async fn bad_input(cluster: &mut Cluster, epoch: i32, tasks: &[i32]) -> Result<()> {
    let refused = |r: &StreamsGroupHeartbeatResponse| r.error_code;
    ensure!(refused(&call(cluster, &beat("m1", epoch + 5, tasks)).await?) == FENCED_MEMBER_EPOCH);
    ensure!(
        refused(&call(cluster, &beat("m1", epoch, &[PARTITIONS])).await?) == INVALID_REQUEST,
        "task out of range"
    );
    let mut changed = join("m2");
    if let Some(t) = changed.topology.as_mut() {
        t.subtopologies[0].source_topics.push(TopicName(text("other")));
    }
    let answer = call(cluster, &changed).await?;
    let message = answer.error_message.as_deref().map(|m| m.to_string()).unwrap_or_default();
    ensure!(
        answer.error_code == INVALID_REQUEST && message == "Topology updates are not supported yet.",
        "{answer:?}"
    );
    let mut sized = join("m2");
    if let Some(t) = sized.topology.as_mut() {
        t.subtopologies[0].state_changelog_topics[0].partitions = 2;
    }
    ensure!(refused(&call(cluster, &sized).await?) == STREAMS_INVALID_TOPOLOGY, "a sized changelog");
    let still = call(cluster, &beat("m1", epoch, tasks)).await?;
    ensure!(still.error_code == 0 && still.member_epoch == epoch, "the member moved: {still:?}");
    Ok(())
}

/// kafka-streams-groups.sh: list and describe the live group; once its member left, reset
/// its input offsets and delete it.
async fn tools(cluster: &mut Cluster, epoch: i32, tasks: &[i32]) -> Result<()> {
    let bootstrap = cluster.live_bootstrap();
    let listed = streams_tool(&bootstrap, &["--list"])?.stdout;
    ensure!(listed.lines().any(|l| l.trim() == GROUP), "--list: {listed}");
    let described = streams_tool(&bootstrap, &["--describe", "--group", GROUP, "--members"])?.stdout;
    ensure!(described.contains("m1") && described.contains("process-1"), "--describe --members: {described}");
    let state = streams_tool(&bootstrap, &["--describe", "--group", GROUP, "--state"])?.stdout;
    ensure!(state.contains("Stable"), "--describe --state: {state}");

    offset_commits(cluster, epoch).await?;
    let left = call(cluster, &beat("m1", -1, tasks)).await?;
    ensure!(left.error_code == 0 && left.member_epoch == -1, "leave: {left:?} (was at epoch {epoch})");
    let reset = ["--reset-offsets", "--group", GROUP, "--input-topic", INPUT, "--to-earliest", "--execute"];
    let reset = streams_tool(&bootstrap, &reset)?.stdout;
    ensure!(reset.contains(INPUT), "--reset-offsets: {reset}");
    let deleted = streams_tool(&bootstrap, &["--delete", "--group", GROUP])?.stdout;
    ensure!(deleted.contains("success"), "--delete: {deleted}");
    let listed = streams_tool(&bootstrap, &["--list"])?.stdout;
    ensure!(!listed.lines().any(|l| l.trim() == GROUP), "still listed after --delete: {listed}");
    Ok(())
}

/// OffsetCommit v9 from the member: at its epoch stored, at a future one STALE_MEMBER_EPOCH,
/// v8 UNSUPPORTED_VERSION (Kafka 4.4's `StreamsGroup.validateOffsetCommit`).
async fn offset_commits(cluster: &mut Cluster, epoch: i32) -> Result<()> {
    let commit = |member_epoch: i32| {
        let partitions = (0..PARTITIONS)
            .map(|p| OffsetCommitRequestPartition::default().with_partition_index(p).with_committed_offset(3))
            .collect();
        OffsetCommitRequest::default()
            .with_group_id(GroupId(text(GROUP)))
            .with_generation_id_or_member_epoch(member_epoch)
            .with_member_id(text("m1"))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(text(INPUT)))
                .with_partitions(partitions)])
    };
    let leader = cluster.leader()?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    for (version, member_epoch, want) in
        [(9, epoch, 0), (9, epoch + 1, STALE_MEMBER_EPOCH), (8, epoch, UNSUPPORTED_VERSION)]
    {
        let answer = client.request(version, &commit(member_epoch)).await?;
        let codes: Vec<i16> =
            answer.topics.iter().flat_map(|t| &t.partitions).map(|p| p.error_code).collect();
        ensure!(
            codes.iter().all(|c| *c == want),
            "OffsetCommit v{version} at epoch {member_epoch}: {codes:?}"
        );
    }
    Ok(())
}

/// Heartbeats at `epoch` until the member runs tasks (the broker created the changelog);
/// the epoch and active tasks then.
async fn until_running(cluster: &mut Cluster, mut epoch: i32) -> Result<(i32, Vec<i32>)> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let answer = call(cluster, &beat("m1", epoch, &[])).await?;
        ensure!(answer.error_code == 0, "heartbeat refused: {answer:?}");
        epoch = answer.member_epoch;
        let active =
            answer.active_tasks.iter().flatten().flat_map(|t| t.partitions.clone()).collect::<Vec<_>>();
        if !active.is_empty() {
            return Ok((epoch, active));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("the member got no task in 20 s")
}

/// One heartbeat (v1) to the leader, retried while leadership moves.
async fn call(
    cluster: &mut Cluster,
    request: &StreamsGroupHeartbeatRequest,
) -> Result<StreamsGroupHeartbeatResponse> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let leader = cluster.leader()?;
        let addr: SocketAddr = cluster.kafka_addr(leader);
        let answer = match RawClient::connect_negotiated(addr).await {
            Ok(mut client) => client.request(1, request).await.ok(),
            Err(_) => None,
        };
        let moving = |r: &StreamsGroupHeartbeatResponse| {
            [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE].contains(&r.error_code)
        };
        match answer {
            Some(r) if !moving(&r) => return Ok(r),
            _ if Instant::now() > deadline => bail!("no leader answered the heartbeat in 20 s"),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// kafka-streams-groups.sh of Kafka 4.4.0 (4.1's has no --reset-offsets).
fn streams_tool(bootstrap: &str, args: &[&str]) -> Result<java::Output> {
    let mut all = vec!["--bootstrap-server".to_string(), bootstrap.to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    java::Clients::Kafka44.run_text(STREAMS_TOOL, &all)
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A join with a one-subtopology topology: `words` into a counting store with a changelog.
fn join(member: &str) -> StreamsGroupHeartbeatRequest {
    let changelog = TopicInfo::default().with_name(TopicName(text(CHANGELOG))).with_topic_configs(vec![
        kafka_protocol::messages::streams_group_heartbeat_request::KeyValue::default()
            .with_key(text("cleanup.policy"))
            .with_value(text("compact")),
    ]);
    let subtopology = Subtopology::default()
        .with_subtopology_id(text("0"))
        .with_source_topics(vec![TopicName(text(INPUT))])
        .with_state_changelog_topics(vec![changelog]);
    let none = Some(Vec::new());
    beat(member, 0, &[])
        .with_rebalance_timeout_ms(30_000)
        .with_topology(Some(Topology::default().with_epoch(0).with_subtopologies(vec![subtopology])))
        .with_process_id(Some(text("process-1")))
        .with_active_tasks(none.clone())
        .with_standby_tasks(none.clone())
        .with_warmup_tasks(none)
}

/// A heartbeat at `epoch` owning `active` tasks of subtopology 0.
fn beat(member: &str, epoch: i32, active: &[i32]) -> StreamsGroupHeartbeatRequest {
    let owned = if active.is_empty() {
        Vec::new()
    } else {
        vec![TaskIds::default().with_subtopology_id(text("0")).with_partitions(active.to_vec())]
    };
    StreamsGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_member_id(text(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(-1)
        .with_active_tasks(Some(owned))
        .with_standby_tasks(Some(Vec::new()))
        .with_warmup_tasks(Some(Vec::new()))
}

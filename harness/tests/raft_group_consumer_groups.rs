//! Consumer groups in the Raft group their id is placed in (issue 32, a cluster created with
//! `onelog.group.placement` 1), on three nodes running three groups (group g led by node g + 1),
//! with librdkafka:
//!
//! 1. FindCoordinator(GROUP) names, on every node, the leader of each group id's Raft group:
//!    ids named `ruled-…` (rule `group:ruled-=2`) group 2's leader, other ids their hash's;
//! 2. for the classic protocol and KIP-848's: a group placed in group 2 reads a topic of group 2
//!    and one of group 1, every record once, and commits: group 2's log takes the commits and
//!    group 0's does not, group 2's leader answers OffsetFetch with them and lists the group,
//!    and group 0's leader answers NOT_COORDINATOR and lists none of it;
//! 3. a Streams group placed in group 2 joins at group 2's leader (not the controller) with a
//!    topology whose changelog is missing: that leader has group 0's leader create it, and
//!    the member is handed every task;
//! 4. group 2's leader is killed -9: more records are written, the new leader's status page
//!    shows the group that many behind (its offsets read from group 2, the high watermarks
//!    from the topics' groups), and a new member reads exactly the new ones from the group's
//!    commits;
//! 5. a share group placed in group 2 reads group 2's topic, every record delivered and
//!    acknowledged through group 2's log (group 0's untouched); one placed in group 2 reads
//!    group 1's topic, its records acquired and acknowledged in group 1's log, and its
//!    coordinator describes, resets and deletes its offsets there, and deletes the group
//!    (`share`);
//! 6. each group's replicas end with equal digests.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::chaos::group_protocol::GroupProtocol;
use harness::kafka::{client_config, create_topics, produce_numbered};
use harness::raft_groups::{
    digests_agree, group_row, preferred_of_three, settle, three_group_rules, GROUP1_PREFIX, RULED_PREFIX,
};
use harness::raw_ops::topic_name;
use harness::{Cluster, RawClient};
use kafka_compat::error_code::NOT_COORDINATOR;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics};
use kafka_protocol::messages::streams_group_heartbeat_request::{Subtopology, TopicInfo, Topology};
use kafka_protocol::messages::{
    FindCoordinatorRequest, GroupId, ListGroupsRequest, MetadataRequest, OffsetFetchRequest,
    StreamsGroupHeartbeatRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use onelog_state::xgroup::placement::{IdKind, Placement};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::Message;

#[path = "raft_group_consumer_groups/share.rs"]
mod share;

const GROUPS: u64 = 3;
const PARTS: i32 = 3;
/// Records written to each topic before the groups read, and after the kill.
const RECORDS: usize = 300;
const SETTLE_TIMEOUT: Duration = Duration::from_secs(40);
const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// Group 0's applied index may move by this much while a group of group 2 joins, reads and
/// commits: its own duties, never the group's entries.
const GROUP0_ENTRIES_MAX: u64 = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn consumer_groups_live_in_the_raft_group_of_their_id() {
    let mut cluster = harness::raft_groups::start_three_groups().expect("starting 3 nodes with 3 groups");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

fn topics() -> [String; 2] {
    [format!("{RULED_PREFIX}cg-in"), format!("{GROUP1_PREFIX}cg-in")]
}

fn group_id(protocol: GroupProtocol) -> String {
    format!("{RULED_PREFIX}readers-{}", protocol.name())
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    settle(cluster, &[1, 2, 3], GROUPS, SETTLE_TIMEOUT).await?;
    let [in2, in1] = topics();
    create_topics(&cluster.bootstrap(), &[(&in2, PARTS), (&in1, PARTS)]).await?;
    coordinators_are_the_groups_leaders(cluster).await?;
    produce_numbered(&cluster.bootstrap(), &in2, 0..RECORDS).await?;
    produce_numbered(&cluster.bootstrap(), &in1, RECORDS..2 * RECORDS).await?;
    for protocol in [GroupProtocol::Classic, GroupProtocol::Consumer] {
        group_in_group_2(cluster, protocol).await?;
    }
    streams_group_in_group_2(cluster).await?;
    share::share_group_in_group_2(cluster).await?;
    share::share_group_across_groups(cluster).await?;
    resume_after_leader_kill(cluster).await?;
    for g in 0..GROUPS {
        digests_agree(cluster, &[1, 2, 3], g, Duration::from_secs(30)).await?;
    }
    cluster.check_none_exited()
}

/// FindCoordinator v3 (one key) and v4 (a batch) of group ids on every node.
async fn coordinators_are_the_groups_leaders(cluster: &Cluster) -> Result<()> {
    let placement = Placement::new(GROUPS as u32, &three_group_rules(), Default::default())?;
    let ids: Vec<String> =
        (0..12).map(|i| format!("readers-{i}")).chain([group_id(GroupProtocol::Classic)]).collect();
    let expected: Vec<i32> =
        ids.iter().map(|id| preferred_of_three(u64::from(placement.id(IdKind::Group, id))) as i32).collect();
    for g in 0..GROUPS as u32 {
        ensure!(ids.iter().any(|id| placement.id(IdKind::Group, id) == g), "no id of group {g} in {ids:?}");
    }
    for node in 1..=3 {
        let mut client = RawClient::connect_negotiated(cluster.kafka_addr(node)).await?;
        let keys: Vec<StrBytes> = ids.iter().map(|id| StrBytes::from_string(id.clone())).collect();
        let batch = client.request(4, &FindCoordinatorRequest::default().with_coordinator_keys(keys)).await?;
        let found: Vec<i32> = batch.coordinators.iter().map(|c| c.node_id.0).collect();
        ensure!(
            found == expected,
            "node {node}: coordinators {found:?}, the ids' groups' leaders {expected:?}"
        );
        for (id, want) in ids.iter().zip(&expected) {
            let one = FindCoordinatorRequest::default().with_key(StrBytes::from_string(id.clone()));
            let answer = client.request(3, &one).await?;
            ensure!(answer.error_code == 0 && answer.node_id.0 == *want, "node {node}, {id}: {answer:?}");
        }
    }
    println!(
        "FindCoordinator(GROUP) on every node names the leader of each id's Raft group ({} ids)",
        ids.len()
    );
    Ok(())
}

/// A group of group 2 reads both topics and commits there, not in group 0.
async fn group_in_group_2(cluster: &Cluster, protocol: GroupProtocol) -> Result<()> {
    let leader2 = preferred_of_three(2);
    let applied =
        |g| -> Result<u64> { Ok(group_row(cluster, leader2, g)?["last_applied"].as_u64().unwrap_or(0)) };
    let (group0_before, group2_before) = (applied(0)?, applied(2)?);
    let group = group_id(protocol);
    let values = read_and_commit(&cluster.bootstrap(), &group, protocol, 2 * RECORDS).await?;
    let wanted: BTreeSet<usize> = (0..2 * RECORDS).collect();
    ensure!(values == wanted, "{group} read {} distinct values of {}", values.len(), wanted.len());
    let (group0_grew, group2_grew) = (applied(0)? - group0_before, applied(2)? - group2_before);
    ensure!(
        group0_grew <= GROUP0_ENTRIES_MAX && group2_grew >= 2,
        "{group}: group 0 applied {group0_grew} entries, group 2 {group2_grew}"
    );
    let committed = committed_total(cluster, leader2, &group).await?;
    ensure!(committed == 2 * RECORDS as i64, "{group}: the commits at group 2's leader sum to {committed}");
    let elsewhere = offset_fetch_code(cluster, preferred_of_three(0), &group).await?;
    ensure!(elsewhere == NOT_COORDINATOR, "{group} at group 0's leader: error {elsewhere}");
    ensure!(listed(cluster, leader2).await?.contains(&group), "group 2's leader does not list {group}");
    ensure!(
        !listed(cluster, preferred_of_three(0)).await?.contains(&group),
        "group 0's leader lists {group}"
    );
    println!(
        "{} group {group}: read {} records of groups 1 and 2 once, committed in group 2 ({group2_grew} entries; group 0: {group0_grew})",
        protocol.name(),
        values.len()
    );
    Ok(())
}

/// Kill -9 of group 2's leader; more records; a new member reads exactly those.
async fn resume_after_leader_kill(cluster: &mut Cluster) -> Result<()> {
    let leader2 = preferred_of_three(2);
    cluster.kill9(leader2)?;
    let bootstrap = cluster.live_bootstrap();
    let [in2, in1] = topics();
    produce_numbered(&bootstrap, &in2, 2 * RECORDS..3 * RECORDS).await?;
    produce_numbered(&bootstrap, &in1, 3 * RECORDS..4 * RECORDS).await?;
    lag_on_the_status_page(cluster, &group_id(GroupProtocol::Classic), 2 * RECORDS)?;
    let started = Instant::now();
    let values =
        read_and_commit(&bootstrap, &group_id(GroupProtocol::Classic), GroupProtocol::Classic, 2 * RECORDS)
            .await?;
    let wanted: BTreeSet<usize> = (2 * RECORDS..4 * RECORDS).collect();
    ensure!(values == wanted, "after the kill the group read {values:?}");
    println!(
        "after kill -9 of group 2's leader, the group read the {} new records only ({:?})",
        values.len(),
        started.elapsed()
    );
    cluster.start_node(leader2)?;
    settle(cluster, &[1, 2, 3], GROUPS, SETTLE_TIMEOUT).await?;
    Ok(())
}

/// A Streams group of group 2 whose changelog is missing, at group 2's leader (node 3), while
/// group 0 (the controller's) is led by node 1.
async fn streams_group_in_group_2(cluster: &Cluster) -> Result<()> {
    let [in2, _] = topics();
    let (group, changelog) =
        (format!("{RULED_PREFIX}streams"), format!("{RULED_PREFIX}streams-counts-changelog"));
    let text = |s: &str| StrBytes::from_string(s.to_string());
    let subtopology = Subtopology::default()
        .with_subtopology_id(text("0"))
        .with_source_topics(vec![TopicName(text(&in2))])
        .with_state_changelog_topics(vec![TopicInfo::default().with_name(TopicName(text(&changelog)))]);
    let beat = |epoch: i32| {
        StreamsGroupHeartbeatRequest::default()
            .with_group_id(GroupId(text(&group)))
            .with_member_id(text("streams-member"))
            .with_member_epoch(epoch)
            .with_rebalance_timeout_ms(-1)
            .with_active_tasks(Some(Vec::new()))
            .with_standby_tasks(Some(Vec::new()))
            .with_warmup_tasks(Some(Vec::new()))
    };
    let join = beat(0)
        .with_rebalance_timeout_ms(30_000)
        .with_topology(Some(Topology::default().with_epoch(0).with_subtopologies(vec![subtopology])))
        .with_process_id(Some(text("process-1")));
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(preferred_of_three(2))).await?;
    let joined = client.request(1, &join).await?;
    ensure!(joined.error_code == 0, "{group}: join refused: {joined:?}");
    let (mut epoch, deadline) = (joined.member_epoch, Instant::now() + READ_TIMEOUT);
    let tasks = loop {
        let answer = client.request(1, &beat(epoch)).await?;
        ensure!(answer.error_code == 0, "{group}: heartbeat refused: {answer:?}");
        epoch = answer.member_epoch;
        let active: Vec<i32> =
            answer.active_tasks.iter().flatten().flat_map(|t| t.partitions.clone()).collect();
        if !active.is_empty() {
            break active;
        }
        ensure!(Instant::now() < deadline, "{group}: no task in {READ_TIMEOUT:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    ensure!(tasks == (0..PARTS).collect::<Vec<_>>(), "{group}: tasks {tasks:?}");
    ensure!(topic_exists(cluster, &changelog).await?, "{group}: the changelog {changelog} was not created");
    println!("Streams group {group} at group 2's leader: its changelog created through group 0's leader, tasks {tasks:?}");
    Ok(())
}

/// Whether `topic` is in node 1's Metadata.
async fn topic_exists(cluster: &Cluster, topic: &str) -> Result<bool> {
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(1)).await?;
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(topic_name(topic)))]));
    let answer = client.request(9, &request).await?;
    Ok(answer.topics.iter().any(|t| t.error_code == 0))
}

/// The status page of group 2's new leader shows `group` `lag` records behind: its offsets
/// read from group 2, the high watermarks from groups 1 and 2.
fn lag_on_the_status_page(cluster: &Cluster, group: &str, lag: usize) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let leader = group_row(cluster, 1, 2)?["leader"].as_u64().unwrap_or(0);
        let page = match leader {
            0 => String::new(),
            // The killed leader, until node 1 hears of the new one, does not answer.
            id => harness::admin_api::request(cluster.admin_addr(id), "GET", "/")
                .map(|r| r.text())
                .unwrap_or_default(),
        };
        let row = page.split(&format!("<td>{group}</td>")).nth(1).and_then(|rest| rest.split("</tr>").next());
        if row.is_some_and(|r| r.ends_with(&format!("<td class=\"n\">{lag}</td><td class=\"n\">–</td>"))) {
            println!(
                "the status page of group 2's new leader (node {leader}) shows {group} {lag} records behind"
            );
            return Ok(());
        }
        ensure!(Instant::now() < deadline, "no row of {group} {lag} behind at node {leader}: {row:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Reads with a member of `group` until `want` records came, commits, and leaves.
async fn read_and_commit(
    bootstrap: &str,
    group: &str,
    protocol: GroupProtocol,
    want: usize,
) -> Result<BTreeSet<usize>> {
    let (bootstrap, group) = (bootstrap.to_string(), group.to_string());
    tokio::task::spawn_blocking(move || {
        let mut config = client_config(&bootstrap);
        config
            .set("group.id", &group)
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "false");
        protocol.configure(&mut config);
        let consumer: BaseConsumer = config.create()?;
        let topics = topics();
        consumer.subscribe(&[topics[0].as_str(), topics[1].as_str()])?;
        let deadline = Instant::now() + READ_TIMEOUT;
        let (mut values, mut read) = (BTreeSet::new(), 0usize);
        while read < want {
            ensure!(Instant::now() < deadline, "{group}: {read} of {want} records in {READ_TIMEOUT:?}");
            let Some(message) = consumer.poll(Duration::from_millis(200)) else { continue };
            let message = match message {
                Ok(message) => message,
                Err(e) if harness::kafka::is_connection_lost(&e) => continue,
                Err(e) => return Err(e).context("poll"),
            };
            let value = std::str::from_utf8(message.payload().unwrap_or_default())?.parse::<usize>()?;
            ensure!(values.insert(value), "{group} read {value} twice");
            read += 1;
        }
        consumer.commit_consumer_state(CommitMode::Sync).context("commit")?;
        Ok(values)
    })
    .await?
}

/// The sum of the group's committed offsets over both topics, asked of `node` (OffsetFetch v8).
async fn committed_total(cluster: &Cluster, node: u64, group: &str) -> Result<i64> {
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(node)).await?;
    let response = client.request(8, &offset_fetch(group)).await?;
    let answer = response.groups.first().context("one group")?;
    ensure!(answer.error_code == 0, "OffsetFetch of {group} at node {node}: {answer:?}");
    Ok(answer.topics.iter().flat_map(|t| &t.partitions).map(|p| p.committed_offset.max(0)).sum())
}

async fn offset_fetch_code(cluster: &Cluster, node: u64, group: &str) -> Result<i16> {
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(node)).await?;
    let response = client.request(8, &offset_fetch(group)).await?;
    Ok(response.groups.first().context("one group")?.error_code)
}

fn offset_fetch(group: &str) -> OffsetFetchRequest {
    let topics = topics()
        .iter()
        .map(|t| {
            OffsetFetchRequestTopics::default()
                .with_name(topic_name(t))
                .with_partition_indexes((0..PARTS).collect())
        })
        .collect();
    OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_topics(Some(topics))])
}

/// The group ids `node` lists (ListGroups v5).
async fn listed(cluster: &Cluster, node: u64) -> Result<Vec<String>> {
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(node)).await?;
    let response = client.request(5, &ListGroupsRequest::default()).await?;
    ensure!(response.error_code == 0, "ListGroups at node {node}: {response:?}");
    Ok(response.groups.iter().map(|g| g.group_id.0.to_string()).collect())
}

//! A KIP-932 share group wherever a group shows, against one node, as Kafka 4.4 shows it:
//! ListGroups (type and protocol type `share`, its filters case-insensitive), DescribeGroups
//! (Dead, and GROUP_ID_NOT_FOUND from v6), the consumer and Streams describes ("is not a
//! consumer/streams group."); the other types' joins and commits on its id refused with
//! Kafka's codes, empty or not; `/metrics`, the status page and `onelog admin groups list`;
//! and the broker's `group.share.*` configs (heartbeat interval, group size) in its answers.

use std::process::Command;

use anyhow::{ensure, Context, Result};
use harness::kafka::create_topics;
use harness::process::onelog_binary;
use harness::raw_ops::topic_name;
use harness::scrape::Scrape;
use harness::{Cluster, ClusterOptions, RawClient};
use kafka_compat::error_code::{GROUP_ID_NOT_FOUND, GROUP_MAX_SIZE_REACHED, INCONSISTENT_GROUP_PROTOCOL};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, DescribeGroupsRequest, GroupId,
    JoinGroupRequest, ListGroupsRequest, OffsetCommitRequest, ShareGroupHeartbeatRequest,
    StreamsGroupDescribeRequest, StreamsGroupHeartbeatRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const GROUP: &str = "share-surfaces";
const TOPIC: &str = "share-jobs";
const MEMBER: &str = "7cd1e3a4-0000-4000-8000-0000000000aa";
const OTHER_MEMBER: &str = "7cd1e3a4-0000-4000-8000-0000000000bb";
/// The broker's `group.share.heartbeat.interval.ms`, not Kafka's default 5000.
const HEARTBEAT_MS: i32 = 7_000;

#[tokio::test(flavor = "multi_thread")]
async fn a_share_group_shows_wherever_a_group_shows_and_keeps_its_id() {
    let options = ClusterOptions::new(1)
        .config("group.share.heartbeat.interval.ms", HEARTBEAT_MS)
        .config("group.share.max.size", 1)
        .config("group.share.max.share.sessions", 1);
    let cluster = Cluster::start_with(options).expect("starting onelog");
    let result = scenario(&cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &Cluster) -> Result<()> {
    create_topics(&cluster.bootstrap(), &[(TOPIC, 1)]).await?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(1)).await?;
    ensure!(share_heartbeat(&mut client, 0).await? == 0, "share join refused");
    brokers_settings(&mut client).await?;
    listed(&mut client, "Stable").await?;
    described(&mut client).await?;
    refused(&mut client).await?;
    shown(cluster, 1)?;
    // Empty, the group still holds its id: Kafka converts only an empty classic group.
    ensure!(share_heartbeat(&mut client, -1).await? == 0, "share leave refused");
    listed(&mut client, "Empty").await?;
    refused(&mut client).await?;
    shown(cluster, 0)
}

/// ListGroups v5 lists it with type and protocol type `share`; filters match in any case.
async fn listed(client: &mut RawClient, state: &str) -> Result<()> {
    let all = client.request(5, &ListGroupsRequest::default()).await?;
    let group = all.groups.iter().find(|g| g.group_id.0.as_str() == GROUP).context("not listed")?;
    ensure!(
        (group.group_type.as_str(), group.protocol_type.as_str(), group.group_state.as_str())
            == ("share", "share", state),
        "{group:?}"
    );
    let filters = |types: &[&str], states: &[&str]| {
        ListGroupsRequest::default()
            .with_types_filter(types.iter().map(|t| text(t)).collect())
            .with_states_filter(states.iter().map(|s| text(s)).collect())
    };
    let upper = state.to_uppercase();
    let matched = client.request(5, &filters(&["SHARE"], &[&upper])).await?;
    ensure!(matched.groups.iter().any(|g| g.group_id.0.as_str() == GROUP), "filters: {matched:?}");
    let consumer = client.request(5, &filters(&["consumer", "classic", "streams"], &[])).await?;
    ensure!(consumer.groups.iter().all(|g| g.group_id.0.as_str() != GROUP), "other types: {consumer:?}");
    Ok(())
}

/// DescribeGroups: Dead up to v5, GROUP_ID_NOT_FOUND from v6; the consumer and Streams
/// describes name the type it is not.
async fn described(client: &mut RawClient) -> Result<()> {
    let request = DescribeGroupsRequest::default().with_groups(vec![gid()]);
    let v5 = client.request(5, &request).await?;
    ensure!(v5.groups[0].group_state.as_str() == "Dead" && v5.groups[0].error_code == 0, "{v5:?}");
    let v6 = client.request(6, &request).await?;
    let message = format!("Group {GROUP} is not a classic group.");
    ensure!(v6.groups[0].error_code == GROUP_ID_NOT_FOUND, "{v6:?}");
    ensure!(v6.groups[0].error_message.as_deref() == Some(message.as_str()), "{v6:?}");
    let consumer = ConsumerGroupDescribeRequest::default().with_group_ids(vec![gid()]);
    let consumer = client.request(0, &consumer).await?;
    let message = format!("Group {GROUP} is not a consumer group.");
    ensure!(consumer.groups[0].error_code == GROUP_ID_NOT_FOUND, "{consumer:?}");
    ensure!(consumer.groups[0].error_message.as_deref() == Some(message.as_str()), "{consumer:?}");
    let streams = StreamsGroupDescribeRequest::default().with_group_ids(vec![gid()]);
    let streams = client.request(0, &streams).await?;
    let message = format!("Group {GROUP} is not a streams group.");
    ensure!(streams.groups[0].error_code == GROUP_ID_NOT_FOUND, "{streams:?}");
    ensure!(streams.groups[0].error_message.as_deref() == Some(message.as_str()), "{streams:?}");
    Ok(())
}

/// A consumer or Streams heartbeat, a classic JoinGroup and an OffsetCommit on its id.
async fn refused(client: &mut RawClient) -> Result<()> {
    let consumer = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(gid())
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(text(TOPIC))]))
        .with_topic_partitions(Some(Vec::new()));
    let consumer = client.request(0, &consumer).await?;
    let message = format!("Group {GROUP} is not a consumer group.");
    ensure!(consumer.error_code == GROUP_ID_NOT_FOUND, "{consumer:?}");
    ensure!(consumer.error_message.as_deref() == Some(message.as_str()), "{consumer:?}");
    let streams = StreamsGroupHeartbeatRequest::default()
        .with_group_id(gid())
        .with_member_id(text("streams-member"))
        .with_rebalance_timeout_ms(30_000)
        .with_topology(Some(Default::default()))
        .with_active_tasks(Some(Vec::new()))
        .with_standby_tasks(Some(Vec::new()))
        .with_warmup_tasks(Some(Vec::new()));
    let streams = client.request(0, &streams).await?;
    let message = format!("Group {GROUP} is not a streams group.");
    ensure!(streams.error_code == GROUP_ID_NOT_FOUND, "{streams:?}");
    ensure!(streams.error_message.as_deref() == Some(message.as_str()), "{streams:?}");
    let join = JoinGroupRequest::default()
        .with_group_id(gid())
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default().with_name(text("range"))]);
    let joined = client.request(9, &join).await?;
    ensure!(joined.error_code == INCONSISTENT_GROUP_PROTOCOL && joined.member_id.is_empty(), "{joined:?}");
    let commit = OffsetCommitRequest::default()
        .with_group_id(gid())
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name(TOPIC))
            .with_partitions(vec![OffsetCommitRequestPartition::default().with_committed_offset(0)])]);
    let committed = client.request(8, &commit).await?;
    let codes: Vec<i16> = committed.topics.iter().flat_map(|t| &t.partitions).map(|p| p.error_code).collect();
    ensure!(codes == vec![GROUP_ID_NOT_FOUND], "OffsetCommit: {committed:?}");
    Ok(())
}

/// `/metrics`, the status page and `onelog admin groups list` show it with `members`.
fn shown(cluster: &Cluster, members: usize) -> Result<()> {
    let admin = cluster.admin_addr(1);
    let scrape = Scrape::of(admin)?;
    let state = if members == 0 { "Empty" } else { "Stable" };
    ensure!(scrape.value("onelog_share_groups", &[("state", state)])? == 1.0, "share_groups{{{state}}}");
    let counted = scrape.value("onelog_share_group_members", &[("group", GROUP)])?;
    ensure!(counted == members as f64, "share_group_members: {counted}");
    ensure!(scrape.value("onelog_share_group_lag_records", &[("group", GROUP)])? == 0.0, "lag");
    let page = harness::admin_api::request(admin, "GET", "/")?.text();
    let row = format!("<td>{GROUP}</td><td>share</td><td>{state}</td><td class=\"n\">{members}</td>");
    ensure!(page.contains(&row), "the status page has no row {row}:\n{page}");
    let output = Command::new(onelog_binary("debug")?)
        .args(["admin", "--admin", &admin.to_string(), "--bootstrap", &cluster.bootstrap()])
        .args(["groups", "list"])
        .output()
        .context("running onelog admin groups list")?;
    let listed = String::from_utf8(output.stdout)?;
    let line = listed.lines().find(|l| l.starts_with(GROUP)).context("not in groups list")?;
    let words: Vec<&str> = line.split_whitespace().collect();
    ensure!(words == [GROUP, "share", state, "share"], "groups list: {listed}");
    Ok(())
}

/// The broker's `group.share.*` configs apply: the member's heartbeat interval is the
/// broker's, and a second member finds the group full (`group.share.max.size=1`).
async fn brokers_settings(client: &mut RawClient) -> Result<()> {
    let join = |member: &str| {
        ShareGroupHeartbeatRequest::default()
            .with_group_id(gid())
            .with_member_id(text(member))
            .with_member_epoch(0)
            .with_subscribed_topic_names(Some(vec![TopicName(text(TOPIC))]))
    };
    let first = client.request(1, &join(MEMBER)).await?;
    ensure!(
        first.heartbeat_interval_ms == HEARTBEAT_MS,
        "heartbeat interval {}",
        first.heartbeat_interval_ms
    );
    let second = client.request(1, &join(OTHER_MEMBER)).await?;
    ensure!(second.error_code == GROUP_MAX_SIZE_REACHED, "a second member of a full group: {second:?}");
    Ok(())
}

/// A ShareGroupHeartbeat v1 of the one member at `epoch` (0 joins, -1 leaves); its code.
async fn share_heartbeat(client: &mut RawClient, epoch: i32) -> Result<i16> {
    let request = ShareGroupHeartbeatRequest::default()
        .with_group_id(gid())
        .with_member_id(text(MEMBER))
        .with_member_epoch(epoch)
        .with_subscribed_topic_names((epoch == 0).then(|| vec![TopicName(text(TOPIC))]));
    Ok(client.request(1, &request).await?.error_code)
}

fn gid() -> GroupId {
    GroupId(text(GROUP))
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

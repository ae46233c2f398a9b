//! Group administration and bad group input, on the wire: DeleteGroups (every version, and
//! librdkafka's AdminClient), OffsetDelete (KIP-496) with Kafka's per-partition codes, and the codes for
//! unknown groups, wrong generations, over-long group ids and member metadata that is not a
//! consumer subscription. A member that never completes its rebalance blocks no other group.

use anyhow::{ensure, Result};
use bytes::Bytes;
use harness::kafka::{client_config, create_topics};
use harness::raw_ops::topic_name;
use harness::{Broker, BrokerOptions, RawClient};
use kafka_compat::error_code::{
    GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC, ILLEGAL_GENERATION, INVALID_GROUP_ID, MEMBER_ID_REQUIRED,
    NON_EMPTY_GROUP, UNKNOWN_MEMBER_ID, UNKNOWN_TOPIC_OR_PARTITION,
};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, GroupId, HeartbeatRequest, JoinGroupRequest,
    JoinGroupResponse, LeaveGroupRequest, ListGroupsRequest, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetDeleteResponse, OffsetFetchRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;

fn gid(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_string()))
}

fn too_long() -> String {
    "g".repeat(256)
}

/// `ConsumerProtocolSubscription` v0 bytes, as a consumer subscribing to `topics` sends them.
fn subscription(topics: &[&str]) -> Bytes {
    let mut out = vec![0, 0];
    out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        out.extend_from_slice(&(t.len() as i16).to_be_bytes());
        out.extend_from_slice(t.as_bytes());
    }
    out.extend_from_slice(&(-1i32).to_be_bytes());
    Bytes::from(out)
}

/// A JoinGroup of the "consumer" protocol type with one protocol, "range", and `metadata`.
fn join_request(group: &str, metadata: Bytes) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(gid(group))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(metadata)])
}

/// JoinGroup v9 with `metadata`, learning the member id first (KIP-394).
async fn join(client: &mut RawClient, group: &str, metadata: Bytes) -> Result<JoinGroupResponse> {
    let join = join_request(group, metadata);
    let first = client.request(9, &join).await?;
    ensure!(first.error_code == MEMBER_ID_REQUIRED, "first join of {group}: {first:?}");
    client.request(9, &join.with_member_id(first.member_id)).await
}

/// One member joins `group` alone and completes its generation; returns (member id, generation).
async fn lone_member(client: &mut RawClient, group: &str, metadata: Bytes) -> Result<(StrBytes, i32)> {
    let joined = join(client, group, metadata).await?;
    ensure!(joined.error_code == 0, "join {group}: {joined:?}");
    let sync = SyncGroupRequest::default()
        .with_group_id(gid(group))
        .with_generation_id(joined.generation_id)
        .with_member_id(joined.member_id.clone())
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(joined.member_id.clone())
            .with_assignment(Bytes::from_static(b"\x00\x01opaque"))]);
    let synced = client.request(5, &sync).await?;
    ensure!(
        synced.error_code == 0 && &synced.assignment[..] == b"\x00\x01opaque",
        "sync {group}: {synced:?}"
    );
    Ok((joined.member_id, joined.generation_id))
}

/// OffsetCommit v8 of (topic, partition, offset) for `group`; returns the codes.
async fn commit(
    client: &mut RawClient,
    group: &str,
    member: (&StrBytes, i32),
    offsets: &[(&str, i32, i64)],
) -> Result<Vec<i16>> {
    let topics = offsets
        .iter()
        .map(|(t, p, o)| {
            OffsetCommitRequestTopic::default().with_name(topic_name(t)).with_partitions(vec![
                OffsetCommitRequestPartition::default().with_partition_index(*p).with_committed_offset(*o),
            ])
        })
        .collect();
    let request = OffsetCommitRequest::default()
        .with_group_id(gid(group))
        .with_generation_id_or_member_epoch(member.1)
        .with_member_id(member.0.clone())
        .with_topics(topics);
    let response = client.request(8, &request).await?;
    Ok(response.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect())
}

/// A simple consumer's commit (generation -1), which must succeed.
async fn commit_simple(client: &mut RawClient, group: &str, offsets: &[(&str, i32, i64)]) -> Result<()> {
    let codes = commit(client, group, (&StrBytes::default(), -1), offsets).await?;
    ensure!(codes.iter().all(|c| *c == 0), "commit to {group}: {codes:?}");
    Ok(())
}

/// The committed offset of one partition (-1: none).
async fn committed(client: &mut RawClient, group: &str, topic: &str, partition: i32) -> Result<i64> {
    let request = OffsetFetchRequest::default().with_group_id(gid(group)).with_topics(Some(vec![
        OffsetFetchRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partition_indexes(vec![partition]),
    ]));
    let response = client.request(6, &request).await?;
    Ok(response.topics[0].partitions[0].committed_offset)
}

async fn offset_delete(
    client: &mut RawClient,
    group: &str,
    partitions: &[(&str, i32)],
) -> Result<OffsetDeleteResponse> {
    let topics = partitions
        .iter()
        .map(|(t, p)| {
            OffsetDeleteRequestTopic::default()
                .with_name(topic_name(t))
                .with_partitions(vec![OffsetDeleteRequestPartition::default().with_partition_index(*p)])
        })
        .collect();
    client.request(0, &OffsetDeleteRequest::default().with_group_id(gid(group)).with_topics(topics)).await
}

/// Per-partition codes of an OffsetDelete answer without a group error.
fn partition_codes(response: &OffsetDeleteResponse) -> Result<Vec<i16>> {
    ensure!(response.error_code == 0, "group error in {response:?}");
    Ok(response.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect())
}

async fn delete_groups(client: &mut RawClient, version: i16, groups: &[&str]) -> Result<Vec<i16>> {
    let request = DeleteGroupsRequest::default().with_groups_names(groups.iter().map(|g| gid(g)).collect());
    let response = client.request(version, &request).await?;
    ensure!(response.results.len() == groups.len(), "{response:?}");
    Ok(response.results.iter().map(|r| r.error_code).collect())
}

#[tokio::test(flavor = "multi_thread")]
async fn offset_delete_and_delete_groups_answer_as_kafka_does() {
    let broker = Broker::start(BrokerOptions::default().config("group.initial.rebalance.delay.ms", 0))
        .expect("starting onelog");
    let result = admin_scenario(&broker).await;
    broker.unwrap_or_dump(result);
}

async fn admin_scenario(broker: &Broker) -> Result<()> {
    create_topics(&broker.bootstrap(), &[("orders", 2), ("audit", 1)]).await?;
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;

    // OffsetDelete of a group without members: offsets go, unknown partitions are named.
    commit_simple(&mut client, "simple", &[("orders", 0, 10), ("orders", 1, 11), ("audit", 0, 12)]).await?;
    let deleted =
        offset_delete(&mut client, "simple", &[("orders", 0), ("nosuch", 0), ("orders", 7)]).await?;
    ensure!(
        partition_codes(&deleted)? == [0, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION],
        "{deleted:?}"
    );
    ensure!(committed(&mut client, "simple", "orders", 0).await? == -1, "orders-0 still committed");
    ensure!(committed(&mut client, "simple", "orders", 1).await? == 11, "orders-1 lost");
    for (group, code) in
        [("never", GROUP_ID_NOT_FOUND), ("", INVALID_GROUP_ID), (&too_long(), INVALID_GROUP_ID)]
    {
        let answer = offset_delete(&mut client, group, &[("orders", 1)]).await?;
        ensure!(answer.error_code == code && answer.topics.is_empty(), "OffsetDelete {group:?}: {answer:?}");
    }

    // A live member subscribed to "orders": its offsets stay, other topics' go.
    let active = lone_member(&mut client, "active", subscription(&["orders"])).await?;
    let codes =
        commit(&mut client, "active", (&active.0, active.1), &[("orders", 0, 5), ("audit", 0, 6)]).await?;
    ensure!(codes == [0, 0], "member commit: {codes:?}");
    let answer = offset_delete(&mut client, "active", &[("orders", 0), ("audit", 0)]).await?;
    ensure!(partition_codes(&answer)? == [GROUP_SUBSCRIBED_TO_TOPIC, 0], "{answer:?}");
    ensure!(committed(&mut client, "active", "orders", 0).await? == 5, "a subscribed offset was deleted");
    ensure!(committed(&mut client, "active", "audit", 0).await? == -1, "audit-0 still committed");

    // Metadata that is not a subscription is carried untouched and counts as subscribing to
    // every topic.
    let junk = Bytes::from_static(b"\xff\xfe not a subscription");
    let odd = lone_member(&mut client, "odd", junk.clone()).await?;
    commit(&mut client, "odd", (&odd.0, odd.1), &[("audit", 0, 1)]).await?;
    let described =
        client.request(5, &DescribeGroupsRequest::default().with_groups(vec![gid("odd")])).await?;
    ensure!(described.groups[0].members[0].member_metadata == junk, "{described:?}");
    let answer = offset_delete(&mut client, "odd", &[("audit", 0)]).await?;
    ensure!(partition_codes(&answer)? == [GROUP_SUBSCRIBED_TO_TOPIC], "{answer:?}");

    // DeleteGroups, every version: one code per group.
    let long = too_long();
    let codes = delete_groups(&mut client, 0, &["simple", "active", "never", "", &long, "odd"]).await?;
    let expected =
        [0, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, INVALID_GROUP_ID, INVALID_GROUP_ID, NON_EMPTY_GROUP];
    ensure!(codes == expected, "DeleteGroups v0: {codes:?}");
    ensure!(committed(&mut client, "simple", "orders", 1).await? == -1, "deleted group's offsets remain");
    let leave = LeaveGroupRequest::default()
        .with_group_id(gid("active"))
        .with_members(vec![MemberIdentity::default().with_member_id(active.0.clone())]);
    ensure!(client.request(5, &leave).await?.error_code == 0, "LeaveGroup");
    ensure!(delete_groups(&mut client, 1, &["active", "simple"]).await? == [0, GROUP_ID_NOT_FOUND], "v1");
    ensure!(committed(&mut client, "active", "orders", 0).await? == -1, "deleted group's offsets remain");
    let described =
        client.request(5, &DescribeGroupsRequest::default().with_groups(vec![gid("active")])).await?;
    ensure!(described.groups[0].group_state.as_str() == "Dead", "{described:?}");
    let listed = client.request(4, &ListGroupsRequest::default()).await?;
    let names: Vec<&str> = listed.groups.iter().map(|g| g.group_id.0.as_str()).collect();
    ensure!(names == ["odd"], "listed after deletion: {names:?}");
    // A deleted group's name starts a new group from generation 1.
    let again = lone_member(&mut client, "active", subscription(&["orders"])).await?;
    ensure!(again.1 == 1, "generation after deletion: {}", again.1);
    ensure!(delete_groups(&mut client, 2, &["never-again"]).await? == [GROUP_ID_NOT_FOUND], "v2");

    // librdkafka's AdminClient (FindCoordinator, then DeleteGroups v1).
    commit_simple(&mut client, "by-admin-client", &[("orders", 0, 3)]).await?;
    let admin: AdminClient<DefaultClientContext> = client_config(&broker.bootstrap()).create()?;
    let results = admin.delete_groups(&["by-admin-client", "no-such-group"], &AdminOptions::new()).await?;
    println!("AdminClient delete_groups: {results:?}");
    ensure!(results[0] == Ok("by-admin-client".to_string()), "{results:?}");
    ensure!(
        results[1] == Err(("no-such-group".to_string(), RDKafkaErrorCode::GroupIdNotFound)),
        "{results:?}"
    );
    ensure!(committed(&mut client, "by-admin-client", "orders", 0).await? == -1, "offsets remain");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_group_input_gets_kafka_codes_and_a_stuck_group_blocks_no_one() {
    let broker = Broker::start(BrokerOptions::default().config("group.initial.rebalance.delay.ms", 0))
        .expect("starting onelog");
    let result = bad_input_scenario(&broker).await;
    broker.unwrap_or_dump(result);
}

async fn bad_input_scenario(broker: &Broker) -> Result<()> {
    create_topics(&broker.bootstrap(), &[("orders", 1)]).await?;
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    let long = too_long();
    let nobody = StrBytes::from_static_str("nobody");

    // Over-long (and empty) group ids: INVALID_GROUP_ID wherever a group is named.
    let heartbeat = |group: &str, generation: i32, member: &StrBytes| {
        HeartbeatRequest::default()
            .with_group_id(gid(group))
            .with_generation_id(generation)
            .with_member_id(member.clone())
    };
    let sync = |group: &str, generation: i32, member: &StrBytes| {
        SyncGroupRequest::default()
            .with_group_id(gid(group))
            .with_generation_id(generation)
            .with_member_id(member.clone())
    };
    for group in [long.as_str(), ""] {
        ensure!(
            client.request(4, &heartbeat(group, 1, &nobody)).await?.error_code == INVALID_GROUP_ID,
            "Heartbeat"
        );
        ensure!(
            client.request(5, &sync(group, 1, &nobody)).await?.error_code == INVALID_GROUP_ID,
            "SyncGroup"
        );
        let leave = LeaveGroupRequest::default().with_group_id(gid(group)).with_member_id(nobody.clone());
        ensure!(client.request(2, &leave).await?.error_code == INVALID_GROUP_ID, "LeaveGroup");
        let described =
            client.request(5, &DescribeGroupsRequest::default().with_groups(vec![gid(group)])).await?;
        ensure!(described.groups[0].error_code == INVALID_GROUP_ID, "DescribeGroups");
        let joined = client.request(5, &JoinGroupRequest::default().with_group_id(gid(group))).await?;
        ensure!(joined.error_code == INVALID_GROUP_ID, "JoinGroup: {joined:?}");
    }
    let codes = commit(&mut client, &long, (&nobody, -1), &[("orders", 0, 1)]).await?;
    ensure!(codes == [INVALID_GROUP_ID], "OffsetCommit: {codes:?}");

    // Unknown groups.
    ensure!(
        client.request(4, &heartbeat("unknown", 1, &nobody)).await?.error_code == UNKNOWN_MEMBER_ID,
        "hb"
    );
    ensure!(client.request(5, &sync("unknown", 1, &nobody)).await?.error_code == UNKNOWN_MEMBER_ID, "sync");
    let codes = commit(&mut client, "unknown", (&nobody, 1), &[("orders", 0, 1)]).await?;
    ensure!(codes == [ILLEGAL_GENERATION], "commit to an unknown group: {codes:?}");

    // Wrong generations of a real member.
    let (member, generation) = lone_member(&mut client, "real", subscription(&["orders"])).await?;
    let wrong = generation + 6;
    ensure!(
        client.request(4, &heartbeat("real", wrong, &member)).await?.error_code == ILLEGAL_GENERATION,
        "hb"
    );
    ensure!(client.request(5, &sync("real", wrong, &member)).await?.error_code == ILLEGAL_GENERATION, "sync");
    let codes = commit(&mut client, "real", (&member, wrong), &[("orders", 0, 1)]).await?;
    ensure!(codes == [ILLEGAL_GENERATION], "commit with a wrong generation: {codes:?}");
    let codes = commit(&mut client, "real", (&nobody, generation), &[("orders", 0, 1)]).await?;
    ensure!(codes == [UNKNOWN_MEMBER_ID], "commit by a stranger: {codes:?}");

    // A group whose leader member never sends SyncGroup: its follower waits, and every other
    // group is served meanwhile.
    let mut leader_conn = RawClient::connect(broker.addr()).await?;
    let mut follower_conn = RawClient::connect(broker.addr()).await?;
    let stuck_leader = join(&mut leader_conn, "stuck", subscription(&["orders"])).await?;
    ensure!(stuck_leader.error_code == 0, "{stuck_leader:?}");
    // A follower joins (parked until the leader rejoins), then the leader rejoins.
    let mut follower = join_request("stuck", subscription(&["orders"]));
    let first = follower_conn.request(9, &follower).await?;
    follower = follower.with_member_id(first.member_id);
    let follower_corr = follower_conn.send_request(9, &follower).await?;
    wait_for_state(&mut client, "stuck", "PreparingRebalance").await?;
    let rejoin = follower.clone().with_member_id(stuck_leader.member_id.clone());
    let leader_rejoin = leader_conn.request(9, &rejoin).await?;
    let follower_join = follower_conn.receive_response::<JoinGroupRequest>(follower_corr, 9).await?;
    ensure!(follower_join.error_code == 0 && leader_rejoin.error_code == 0, "{follower_join:?}");
    ensure!(leader_rejoin.leader == stuck_leader.member_id, "{leader_rejoin:?}");
    let parked_sync = follower_conn
        .send_request(5, &sync("stuck", follower_join.generation_id, &follower_join.member_id))
        .await?;
    let other = lone_member(&mut client, "unaffected", subscription(&["orders"])).await?;
    let codes = commit(&mut client, "unaffected", (&other.0, other.1), &[("orders", 0, 7)]).await?;
    ensure!(codes == [0], "commit beside a stuck group: {codes:?}");
    let described =
        client.request(5, &DescribeGroupsRequest::default().with_groups(vec![gid("stuck")])).await?;
    ensure!(described.groups[0].group_state.as_str() == "CompletingRebalance", "{described:?}");
    println!("group 'stuck' waits in CompletingRebalance (sync {parked_sync} parked); 'unaffected' committed meanwhile");
    Ok(())
}

async fn wait_for_state(client: &mut RawClient, group: &str, state: &str) -> Result<()> {
    let describe = DescribeGroupsRequest::default().with_groups(vec![gid(group)]);
    for _ in 0..200 {
        if client.request(5, &describe).await?.groups[0].group_state.as_str() == state {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    anyhow::bail!("group {group} never reached {state}")
}

//! KIP-848's consumer group protocol on the wire (issue 28), against one node: two members of
//! one group walk through a join, the revocation that must come before the second member gets
//! anything, and a leave; ConsumerGroupDescribe shows the group; OffsetCommit v9 is fenced by
//! the member epoch; each bad input gets Kafka's code with the group unchanged; and the classic
//! admin APIs (ListGroups, DescribeGroups, OffsetDelete, JoinGroup, DeleteGroups) treat the
//! group as Kafka 4.x treats a consumer group.
//! (The Java client with `group.protocol=consumer` is in java_consumer_group.rs.)

use std::collections::BTreeSet;

use anyhow::{ensure, Context, Result};
use harness::kafka::create_topics;
use harness::process::log_lines_with;
use harness::raw_ops::topic_name;
use harness::{Broker, BrokerOptions, RawClient};
use kafka_compat::error_code::{
    FENCED_MEMBER_EPOCH, GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC, INCONSISTENT_GROUP_PROTOCOL,
    INVALID_REGULAR_EXPRESSION, INVALID_REQUEST, MEMBER_ID_REQUIRED, NON_EMPTY_GROUP, STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID, UNSUPPORTED_ASSIGNOR, UNSUPPORTED_VERSION,
};
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    DeleteGroupsRequest, DescribeGroupsRequest, GroupId, JoinGroupRequest, ListGroupsRequest,
    OffsetCommitRequest, OffsetDeleteRequest,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

const GROUP: &str = "kip-848";
const TOPIC: &str = "orders";
const PARTITIONS: usize = 6;
const API_KEY_CONSUMER_GROUP_HEARTBEAT: i16 = 68;

#[tokio::test(flavor = "multi_thread")]
async fn two_members_join_revoke_before_assign_and_leave() {
    // Every heartbeat that owes a target computes it (Kafka 4.3+ waits up to a second between
    // two by default, which would make each step below depend on timing).
    let options = BrokerOptions::default().config("group.consumer.assignment.interval.ms", 0);
    let broker = Broker::start(options).expect("starting onelog");
    let result = scenario(&broker).await;
    broker.unwrap_or_dump(result);
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn join(member: &str) -> ConsumerGroupHeartbeatRequest {
    harness::raw_ops::consumer_join(GROUP, member, TOPIC)
}

fn beat(member: &str, epoch: i32, owned: &[(Uuid, Vec<i32>)]) -> ConsumerGroupHeartbeatRequest {
    let owned = owned
        .iter()
        .map(|(id, partitions)| {
            TopicPartitions::default().with_topic_id(*id).with_partitions(partitions.clone())
        })
        .collect();
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_member_id(text(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(-1)
        .with_topic_partitions(Some(owned))
}

/// The assignment in a response: (topic id, partitions), or None for "keep what you have".
fn assigned(r: &ConsumerGroupHeartbeatResponse) -> Option<Vec<(Uuid, Vec<i32>)>> {
    let a = r.assignment.as_ref()?;
    Some(a.topic_partitions.iter().map(|tp| (tp.topic_id, tp.partitions.clone())).collect())
}

fn partitions(owned: &[(Uuid, Vec<i32>)]) -> BTreeSet<i32> {
    owned.iter().flat_map(|(_, p)| p.iter().copied()).collect()
}

async fn scenario(broker: &Broker) -> Result<()> {
    create_topics(&broker.bootstrap(), &[(TOPIC, PARTITIONS as i32)]).await?;
    let mut c = RawClient::connect_negotiated(broker.addr()).await?;
    let versions = c.api_versions().await?;
    let advertised = versions.api_keys.iter().find(|k| k.api_key == API_KEY_CONSUMER_GROUP_HEARTBEAT);
    ensure!(advertised.is_some_and(|k| k.max_version == 1), "ConsumerGroupHeartbeat v1 not advertised");
    let group_version = versions.finalized_features.iter().find(|f| f.name.as_str() == "group.version");
    ensure!(group_version.is_some_and(|f| f.max_version_level == 1), "group.version not finalized at 1");

    // A alone: every partition at once, at the group's first assigned epoch (2, as Kafka 4.3+).
    let a = c.request(1, &join("A")).await?;
    ensure!(a.error_code == 0, "A's join: {a:?}");
    let a_owned = assigned(&a).context("a join carries the assignment")?;
    ensure!(partitions(&a_owned).len() == PARTITIONS && a.member_epoch == 2, "A: {a:?}");
    let a_epoch = a.member_epoch;

    // B joins: nothing yet, A still owns everything.
    let b = c.request(1, &join("B")).await?;
    ensure!(b.error_code == 0, "B's join: {b:?}");
    let b_epoch = b.member_epoch;
    ensure!(b_epoch > a_epoch && assigned(&b).is_some_and(|o| partitions(&o).is_empty()), "B: {b:?}");

    // A's heartbeat at its epoch: told to keep half; its epoch waits for the revocation.
    let a = c.request(1, &beat("A", a_epoch, &a_owned)).await?;
    let kept = assigned(&a).context("A is told what it keeps")?;
    ensure!(
        a.error_code == 0 && a.member_epoch == a_epoch && partitions(&kept).len() == 3,
        "A revokes: {a:?}"
    );
    // B is still given none of A's partitions.
    let b = c.request(1, &beat("B", b_epoch, &[])).await?;
    ensure!(
        !assigned(&b).is_some_and(|o| !partitions(&o).is_empty()),
        "B got partitions A still owns: {b:?}"
    );
    // A reports the revocation done and moves to the new epoch; then B gets the released half.
    let a = c.request(1, &beat("A", a_epoch, &kept)).await?;
    ensure!(a.error_code == 0 && a.member_epoch == b_epoch, "A after revoking: {a:?}");
    let b = c.request(1, &beat("B", b_epoch, &[])).await?;
    let b_owned = assigned(&b).context("B is given the released partitions")?;
    ensure!(
        partitions(&b_owned).len() == 3 && partitions(&b_owned).is_disjoint(&partitions(&kept)),
        "B: {b:?}"
    );
    println!("A kept {:?}, B got {:?} at epoch {b_epoch}", partitions(&kept), partitions(&b_owned));

    bad_input(&mut c, b_epoch).await?;
    refusals_logged_once(broker).await?;
    offset_commits(&mut c, b_epoch).await?;
    describe(&mut c, 2, "Stable").await?;

    // A leaves: the answer echoes -1, and B is alone.
    let left = c.request(1, &beat("A", -1, &kept)).await?;
    ensure!(left.error_code == 0 && left.member_epoch == -1, "A's leave: {left:?}");
    describe(&mut c, 1, "").await?;
    admin_apis(&mut c).await
}

/// The classic admin APIs see the consumer group as Kafka 4.x shows one: listed with type
/// `consumer`, not described by DescribeGroups (Dead up to v5, GROUP_ID_NOT_FOUND from v6),
/// its subscribed topics' offsets kept, a classic JoinGroup refused, and deleted only once
/// empty, with its committed offsets.
async fn admin_apis(c: &mut RawClient) -> Result<()> {
    let listed = |types: &[&str], states: &[&str]| {
        ListGroupsRequest::default()
            .with_types_filter(types.iter().map(|t| text(t)).collect())
            .with_states_filter(states.iter().map(|s| text(s)).collect())
    };
    let all = c.request(5, &listed(&[], &[])).await?;
    let row = all.groups.iter().find(|g| g.group_id.as_str() == GROUP).context("the group is listed")?;
    ensure!(row.group_type.as_str() == "consumer" && row.protocol_type.as_str() == "consumer", "{row:?}");
    println!("listed: {row:?}");
    let state = row.group_state.to_string();
    for (types, states, want) in [
        (vec!["classic"], vec![], false),
        (vec!["Consumer"], vec![], true),
        (vec![], vec![state.to_lowercase().as_str()], true),
        (vec![], vec!["PreparingRebalance"], false),
    ] {
        let answer = c.request(5, &listed(&types, &states)).await?;
        let found = answer.groups.iter().any(|g| g.group_id.as_str() == GROUP);
        ensure!(found == want, "ListGroups types {types:?} states {states:?}: {answer:?}");
    }

    let described = DescribeGroupsRequest::default().with_groups(vec![GroupId(text(GROUP))]);
    let v5 = c.request(5, &described).await?;
    ensure!(v5.groups[0].error_code == 0 && v5.groups[0].group_state.as_str() == "Dead", "v5: {v5:?}");
    let v6 = c.request(6, &described).await?;
    let message = v6.groups[0].error_message.as_ref().map(|m| m.to_string());
    ensure!(
        v6.groups[0].error_code == GROUP_ID_NOT_FOUND
            && message.as_deref() == Some("Group kip-848 is not a classic group."),
        "v6: {v6:?}"
    );

    let topic = OffsetDeleteRequestTopic::default()
        .with_name(topic_name(TOPIC))
        .with_partitions(vec![OffsetDeleteRequestPartition::default().with_partition_index(0)]);
    let request = OffsetDeleteRequest::default().with_group_id(GroupId(text(GROUP))).with_topics(vec![topic]);
    let answer = c.request(0, &request).await?;
    ensure!(
        answer.topics[0].partitions[0].error_code == GROUP_SUBSCRIBED_TO_TOPIC,
        "OffsetDelete: {answer:?}"
    );

    let classic = JoinGroupRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(text(""))
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default().with_name(text("range"))]);
    // A classic member is served inside the consumer group (online migration): KIP-394 first,
    // then its embedded subscription is read, and an empty one is malformed. (Kafka answers
    // that with UNKNOWN_SERVER_ERROR from an IllegalStateException; onelog names the protocol.)
    let answer = c.request(9, &classic).await?;
    ensure!(
        answer.error_code == MEMBER_ID_REQUIRED && !answer.member_id.is_empty(),
        "a classic join: {answer:?}"
    );
    let answer = c.request(9, &classic.clone().with_member_id(answer.member_id)).await?;
    ensure!(
        answer.error_code == INCONSISTENT_GROUP_PROTOCOL,
        "a classic join without a subscription: {answer:?}"
    );

    let delete = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(text(GROUP))]);
    let answer = c.request(2, &delete).await?;
    ensure!(answer.results[0].error_code == NON_EMPTY_GROUP, "DeleteGroups with a member: {answer:?}");
    let left = c.request(1, &beat("B", -1, &[])).await?;
    ensure!(left.error_code == 0, "B's leave: {left:?}");
    let answer = c.request(2, &delete).await?;
    ensure!(answer.results[0].error_code == 0, "DeleteGroups of the empty group: {answer:?}");
    let all = c.request(5, &listed(&[], &[])).await?;
    ensure!(!all.groups.iter().any(|g| g.group_id.as_str() == GROUP), "deleted, still listed: {all:?}");
    let answer = c.request(2, &delete).await?;
    ensure!(answer.results[0].error_code == GROUP_ID_NOT_FOUND, "deleted twice: {answer:?}");
    Ok(())
}

/// Each bad heartbeat gets Kafka's code, and the group is as before (the next good heartbeat
/// answers as if they never came).
async fn bad_input(c: &mut RawClient, epoch: i32) -> Result<()> {
    let cases: Vec<(&str, i16, ConsumerGroupHeartbeatRequest)> = vec![
        ("a future epoch", FENCED_MEMBER_EPOCH, beat("A", epoch + 5, &[])),
        ("an unknown member", UNKNOWN_MEMBER_ID, beat("nobody", epoch, &[])),
        (
            "an unknown assignor",
            UNSUPPORTED_ASSIGNOR,
            beat("A", epoch, &[]).with_server_assignor(Some(text("sticky"))),
        ),
        (
            "an invalid regex",
            INVALID_REGULAR_EXPRESSION,
            join("C").with_subscribed_topic_regex(Some(text("(orders"))),
        ),
        ("an empty group id", INVALID_REQUEST, join("C").with_group_id(GroupId(text("")))),
        ("a join without its rebalance timeout", INVALID_REQUEST, join("C").with_rebalance_timeout_ms(-1)),
    ];
    for (what, code, request) in cases {
        let answer = c.request(1, &request).await?;
        ensure!(answer.error_code == code, "{what}: {answer:?}, expected {code}");
        println!("{what}: {} {:?}", answer.error_code, answer.error_message);
    }
    let steady = c.request(1, &beat("A", epoch, &[])).await?;
    ensure!(steady.error_code == 0 && steady.member_epoch == epoch, "after the bad input: {steady:?}");
    Ok(())
}

/// The burst of bad heartbeats above (well within the 10 s incident interval) wrote one log
/// line naming the first refusal, not one per request.
async fn refusals_logged_once(broker: &Broker) -> Result<()> {
    let needle = ["ConsumerGroupHeartbeat refused"];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut lines = log_lines_with(&broker.log_path(), &needle)?;
    while lines.is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        lines = log_lines_with(&broker.log_path(), &needle)?;
    }
    ensure!(lines.len() == 1 && lines[0].contains("FENCED_MEMBER_EPOCH"), "refusal log lines: {lines:?}");
    Ok(())
}

/// OffsetCommit v9 at the member epoch is stored; a future epoch is STALE_MEMBER_EPOCH; v8 from
/// a member of a consumer group is UNSUPPORTED_VERSION (Kafka's rules).
async fn offset_commits(c: &mut RawClient, epoch: i32) -> Result<()> {
    let commit = |member_epoch: i32| {
        let partition =
            OffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(0);
        OffsetCommitRequest::default()
            .with_group_id(GroupId(text(GROUP)))
            .with_generation_id_or_member_epoch(member_epoch)
            .with_member_id(text("A"))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(topic_name(TOPIC))
                .with_partitions(vec![partition])])
    };
    let code = |r: &kafka_protocol::messages::OffsetCommitResponse| r.topics[0].partitions[0].error_code;
    for (version, member_epoch, want) in
        [(9, epoch, 0), (9, epoch + 1, STALE_MEMBER_EPOCH), (8, epoch, UNSUPPORTED_VERSION)]
    {
        let answer = c.request(version, &commit(member_epoch)).await?;
        ensure!(code(&answer) == want, "OffsetCommit v{version} at epoch {member_epoch}: {answer:?}");
    }
    Ok(())
}

/// ConsumerGroupDescribe: the member count and, when given, the state.
async fn describe(c: &mut RawClient, members: usize, state: &str) -> Result<()> {
    let request = ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(GROUP))]);
    let answer = c.request(1, &request).await?;
    let group = answer.groups.first().context("one group")?;
    ensure!(group.error_code == 0 && group.members.len() == members, "describe: {group:?}");
    ensure!(state.is_empty() || group.group_state.as_str() == state, "describe: {group:?}");
    ensure!(group.assignor_name.as_str() == "uniform", "assignor: {group:?}");
    println!(
        "described: {} members, {}, epoch {}",
        group.members.len(),
        group.group_state,
        group.group_epoch
    );
    Ok(())
}

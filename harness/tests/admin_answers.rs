//! The answers of the read-only and not-served admin APIs where no Kafka tool prints them, as
//! raw requests against one node: authorized operations (every bit of the resource type when
//! asked, `i32::MIN` when not), DescribeTopicPartitions' cursor, ConsumerGroupDescribe for a
//! classic and an unknown group (Kafka 4.x's messages), ElectLeaders for unknown partitions,
//! DescribeLogDirs v4's file system figures, the telemetry subscription, SCRAM.

use anyhow::{ensure, Context, Result};
use harness::atomic::{send_atomic, Slice};
use harness::raw_ops::{create_topics_ok, topic_name};
use harness::{Broker, BrokerOptions, RawClient};
use kafka_compat::error_code::{
    DELEGATION_TOKEN_AUTH_DISABLED, ELECTION_NOT_NEEDED, GROUP_ID_NOT_FOUND, INVALID_REPLICA_ASSIGNMENT,
    INVALID_REQUEST, INVALID_UPDATE_VERSION, RESOURCE_NOT_FOUND, UNKNOWN_SUBSCRIPTION_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
};
use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const SEGMENT_BYTES: &str = "1048576";
const OMITTED: i32 = i32::MIN;
/// Kafka's supported operations: topic (READ..ALTER_CONFIGS), group (READ, DESCRIBE, DELETE),
/// cluster (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, *_CONFIGS, IDEMPOTENT_WRITE), as bits.
const TOPIC_OPERATIONS: i32 = 3576;
const GROUP_OPERATIONS: i32 = 328;
const CLUSTER_OPERATIONS: i32 = 8096;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_apis_answer_what_kafka_answers() {
    let options = BrokerOptions {
        configs: vec![("log.segment.bytes".to_string(), SEGMENT_BYTES.to_string())],
        ..BrokerOptions::default()
    };
    let mut broker = Broker::start(options).expect("starting onelog");
    let result = scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn scenario(broker: &mut Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    create_topics_ok(&mut client, &[("alpha", 3), ("beta", 2)]).await?;
    authorized_operations(&mut client).await?;
    topic_partitions_cursor(&mut client).await?;
    group_describe(&mut client).await?;
    elections(&mut client).await?;
    log_dirs_v4(&mut client).await?;
    telemetry_and_scram(&mut client).await?;
    not_served(&mut client).await?;
    Ok(())
}

async fn authorized_operations(client: &mut RawClient) -> Result<()> {
    for (version, asked) in [(8, true), (10, true), (12, true), (12, false)] {
        let request = MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(topic_name("alpha")))]))
            .with_include_topic_authorized_operations(asked)
            .with_include_cluster_authorized_operations(asked && version <= 10);
        let response = client.request(version, &request).await?;
        let want = if asked { TOPIC_OPERATIONS } else { OMITTED };
        ensure!(response.topics[0].topic_authorized_operations == want, "Metadata v{version}: {response:?}");
        if version <= 10 {
            ensure!(
                response.cluster_authorized_operations == CLUSTER_OPERATIONS,
                "Metadata v{version} cluster"
            );
        }
    }
    for asked in [true, false] {
        let request = DescribeClusterRequest::default().with_include_cluster_authorized_operations(asked);
        let response = client.request(1, &request).await?;
        let want = if asked { CLUSTER_OPERATIONS } else { OMITTED };
        ensure!(
            response.cluster_authorized_operations == want,
            "DescribeCluster asked={asked}: {response:?}"
        );
        let request = DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(s("any-group"))])
            .with_include_authorized_operations(asked);
        let response = client.request(5, &request).await?;
        let want = if asked { GROUP_OPERATIONS } else { OMITTED };
        ensure!(response.groups[0].authorized_operations == want, "DescribeGroups asked={asked}");
    }
    Ok(())
}

/// (topic, partitions) of a DescribeTopicPartitions page, and its next cursor.
async fn page(
    client: &mut RawClient,
    topics: &[&str],
    limit: i32,
    cursor: Option<(&str, i32)>,
) -> Result<(Vec<(String, Vec<i32>)>, Option<(String, i32)>)> {
    let request = DescribeTopicPartitionsRequest::default()
        .with_topics(topics.iter().map(|t| TopicRequest::default().with_name(topic_name(t))).collect())
        .with_response_partition_limit(limit)
        .with_cursor(
            cursor.map(|(t, p)| Cursor::default().with_topic_name(topic_name(t)).with_partition_index(p)),
        );
    let response = client.request(0, &request).await?;
    let mut listed = Vec::new();
    for t in &response.topics {
        ensure!(t.error_code == 0, "{t:?}");
        ensure!(t.topic_authorized_operations == TOPIC_OPERATIONS && !t.topic_id.is_nil(), "{t:?}");
        ensure!(t
            .partitions
            .iter()
            .all(|p| p.eligible_leader_replicas == Some(vec![]) && p.leader_id.0 == 1));
        let name = t.name.as_ref().context("name")?.0.to_string();
        listed.push((name, t.partitions.iter().map(|p| p.partition_index).collect()));
    }
    Ok((listed, response.next_cursor.map(|c| (c.topic_name.0.to_string(), c.partition_index))))
}

async fn topic_partitions_cursor(client: &mut RawClient) -> Result<()> {
    // Requested out of order: answered sorted, two partitions per page.
    let (first, next) = page(client, &["beta", "alpha"], 2, None).await?;
    ensure!(first == vec![("alpha".to_string(), vec![0, 1])], "{first:?}");
    ensure!(next == Some(("alpha".to_string(), 2)), "{next:?}");
    let (second, next) = page(client, &["beta", "alpha"], 2, Some(("alpha", 2))).await?;
    ensure!(second == vec![("alpha".to_string(), vec![2]), ("beta".to_string(), vec![0])], "{second:?}");
    ensure!(next == Some(("beta".to_string(), 1)), "{next:?}");
    let (third, next) = page(client, &["beta", "alpha"], 2, Some(("beta", 1))).await?;
    ensure!(third == vec![("beta".to_string(), vec![1])] && next.is_none(), "{third:?} {next:?}");
    // No topics named: every topic, the internal `__consumer_offsets` too (as Kafka lists it;
    // `kafka-topics --exclude-internal` filters by its flag).
    let (all, next) = page(client, &[], 100, None).await?;
    let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
    ensure!(names == ["__consumer_offsets", "alpha", "beta"] && next.is_none(), "{all:?}");
    let stray = DescribeTopicPartitionsRequest::default()
        .with_topics(vec![TopicRequest::default().with_name(topic_name("alpha"))])
        .with_response_partition_limit(10)
        .with_cursor(Some(Cursor::default().with_topic_name(topic_name("beta"))));
    let response = client.request(0, &stray).await?;
    let answered = &response.topics;
    ensure!(
        answered.len() == 1
            && answered[0].error_code == INVALID_REQUEST
            && answered[0].name == Some(topic_name("alpha")),
        "a cursor outside the requested topics: {response:?}"
    );
    let unknown = DescribeTopicPartitionsRequest::default()
        .with_topics(vec![TopicRequest::default().with_name(topic_name("gamma"))])
        .with_response_partition_limit(10);
    let response = client.request(0, &unknown).await?;
    ensure!(response.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION, "{response:?}");
    Ok(())
}

async fn group_describe(client: &mut RawClient) -> Result<()> {
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("classic-group")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name("alpha"))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(0)])]);
    client.request(8, &commit).await?;
    let request = ConsumerGroupDescribeRequest::default()
        .with_group_ids(vec![GroupId(s("classic-group")), GroupId(s("no-group"))])
        .with_include_authorized_operations(true);
    let response = client.request(1, &request).await?;
    let answers: Vec<(i16, String)> = response
        .groups
        .iter()
        .map(|g| (g.error_code, g.error_message.as_ref().map(|m| m.to_string()).unwrap_or_default()))
        .collect();
    ensure!(
        answers
            == vec![
                (GROUP_ID_NOT_FOUND, "Group classic-group is not a consumer group.".to_string()),
                (GROUP_ID_NOT_FOUND, "Group no-group not found.".to_string())
            ],
        "{answers:?}"
    );
    let listed =
        client.request(5, &ListGroupsRequest::default().with_types_filter(vec![s("Classic")])).await?;
    let types: Vec<(String, String)> =
        listed.groups.iter().map(|g| (g.group_id.0.to_string(), g.group_type.to_string())).collect();
    ensure!(types == vec![("classic-group".to_string(), "classic".to_string())], "{types:?}");
    let consumer =
        client.request(5, &ListGroupsRequest::default().with_types_filter(vec![s("consumer")])).await?;
    ensure!(consumer.groups.is_empty(), "{consumer:?}");
    Ok(())
}

async fn elections(client: &mut RawClient) -> Result<()> {
    let request = ElectLeadersRequest::default()
        .with_election_type(0)
        .with_timeout_ms(1_000)
        .with_topic_partitions(Some(vec![
            TopicPartitions::default().with_topic(topic_name("alpha")).with_partitions(vec![0, 7]),
            TopicPartitions::default().with_topic(topic_name("gamma")).with_partitions(vec![0]),
        ]));
    let response = client.request(2, &request).await?;
    let codes: Vec<i16> = response
        .replica_election_results
        .iter()
        .flat_map(|t| t.partition_result.iter().map(|p| p.error_code))
        .collect();
    // One node: the leader is the preferred replica.
    ensure!(
        codes == vec![ELECTION_NOT_NEEDED, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION],
        "{codes:?}"
    );
    let all = client.request(2, &ElectLeadersRequest::default().with_topic_partitions(None)).await?;
    ensure!(all.error_code == 0 && all.replica_election_results.is_empty(), "nothing to elect: {all:?}");
    Ok(())
}

async fn log_dirs_v4(client: &mut RawClient) -> Result<()> {
    send_atomic(client, &[Slice { topic: "beta", key: b"k", value: &[1u8; 300] }]).await?;
    let response = client.request(4, &DescribeLogDirsRequest::default().with_topics(None)).await?;
    let dir = response.results.first().context("no log dir")?;
    ensure!(dir.total_bytes > 0 && dir.usable_bytes > 0 && dir.usable_bytes <= dir.total_bytes, "{dir:?}");
    let sizes: Vec<(String, i32, i64)> = dir
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| (t.name.0.to_string(), p.partition_index, p.partition_size))
        })
        .collect();
    ensure!(sizes.len() == 5, "every partition of alpha and beta: {sizes:?}");
    let beta0 = sizes.iter().find(|(t, p, _)| t == "beta" && *p == 0).context("beta-0")?.2;
    ensure!(beta0 > 300, "beta-0 holds one 300-byte record: {beta0}");
    ensure!(sizes.iter().filter(|(t, p, _)| !(t == "beta" && *p == 0)).all(|s| s.2 == 0), "{sizes:?}");
    Ok(())
}

async fn telemetry_and_scram(client: &mut RawClient) -> Result<()> {
    let subscription = client.request(0, &GetTelemetrySubscriptionsRequest::default()).await?;
    ensure!(subscription.error_code == 0 && !subscription.client_instance_id.is_nil(), "{subscription:?}");
    ensure!(
        subscription.requested_metrics.is_empty() && subscription.push_interval_ms == 300_000,
        "{subscription:?}"
    );
    let push = PushTelemetryRequest::default().with_client_instance_id(subscription.client_instance_id);
    ensure!(client.request(0, &push).await?.error_code == UNKNOWN_SUBSCRIPTION_ID, "push");
    let describe = DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
        describe_user_scram_credentials_request::UserName::default().with_name(s("alice")),
    ]));
    let described = client.request(0, &describe).await?;
    ensure!(described.results[0].error_code == RESOURCE_NOT_FOUND, "{described:?}");
    let alter = AlterUserScramCredentialsRequest::default().with_deletions(vec![
        alter_user_scram_credentials_request::ScramCredentialDeletion::default()
            .with_name(s("alice"))
            .with_mechanism(1),
    ]);
    let altered = client.request(0, &alter).await?;
    ensure!(
        altered.results.len() == 1 && altered.results[0].error_code == RESOURCE_NOT_FOUND,
        "deleting a credential that does not exist: {altered:?}"
    );
    Ok(())
}

/// APIs onelog cannot honour: each gets its precise code (docs/COMPATIBILITY.md, "What onelog does not
/// serve").
async fn not_served(client: &mut RawClient) -> Result<()> {
    let listed = client.request(0, &ListPartitionReassignmentsRequest::default().with_topics(None)).await?;
    ensure!(listed.error_code == 0 && listed.topics.is_empty(), "{listed:?}");
    let alter = AlterPartitionReassignmentsRequest::default().with_topics(vec![
        alter_partition_reassignments_request::ReassignableTopic::default()
            .with_name(topic_name("alpha"))
            .with_partitions(vec![alter_partition_reassignments_request::ReassignablePartition::default()
                .with_partition_index(1)
                .with_replicas(Some(vec![BrokerId(1)]))]),
    ]);
    let altered = client.request(1, &alter).await?;
    let p = &altered.responses[0].partitions[0];
    ensure!(
        p.partition_index == 1 && p.error_code == INVALID_REPLICA_ASSIGNMENT && p.error_message.is_some(),
        "{p:?}"
    );
    let tokens = client.request(3, &DescribeDelegationTokenRequest::default().with_owners(None)).await?;
    ensure!(tokens.error_code == DELEGATION_TOKEN_AUTH_DISABLED, "{tokens:?}");
    // A feature this build does not know: Kafka's top-level refusal, no per-feature results.
    let unknown = update_features_request::FeatureUpdateKey::default()
        .with_feature(s("no.such.feature"))
        .with_max_version_level(1)
        .with_upgrade_type(1);
    let features =
        client.request(1, &UpdateFeaturesRequest::default().with_feature_updates(vec![unknown])).await?;
    ensure!(
        features.error_code == INVALID_UPDATE_VERSION
            && features.results.is_empty()
            && features
                .error_message
                .as_deref()
                .is_some_and(|m| m.ends_with("does not support this feature.")),
        "{features:?}"
    );
    let all = client.request(1, &ListConfigResourcesRequest::default()).await?;
    let listed: Vec<(i8, String)> =
        all.config_resources.iter().map(|r| (r.resource_type, r.resource_name.to_string())).collect();
    // Topics (2), the broker (4), the group with committed offsets (32); no client metrics (16).
    let expected: Vec<(i8, String)> =
        vec![(2, "alpha".into()), (2, "beta".into()), (4, "1".into()), (32, "classic-group".into())];
    ensure!(listed == expected, "ListConfigResources: {listed:?}");
    let metrics = client.request(0, &ListConfigResourcesRequest::default()).await?;
    ensure!(metrics.error_code == 0 && metrics.config_resources.is_empty(), "v0: {metrics:?}");
    let loggers =
        client.request(1, &ListConfigResourcesRequest::default().with_resource_types(vec![8])).await?;
    ensure!(loggers.error_code == INVALID_REQUEST, "broker loggers: {loggers:?}");
    let voter = client.request(0, &RemoveRaftVoterRequest::default().with_voter_id(2)).await?;
    ensure!(voter.error_code == INVALID_REQUEST, "{voter:?}");
    Ok(())
}

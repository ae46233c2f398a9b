//! Regressions for the divergences from Apache Kafka that issue 12 lists, each on the wire
//! against a real onelog process: a JoinGroup from a member of a Stable group, ListOffsets
//! MAX_TIMESTAMP, keyless records on a compacted topic, `segment.bytes` below Kafka's minimum
//! and an explicit CreatePartitions replica assignment.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use harness::batch::{encode_batch, TestRecord};
use harness::raw_ops::{produce_at, topic_name, BatchFor};
use harness::{Broker, BrokerOptions, Cluster, ClusterOptions, RawClient};
use kafka_compat::error_code::{
    COORDINATOR_NOT_AVAILABLE, INVALID_CONFIG, INVALID_RECORD, INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST,
    MEMBER_ID_REQUIRED, NOT_COORDINATOR,
};
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    BrokerId, CreatePartitionsRequest, CreateTopicsRequest, DescribeTopicPartitionsRequest, GroupId,
    HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, ListOffsetsRequest, MetadataRequest,
    SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;

const MAX_TIMESTAMP: i64 = -3;
/// Partition segments of 1 MiB (Kafka's minimum `segment.bytes`): these tests write little.
const SEGMENT_BYTES: u64 = 1 << 20;

fn broker() -> Broker {
    let options = BrokerOptions::default()
        .config("group.initial.rebalance.delay.ms", 0)
        .config("log.segment.bytes", SEGMENT_BYTES);
    Broker::start(options).expect("starting onelog")
}

fn gid(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_string()))
}

fn join_request(member_id: &StrBytes) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(gid("stable"))
        .with_member_id(member_id.clone())
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(Bytes::from_static(b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"))])
}

/// JoinGroup v9 of `member_id` (empty: learn one first, KIP-394).
async fn join(client: &mut RawClient, member_id: &StrBytes) -> Result<JoinGroupResponse> {
    let mut id = member_id.clone();
    if id.is_empty() {
        // Right after start the node may not act as coordinator yet; clients retry these
        // (seen once in a fresh-clone CI run: NOT_COORDINATOR on the very first join).
        let mut first = client.request(9, &join_request(&id)).await?;
        for _ in 0..50 {
            if first.error_code != NOT_COORDINATOR && first.error_code != COORDINATOR_NOT_AVAILABLE {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            first = client.request(9, &join_request(&id)).await?;
        }
        ensure!(first.error_code == MEMBER_ID_REQUIRED, "first join: {first:?}");
        id = first.member_id;
    }
    let joined = client.request(9, &join_request(&id)).await?;
    ensure!(joined.error_code == 0, "join of {id:?}: {joined:?}");
    Ok(joined)
}

async fn sync(
    client: &mut RawClient,
    joined: &JoinGroupResponse,
    assignments: &[(&StrBytes, &'static [u8])],
) -> Result<SyncGroupResponse> {
    let assignments = assignments.iter().map(|(id, a)| {
        SyncGroupRequestAssignment::default()
            .with_member_id((*id).clone())
            .with_assignment(Bytes::from_static(a))
    });
    let request = SyncGroupRequest::default()
        .with_group_id(gid("stable"))
        .with_generation_id(joined.generation_id)
        .with_member_id(joined.member_id.clone())
        .with_assignments(assignments.collect());
    client.request(5, &request).await
}

/// Regression (kafka-python 3.0's group never settled): a follower of a Stable group that
/// sends JoinGroup again with unchanged protocols gets the current generation at once, as
/// Kafka's `GroupCoordinator.doCurrentMemberJoinGroup` answers; the group stays Stable (the
/// leader's heartbeat is not told to rejoin) and the follower's SyncGroup returns its
/// current assignment. Before the fix the rejoin started a rebalance and waited for the
/// leader to rejoin (up to the 30 s rebalance timeout).
#[tokio::test(flavor = "multi_thread")]
async fn a_follower_rejoining_a_stable_group_gets_the_current_generation() {
    let broker = broker();
    let result = stable_rejoin_scenario(&broker).await;
    broker.unwrap_or_dump(result);
}

async fn stable_rejoin_scenario(broker: &Broker) -> Result<()> {
    let (mut a, mut b) = (RawClient::connect(broker.addr()).await?, RawClient::connect(broker.addr()).await?);
    let first = join(&mut a, &StrBytes::default()).await?;
    ensure!(first.generation_id == 1, "{first:?}");
    ensure!(sync(&mut a, &first, &[(&first.member_id, b"a1")]).await?.error_code == 0);
    // The second member makes generation 2; the leader rejoins beside it.
    let none = StrBytes::default();
    let (joined_a, joined_b) = tokio::join!(
        async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            join(&mut a, &first.member_id).await
        },
        join(&mut b, &none)
    );
    let (joined_a, joined_b) = (joined_a?, joined_b?);
    ensure!(joined_a.leader == joined_a.member_id && joined_a.generation_id == 2, "{joined_a:?}");
    let assignments = [(&joined_a.member_id, &b"a2"[..]), (&joined_b.member_id, &b"b2"[..])];
    let (leader_sync, follower_sync) =
        tokio::join!(sync(&mut a, &joined_a, &assignments), sync(&mut b, &joined_b, &[]));
    ensure!(leader_sync?.error_code == 0);
    ensure!(&follower_sync?.assignment[..] == b"b2");

    let again = tokio::time::timeout(Duration::from_secs(5), join(&mut b, &joined_b.member_id))
        .await
        .context("a Stable group's follower rejoin must be answered at once")??;
    ensure!(again.generation_id == 2 && again.leader == joined_a.member_id, "{again:?}");
    ensure!(again.members.is_empty(), "a follower gets no member list: {again:?}");
    let heartbeat = HeartbeatRequest::default()
        .with_group_id(gid("stable"))
        .with_generation_id(2)
        .with_member_id(joined_a.member_id.clone());
    let beat = a.request(4, &heartbeat).await?;
    ensure!(beat.error_code == 0, "the leader is not asked to rejoin: {beat:?}");
    let resync = sync(&mut b, &again, &[]).await?;
    ensure!(resync.error_code == 0 && &resync.assignment[..] == b"b2", "{resync:?}");
    Ok(())
}

/// CreateTopics v7 of one topic with one partition and `configs`; returns its error code.
async fn create_topic(client: &mut RawClient, name: &str, configs: &[(&str, &str)]) -> Result<i16> {
    create_topic_rf(client, name, -1, configs).await
}

async fn create_topic_rf(
    client: &mut RawClient,
    name: &str,
    replication_factor: i16,
    configs: &[(&str, &str)],
) -> Result<i16> {
    let configs = configs.iter().map(|(k, v)| {
        CreatableTopicConfig::default()
            .with_name(StrBytes::from_string(k.to_string()))
            .with_value(Some(StrBytes::from_string(v.to_string())))
    });
    let topic = CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(1)
        .with_replication_factor(replication_factor)
        .with_configs(configs.collect());
    let request = CreateTopicsRequest::default().with_timeout_ms(30_000).with_topics(vec![topic]);
    let response = client.request(7, &request).await?;
    Ok(response.topics.first().context("one topic result")?.error_code)
}

/// Produces one batch of `records` to partition 0 of `topic` at Produce `version`.
async fn produce_one(
    client: &mut RawClient,
    version: i16,
    topic: &str,
    records: &[TestRecord],
) -> Result<PartitionProduceResponse> {
    let batch = BatchFor { topic: topic.to_string(), partition: 0, records: encode_batch(records)? };
    let response = produce_at(client, version, -1, &[batch]).await?;
    let topic = response.responses.into_iter().next().context("one topic")?;
    topic.partition_responses.into_iter().next().context("one partition")
}

fn keyed(timestamp_ms: i64) -> TestRecord {
    TestRecord::new(&b"k"[..], &b"v"[..], timestamp_ms)
}

fn keyless(timestamp_ms: i64) -> TestRecord {
    TestRecord { key: None, ..keyed(timestamp_ms) }
}

/// Regression: ListOffsets MAX_TIMESTAMP (-3) answered the last offset of the batch holding
/// the highest timestamp (3 here); Kafka answers the first record with that timestamp
/// (KIP-734, `offsetOfMaxTimestamp`): offset 1, timestamp 300. A later batch with a lower
/// maximum changes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn list_offsets_max_timestamp_names_the_first_record_with_the_highest_timestamp() {
    let broker = broker();
    let result = max_timestamp_scenario(&broker).await;
    broker.unwrap_or_dump(result);
}

async fn max_timestamp_scenario(broker: &Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    ensure!(create_topic(&mut client, "times", &[]).await? == 0);
    let first =
        produce_one(&mut client, 9, "times", &[keyed(100), keyed(300), keyed(200), keyed(300)]).await?;
    ensure!(first.error_code == 0 && first.base_offset == 0, "{first:?}");
    let second = produce_one(&mut client, 9, "times", &[keyed(250)]).await?;
    ensure!(second.error_code == 0 && second.base_offset == 4, "{second:?}");
    let request = ListOffsetsRequest::default().with_replica_id((-1).into()).with_topics(vec![
        ListOffsetsTopic::default()
            .with_name(topic_name("times"))
            .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(MAX_TIMESTAMP)]),
    ]);
    let response = client.request(7, &request).await?;
    let answer = &response.topics[0].partitions[0];
    ensure!(answer.error_code == 0, "{answer:?}");
    ensure!((answer.offset, answer.timestamp) == (1, 300), "MAX_TIMESTAMP: {answer:?}");
    Ok(())
}

/// Regression: a compacted topic accepted records without a key. Kafka's LogValidator
/// refuses the batch with INVALID_RECORD (87) at every Produce version; from v8 the response
/// lists each keyless record's index in its batch (KIP-467). Nothing is appended, and a batch
/// whose records all have keys is accepted. A topic with the default (delete) policy takes
/// keyless records.
#[tokio::test(flavor = "multi_thread")]
async fn a_compacted_topic_refuses_records_without_a_key() {
    let broker = broker();
    let result = compacted_scenario(&broker).await;
    broker.unwrap_or_dump(result);
}

async fn compacted_scenario(broker: &Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    ensure!(create_topic(&mut client, "compacted", &[("cleanup.policy", "compact")]).await? == 0);
    ensure!(create_topic(&mut client, "deleted", &[]).await? == 0);
    let mixed = [keyed(1), keyless(2), keyed(3), keyless(4)];
    let v9 = produce_one(&mut client, 9, "compacted", &mixed).await?;
    ensure!(v9.error_code == INVALID_RECORD, "v9: {v9:?}");
    let indexes: Vec<i32> = v9.record_errors.iter().map(|e| e.batch_index).collect();
    ensure!(indexes == [1, 3], "record errors: {:?}", v9.record_errors);
    let v7 = produce_one(&mut client, 7, "compacted", &mixed).await?;
    ensure!(v7.error_code == INVALID_RECORD, "v7: {v7:?}");
    let ok = produce_one(&mut client, 9, "compacted", &[keyed(5), keyed(6)]).await?;
    ensure!(ok.error_code == 0 && ok.base_offset == 0, "nothing appended before: {ok:?}");
    let delete = produce_one(&mut client, 9, "deleted", &mixed).await?;
    ensure!(delete.error_code == 0, "delete policy: {delete:?}");
    Ok(())
}

/// Regression: `segment.bytes` below Kafka's minimum was accepted. Kafka 4.1.1's `LogConfig`
/// defines `segment.bytes` with `atLeast(1048576)` (read from the kafka-storage 4.1.1 jar's
/// class, not from a running reference broker): CreateTopics answers INVALID_CONFIG (40),
/// and the minimum itself is accepted.
#[tokio::test(flavor = "multi_thread")]
async fn segment_bytes_below_kafkas_minimum_is_invalid_config() {
    let broker = broker();
    let result = segment_bytes_scenario(&broker).await;
    broker.unwrap_or_dump(result);
}

async fn segment_bytes_scenario(broker: &Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    for small in ["14", "1048575"] {
        let code = create_topic(&mut client, "small", &[("segment.bytes", small)]).await?;
        ensure!(code == INVALID_CONFIG, "segment.bytes={small}: {code}");
    }
    ensure!(create_topic(&mut client, "minimum", &[("segment.bytes", "1048576")]).await? == 0);
    Ok(())
}

/// CreatePartitions v3 of `topic` to `count` partitions with `assignments`; returns the code.
async fn create_partitions(
    client: &mut RawClient,
    topic: &str,
    count: i32,
    assignments: &[&[i32]],
    validate_only: bool,
) -> Result<i16> {
    let assignments = assignments.iter().map(|a| {
        CreatePartitionsAssignment::default().with_broker_ids(a.iter().map(|b| BrokerId(*b)).collect())
    });
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(30_000)
        .with_validate_only(validate_only)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(topic_name(topic))
            .with_count(count)
            .with_assignments(Some(assignments.collect()))]);
    let response = client.request(3, &request).await?;
    Ok(response.results.first().context("one result")?.error_code)
}

/// Regression: CreatePartitions ignored an explicit replica assignment. On three nodes, a topic
/// of replication factor 2 grows by two partitions assigned [3, 2] and [2, 1]: Metadata
/// reports those replicas, in that order. Kafka's INVALID_REPLICA_ASSIGNMENT (39) answers an
/// assignment count that does not match the partitions added, a broker named twice, a broker
/// that does not exist and a replica count other than the topic's, also for validate_only,
/// and nothing is added.
#[test]
fn create_partitions_honours_an_explicit_replica_assignment() {
    let options = ClusterOptions::new(3).config("log.segment.bytes", SEGMENT_BYTES);
    let mut cluster = Cluster::start_with(options).expect("starting 3 nodes");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let result = cluster.leader().and_then(|leader| runtime.block_on(assignment_scenario(&cluster, leader)));
    cluster.unwrap_or_dump(result);
}

async fn assignment_scenario(cluster: &Cluster, leader: u64) -> Result<()> {
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    ensure!(create_topic_rf(&mut client, "assigned", 2, &[]).await? == 0);
    for (count, assignments) in [
        (3, &[&[3, 2][..]][..]),
        (3, &[&[3, 3], &[2, 1]]),
        (3, &[&[3, 9], &[2, 1]]),
        (3, &[&[1, 2, 3], &[2, 1]]),
    ] {
        for validate_only in [true, false] {
            let code = create_partitions(&mut client, "assigned", count, assignments, validate_only).await?;
            ensure!(
                code == INVALID_REPLICA_ASSIGNMENT,
                "{assignments:?} (validate_only {validate_only}): {code}"
            );
        }
    }
    ensure!(create_partitions(&mut client, "assigned", 3, &[&[3, 2], &[2, 1]], true).await? == 0);
    ensure!(create_partitions(&mut client, "assigned", 3, &[&[3, 2], &[2, 1]], false).await? == 0);
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(topic_name("assigned")))]));
    let response = client.request(12, &request).await?;
    let topic = response.topics.first().context("the topic")?;
    let replicas: Vec<Vec<i32>> =
        topic.partitions.iter().map(|p| p.replica_nodes.iter().map(|b| b.0).collect()).collect();
    ensure!(replicas.len() == 3, "{replicas:?}");
    ensure!(replicas[1] == [3, 2] && replicas[2] == [2, 1], "assigned replicas: {replicas:?}");
    // Regression: DescribeTopicPartitions (kafka-topics --describe from Kafka 3.8) reported
    // every voter for every partition.
    let request = DescribeTopicPartitionsRequest::default()
        .with_topics(vec![TopicRequest::default().with_name(topic_name("assigned"))])
        .with_response_partition_limit(100);
    let response = client.request(0, &request).await?;
    let topic = response.topics.first().context("the topic")?;
    let described: Vec<Vec<i32>> =
        topic.partitions.iter().map(|p| p.replica_nodes.iter().map(|b| b.0).collect()).collect();
    ensure!(described == replicas, "DescribeTopicPartitions {described:?}, Metadata {replicas:?}");
    created_with_an_assignment(&mut client).await
}

/// Regression (issue 28, found by franz-go's kgo suite): a topic created with a manual
/// assignment of three replicas per partition took its replication factor from
/// `default.replication.factor` (1), so growing it with three-replica partitions was refused
/// INVALID_REPLICA_ASSIGNMENT. Kafka takes the factor from the assignment, and refuses an
/// assignment with counts set (INVALID_REQUEST), with uneven replica lists or gaps in the
/// partition indexes (INVALID_REPLICA_ASSIGNMENT).
async fn created_with_an_assignment(client: &mut RawClient) -> Result<()> {
    let create = |name: &str, counts: (i32, i16), assignment: &[(i32, &[i32])]| {
        let assignments = assignment.iter().map(|(index, replicas)| {
            CreatableReplicaAssignment::default()
                .with_partition_index(*index)
                .with_broker_ids(replicas.iter().map(|b| BrokerId(*b)).collect())
        });
        let topic = CreatableTopic::default()
            .with_name(topic_name(name))
            .with_num_partitions(counts.0)
            .with_replication_factor(counts.1)
            .with_assignments(assignments.collect());
        CreateTopicsRequest::default().with_timeout_ms(30_000).with_topics(vec![topic])
    };
    for (counts, assignment, want) in [
        ((2, -1), &[(0, &[1, 2, 3][..])][..], INVALID_REQUEST),
        ((-1, 3), &[(0, &[1, 2, 3][..])][..], INVALID_REQUEST),
        ((-1, -1), &[(0, &[1, 2, 3][..]), (1, &[1, 2][..])][..], INVALID_REPLICA_ASSIGNMENT),
        ((-1, -1), &[(0, &[1, 2, 3][..]), (2, &[1, 2, 3][..])][..], INVALID_REPLICA_ASSIGNMENT),
    ] {
        let answer = client.request(7, &create("refused", counts, assignment)).await?;
        let code = answer.topics.first().context("one result")?.error_code;
        ensure!(code == want, "{counts:?} {assignment:?}: {answer:?}");
    }
    let answer = client.request(7, &create("manual", (-1, -1), &[(0, &[1, 2, 3]), (1, &[2, 3, 1])])).await?;
    let created = answer.topics.first().context("one result")?;
    ensure!(
        created.error_code == 0 && created.replication_factor == 3 && created.num_partitions == 2,
        "created with an assignment: {created:?}"
    );
    let code = create_partitions(client, "manual", 3, &[&[3, 1, 2]], false).await?;
    ensure!(code == 0, "CreatePartitions with three replicas after a three-replica assignment: {code}");
    Ok(())
}

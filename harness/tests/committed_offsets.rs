//! Committed offsets of consumers that manage assignment themselves (`assign()`), end to end.
//!
//! librdkafka: a consumer with a group.id commits offsets with `commit(Sync)` (FindCoordinator,
//! OffsetCommit), and a new consumer with the same group.id reads them back with
//! `committed_offsets` (OffsetFetch); another group sees none. Then a raw client walks every
//! served version of FindCoordinator, OffsetCommit, OffsetFetch and ListGroups, checks Kafka's
//! per-partition error codes, and that deleting a topic drops its committed offsets.
//! In a three-node cluster every node names the leader as coordinator, followers answer
//! NOT_COORDINATOR, and after the leader is killed the new leader serves the same offsets.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use harness::cluster::ELECTION_TIMEOUT_MAX;
use harness::kafka::{client_config, create_topics};
use harness::raw_ops::topic_name;
use harness::{Broker, BrokerOptions, Cluster, RawClient};
use kafka_compat::error_code::{INVALID_REQUEST, NOT_COORDINATOR};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopic};
use kafka_protocol::messages::{
    DeleteTopicsRequest, FindCoordinatorRequest, GroupId, ListGroupsRequest, OffsetCommitRequest,
    OffsetFetchRequest,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

const TOPIC: &str = "committed";
const PARTITIONS: i32 = 3;
const TIMEOUT: Duration = Duration::from_secs(30);

fn consumer(bootstrap: &str, group: &str) -> Result<BaseConsumer> {
    Ok(client_config(bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .create()?)
}

#[tokio::test(flavor = "multi_thread")]
async fn assign_consumer_commits_and_a_new_consumer_reads_them_back() {
    let broker = Broker::start(BrokerOptions::default()).expect("starting onelog");
    let result = librdkafka_scenario(&broker).await;
    broker.unwrap_or_dump(result);
    let result = raw_scenario(&broker).await;
    broker.unwrap_or_dump(result);
}

async fn librdkafka_scenario(broker: &Broker) -> Result<()> {
    let bootstrap = broker.bootstrap();
    create_topics(&bootstrap, &[(TOPIC, PARTITIONS)]).await?;
    tokio::task::spawn_blocking(move || {
        let mut assigned = TopicPartitionList::new();
        for p in 0..PARTITIONS {
            assigned.add_partition_offset(TOPIC, p, Offset::Beginning)?;
        }
        let first = consumer(&bootstrap, "assigners")?;
        first.assign(&assigned)?;
        let mut commits = TopicPartitionList::new();
        for p in 0..PARTITIONS {
            commits.add_partition_offset(TOPIC, p, Offset::Offset(10 * i64::from(p) + 5))?;
        }
        first.commit(&commits, CommitMode::Sync).context("commit(Sync)")?;
        drop(first);

        let second = consumer(&bootstrap, "assigners")?;
        second.assign(&assigned)?;
        let committed = second.committed_offsets(assigned.clone(), TIMEOUT).context("committed_offsets")?;
        for p in 0..PARTITIONS {
            let got = committed.find_partition(TOPIC, p).context("partition in answer")?.offset();
            ensure!(got == Offset::Offset(10 * i64::from(p) + 5), "{TOPIC}-{p}: committed {got:?}");
        }
        let stranger = consumer(&bootstrap, "strangers")?;
        let none =
            stranger.committed_offsets(assigned, TIMEOUT).context("committed_offsets of another group")?;
        for elem in none.elements() {
            ensure!(elem.offset() == Offset::Invalid, "another group sees {:?}", elem.offset());
        }
        anyhow::Ok(())
    })
    .await?
}

fn commit_request(
    group: &str,
    generation: i32,
    partitions: &[(&str, i32, i64, Option<String>)],
) -> OffsetCommitRequest {
    let topics = partitions
        .iter()
        .map(|(topic, partition, offset, metadata)| {
            OffsetCommitRequestTopic::default().with_name(topic_name(topic)).with_partitions(vec![
                OffsetCommitRequestPartition::default()
                    .with_partition_index(*partition)
                    .with_committed_offset(*offset)
                    .with_committed_metadata(metadata.clone().map(StrBytes::from_string)),
            ])
        })
        .collect();
    OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_generation_id_or_member_epoch(generation)
        .with_topics(topics)
}

async fn commit(client: &mut RawClient, version: i16, request: &OffsetCommitRequest) -> Result<Vec<i16>> {
    let response =
        client.request(version, request).await.with_context(|| format!("OffsetCommit v{version}"))?;
    Ok(response.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect())
}

/// (offset, metadata, error) of `partition` in `group`, asked with OffsetFetch `version`.
async fn fetch(
    client: &mut RawClient,
    version: i16,
    group: &str,
    partition: i32,
) -> Result<(i64, String, i16)> {
    let group_id = GroupId(StrBytes::from_string(group.into()));
    let request = if version >= 8 {
        let topics =
            vec![kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopics::default()
                .with_name(topic_name(TOPIC))
                .with_partition_indexes(vec![partition])];
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(group_id)
            .with_topics(Some(topics))])
    } else {
        let topics = vec![OffsetFetchRequestTopic::default()
            .with_name(topic_name(TOPIC))
            .with_partition_indexes(vec![partition])];
        OffsetFetchRequest::default().with_group_id(group_id).with_topics(Some(topics))
    };
    let response =
        client.request(version, &request).await.with_context(|| format!("OffsetFetch v{version}"))?;
    if version >= 8 {
        let group = response.groups.first().context("one group")?;
        ensure!(group.error_code == 0, "OffsetFetch v{version}: group error {}", group.error_code);
        let p = group.topics.first().and_then(|t| t.partitions.first()).context("one partition")?;
        Ok((p.committed_offset, p.metadata.as_deref().unwrap_or("").to_string(), p.error_code))
    } else {
        ensure!(response.error_code == 0, "OffsetFetch v{version}: error {}", response.error_code);
        let p = response.topics.first().and_then(|t| t.partitions.first()).context("one partition")?;
        Ok((p.committed_offset, p.metadata.as_deref().unwrap_or("").to_string(), p.error_code))
    }
}

async fn raw_scenario(broker: &Broker) -> Result<()> {
    let mut client = RawClient::connect(broker.addr()).await?;
    for version in 0..=4i16 {
        let mut request = FindCoordinatorRequest::default();
        if version >= 4 {
            request = request.with_coordinator_keys(vec![StrBytes::from_static_str("raw")]);
        } else {
            request = request.with_key(StrBytes::from_static_str("raw"));
        }
        let response =
            client.request(version, &request).await.with_context(|| format!("FindCoordinator v{version}"))?;
        let (code, port) = match response.coordinators.first() {
            Some(c) => (c.error_code, c.port),
            None => (response.error_code, response.port),
        };
        ensure!(
            code == 0 && port == i32::from(broker.addr().port()),
            "FindCoordinator v{version}: {response:?}"
        );
    }
    let unknown_type = client.request(1, &FindCoordinatorRequest::default().with_key_type(7)).await?;
    ensure!(unknown_type.error_code == INVALID_REQUEST, "key type 7: {unknown_type:?}");

    for version in 2..=8i16 {
        let offset = 100 + i64::from(version);
        let metadata = Some(format!("v{version}"));
        let codes =
            commit(&mut client, version, &commit_request("raw", -1, &[(TOPIC, 0, offset, metadata)])).await?;
        ensure!(codes == [0], "OffsetCommit v{version}: {codes:?}");
        for fetch_version in 1..=8i16 {
            let got = fetch(&mut client, fetch_version, "raw", 0).await?;
            ensure!(
                got == (offset, format!("v{version}"), 0),
                "v{version} commit, v{fetch_version} fetch: {got:?}"
            );
        }
    }
    let unknown = fetch(&mut client, 8, "nobody", 1).await?;
    ensure!(unknown == (-1, String::new(), 0), "unknown group: {unknown:?}");

    let mixed = [
        (TOPIC, 1, 7, None),
        (TOPIC, 9, 7, None),
        ("missing", 0, 7, None),
        (TOPIC, 2, 7, Some("x".repeat(5000))),
    ];
    let codes = commit(&mut client, 8, &commit_request("raw", -1, &mixed)).await?;
    ensure!(codes == [0, 3, 3, 12], "per-partition codes: {codes:?}");
    let codes = commit(&mut client, 8, &commit_request("raw", 4, &[(TOPIC, 1, 8, None)])).await?;
    ensure!(codes == [25], "real generation, existing group: {codes:?}");
    let codes = commit(&mut client, 8, &commit_request("fresh", 4, &[(TOPIC, 1, 8, None)])).await?;
    ensure!(codes == [22], "real generation, unknown group: {codes:?}");
    let codes = commit(&mut client, 8, &commit_request(&"g".repeat(300), -1, &[(TOPIC, 1, 8, None)])).await?;
    ensure!(codes == [24], "group id too long: {codes:?}");

    for version in 0..=4i16 {
        let response = client.request(version, &ListGroupsRequest::default()).await?;
        let mut ids: Vec<String> = response.groups.iter().map(|g| g.group_id.0.to_string()).collect();
        ids.sort();
        ensure!(
            response.error_code == 0 && ids == ["assigners", "raw"],
            "ListGroups v{version}: {response:?}"
        );
    }
    let filtered = client
        .request(
            4,
            &ListGroupsRequest::default().with_states_filter(vec![StrBytes::from_static_str("Stable")]),
        )
        .await?;
    ensure!(filtered.groups.is_empty(), "no group is Stable: {filtered:?}");

    let delete =
        DeleteTopicsRequest::default().with_topic_names(vec![topic_name(TOPIC)]).with_timeout_ms(30_000);
    let deleted = client.request(4, &delete).await?;
    ensure!(deleted.responses.iter().all(|r| r.error_code == 0), "DeleteTopics: {deleted:?}");
    let gone = fetch(&mut client, 8, "raw", 0).await?;
    ensure!(gone == (-1, String::new(), 0), "offsets of a deleted topic: {gone:?}");
    let listed = client.request(3, &ListGroupsRequest::default()).await?;
    ensure!(listed.groups.is_empty(), "groups left without offsets disappear: {listed:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_leader_coordinates_and_committed_offsets_survive_failover() {
    let mut cluster = Cluster::start(3).expect("starting 3 nodes");
    let result = cluster_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn cluster_scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    create_topics(&cluster.bootstrap(), &[(TOPIC, PARTITIONS)]).await?;
    for id in cluster.ids() {
        let mut client = RawClient::connect(cluster.kafka_addr(id)).await?;
        let found = client
            .request(2, &FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g")))
            .await?;
        ensure!(
            found.error_code == 0 && found.node_id.0 == leader as i32,
            "node {id} names {found:?}, leader is {leader}"
        );
        let codes = commit(&mut client, 7, &commit_request("g", -1, &[(TOPIC, 1, 42, None)])).await?;
        let expected = if id == leader { 0 } else { NOT_COORDINATOR };
        ensure!(codes == [expected], "OffsetCommit on node {id}: {codes:?}");
        if id != leader {
            let response = client
                .request(
                    5,
                    &OffsetFetchRequest::default()
                        .with_group_id(GroupId(StrBytes::from_static_str("g")))
                        .with_topics(None),
                )
                .await?;
            ensure!(response.error_code == NOT_COORDINATOR, "OffsetFetch on follower {id}: {response:?}");
            let listed = client.request(3, &ListGroupsRequest::default()).await?;
            ensure!(
                listed.error_code == 0 && listed.groups.is_empty(),
                "ListGroups on follower {id}: {listed:?}"
            );
        }
    }
    cluster.kill9(leader)?;
    let (new_leader, _) = cluster.wait_for_leader(ELECTION_TIMEOUT_MAX * 20)?;
    ensure!(new_leader != leader, "killed leader {leader} still leads");
    let mut client = RawClient::connect(cluster.kafka_addr(new_leader)).await?;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        // The new leader may still be taking its lease; NOT_COORDINATOR is retried as clients do.
        match fetch(&mut client, 6, "g", 1).await {
            Ok(got) => {
                ensure!(got == (42, String::new(), 0), "after failover: {got:?}");
                return Ok(());
            }
            Err(e) if std::time::Instant::now() < deadline => {
                println!("retrying OffsetFetch on the new leader: {e:#}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

//! The share-group steps of `raft_group_consumer_groups`: a share group's members live in the
//! Raft group of its id, each share partition in the Raft group of its topic (as Kafka keeps a
//! share partition on its partition's leader).

use std::collections::BTreeSet;
use std::ops::Range;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::raft_groups::{group_row, preferred_of_three, RULED_PREFIX};
use harness::share_consumer::{joined, set_group_configs, AckType, ShareConsumer, ShareConsumerConfig};
use harness::{Cluster, RawClient};
use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
use kafka_protocol::messages::describe_share_group_offsets_request::{
    DescribeShareGroupOffsetsRequestGroup, DescribeShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, DeleteGroupsRequest, DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest, GroupId, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::{listed, topics, GROUP0_ENTRIES_MAX, PARTS, READ_TIMEOUT, RECORDS};

/// A share group of group 2 reading group 2's topic: every record delivered and accepted, in
/// group 2's log.
pub async fn share_group_in_group_2(cluster: &Cluster) -> Result<()> {
    let leader2 = preferred_of_three(2);
    let applied =
        |g| -> Result<u64> { Ok(group_row(cluster, leader2, g)?["last_applied"].as_u64().unwrap_or(0)) };
    let (group0_before, group2_before) = (applied(0)?, applied(2)?);
    let [in2, _] = topics();
    let group = format!("{RULED_PREFIX}sharers-ok");
    read_all(cluster, &group, &in2, 0..RECORDS).await?;
    let (group0_grew, group2_grew) = (applied(0)? - group0_before, applied(2)? - group2_before);
    ensure!(
        group0_grew <= GROUP0_ENTRIES_MAX && group2_grew >= 2,
        "{group}: group 0 applied {group0_grew} entries, group 2 {group2_grew}"
    );
    println!(
        "share group {group}: {RECORDS} records of group 2's topic delivered and accepted in group 2's log ({group2_grew} entries; group 0: {group0_grew})"
    );
    Ok(())
}

/// A share group of group 2 reading group 1's topic: its member joins at group 2's leader and
/// fetches from group 1's, every record delivered and accepted through group 1's log. Its
/// coordinator (group 2's leader) then describes the group's offsets as group 1 holds them,
/// resets and deletes them there, and deleting the group forgets its share partitions in group
/// 1; group 1's leader never lists the group.
pub async fn share_group_across_groups(cluster: &Cluster) -> Result<()> {
    let leader1 = preferred_of_three(1);
    let applied1 =
        || -> Result<u64> { Ok(group_row(cluster, leader1, 1)?["last_applied"].as_u64().unwrap_or(0)) };
    let before = applied1()?;
    let [_, in1] = topics();
    let group = format!("{RULED_PREFIX}sharers");
    read_all(cluster, &group, &in1, RECORDS..2 * RECORDS).await?;
    let grew = applied1()? - before;
    ensure!(grew >= 2, "{group}: group 1 applied {grew} entries while it read group 1's topic");
    println!("share group {group} (group 2) read {RECORDS} records of group 1's topic, acquired and accepted in group 1's log ({grew} entries)");

    let coordinator = cluster.kafka_addr(preferred_of_three(2));
    let mut client = RawClient::connect_negotiated(coordinator).await?;
    // Every record accepted: each start offset at its partition's end, no lag.
    let done = until(&mut client, (&group, &in1), |o| {
        o.iter().all(|(_, lag)| *lag == 0) && total(o) == RECORDS as i64
    })
    .await?;
    println!("DescribeShareGroupOffsets at group 2's leader, from group 1: start offsets {done:?}, no lag");

    let alter = AlterShareGroupOffsetsRequest::default().with_group_id(group_id(&group)).with_topics(vec![
        AlterShareGroupOffsetsRequestTopic::default().with_topic_name(TopicName(text(&in1))).with_partitions(
            (0..PARTS)
                .map(|p| {
                    AlterShareGroupOffsetsRequestPartition::default()
                        .with_partition_index(p)
                        .with_start_offset(0)
                })
                .collect(),
        ),
    ]);
    let altered = client.request(0, &alter).await?;
    ensure!(altered.error_code == 0, "AlterShareGroupOffsets: {altered:?}");
    let codes: Vec<i16> =
        altered.responses.iter().flat_map(|t| &t.partitions).map(|p| p.error_code).collect();
    ensure!(codes == vec![0; PARTS as usize], "AlterShareGroupOffsets partitions: {altered:?}");
    let reset = until(&mut client, (&group, &in1), |o| o.iter().all(|(start, _)| *start == 0)).await?;
    let lag: i64 = reset.iter().map(|(_, lag)| lag).sum();
    ensure!(lag == RECORDS as i64, "after the reset to 0: {reset:?}");
    println!("AlterShareGroupOffsets to 0 reached group 1: lag {lag}");

    let delete = DeleteShareGroupOffsetsRequest::default().with_group_id(group_id(&group)).with_topics(vec![
        DeleteShareGroupOffsetsRequestTopic::default().with_topic_name(TopicName(text(&in1))),
    ]);
    let deleted = client.request(0, &delete).await?;
    let code = deleted.responses.first().map(|t| t.error_code);
    ensure!(deleted.error_code == 0 && code == Some(0), "DeleteShareGroupOffsets: {deleted:?}");
    until(&mut client, (&group, &in1), |o| o.iter().all(|(start, _)| *start == -1)).await?;
    println!("DeleteShareGroupOffsets reached group 1: no start offsets");

    // State again in group 1, then the group deleted: group 1 forgets it.
    let altered = client.request(0, &alter).await?;
    ensure!(altered.error_code == 0, "AlterShareGroupOffsets again: {altered:?}");
    until(&mut client, (&group, &in1), |o| o.iter().all(|(start, _)| *start == 0)).await?;
    let groups = DeleteGroupsRequest::default().with_groups_names(vec![group_id(&group)]);
    let answer = client.request(2, &groups).await?;
    let code = answer.results.first().map(|r| r.error_code);
    ensure!(code == Some(0), "DeleteGroups of {group}: {answer:?}");
    until(&mut client, (&group, &in1), |o| o.iter().all(|(start, _)| *start == -1)).await?;
    ensure!(!listed(cluster, leader1).await?.contains(&group), "group 1's leader lists {group}");
    println!(
        "DeleteGroups of {group} forgot its share partitions in group 1; group 1's leader does not list it"
    );
    Ok(())
}

/// Reads `values` of `topic` with one member of share group `group`, accepting each record,
/// every value exactly once.
async fn read_all(cluster: &Cluster, group: &str, topic: &str, values: Range<usize>) -> Result<()> {
    let config = ShareConsumerConfig::new(&cluster.bootstrap(), group, topic)?;
    // The records are older than the group (a share group starts at the latest by default);
    // its configs live in group 0, wherever the group lives.
    set_group_configs(&config.bootstrap, topic, group, &[("share.auto.offset.reset", "earliest")]).await?;
    let mut consumer = ShareConsumer::start(config);
    joined(&consumer, READ_TIMEOUT).await?;
    let deadline = Instant::now() + READ_TIMEOUT;
    let mut got = BTreeSet::new();
    while got.len() < values.len() {
        ensure!(
            Instant::now() < deadline,
            "{group}: {} of {} records in {READ_TIMEOUT:?}",
            got.len(),
            values.len()
        );
        let Ok(fetched) = consumer.poll().await else { continue };
        for d in fetched.deliveries {
            let value = std::str::from_utf8(d.value.as_deref().unwrap_or_default())?.parse::<usize>()?;
            got.insert(value);
            consumer.acknowledge(d.partition, d.offset, AckType::Accept);
        }
    }
    consumer.commit().await?;
    consumer.close().await;
    ensure!(got == values.clone().collect::<BTreeSet<_>>(), "{group} got {} values of {values:?}", got.len());
    Ok(())
}

/// Each partition's (start offset, lag), DescribeShareGroupOffsets v1.
async fn describe(client: &mut RawClient, group: &str, topic: &str) -> Result<Vec<(i64, i64)>> {
    let request = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
        DescribeShareGroupOffsetsRequestGroup::default().with_group_id(group_id(group)).with_topics(Some(
            vec![DescribeShareGroupOffsetsRequestTopic::default()
                .with_topic_name(TopicName(text(topic)))
                .with_partitions((0..PARTS).collect())],
        )),
    ]);
    let answer = client.request(1, &request).await?;
    let g = answer.groups.first().context("no group in the answer")?;
    ensure!(g.error_code == 0, "DescribeShareGroupOffsets: {g:?}");
    let partitions = g.topics.iter().flat_map(|t| &t.partitions);
    partitions
        .map(|p| {
            ensure!(p.error_code == 0, "DescribeShareGroupOffsets partition: {p:?}");
            Ok((p.start_offset, p.lag))
        })
        .collect()
}

fn total(offsets: &[(i64, i64)]) -> i64 {
    offsets.iter().map(|(start, _)| start).sum()
}

/// Asks until `done` holds (the coordinator reads a replica of the partitions' Raft group,
/// which may be an entry behind its leader), at most ten seconds.
async fn until(
    client: &mut RawClient,
    (group, topic): (&str, &str),
    done: impl Fn(&[(i64, i64)]) -> bool,
) -> Result<Vec<(i64, i64)>> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let offsets = describe(client, group, topic).await?;
        if done(&offsets) {
            return Ok(offsets);
        }
        ensure!(Instant::now() < deadline, "share offsets of {group} still {offsets:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn group_id(group: &str) -> GroupId {
    GroupId(text(group))
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

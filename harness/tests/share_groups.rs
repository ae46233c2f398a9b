//! KIP-932 share groups on the wire (issue 29), against three nodes: a member joins and is
//! assigned the partition; its first ShareFetch starts the share state; records produced after
//! it are acquired with delivery count 1; accepted ones never come back and released ones come
//! back with count 2; bad input gets Kafka 4.4's codes with the records unchanged; after a
//! kill -9 of the Raft leader, the records acquired and not acknowledged are available again
//! with their delivery counts kept, and every record is accepted exactly once, the last ones by
//! the final acknowledgement of a member that already left the group; the offsets APIs
//! and `kafka-share-groups.sh` 4.4.0 list, describe, reset and delete, and
//! `kafka-console-share-consumer.sh` 4.4.0 reads the topic once in a group of its own.
//! (Kafka's `KafkaShareConsumer` runs in the compatibility matrix,
//! `scripts/compat.sh --clients java-4.4.0-share`.)

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use harness::kafka::{create_topics, produce_numbered};
use harness::{java, Cluster, ClusterOptions, RawClient};
use kafka_compat::error_code::{
    INVALID_RECORD_STATE, INVALID_REQUEST, INVALID_SHARE_SESSION_EPOCH, NON_EMPTY_GROUP, NOT_COORDINATOR,
    NOT_LEADER_OR_FOLLOWER, SHARE_SESSION_NOT_FOUND,
};
use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition as AckPartition, AcknowledgeTopic as AckTopic, AcknowledgementBatch as AckBatch,
};
use kafka_protocol::messages::share_fetch_request::{AcknowledgementBatch, FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, DescribeShareGroupOffsetsRequest, GroupId, MetadataRequest,
    ShareAcknowledgeRequest, ShareFetchRequest, ShareFetchResponse, ShareGroupHeartbeatRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

const GROUP: &str = "queue-workers";
const TOPIC: &str = "jobs";
const MEMBER: &str = "7cd1e3a4-0000-4000-8000-000000000001";
const ACCEPT: i8 = 1;
const RELEASE: i8 = 2;
const SHARE_TOOL: &str = "org.apache.kafka.tools.consumer.group.ShareGroupCommand";
const CONSOLE_SHARE_CONSUMER: &str = "org.apache.kafka.tools.consumer.ConsoleShareConsumer";

#[tokio::test(flavor = "multi_thread")]
async fn share_group_records_survive_a_leader_kill_acknowledged_once() {
    let mut cluster = Cluster::start_with(ClusterOptions::new(3)).expect("starting three onelog nodes");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    create_topics(&cluster.bootstrap(), &[(TOPIC, 1)]).await?;
    let topic_id = topic_id(cluster).await?;
    let joined = heartbeat(cluster, 0).await?;
    ensure!(joined.0 == 0, "join refused: {joined:?}");
    // The first fetch starts the group's share state at the end of the log (latest).
    let (mut share, first) = Share::open(cluster, topic_id).await?;
    ensure!(acquired(&first).is_empty(), "nothing before the first fetch: {first:?}");
    produce_numbered(&cluster.bootstrap(), TOPIC, 0..10).await?;
    let got = share.fetch(&[], 5_000).await?;
    ensure!(acquired(&got) == vec![(0, 9, 1)], "ten records, first delivery: {:?}", acquired(&got));

    bad_input(&mut share).await?;
    follower_answers(cluster, topic_id).await?;
    // Accept 0-4, release 5-9: only 5-9 come back, delivered twice.
    let back = share.fetch(&[(0, 4, ACCEPT), (5, 9, RELEASE)], 5_000).await?;
    ensure!(ack_codes(&back).iter().all(|c| *c == 0), "acknowledged: {back:?}");
    ensure!(acquired(&back) == vec![(5, 9, 2)], "released records come back: {:?}", acquired(&back));
    // Below the share-partition start offset an acknowledgement is skipped, as in Kafka.
    let twice = share.fetch(&[(0, 4, ACCEPT)], 0).await?;
    ensure!(ack_codes(&twice) == vec![0], "accepting again below the start: {twice:?}");
    // ShareAcknowledge: released records are no longer this member's to accept.
    ensure!(share.acknowledge(0, &[(5, 9, RELEASE)]).await? == vec![INVALID_SHARE_SESSION_EPOCH], "epoch 0");
    ensure!(share.acknowledge(share.epoch, &[(5, 9, RELEASE)]).await? == vec![0], "released");
    let not_held = share.acknowledge(share.epoch, &[(5, 9, ACCEPT)]).await?;
    ensure!(not_held == vec![INVALID_RECORD_STATE], "accepting records not acquired: {not_held:?}");
    let third = share.fetch(&[], 5_000).await?;
    ensure!(acquired(&third) == vec![(5, 9, 3)], "a third delivery: {:?}", acquired(&third));

    // The acquisition is in the log: a new leader releases what the old leader's sessions
    // held, with delivery counts kept.
    let leader = cluster.leader()?;
    cluster.kill9(leader)?;
    let (mut share, opened) = Share::open(cluster, topic_id).await?;
    let again = if acquired(&opened).is_empty() { share.fetch(&[], 5_000).await? } else { opened };
    ensure!(acquired(&again) == vec![(5, 9, 4)], "after the kill: {:?}", acquired(&again));
    // A member that leaves keeps what it acquired until its share session ends, as in Kafka:
    // its final ShareAcknowledge (epoch -1) after the leave still accepts (regression: the
    // leave released the records and closed the session, so librdkafka's close, which leaves
    // first, lost its last acknowledgements).
    let left = heartbeat(cluster, -1).await?;
    ensure!(left == (0, -1), "leave: {left:?}");
    let last = share.acknowledge(-1, &[(5, 9, ACCEPT)]).await?;
    ensure!(last == vec![0], "the final acknowledgement after the leave: {last:?}");
    let rejoined = heartbeat(cluster, 0).await?;
    ensure!(rejoined.0 == 0, "rejoin refused: {rejoined:?}");
    cluster.start_node(leader)?;
    offsets(cluster).await
}

/// DescribeShareGroupOffsets: every record accepted, the start offset at the end and no lag;
/// AlterShareGroupOffsets refuses a group with members (NON_EMPTY_GROUP), as Kafka.
async fn offsets(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    let describe = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
        DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(GroupId(text(GROUP)))
            .with_topics(None),
    ]);
    let described = client.request(1, &describe).await?;
    let partitions: Vec<(i64, i64)> = described
        .groups
        .iter()
        .flat_map(|g| &g.topics)
        .flat_map(|t| &t.partitions)
        .map(|p| (p.start_offset, p.lag))
        .collect();
    ensure!(partitions == vec![(10, 0)], "start offset 10, lag 0: {described:?}");
    let alter =
        AlterShareGroupOffsetsRequest::default().with_group_id(GroupId(text(GROUP))).with_topics(vec![
            AlterShareGroupOffsetsRequestTopic::default()
                .with_topic_name(TopicName(text(TOPIC)))
                .with_partitions(vec![AlterShareGroupOffsetsRequestPartition::default()
                    .with_partition_index(0)
                    .with_start_offset(0)]),
        ]);
    let altered = client.request(0, &alter).await?;
    ensure!(altered.error_code == NON_EMPTY_GROUP, "a reset with a member in the group: {altered:?}");
    tools(cluster).await
}

/// kafka-share-groups.sh of Kafka 4.4.0: list, describe members, offsets and state; once the
/// member left, reset the offsets to the earliest, delete them, and delete the group.
async fn tools(cluster: &mut Cluster) -> Result<()> {
    let bootstrap = cluster.live_bootstrap();
    let listed = share_tool(&bootstrap, &["--list"])?.stdout;
    ensure!(listed.lines().any(|l| l.trim() == GROUP), "--list: {listed}");
    let members = share_tool(&bootstrap, &["--describe", "--group", GROUP, "--members"])?.stdout;
    ensure!(members.contains(MEMBER), "--describe --members: {members}");
    let state = share_tool(&bootstrap, &["--describe", "--group", GROUP, "--state"])?.stdout;
    ensure!(state.contains("Stable"), "--describe --state: {state}");
    let offsets = share_tool(&bootstrap, &["--describe", "--group", GROUP, "--offsets"])?.stdout;
    ensure!(
        offsets.lines().any(|l| l.contains(TOPIC) && l.contains(" 10 ")),
        "--describe --offsets: {offsets}"
    );

    let left = heartbeat(cluster, -1).await?;
    ensure!(left == (0, -1), "leave: {left:?}");
    let reset = ["--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--to-earliest", "--execute"];
    let reset = share_tool(&bootstrap, &reset)?.stdout;
    ensure!(reset.contains(TOPIC), "--reset-offsets: {reset}");
    let offsets = share_tool(&bootstrap, &["--describe", "--group", GROUP, "--offsets"])?.stdout;
    ensure!(offsets.lines().any(|l| l.contains(TOPIC) && l.contains(" 0 ")), "after the reset: {offsets}");
    let deleted = share_tool(&bootstrap, &["--delete-offsets", "--group", GROUP, "--topic", TOPIC])?.stdout;
    ensure!(deleted.contains(TOPIC), "--delete-offsets: {deleted}");
    let deleted = share_tool(&bootstrap, &["--delete", "--group", GROUP])?.stdout;
    ensure!(deleted.contains("success"), "--delete: {deleted}");
    let listed = share_tool(&bootstrap, &["--list"])?.stdout;
    ensure!(!listed.lines().any(|l| l.trim() == GROUP), "still listed after --delete: {listed}");
    console_share_consumer(&bootstrap)
}

/// kafka-console-share-consumer.sh of Kafka 4.4.0: a share group set to start from the
/// earliest record prints the topic's ten values and accepts them (implicit acknowledgement),
/// so a second run in the same group gets none.
fn console_share_consumer(bootstrap: &str) -> Result<()> {
    const GROUP: &str = "console-workers";
    let set = ["--entity-type", "groups", "--entity-name", GROUP, "--alter", "--add-config"];
    let (ok, out) =
        java::config_command(bootstrap, &[&set[..], &["share.auto.offset.reset=earliest"]].concat())?;
    ensure!(ok, "kafka-configs --entity-type groups: {out}");
    let run = |timeout_ms: &str| -> Result<Vec<String>> {
        let args: Vec<String> = ["--bootstrap-server", bootstrap, "--topic", TOPIC, "--group", GROUP]
            .iter()
            .chain(&["--max-messages", "10", "--timeout-ms", timeout_ms])
            .map(|a| a.to_string())
            .collect();
        let out = java::Clients::Kafka44.command(CONSOLE_SHARE_CONSUMER, &args)?.output()?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        Ok(stdout.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect())
    };
    let mut first = run("30000")?;
    first.sort_by_key(|v| v.parse::<u32>().unwrap_or(u32::MAX));
    let expected: Vec<String> = (0..10).map(|v| v.to_string()).collect();
    ensure!(first == expected, "kafka-console-share-consumer.sh printed {first:?}");
    let second = run("5000")?;
    ensure!(second.is_empty(), "accepted records came back to the group: {second:?}");
    Ok(())
}

/// kafka-share-groups.sh of Kafka 4.4.0.
fn share_tool(bootstrap: &str, args: &[&str]) -> Result<java::Output> {
    let mut all = vec!["--bootstrap-server".to_string(), bootstrap.to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    java::Clients::Kafka44.run_text(SHARE_TOOL, &all)
}

/// Kafka 4.4's codes, each leaving the member's acquired records as they were (the next
/// acknowledgement of them succeeds).
async fn bad_input(share: &mut Share) -> Result<()> {
    let stale = share.raw(share.epoch - 1, &[], 0).await?;
    ensure!(stale.error_code == INVALID_SHARE_SESSION_EPOCH, "stale epoch: {stale:?}");
    let member = std::mem::replace(&mut share.member, "nobody-member".into());
    let unknown = share.raw(5, &[], 0).await;
    share.member = member;
    ensure!(unknown?.error_code == SHARE_SESSION_NOT_FOUND, "no session for another member");
    let opening = share.raw(0, &[(0, 0, ACCEPT)], 0).await?;
    ensure!(opening.error_code == INVALID_REQUEST, "acknowledging in an opening fetch: {opening:?}");
    // The failed open above ended nothing: the session still runs at its epoch.
    for (bad, why) in [
        (vec![(0, 4, 9)], "a type out of range"),
        (vec![(3, 5, ACCEPT), (4, 6, ACCEPT)], "overlapping batches"),
        (vec![(10, 12, ACCEPT)], "offsets never acquired"),
    ] {
        let answer = share.fetch(&bad, 0).await?;
        // Past the acquired records is INVALID_REQUEST in Kafka 4.4 too ("Batch record not
        // found. The first offset in request is past acquired records.").
        ensure!(ack_codes(&answer) == vec![INVALID_REQUEST], "{why}: {answer:?}");
        ensure!(acquired(&answer).is_empty(), "{why}: nothing new acquired");
    }
    Ok(())
}

/// Regression: a follower answered a session's next ShareFetch with no partitions and no
/// error, and a Java share consumer whose cached leader it was asked it again at once, tens
/// of thousands of times a second, for as long as the follower had not applied the new term.
/// A follower holds no share session: SHARE_SESSION_NOT_FOUND; an opening fetch gets each
/// partition NOT_LEADER_OR_FOLLOWER naming the leader, and the leader's address.
async fn follower_answers(cluster: &mut Cluster, topic_id: Uuid) -> Result<()> {
    let leader = cluster.leader()?;
    let follower = cluster.ids().into_iter().find(|id| *id != leader).context("a follower")?;
    let client = RawClient::connect_negotiated(cluster.kafka_addr(follower)).await?;
    let mut share = Share { client, topic_id, member: MEMBER.into(), epoch: 0 };
    let next = share.raw(3, &[], 0).await?;
    ensure!(next.error_code == SHARE_SESSION_NOT_FOUND, "a session's next fetch at a follower: {next:?}");
    let opening = share.raw(0, &[], 0).await?;
    let hints: Vec<(i16, i32)> = opening
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| (p.error_code, p.current_leader.leader_id))
        .collect();
    ensure!(
        hints == vec![(NOT_LEADER_OR_FOLLOWER, leader as i32)],
        "an opening fetch at a follower: {opening:?}"
    );
    let endpoints: Vec<i32> = opening.node_endpoints.iter().map(|e| e.node_id.0).collect();
    ensure!(endpoints == vec![leader as i32], "the leader's address: {opening:?}");
    Ok(())
}

/// One member's share session, on one connection: a session closes with its connection, as
/// in Kafka.
struct Share {
    client: RawClient,
    topic_id: Uuid,
    member: String,
    epoch: i32,
}

impl Share {
    /// A new share session with the leader (epoch 0), and the answer of its opening fetch.
    async fn open(cluster: &mut Cluster, topic_id: Uuid) -> Result<(Share, ShareFetchResponse)> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let leader = cluster.leader()?;
            if let Ok(client) = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await {
                let mut share = Share { client, topic_id, member: MEMBER.into(), epoch: 0 };
                if let Ok(answer) = share.raw(0, &[], 0).await {
                    if answer.error_code == 0 && !partition_codes(&answer).contains(&NOT_LEADER_OR_FOLLOWER) {
                        share.epoch = 1;
                        return Ok((share, answer));
                    }
                }
            }
            ensure!(Instant::now() < deadline, "no leader opened a share session in 20 s");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A ShareAcknowledge at `epoch` (the session advances unless it is refused): the
    /// top-level code if not 0, else the partition's code.
    async fn acknowledge(&mut self, epoch: i32, acks: &[(i64, i64, i8)]) -> Result<Vec<i16>> {
        let partition = AckPartition::default().with_partition_index(0).with_acknowledgement_batches(
            acks.iter()
                .map(|(first, last, kind)| {
                    AckBatch::default()
                        .with_first_offset(*first)
                        .with_last_offset(*last)
                        .with_acknowledge_types(vec![*kind])
                })
                .collect(),
        );
        let request = ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(text(GROUP))))
            .with_member_id(Some(text(&self.member)))
            .with_share_session_epoch(epoch)
            .with_topics(vec![AckTopic::default()
                .with_topic_id(self.topic_id)
                .with_partitions(vec![partition])]);
        let answer = self.client.request(2, &request).await?;
        if answer.error_code != 0 {
            return Ok(vec![answer.error_code]);
        }
        self.epoch += 1;
        Ok(answer.responses.iter().flat_map(|t| &t.partitions).map(|p| p.error_code).collect())
    }

    /// The next ShareFetch of the session, acknowledging `acks`.
    async fn fetch(&mut self, acks: &[(i64, i64, i8)], wait_ms: i32) -> Result<ShareFetchResponse> {
        let answer = self.raw(self.epoch, acks, wait_ms).await?;
        ensure!(answer.error_code == 0, "ShareFetch at epoch {}: {answer:?}", self.epoch);
        self.epoch += 1;
        Ok(answer)
    }

    async fn raw(&mut self, epoch: i32, acks: &[(i64, i64, i8)], wait_ms: i32) -> Result<ShareFetchResponse> {
        let batches = acks
            .iter()
            .map(|(first, last, kind)| {
                AcknowledgementBatch::default()
                    .with_first_offset(*first)
                    .with_last_offset(*last)
                    .with_acknowledge_types(vec![*kind])
            })
            .collect();
        let partition =
            FetchPartition::default().with_partition_index(0).with_acknowledgement_batches(batches);
        let request = ShareFetchRequest::default()
            .with_group_id(Some(GroupId(text(GROUP))))
            .with_member_id(Some(text(&self.member)))
            .with_share_session_epoch(epoch)
            .with_max_wait_ms(wait_ms)
            .with_max_bytes(1 << 20)
            .with_max_records(500)
            .with_batch_size(500)
            .with_topics(vec![FetchTopic::default()
                .with_topic_id(self.topic_id)
                .with_partitions(vec![partition])]);
        self.client.request(2, &request).await
    }
}

/// (first, last, delivery count) of every acquired range.
fn acquired(r: &ShareFetchResponse) -> Vec<(i64, i64, i16)> {
    let partitions = r.responses.iter().flat_map(|t| &t.partitions);
    partitions
        .flat_map(|p| &p.acquired_records)
        .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        .collect()
}

fn ack_codes(r: &ShareFetchResponse) -> Vec<i16> {
    r.responses.iter().flat_map(|t| &t.partitions).map(|p| p.acknowledge_error_code).collect()
}

fn partition_codes(r: &ShareFetchResponse) -> Vec<i16> {
    r.responses.iter().flat_map(|t| &t.partitions).map(|p| p.error_code).collect()
}

/// (error code, member epoch) of a ShareGroupHeartbeat at `epoch` subscribing to the topic.
async fn heartbeat(cluster: &mut Cluster, epoch: i32) -> Result<(i16, i32)> {
    let request = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_member_id(text(MEMBER))
        .with_member_epoch(epoch)
        .with_subscribed_topic_names(Some(vec![TopicName(text(TOPIC))]));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let leader = cluster.leader()?;
        let addr = cluster.kafka_addr(leader);
        let answer = match RawClient::connect_negotiated(addr).await {
            Ok(mut client) => client.request(1, &request).await.ok(),
            Err(_) => None,
        };
        match answer {
            Some(r) if r.error_code != NOT_COORDINATOR => return Ok((r.error_code, r.member_epoch)),
            _ if Instant::now() > deadline => bail!("no leader answered the share heartbeat in 20 s"),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

async fn topic_id(cluster: &mut Cluster) -> Result<Uuid> {
    let leader = cluster.leader()?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(TopicName(text(TOPIC))))]));
    let answer = client.request(12, &request).await?;
    let ids: BTreeMap<String, Uuid> =
        answer.topics.iter().filter_map(|t| t.name.as_ref().map(|n| (n.0.to_string(), t.topic_id))).collect();
    ids.get(TOPIC).copied().context("the topic's id")
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

//! DescribeTopicPartitions (key 75), v0 (KIP-966): Metadata's topic description with paging,
//! what `kafka-topics.sh --describe` uses from Kafka 3.8 on.
//!
//! Topics are answered sorted by name (every topic when the list is empty). The cursor names
//! the topic and partition to start from; at most `response_partition_limit` partitions
//! (capped at `DESCRIBE_TOPIC_PARTITIONS_LIMIT_MAX`, Kafka's default
//! `max.request.partition.size.limit`) are returned, and `next_cursor` points at the first
//! one left out. A cursor naming a topic that is not requested is INVALID_REQUEST, as Kafka
//! answers. Partitions are described as in Metadata (leader: the Raft leader, epoch: the term,
//! replicas: the voters); onelog has no ELR (KIP-966's eligible leader replicas): both lists
//! are empty. DESCRIBE on each topic (a listing of all leaves the others out); authorized operations are always returned (see `authorized`).
//! The virtual `__consumer_offsets` is described as internal (`internal_topic`).

use onelog_state::xgroup::placement::recorded_topic_group;

use super::partition_leaders::PartitionLeaders;
use std::collections::BTreeSet;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, RequestKind,
    ResponseKind,
};

use super::util::{topic_name, uuid};
use super::{authorized, HandlerResult};
use crate::ctx::{Ctx, SharedCtx};
use crate::internal_topic;
use crate::limits::DESCRIBE_TOPIC_PARTITIONS_LIMIT_MAX;
use crate::security::authz::{code, op, rt, Subject};

pub const KEY: ApiKey = ApiKey::DescribeTopicPartitions;
pub const VERSIONS: (i16, i16) = (0, 0);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::DescribeTopicPartitions(body) = req.body else {
        anyhow::bail!("not a DescribeTopicPartitions body")
    };
    Ok(Some(ResponseKind::DescribeTopicPartitions(describe(&ctx, &who, body))))
}

fn describe(
    ctx: &Ctx,
    who: &Subject,
    body: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let listed_all = body.topics.is_empty();
    let requested: BTreeSet<String> = body.topics.iter().map(|t| t.name.0.to_string()).collect();
    let names: Vec<String> = if requested.is_empty() {
        // Every topic, and the virtual `__consumer_offsets` (`internal_topic`), sorted.
        let mut all: BTreeSet<String> = ctx.applied.state(|s| s.topics.keys().cloned().collect());
        all.insert(internal_topic::NAME.to_string());
        all.into_iter().collect()
    } else {
        requested.into_iter().collect()
    };
    let (start_topic, start_partition) = match &body.cursor {
        Some(c) => (c.topic_name.0.to_string(), c.partition_index.max(0)),
        None => (String::new(), 0),
    };
    if body.cursor.is_some() && !names.contains(&start_topic) {
        return invalid_cursor(&names);
    }
    // Kafka: DESCRIBE on each topic; a listing of all leaves the others out.
    let allowed = ctx.authorizer.allowed_each(who, rt::TOPIC, names.iter().map(String::as_str), op::DESCRIBE);
    let names: Vec<(String, bool)> =
        names.into_iter().zip(allowed).filter(|(_, allowed)| *allowed || !listed_all).collect();
    let mut budget = body.response_partition_limit.clamp(1, DESCRIBE_TOPIC_PARTITIONS_LIMIT_MAX) as usize;
    let mut topics = Vec::new();
    let mut next_cursor = None;
    for (name, allowed) in names.into_iter().filter(|(n, _)| *n >= start_topic) {
        if !allowed {
            topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
                    .with_name(Some(topic_name(name))),
            );
            continue;
        }
        if budget == 0 {
            next_cursor = Some(Cursor::default().with_topic_name(topic_name(name)).with_partition_index(0));
            break;
        }
        let first = if name == start_topic { start_partition } else { 0 };
        let (topic, count) = describe_topic(ctx, &name, first, budget);
        let topic = topic.with_topic_authorized_operations(authorized::topic(ctx, who, true, &name));
        budget -= topic.partitions.len();
        let described_to = first + topic.partitions.len() as i32;
        topics.push(topic);
        if described_to < count {
            next_cursor =
                Some(Cursor::default().with_topic_name(topic_name(name)).with_partition_index(described_to));
            break;
        }
    }
    DescribeTopicPartitionsResponse::default().with_topics(topics).with_next_cursor(next_cursor)
}

/// The response has no top-level error: as Kafka's `getErrorResponse`, every requested topic
/// carries it.
fn invalid_cursor(names: &[String]) -> DescribeTopicPartitionsResponse {
    let topics = names
        .iter()
        .map(|n| {
            DescribeTopicPartitionsResponseTopic::default()
                .with_error_code(error_code::INVALID_REQUEST)
                .with_name(Some(topic_name(n)))
        })
        .collect();
    DescribeTopicPartitionsResponse::default().with_topics(topics)
}

/// One topic from partition `first`, at most `budget` partitions; and its partition count.
fn describe_topic(
    ctx: &Ctx,
    name: &str,
    first: i32,
    budget: usize,
) -> (DescribeTopicPartitionsResponseTopic, i32) {
    // (id, replicas per partition: empty for every voter, internal), and its group
    let found = ctx.applied.state(|s| {
        let replicas = |t: &onelog_state::Topic| t.partitions.iter().map(|p| p.replicas.clone()).collect();
        s.topics.get(name).map(|t| ((t.topic_id, replicas(t), false), recorded_topic_group(&t.configs)))
    });
    let by = PartitionLeaders::of(ctx).group(found.as_ref().map_or(0, |(_, g)| *g)).clone();
    let found = found.map(|(topic, _)| topic);
    let (leader, epoch) = (by.leader, by.epoch);
    let ids = |v: Vec<i32>| v.into_iter().map(BrokerId).collect::<Vec<_>>();
    let voters = ids(by.voters);
    let in_sync = ids(by.in_sync);
    let internal = || {
        let replicas = vec![Vec::new(); internal_topic::PARTITIONS as usize];
        internal_topic::is_internal(name).then_some((internal_topic::TOPIC_ID, replicas, true))
    };
    let Some((topic_id, replicas, is_internal)) = found.or_else(internal) else {
        let topic = DescribeTopicPartitionsResponseTopic::default()
            .with_error_code(error_code::UNKNOWN_TOPIC_OR_PARTITION)
            .with_name(Some(topic_name(name)));
        return (topic, 0);
    };
    let count = replicas.len() as i32;
    let code = if leader < 0 { error_code::LEADER_NOT_AVAILABLE } else { error_code::NONE };
    let partitions = (first..count)
        .take(budget)
        .map(|p| {
            // An explicit CreatePartitions assignment names the replicas, as in Metadata.
            let named = &replicas[p as usize];
            let (replicas, isr) = if named.is_empty() {
                (voters.clone(), in_sync.clone())
            } else {
                (ids(named.clone()), in_sync.iter().filter(|b| named.contains(&b.0)).copied().collect())
            };
            DescribeTopicPartitionsResponsePartition::default()
                .with_error_code(code)
                .with_partition_index(p)
                .with_leader_id(leader.into())
                .with_leader_epoch(epoch)
                .with_replica_nodes(replicas)
                .with_isr_nodes(isr)
                .with_eligible_leader_replicas(Some(Vec::new()))
                .with_last_known_elr(Some(Vec::new()))
        })
        .collect();
    let topic = DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(topic_name(name)))
        .with_topic_id(uuid(&topic_id))
        .with_is_internal(is_internal)
        .with_partitions(partitions)
        .with_topic_authorized_operations(authorized::OMITTED);
    (topic, count)
}

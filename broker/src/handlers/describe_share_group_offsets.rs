//! DescribeShareGroupOffsets (key 90), v0–v1: each share partition's start offset (SPSO) and,
//! from v1 (KIP-1226), its lag, read from the applied state as Kafka 4.4 reads its share
//! coordinator's summary: lag = high watermark − start offset − the records above the start
//! already acknowledged or archived. A partition the group never read answers start offset
//! -1 (and lag -1); a group without topics named, every partition the group has state of.
//! A node not leading the group's Raft group answers NOT_COORDINATOR. Each topic's share
//! partitions are read where they live, from this node's replica of the topic's Raft group
//! (committed state; the leader's may be an entry ahead).
//!
//! Access: DESCRIBE on the group, then DESCRIBE on each topic (a topic not allowed is left
//! out of the answer, as Kafka's `partitionByAuthorized`).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup as Group, DescribeShareGroupOffsetsResponsePartition as Partition,
    DescribeShareGroupOffsetsResponseTopic as Topic,
};
use kafka_protocol::messages::{
    ApiKey, DescribeShareGroupOffsetsResponse, RequestKind, ResponseKind, TopicName,
};
use onelog_state::features::SHARE_VERSION;
use onelog_state::share_partition::SharePartition;
use onelog_state::BrokerState;

use super::util::{str_bytes, uuid};
use super::HandlerResult;
use crate::ctx::{Ctx, SharedCtx};
use crate::security::authz::{code, op, rt, Subject};

pub const KEY: ApiKey = ApiKey::DescribeShareGroupOffsets;
pub const VERSIONS: (i16, i16) = (0, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::DescribeShareGroupOffsets(body) = &req.body else {
        anyhow::bail!("not a DescribeShareGroupOffsets body")
    };
    let groups = body
        .groups
        .iter()
        .map(|g| {
            let topics = g.topics.as_ref().map(|ts| {
                ts.iter().map(|t| (t.topic_name.0.to_string(), t.partitions.clone())).collect::<Vec<_>>()
            });
            let answer = describe(&ctx, &who, &g.group_id.0, topics);
            answer.with_group_id(g.group_id.clone())
        })
        .collect();
    Ok(Some(ResponseKind::DescribeShareGroupOffsets(
        DescribeShareGroupOffsetsResponse::default().with_groups(groups),
    )))
}

/// One group: named topics with their partitions, or None for every partition with state.
fn describe(ctx: &Ctx, who: &Subject, group_id: &str, topics: Option<Vec<(String, Vec<i32>)>>) -> Group {
    let refused = |code: i16| Group::default().with_error_code(code);
    if ctx.applied.state(|s| s.features.level(SHARE_VERSION)) < 1 {
        return refused(error_code::UNSUPPORTED_VERSION);
    }
    if !ctx.authorizer.allowed(who, rt::GROUP, group_id, op::DESCRIBE) {
        return refused(code::GROUP_AUTHORIZATION_FAILED);
    }
    if ctx.group_lane(group_id).filter(|lane| lane.is_leader()).is_none() {
        return refused(error_code::NOT_COORDINATOR);
    }
    let readable = |name: &str| ctx.authorizer.allowed(who, rt::TOPIC, name, op::DESCRIBE);
    let topics = match topics {
        Some(named) => named,
        None => ctx.lanes().flat_map(|lane| lane.applied.state(|s| with_state(s, group_id))).collect(),
    };
    let answered = topics.into_iter().filter(|(name, _)| readable(name)).map(|(name, ps)| {
        // Each share partition lives in its topic's Raft group: read from this node's replica.
        let group = ctx.topic_group(&name);
        match ctx.lane(group) {
            Some(lane) => {
                let epoch = lane.leadership.leader_epoch();
                lane.applied.state(|s| topic(s, group_id, &name, &ps, epoch))
            }
            None => not_here(&name, &ps, group),
        }
    });
    Group::default().with_topics(answered.collect())
}

/// The partitions of a topic whose Raft group this node does not run (a group of fewer voters
/// than nodes): COORDINATOR_NOT_AVAILABLE for each, naming the group.
fn not_here(name: &str, partitions: &[i32], group: u32) -> Topic {
    let message = format!("topic {name} is in Raft group {group}, which this node does not run");
    let partitions = partitions.iter().map(|p| {
        Partition::default()
            .with_partition_index(*p)
            .with_start_offset(-1)
            .with_lag(-1)
            .with_error_code(error_code::COORDINATOR_NOT_AVAILABLE)
            .with_error_message(Some(str_bytes(message.clone())))
    });
    Topic::default().with_topic_name(TopicName(str_bytes(name))).with_partitions(partitions.collect())
}

/// Every topic and partition the group has share state of, by name.
fn with_state(s: &BrokerState, group_id: &str) -> Vec<(String, Vec<i32>)> {
    let Some(group) = s.share_states.groups.get(group_id) else { return Vec::new() };
    group
        .iter()
        .filter_map(|(id, partitions)| {
            let (name, _) = s.topic_by_id(id)?;
            Some((name.clone(), partitions.keys().copied().collect()))
        })
        .collect()
}

fn topic(s: &BrokerState, group_id: &str, name: &str, partitions: &[i32], epoch: i32) -> Topic {
    let found = s.topics.get(name);
    let answer = |p: i32| {
        let Some(t) = found else {
            return Partition::default().with_partition_index(p).with_start_offset(-1).with_lag(-1);
        };
        let share = s.share_states.get(group_id, &t.topic_id, p);
        let high_watermark =
            usize::try_from(p).ok().and_then(|i| t.partitions.get(i)).map(|ps| ps.high_watermark());
        let (start, lag) = match (share, high_watermark) {
            (Some(share), Some(hw)) => (share.start_offset, lag(share, hw)),
            _ => (-1, -1),
        };
        Partition::default()
            .with_partition_index(p)
            .with_start_offset(start)
            .with_leader_epoch(epoch)
            .with_lag(lag)
    };
    Topic::default()
        .with_topic_name(TopicName(str_bytes(name)))
        .with_topic_id(found.map_or(uuid::Uuid::nil(), |t| uuid(&t.topic_id)))
        .with_partitions(partitions.iter().map(|p| answer(*p)).collect())
}

/// Kafka's share-partition lag: what lies between the start offset and the high watermark,
/// less what of it is already acknowledged or archived.
pub fn lag(share: &SharePartition, high_watermark: i64) -> i64 {
    let done: i64 = share
        .records
        .iter()
        .filter(|(_, r)| r.state.is_terminal())
        .map(|(first, r)| r.last_offset - first + 1)
        .sum();
    (high_watermark - share.start_offset - done).max(0)
}

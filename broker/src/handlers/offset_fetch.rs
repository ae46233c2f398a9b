//! OffsetFetch (key 9), v1–v9: committed offsets from the applied state; no log entry.
//!
//! A group is coordinated by the leader of the Raft group it is placed in (see
//! find_coordinator); another node answers NOT_COORDINATOR. The leader has applied every
//! commit it acknowledged, so a consumer reads back what it committed. As Kafka: an unknown group or partition is offset -1, metadata ""
//! and NONE; topics null (v2+) asks for every committed partition of the group; v8 (KIP-709)
//! asks for several groups at once, each with its own error code; v9 (KIP-848) carries a
//! consumer-protocol or Streams member's id and epoch, checked as Kafka does
//! (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH for the group).
//!
//! `require_stable` (v7+, KIP-447): a partition for which an open transaction holds a pending
//! offset (TxnOffsetCommit not yet decided by EndTxn) answers UNSTABLE_OFFSET_COMMIT, which
//! consumers retry until the transaction ends.

use std::collections::BTreeSet;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{ApiKey, GroupId, OffsetFetchResponse, RequestKind, ResponseKind};

use super::util::{str_bytes, topic_name};
use super::HandlerResult;
use crate::ctx::{Ctx, Lane, SharedCtx};
use crate::security::authz::{code, op, rt, Subject};
use onelog_state::BrokerState;

pub const KEY: ApiKey = ApiKey::OffsetFetch;
pub const VERSIONS: (i16, i16) = (1, 9);
pub const ACCEPTED_MIN_VERSION: i16 = 1;

/// Topics asked for, with their partitions; None asks for every committed partition.
type Wanted = Option<Vec<(String, Vec<i32>)>>;

/// One partition's answer: (partition, offset, leader epoch, metadata, error code).
type Fetched = (i32, i64, i32, String, i16);

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::OffsetFetch(body) = req.body else { anyhow::bail!("not an OffsetFetch body") };
    let all_topics: Vec<bool> = body.groups.iter().map(|g| g.topics.is_none()).collect();
    let single_all_topics = body.topics.is_none();
    let single_group = (req.api_version < 8).then(|| body.group_id.0.to_string());
    let stable = body.require_stable;
    let mut response = if req.api_version >= 8 {
        let mut answers = Vec::with_capacity(body.groups.len());
        for g in body.groups {
            let (lane, coordinator) = lane_of(&ctx, &g.group_id.0).await;
            answers.push(lane.applied.read(|applied| group_answer(&applied.state, stable, coordinator, g)));
        }
        OffsetFetchResponse::default().with_groups(answers)
    } else {
        let (lane, coordinator) = lane_of(&ctx, &body.group_id.0).await;
        let wanted: Wanted = body
            .topics
            .map(|ts| ts.into_iter().map(|t| (t.name.0.to_string(), t.partition_indexes)).collect());
        let group = &body.group_id.0;
        let v = req.api_version;
        lane.applied.read(|applied| single_response(&applied.state, stable, coordinator, group, wanted, v))
    };
    if ctx.authorizer.enabled() {
        restrict(&ctx, &who, &mut response, &all_topics, single_all_topics);
        let refused =
            single_group.is_some_and(|g| !ctx.authorizer.allowed(&who, rt::GROUP, &g, op::DESCRIBE));
        if refused {
            response = OffsetFetchResponse::default().with_error_code(code::GROUP_AUTHORIZATION_FAILED);
        }
    }
    Ok(Some(ResponseKind::OffsetFetch(response)))
}

/// The lane of `group_id`'s Raft group and whether this node serves its reads as the
/// coordinator; group 0's lane, not serving, where this node does not run that group.
async fn lane_of<'a>(ctx: &'a Ctx, group_id: &str) -> (Lane<'a>, bool) {
    match ctx.group_lane(group_id) {
        Some(lane) => (lane, lane.leadership.serves_reads().await),
        None => (ctx.group0(), false),
    }
}

/// v8+: one group of the request, answered from its Raft group's state.
fn group_answer(
    state: &BrokerState,
    stable: bool,
    coordinator: bool,
    g: OffsetFetchRequestGroup,
) -> OffsetFetchResponseGroup {
    let member_id = g.member_id.as_ref().map(|m| m.as_str());
    let fenced = member_check(state, &g.group_id.0, member_id, g.member_epoch);
    if fenced != error_code::NONE {
        return OffsetFetchResponseGroup::default().with_group_id(g.group_id).with_error_code(fenced);
    }
    let wanted =
        g.topics.map(|ts| ts.into_iter().map(|t| (t.name.0.to_string(), t.partition_indexes)).collect());
    group_response(state, stable, coordinator, g.group_id, wanted)
}

/// v9 (KIP-848): a consumer-protocol or Streams member fetches at its member epoch (Kafka's
/// `ConsumerGroup` / `StreamsGroup.validateOffsetFetch`); each check passes a group that is
/// not of its type, and one id is one group of one type.
fn member_check(state: &BrokerState, group_id: &str, member_id: Option<&str>, member_epoch: i32) -> i16 {
    match state.consumer_groups.check_fetch(group_id, member_id, member_epoch) {
        error_code::NONE => state.streams_groups.check_fetch(group_id, member_id, member_epoch),
        fenced => fenced,
    }
}

/// KafkaApis: DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED), and on each topic: a
/// request for all of a group's topics leaves out those the principal may not describe, a
/// named one gets TOPIC_AUTHORIZATION_FAILED for its partitions.
fn restrict(
    ctx: &crate::ctx::Ctx,
    who: &Subject,
    response: &mut OffsetFetchResponse,
    all_topics: &[bool],
    single_all_topics: bool,
) {
    for (group, all) in response.groups.iter_mut().zip(all_topics) {
        if !ctx.authorizer.allowed(who, rt::GROUP, &group.group_id.0, op::DESCRIBE) {
            *group = OffsetFetchResponseGroup::default()
                .with_group_id(group.group_id.clone())
                .with_error_code(code::GROUP_AUTHORIZATION_FAILED);
            continue;
        }
        let names: Vec<String> = group.topics.iter().map(|t| t.name.0.to_string()).collect();
        let allowed =
            ctx.authorizer.allowed_each(who, rt::TOPIC, names.iter().map(String::as_str), op::DESCRIBE);
        let mut keep = allowed.iter();
        if *all {
            group.topics.retain(|_| *keep.next().unwrap_or(&false));
        } else {
            for (topic, allowed) in group.topics.iter_mut().zip(allowed) {
                for p in topic.partitions.iter_mut().filter(|_| !allowed) {
                    (p.committed_offset, p.error_code) = (-1, code::TOPIC_AUTHORIZATION_FAILED);
                }
            }
        }
    }
    let names: Vec<String> = response.topics.iter().map(|t| t.name.0.to_string()).collect();
    let allowed = ctx.authorizer.allowed_each(who, rt::TOPIC, names.iter().map(String::as_str), op::DESCRIBE);
    if single_all_topics {
        let mut keep = allowed.iter();
        response.topics.retain(|_| *keep.next().unwrap_or(&false));
    } else {
        for (topic, allowed) in response.topics.iter_mut().zip(allowed) {
            for p in topic.partitions.iter_mut().filter(|_| !allowed) {
                (p.committed_offset, p.error_code) = (-1, code::TOPIC_AUTHORIZATION_FAILED);
            }
        }
    }
}

/// Committed offsets of `group`, by topic, for what was asked.
fn fetch(
    state: &BrokerState,
    require_stable: bool,
    group: &str,
    wanted: Wanted,
) -> Vec<(String, Vec<Fetched>)> {
    let groups = &state.groups;
    let pending = if require_stable { state.pending_offsets_of(group) } else { BTreeSet::new() };
    let answer = |topic: &str, partition: i32| {
        if pending.contains(&(topic.to_string(), partition)) {
            return (partition, -1, -1, String::new(), error_code::UNSTABLE_OFFSET_COMMIT);
        }
        match groups.committed(group, topic, partition) {
            Some(c) => (partition, c.offset, c.leader_epoch, c.metadata.clone(), error_code::NONE),
            None => (partition, -1, -1, String::new(), error_code::NONE),
        }
    };
    match wanted {
        Some(topics) => topics
            .into_iter()
            .map(|(topic, partitions)| {
                let fetched = partitions.into_iter().map(|p| answer(&topic, p)).collect();
                (topic, fetched)
            })
            .collect(),
        None => groups
            .groups
            .get(group)
            .map(|g| {
                g.offsets
                    .iter()
                    .map(|(topic, partitions)| {
                        (topic.clone(), partitions.keys().map(|p| answer(topic, *p)).collect())
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// v1–v7: one group. The error of a non-coordinator is top-level from v2 and per partition in
/// v1, which has no top-level error (Kafka's `OffsetFetchRequest.getErrorResponse`).
fn single_response(
    state: &BrokerState,
    require_stable: bool,
    coordinator: bool,
    group: &str,
    wanted: Wanted,
    version: i16,
) -> OffsetFetchResponse {
    if !coordinator {
        let topics = match wanted {
            Some(topics) if version < 2 => topics
                .into_iter()
                .map(|(topic, partitions)| {
                    let partitions = partitions
                        .into_iter()
                        .map(|p| {
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(-1)
                                .with_error_code(error_code::NOT_COORDINATOR)
                        })
                        .collect();
                    OffsetFetchResponseTopic::default()
                        .with_name(topic_name(topic))
                        .with_partitions(partitions)
                })
                .collect(),
            _ => Vec::new(),
        };
        return OffsetFetchResponse::default()
            .with_topics(topics)
            .with_error_code(error_code::NOT_COORDINATOR);
    }
    let topics = fetch(state, require_stable, group, wanted)
        .into_iter()
        .map(|(topic, fetched)| {
            let partitions = fetched
                .into_iter()
                .map(|(partition, offset, epoch, metadata, code)| {
                    OffsetFetchResponsePartition::default()
                        .with_partition_index(partition)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(epoch)
                        .with_metadata(Some(str_bytes(metadata)))
                        .with_error_code(code)
                })
                .collect();
            OffsetFetchResponseTopic::default().with_name(topic_name(topic)).with_partitions(partitions)
        })
        .collect();
    OffsetFetchResponse::default().with_topics(topics)
}

/// v8: one answer per group, each with its own error code.
fn group_response(
    state: &BrokerState,
    require_stable: bool,
    coordinator: bool,
    group: GroupId,
    wanted: Wanted,
) -> OffsetFetchResponseGroup {
    if !coordinator {
        return OffsetFetchResponseGroup::default()
            .with_group_id(group)
            .with_error_code(error_code::NOT_COORDINATOR);
    }
    let topics = fetch(state, require_stable, &group.0, wanted)
        .into_iter()
        .map(|(topic, fetched)| {
            let partitions = fetched
                .into_iter()
                .map(|(partition, offset, epoch, metadata, code)| {
                    OffsetFetchResponsePartitions::default()
                        .with_partition_index(partition)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(epoch)
                        .with_metadata(Some(str_bytes(metadata)))
                        .with_error_code(code)
                })
                .collect();
            OffsetFetchResponseTopics::default().with_name(topic_name(topic)).with_partitions(partitions)
        })
        .collect();
    OffsetFetchResponseGroup::default().with_group_id(group).with_topics(topics)
}

#[cfg(test)]
mod tests {
    use kafka_compat::error_code;
    use onelog_state::streams_group::{Member, StreamsGroup};
    use onelog_state::BrokerState;

    use super::member_check;

    /// A Streams group `g` whose member `m` is at epoch 3.
    fn with_streams_member() -> BrokerState {
        let mut state = BrokerState::default();
        let mut group = StreamsGroup::new();
        group.members.insert("m".into(), Member { member_epoch: 3, ..Member::new() });
        state.streams_groups.groups.insert("g".into(), group);
        state
    }

    #[test]
    fn a_streams_member_fetches_at_its_member_epoch() {
        let state = with_streams_member();
        assert_eq!(member_check(&state, "g", Some("m"), 3), error_code::NONE);
        assert_eq!(member_check(&state, "g", Some("m"), 2), error_code::STALE_MEMBER_EPOCH);
        assert_eq!(member_check(&state, "g", Some("other"), 3), error_code::UNKNOWN_MEMBER_ID);
    }

    #[test]
    fn an_admin_fetch_of_a_streams_group_and_other_groups_pass() {
        let state = with_streams_member();
        assert_eq!(member_check(&state, "g", None, -1), error_code::NONE);
        assert_eq!(member_check(&state, "unknown", Some("m"), 7), error_code::NONE);
    }
}

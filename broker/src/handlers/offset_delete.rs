//! OffsetDelete (key 47), v0 (KIP-496): deletes a group's committed offsets of some
//! partitions, through one log entry.
//!
//! As Kafka (`ClassicGroup.validateDeleteOffsets`, `KafkaApis.handleOffsetDeleteRequest`):
//! group-level errors are INVALID_GROUP_ID (empty or over-long id), NOT_COORDINATOR (a
//! follower), GROUP_ID_NOT_FOUND (unknown or being deleted) and NON_EMPTY_GROUP (members of a
//! protocol other than "consumer"); per partition, UNKNOWN_TOPIC_OR_PARTITION for a partition
//! that does not exist and GROUP_SUBSCRIBED_TO_TOPIC while a live member of the group
//! subscribes to the topic. Subscriptions come from the members' consumer-protocol metadata in
//! the leader's coordinator; metadata that does not parse (or members adopted after a failover,
//! whose metadata comes back only with their next join) counts as subscribed to every topic.
//! A KIP-848 consumer group has no group-level refusal; its members' subscriptions (topic
//! names, and the topics their regular expressions match) are in the applied state. Nor has a
//! KIP-1071 Streams group; while it has members, its topology's source and repartition source
//! topics count as subscribed (Kafka's `StreamsGroup.isSubscribedToTopic`).
//! Every other partition answers NONE, whether or not it had a committed offset; those that
//! had one are named in one `OffsetDelete` op.

use std::collections::BTreeSet;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, OffsetDeleteRequest, OffsetDeleteResponse, RequestKind, ResponseKind,
};

use super::group_kind::{self, GroupKind};
use super::util::{adopt_group, group_id_invalid, group_op_failed};
use super::HandlerResult;
use crate::coord::group::Subscriptions;
use crate::ctx::{Ctx, Lane, SharedCtx};
use crate::security::authz::{code, op, rt, Subject};
use onelog_state::command::OffsetDeleteOp;
use onelog_state::streams_group::StreamsGroup;

pub const KEY: ApiKey = ApiKey::OffsetDelete;
pub const VERSIONS: (i16, i16) = (0, 0);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::OffsetDelete(body) = req.body else { anyhow::bail!("not an OffsetDelete body") };
    // KafkaApis: DELETE on the group, then READ on each topic (TOPIC_AUTHORIZATION_FAILED
    // for its partitions, which keep their offsets).
    if !ctx.authorizer.allowed(&who, rt::GROUP, &body.group_id.0, op::DELETE) {
        let refused = OffsetDeleteResponse::default().with_error_code(code::GROUP_AUTHORIZATION_FAILED);
        return Ok(Some(ResponseKind::OffsetDelete(refused)));
    }
    let names = body.topics.iter().map(|t| t.name.0.as_str());
    let readable = ctx.authorizer.allowed_each(&who, rt::TOPIC, names, op::READ);
    let response = match delete(&ctx, &body, &readable).await {
        Ok(codes) => response(&body, &codes),
        Err(code) => OffsetDeleteResponse::default().with_error_code(code),
    };
    Ok(Some(ResponseKind::OffsetDelete(response)))
}

/// One code per requested partition, in request order, or the group-level error.
async fn delete(ctx: &Ctx, body: &OffsetDeleteRequest, readable: &[bool]) -> Result<Vec<i16>, i16> {
    let group_id = body.group_id.0.to_string();
    if group_id_invalid(&group_id) {
        return Err(error_code::INVALID_GROUP_ID);
    }
    let Some(lane) = ctx.group_lane(&group_id).filter(|lane| lane.is_leader()) else {
        return Err(error_code::NOT_COORDINATOR);
    };
    adopt_group(lane, &group_id);
    let (codes, op) = lane.applied.state(|state| decide_in(lane, state, &group_id, body, readable))?;
    let Some(op) = op else { return Ok(codes) };
    match lane.proposer.propose(op).await {
        Ok(Ok(())) => Ok(codes),
        Ok(Err(refusal)) => Err(refusal.error_code),
        Err(e) => Err(group_op_failed(&e)),
    }
}

/// Each partition's code against the coordinator's membership and the applied state of the
/// group's Raft group, and the op deleting the committed offsets among the deletable ones
/// (None if there are none).
fn decide_in(
    lane: Lane,
    state: &onelog_state::BrokerState,
    group_id: &str,
    body: &OffsetDeleteRequest,
    readable: &[bool],
) -> Result<(Vec<i16>, Option<OffsetDeleteOp>), i16> {
    let subscriptions = subscriptions(lane, state, group_id)?;
    let mut codes = Vec::new();
    let mut partitions = Vec::new();
    for (topic, readable) in body.topics.iter().zip(readable) {
        for p in &topic.partitions {
            let (name, index) = (topic.name.0.as_str(), p.partition_index);
            codes.push(if !readable {
                code::TOPIC_AUTHORIZATION_FAILED
            } else if state.partition(name, index).is_none() {
                error_code::UNKNOWN_TOPIC_OR_PARTITION
            } else if subscriptions.includes(name) {
                error_code::GROUP_SUBSCRIBED_TO_TOPIC
            } else {
                if state.groups.committed(group_id, name, index).is_some() {
                    partitions.push((name.to_string(), index));
                }
                error_code::NONE
            });
        }
    }
    let op = (!partitions.is_empty()).then(|| OffsetDeleteOp { group_id: group_id.to_string(), partitions });
    Ok((codes, op))
}

/// The topics whose offsets stay: those the group's members subscribe to. A consumer group has
/// no group-level refusal (Kafka deletes its offsets while members are active), nor has a
/// Streams group; a classic group's coordinator decides as `coord::group::deletion` says.
fn subscriptions(
    lane: Lane,
    state: &onelog_state::BrokerState,
    group_id: &str,
) -> Result<Subscriptions, i16> {
    match group_kind::kind(lane, state, group_id) {
        Some(GroupKind::Consumer(group)) => {
            return Ok(Subscriptions::Topics(group.subscribed_topic_names(&state.topics)))
        }
        Some(GroupKind::Streams(group)) => return Ok(Subscriptions::Topics(streams_source_topics(group))),
        _ => {}
    }
    match lane.coordinators.classic.offset_delete_check(group_id) {
        Some(checked) => checked,
        // Not in the coordinator's memory: no members, so nothing is subscribed.
        None if state.groups.groups.contains_key(group_id) => Ok(Subscriptions::Topics(Default::default())),
        None => Err(error_code::GROUP_ID_NOT_FOUND),
    }
}

/// The topics a Streams group reads (Kafka's `StreamsGroup.isSubscribedToTopic`): its
/// topology's source and repartition source topics, none while the group is Empty.
fn streams_source_topics(group: &StreamsGroup) -> BTreeSet<String> {
    let Some(topology) = group.topology.as_ref().filter(|_| !group.members.is_empty()) else {
        return BTreeSet::new();
    };
    let subtopologies = topology.subtopologies.values();
    subtopologies
        .flat_map(|s| {
            s.source_topics.iter().cloned().chain(s.repartition_source_topics.iter().map(|t| t.name.clone()))
        })
        .collect()
}

/// One partition per requested one, grouped by topic as the request was.
fn response(body: &OffsetDeleteRequest, codes: &[i16]) -> OffsetDeleteResponse {
    let mut codes = codes.iter();
    let topics = body
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(codes.next().copied().unwrap_or(error_code::UNKNOWN_SERVER_ERROR))
                })
                .collect();
            OffsetDeleteResponseTopic::default().with_name(t.name.clone()).with_partitions(partitions)
        })
        .collect();
    OffsetDeleteResponse::default().with_topics(topics)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use onelog_state::streams_group::{Member, StreamsGroup, Subtopology, TopicInfo, Topology};

    use super::streams_source_topics;

    fn group_reading(source: &str, repartition: &str) -> StreamsGroup {
        let subtopology = Subtopology {
            source_topics: vec![source.into()],
            repartition_source_topics: vec![TopicInfo { name: repartition.into(), ..Default::default() }],
            repartition_sink_topics: vec!["written-only".into()],
            ..Default::default()
        };
        let topology = Topology { epoch: 0, subtopologies: BTreeMap::from([("0".into(), subtopology)]) };
        StreamsGroup { topology: Some(topology), ..StreamsGroup::new() }
    }

    #[test]
    fn a_streams_group_with_members_holds_its_source_topics_offsets() {
        let mut group = group_reading("words", "app-repartition");
        group.members.insert("m".into(), Member::new());
        let topics = streams_source_topics(&group);
        assert_eq!(topics, BTreeSet::from(["app-repartition".to_string(), "words".to_string()]));
    }

    #[test]
    fn an_empty_streams_group_holds_no_offsets() {
        assert!(streams_source_topics(&group_reading("words", "app-repartition")).is_empty());
    }
}

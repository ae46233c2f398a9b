//! StreamsGroupDescribe (key 89), v0–v1: KIP-1071's describe for `streams`-type groups, from
//! the applied state (Kafka's `StreamsGroup.asDescribedGroup`): state, epochs, the assignor,
//! the topology (with the partition counts the broker settled once it is ready), and each
//! member's identity, process, endpoint, reported task offsets, current and target tasks.
//! A group of another type (classic, consumer, share) is GROUP_ID_NOT_FOUND "Group <id> is not
//! a streams group." (`GroupMetadataManager.streamsGroup`), an unknown one "Group <id> not
//! found." A follower answers NOT_COORDINATOR. v1's topology description (KIP-1331) is not
//! kept: its status says so (`TOPOLOGY_DESCRIPTION_NOT_STORED`).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::streams_group_describe_response as rs;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind, StreamsGroupDescribeResponse, TopicName};
use onelog_state::apply_share::is_share_group;
use onelog_state::streams_group::{self as sg, StreamsGroup, Tasks};
use onelog_state::BrokerState;

use super::util::{group_id_invalid, str_bytes};
use super::{authorized, HandlerResult};
use crate::ctx::SharedCtx;
use crate::security::authz::{code, op, rt, Subject};

pub const KEY: ApiKey = ApiKey::StreamsGroupDescribe;
pub const VERSIONS: (i16, i16) = (0, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

/// v1's TopologyDescriptionStatus: not asked for; asked for but not kept.
const NOT_REQUESTED: i8 = 0;
const NOT_STORED: i8 = 1;

/// The assignor Kafka 4.4.0 names (its only one besides a test mock).
const ASSIGNOR: &str = "sticky";

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::StreamsGroupDescribe(body) = req.body else {
        anyhow::bail!("not a StreamsGroupDescribe body")
    };
    let groups = body
        .group_ids
        .into_iter()
        .map(|id| {
            let operations = authorized::group(&ctx, &who, body.include_authorized_operations, &id.0);
            let (code, message) = if !ctx.authorizer.allowed(&who, rt::GROUP, &id.0, op::DESCRIBE) {
                (code::GROUP_AUTHORIZATION_FAILED, None)
            } else if group_id_invalid(&id.0) {
                (error_code::INVALID_GROUP_ID, None)
            } else if let Some(lane) = ctx.group_lane(&id.0).filter(|lane| lane.is_leader()) {
                match lane.applied.state(|s| describe(s, &id.0)) {
                    Ok(described) => {
                        let status =
                            if body.include_topology_description { NOT_STORED } else { NOT_REQUESTED };
                        return described
                            .with_group_id(id)
                            .with_authorized_operations(operations)
                            .with_topology_description_status(status);
                    }
                    Err(message) => (error_code::GROUP_ID_NOT_FOUND, Some(message)),
                }
            } else {
                (error_code::NOT_COORDINATOR, None)
            };
            rs::DescribedGroup::default()
                .with_group_id(id)
                .with_error_code(code)
                .with_error_message(message.map(str_bytes))
                .with_authorized_operations(operations)
        })
        .collect();
    Ok(Some(ResponseKind::StreamsGroupDescribe(StreamsGroupDescribeResponse::default().with_groups(groups))))
}

fn describe(s: &BrokerState, group_id: &str) -> Result<rs::DescribedGroup, String> {
    let Some(group) = s.streams_groups.groups.get(group_id) else {
        let taken = s.consumer_groups.groups.contains_key(group_id)
            || s.groups.groups.contains_key(group_id)
            || is_share_group(s, group_id);
        return Err(if taken {
            format!("Group {group_id} is not a streams group.")
        } else {
            format!("Group {group_id} not found.")
        });
    };
    let configured = group.topology.as_ref().map(|t| sg::configure(t, &s.topics));
    Ok(rs::DescribedGroup::default()
        .with_group_state(str_bytes(group.state().as_str()))
        .with_group_epoch(group.group_epoch)
        .with_assignment_epoch(group.assignment_epoch)
        .with_assignor_name(Some(str_bytes(ASSIGNOR)))
        .with_topology(group.topology.as_ref().map(|t| topology(t, configured.as_ref())))
        .with_members(members(group)))
}

fn topology(t: &sg::Topology, configured: Option<&sg::ConfiguredTopology>) -> rs::Topology {
    let ready = configured.and_then(|c| c.subtopologies.as_ref());
    let subtopologies = t
        .subtopologies
        .iter()
        .map(|(id, sub)| {
            let settled = ready.and_then(|r| r.get(id));
            let info = |infos: &[sg::TopicInfo],
                        pick: fn(
                &sg::ConfiguredSubtopology,
            ) -> &std::collections::BTreeMap<String, sg::InternalTopic>| {
                infos
                    .iter()
                    .map(|i| {
                        let partitions =
                            settled.and_then(|c| pick(c).get(&i.name)).map_or(i.partitions, |t| t.partitions);
                        rs::TopicInfo::default()
                            .with_name(TopicName(str_bytes(i.name.clone())))
                            .with_partitions(partitions)
                            .with_replication_factor(i.replication_factor)
                            .with_topic_configs(
                                i.topic_configs
                                    .iter()
                                    .map(|(k, v)| {
                                        rs::KeyValue::default()
                                            .with_key(str_bytes(k.clone()))
                                            .with_value(str_bytes(v.clone()))
                                    })
                                    .collect(),
                            )
                    })
                    .collect()
            };
            rs::Subtopology::default()
                .with_subtopology_id(str_bytes(id.clone()))
                .with_source_topics(
                    sub.source_topics.iter().map(|n| TopicName(str_bytes(n.clone()))).collect(),
                )
                .with_repartition_sink_topics(
                    sub.repartition_sink_topics.iter().map(|n| TopicName(str_bytes(n.clone()))).collect(),
                )
                .with_state_changelog_topics(info(&sub.state_changelog_topics, |c| &c.state_changelog_topics))
                .with_repartition_source_topics(info(&sub.repartition_source_topics, |c| {
                    &c.repartition_source_topics
                }))
        })
        .collect();
    rs::Topology::default().with_epoch(t.epoch).with_subtopologies(Some(subtopologies))
}

fn members(group: &StreamsGroup) -> Vec<rs::Member> {
    group
        .members
        .iter()
        .map(|(id, m)| {
            let target = group.targets.get(id).cloned().unwrap_or_default();
            let current = m.assigned.tuple();
            rs::Member::default()
                .with_member_id(str_bytes(id.clone()))
                .with_member_epoch(m.member_epoch)
                .with_instance_id(m.instance_id.clone().map(str_bytes))
                .with_rack_id(m.rack_id.clone().map(str_bytes))
                .with_client_id(str_bytes(m.client_id.clone()))
                .with_client_host(str_bytes(m.client_host.clone()))
                .with_topology_epoch(m.topology_epoch)
                .with_process_id(str_bytes(m.process_id.clone()))
                .with_user_endpoint(
                    m.user_endpoint
                        .as_ref()
                        .map(|(h, p)| rs::Endpoint::default().with_host(str_bytes(h.clone())).with_port(*p)),
                )
                .with_client_tags(
                    m.client_tags
                        .iter()
                        .map(|(k, v)| {
                            rs::KeyValue::default()
                                .with_key(str_bytes(k.clone()))
                                .with_value(str_bytes(v.clone()))
                        })
                        .collect(),
                )
                .with_task_offsets(
                    m.task_offsets
                        .iter()
                        .flat_map(|(s, ps)| {
                            ps.iter().map(move |(p, o)| {
                                rs::TaskOffset::default()
                                    .with_subtopology_id(str_bytes(s.clone()))
                                    .with_partition(*p)
                                    .with_offset(*o)
                            })
                        })
                        .collect(),
                )
                .with_assignment(assignment(&current))
                .with_target_assignment(assignment(&target))
        })
        .collect()
}

fn assignment(t: &sg::TasksTuple) -> rs::Assignment {
    let ids = |tasks: &Tasks| {
        tasks
            .iter()
            .map(|(s, ps)| {
                rs::TaskIds::default()
                    .with_subtopology_id(str_bytes(s.clone()))
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect()
    };
    rs::Assignment::default()
        .with_active_tasks(ids(&t.active))
        .with_standby_tasks(ids(&t.standby))
        .with_warmup_tasks(ids(&t.warmup))
}

//! StreamsGroupHeartbeat's wire shapes and the state machine's: the request as
//! `streams_group::Heartbeat` (task ids and topology into ordered maps), and an answer or a
//! refusal as the response.

use std::collections::BTreeMap;

use kafka_compat::codec::Request;
use kafka_protocol::messages::streams_group_heartbeat_request as rq;
use kafka_protocol::messages::streams_group_heartbeat_response as rs;
use kafka_protocol::messages::{StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use onelog_state::consumer_group::Refusal;
use onelog_state::streams_group::{self as sg, HeartbeatAnswer, Tasks};

use super::util::str_bytes;

/// The state machine's input.
pub fn input(req: &Request, body: &StreamsGroupHeartbeatRequest) -> sg::Heartbeat {
    let text = |s: &Option<StrBytes>| s.as_ref().map(|s| s.to_string());
    sg::Heartbeat {
        version: req.api_version,
        group_id: body.group_id.0.to_string(),
        member_id: body.member_id.to_string(),
        member_epoch: body.member_epoch,
        endpoint_information_epoch: body.endpoint_information_epoch,
        instance_id: text(&body.instance_id),
        rack_id: text(&body.rack_id),
        rebalance_timeout_ms: body.rebalance_timeout_ms,
        topology: body.topology.as_ref().map(topology),
        active_tasks: body.active_tasks.as_deref().map(tasks),
        standby_tasks: body.standby_tasks.as_deref().map(tasks),
        warmup_tasks: body.warmup_tasks.as_deref().map(tasks),
        process_id: text(&body.process_id),
        user_endpoint: body.user_endpoint.as_ref().map(|e| (e.host.to_string(), e.port)),
        client_tags: body
            .client_tags
            .as_ref()
            .map(|tags| tags.iter().map(|kv| (kv.key.to_string(), kv.value.to_string())).collect()),
        task_offsets: body.task_offsets.as_ref().map(|offsets| {
            offsets.iter().map(|o| (o.subtopology_id.to_string(), o.partition, o.offset)).collect()
        }),
        shutdown_application: body.shutdown_application,
        client_id: req.header.client_id.as_ref().map_or_else(String::new, |c| c.to_string()),
        client_host: req.client_address.map_or_else(String::new, |a| format!("/{a}")),
    }
}

fn tasks(ids: &[rq::TaskIds]) -> Tasks {
    let mut out = Tasks::new();
    for t in ids {
        out.entry(t.subtopology_id.to_string()).or_default().extend(t.partitions.iter().copied());
    }
    out
}

fn topology(t: &rq::Topology) -> sg::Topology {
    let subtopologies =
        t.subtopologies.iter().map(|s| (s.subtopology_id.to_string(), subtopology(s))).collect();
    sg::Topology { epoch: t.epoch, subtopologies }
}

fn subtopology(s: &rq::Subtopology) -> sg::Subtopology {
    let names = |v: &[TopicName]| {
        let mut names: Vec<String> = v.iter().map(|n| n.0.to_string()).collect();
        names.sort();
        names
    };
    let infos = |v: &[rq::TopicInfo]| v.iter().map(topic_info).collect();
    sg::Subtopology {
        source_topics: names(&s.source_topics),
        source_topic_regex: s.source_topic_regex.iter().map(|r| r.to_string()).collect(),
        state_changelog_topics: infos(&s.state_changelog_topics),
        repartition_sink_topics: names(&s.repartition_sink_topics),
        repartition_source_topics: infos(&s.repartition_source_topics),
        copartition_groups: s
            .copartition_groups
            .iter()
            .map(|g| sg::CopartitionGroup {
                source_topics: g.source_topics.clone(),
                source_topic_regex: g.source_topic_regex.clone(),
                repartition_source_topics: g.repartition_source_topics.clone(),
            })
            .collect(),
    }
}

fn topic_info(t: &rq::TopicInfo) -> sg::TopicInfo {
    sg::TopicInfo {
        name: t.name.0.to_string(),
        partitions: t.partitions,
        replication_factor: t.replication_factor,
        topic_configs: t.topic_configs.iter().map(|kv| (kv.key.to_string(), kv.value.to_string())).collect(),
    }
}

/// The response for an answer or a refusal.
/// v0 carries the recovery lag in its int32 field, v1 in its int64 one.
pub fn response(answer: Result<HeartbeatAnswer, Refusal>, version: i16) -> StreamsGroupHeartbeatResponse {
    let answer = match answer {
        Err(refusal) => {
            return StreamsGroupHeartbeatResponse::default()
                .with_error_code(refusal.code)
                .with_error_message(refusal.message.map(str_bytes))
        }
        Ok(answer) => answer,
    };
    let status = answer
        .status
        .iter()
        .map(|s| {
            rs::Status::default().with_status_code(s.code).with_status_detail(str_bytes(s.detail.clone()))
        })
        .collect();
    let task_ids = |t: &Tasks| {
        t.iter()
            .map(|(id, ps)| {
                rs::TaskIds::default()
                    .with_subtopology_id(str_bytes(id.clone()))
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect::<Vec<_>>()
    };
    let lag = answer.acceptable_recovery_lag;
    let response = if version == 0 {
        StreamsGroupHeartbeatResponse::default()
            .with_acceptable_recovery_lag_legacy(i32::try_from(lag).unwrap_or(i32::MAX))
    } else {
        StreamsGroupHeartbeatResponse::default().with_acceptable_recovery_lag(lag)
    };
    response
        .with_member_id(str_bytes(answer.member_id))
        .with_member_epoch(answer.member_epoch)
        .with_heartbeat_interval_ms(answer.heartbeat_interval_ms)
        .with_task_offset_interval_ms(answer.task_offset_interval_ms)
        .with_status(Some(status))
        .with_active_tasks(answer.tasks.as_ref().map(|t| task_ids(&t.active)))
        .with_standby_tasks(answer.tasks.as_ref().map(|t| task_ids(&t.standby)))
        .with_warmup_tasks(answer.tasks.as_ref().map(|t| task_ids(&t.warmup)))
        .with_endpoint_information_epoch(answer.endpoint_information_epoch)
        .with_partitions_by_user_endpoint(answer.endpoints.map(|list| list.iter().map(endpoint).collect()))
}

fn endpoint(e: &sg::EndpointPartitions) -> rs::EndpointToPartitions {
    let partitions = |m: &BTreeMap<String, Vec<i32>>| {
        m.iter()
            .map(|(topic, ps)| {
                rs::TopicPartition::default()
                    .with_topic(TopicName(str_bytes(topic.clone())))
                    .with_partitions(ps.clone())
            })
            .collect()
    };
    rs::EndpointToPartitions::default()
        .with_user_endpoint(rs::Endpoint::default().with_host(str_bytes(e.host.clone())).with_port(e.port))
        .with_active_partitions(partitions(&e.active))
        .with_standby_partitions(partitions(&e.standby))
}

//! StreamsGroupHeartbeat (key 88), v0–v1: KIP-1071's Streams group protocol
//! (`group.protocol=streams`). The group's state machine is `onelog_state::streams_group`;
//! this handler turns the request into its input, runs it against a copy of the applied
//! group, and proposes a `StreamsGroupHeartbeat` op only when the copy changed: a steady
//! heartbeat writes nothing (DESIGN §9). The member's session and revocation deadlines are
//! re-armed from the answer (`coord::streams`). Internal topics the topology needs and that
//! do not exist (MISSING_INTERNAL_TOPICS) are created here, after the answer, as Kafka's
//! `KafkaApis` creates them: the member learns of them at its next heartbeat.
//!
//! Served once the cluster finalized `streams.version` 1; before that every request is
//! answered UNSUPPORTED_VERSION, as Kafka answers when the protocol is not enabled. A
//! follower answers NOT_COORDINATOR. An id a consumer group, a classic group with members or
//! a KIP-932 share group (empty or not) holds is answered GROUP_ID_NOT_FOUND "Group <id> is
//! not a streams group." (Kafka's `getOrCreateStreamsGroup`), here and in apply
//! (`apply_streams::other_type`).
//!
//! Access: GROUP READ, checked by the pipeline; on a join, DESCRIBE on every topic the
//! topology names (TOPIC_AUTHORIZATION_FAILED), and CREATE on the cluster or topic for the
//! internal topics the broker creates, as Kafka 4.4's `KafkaApis` checks.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind, StreamsGroupHeartbeatResponse, TopicName};
use onelog_state::apply_streams::other_type;
use onelog_state::command::StreamsGroupHeartbeatOp;
use onelog_state::consumer_group::Refusal;
use onelog_state::features::STREAMS_VERSION;
use onelog_state::streams_group::{self as sg, HeartbeatAnswer, Status};
use onelog_state::BrokerState;

use super::streams_group_codec::{input, response};
use super::util::{group_op_failed, log_heartbeat_refusal};
use super::HandlerResult;
use crate::clock::wall_clock_ms;
use crate::controller::{self, TopicRequest};
use crate::ctx::{Ctx, Lane, SharedCtx};
use crate::incident::Incident;
use crate::security::authz::{op, rt, Subject};

pub const KEY: ApiKey = ApiKey::StreamsGroupHeartbeat;
pub const VERSIONS: (i16, i16) = (0, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

const NOT_ENABLED: &str = "The Streams group protocol is not enabled: the cluster has not finalized \
     streams.version 1 (kafka-features.sh upgrade --feature streams.version=1); set group.protocol=classic";

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::StreamsGroupHeartbeat(body) = &req.body else {
        anyhow::bail!("not a StreamsGroupHeartbeat body")
    };
    let hb = input(&req, body);
    let answer = match check(&ctx, &req, &hb) {
        Err(refusal) => Err(refusal),
        Ok(lane) => heartbeat(&ctx, lane, &req, &hb).await,
    };
    if let Err(refusal) = &answer {
        log_refusal(&hb.group_id, &hb.member_id, refusal);
    }
    Ok(Some(ResponseKind::StreamsGroupHeartbeat(response(answer, req.api_version))))
}

/// Refused heartbeats: counted, one log line per interval. A coordinator move is routine.
static REFUSED: Incident = Incident::new();

fn log_refusal(group_id: &str, member_id: &str, refusal: &Refusal) {
    let message = refusal.message.as_deref();
    log_heartbeat_refusal(&REFUSED, "StreamsGroupHeartbeat", (group_id, member_id), refusal.code, message);
}

/// What refuses the request before the group is looked at; else the lane of the group's Raft
/// group, which this node leads.
fn check<'a>(ctx: &'a Ctx, req: &Request, hb: &sg::Heartbeat) -> Result<Lane<'a>, Refusal> {
    if ctx.applied.state(|s| s.features.level(STREAMS_VERSION)) < 1 {
        return Err(Refusal::new(error_code::UNSUPPORTED_VERSION, NOT_ENABLED));
    }
    let Some(lane) = ctx.group_lane(&hb.group_id).filter(|lane| lane.is_leader()) else {
        return Err(Refusal { code: error_code::NOT_COORDINATOR, message: None });
    };
    sg::validate(hb)?;
    let Some(topology) = &hb.topology else { return Ok(lane) };
    let who = Subject::of(req);
    let names = topology_topics(topology);
    if !ctx
        .authorizer
        .allowed_each(&who, rt::TOPIC, names.iter().map(String::as_str), op::DESCRIBE)
        .iter()
        .all(|ok| *ok)
    {
        let message = "The member is not authorized to describe one of the topology's topics";
        return Err(Refusal::new(error_code::TOPIC_AUTHORIZATION_FAILED, message));
    }
    Ok(lane)
}

/// Every topic a topology names: source, repartition and changelog topics.
fn topology_topics(topology: &sg::Topology) -> Vec<String> {
    let mut names = std::collections::BTreeSet::new();
    for s in topology.subtopologies.values() {
        names.extend(s.source_topics.iter().cloned());
        names.extend(s.repartition_sink_topics.iter().cloned());
        names.extend(s.repartition_source_topics.iter().map(|t| t.name.clone()));
        names.extend(s.state_changelog_topics.iter().map(|t| t.name.clone()));
    }
    names.into_iter().collect()
}

/// Runs the heartbeat against a copy of the applied group; proposes it when it changes the
/// group, re-arms the member's deadlines, and creates missing internal topics.
async fn heartbeat(
    ctx: &Ctx,
    lane: Lane<'_>,
    req: &Request,
    hb: &sg::Heartbeat,
) -> Result<HeartbeatAnswer, Refusal> {
    let now_ms = wall_clock_ms();
    let settings = ctx.config.settings.streams_group.for_group(ctx.group_overrides(&hb.group_id).as_ref());
    let (dry_run, changed) = lane.applied.state(|s| dry_run(s, hb, &settings, now_ms));
    let answer = match dry_run {
        Ok(_) if changed => propose(lane, hb, settings.clone(), now_ms).await,
        other => other,
    };
    if let Ok(answer) = &answer {
        // The id is the Streams group's now (`apply_streams::retire_classic_generation`).
        lane.coordinators.classic.forget_empty(&hb.group_id);
        rearm(lane, hb, answer, &settings);
        if answer.status.iter().any(|s| s.code == Status::MissingInternalTopics.code()) {
            create_internal_topics(ctx, lane, req, &hb.group_id).await;
        }
    }
    answer
}

fn dry_run(
    s: &BrokerState,
    hb: &sg::Heartbeat,
    settings: &sg::StreamsSettings,
    now_ms: i64,
) -> (Result<HeartbeatAnswer, Refusal>, bool) {
    if let Some(refusal) = other_type(s, &hb.group_id) {
        return (Err(refusal), false);
    }
    s.streams_groups.trial(&hb.group_id, |copy| copy.heartbeat(&s.topics, hb, settings, now_ms))
}

async fn propose(
    lane: Lane<'_>,
    hb: &sg::Heartbeat,
    settings: sg::StreamsSettings,
    now_ms: i64,
) -> Result<HeartbeatAnswer, Refusal> {
    let op = Box::new(StreamsGroupHeartbeatOp { heartbeat: hb.clone(), settings, now_ms });
    match lane.proposer.propose(op).await {
        Ok(answer) => answer,
        Err(e) => Err(Refusal { code: group_op_failed(&e), message: None }),
    }
}

/// A leave forgets the member's deadlines, except a static member's temporary leave (-2),
/// whose session keeps running until it comes back.
fn rearm(lane: Lane, hb: &sg::Heartbeat, answer: &HeartbeatAnswer, settings: &sg::StreamsSettings) {
    let coordinator = &lane.coordinators.streams;
    match hb.member_epoch {
        sg::LEAVE_GROUP_MEMBER_EPOCH => coordinator.left(&hb.group_id, &answer.member_id),
        sg::LEAVE_GROUP_STATIC_MEMBER_EPOCH => {}
        _ => coordinator.heartbeat(
            &hb.group_id,
            &answer.member_id,
            settings.session_timeout_ms,
            answer.revocation_timer,
            wall_clock_ms(),
        ),
    }
}

/// Creates the internal topics the group's topology needs and that do not exist, if the
/// member may create them (CREATE on the cluster or each topic); one Raft entry.
async fn create_internal_topics(ctx: &Ctx, lane: Lane<'_>, req: &Request, group_id: &str) {
    let missing = lane.applied.state(|s| {
        let topology = s.streams_groups.groups.get(group_id).and_then(|g| g.topology.clone());
        topology.map(|t| sg::configure(&t, &s.topics).internal_topics_to_create).unwrap_or_default()
    });
    let who = Subject::of(req);
    let may = |name: &str| {
        ctx.authorizer.cluster_allowed(&who, op::CREATE)
            || ctx.authorizer.allowed(&who, rt::TOPIC, name, op::CREATE)
    };
    let requests: Vec<TopicRequest> = missing
        .into_values()
        .filter(|t| may(&t.name))
        .map(|t| TopicRequest {
            name: t.name,
            partitions: t.partitions,
            replication_factor: t.replication_factor.unwrap_or(-1),
            configs: t.configs,
            assignments: Vec::new(),
        })
        .collect();
    if requests.is_empty() {
        return;
    }
    let results = if ctx.is_leader() {
        controller::create_topics(ctx, &requests, false).await
    } else {
        // The group's Raft group is led here, group 0 (the controller's) elsewhere.
        created_by_controller(ctx, req, &requests).await
    };
    for (request, (code, message)) in requests.iter().zip(results) {
        if code != error_code::NONE && code != error_code::TOPIC_ALREADY_EXISTS {
            tracing::warn!(group_id, topic = %request.name, error = error_code::name(code),
                message = message.as_deref().unwrap_or(""), "could not create a Streams internal topic");
        }
    }
}

/// `requests` forwarded to the controller, as the member's CreateTopics; one (code, message)
/// per request (NOT_CONTROLLER for each when the controller cannot be asked).
async fn created_by_controller(
    ctx: &Ctx,
    req: &Request,
    requests: &[TopicRequest],
) -> Vec<(i16, Option<String>)> {
    let topics = requests.iter().map(creatable).collect();
    let origin = crate::net::forward::Origin::of(req);
    let Ok(ResponseKind::CreateTopics(response)) =
        crate::net::forward::create_on_leader(ctx, &origin, topics).await
    else {
        return vec![(error_code::NOT_CONTROLLER, None); requests.len()];
    };
    let answer = |name: &str| {
        let t = response.topics.iter().find(|t| t.name.0.as_str() == name)?;
        Some((t.error_code, t.error_message.as_ref().map(|m| m.to_string())))
    };
    requests.iter().map(|r| answer(&r.name).unwrap_or((error_code::UNKNOWN_SERVER_ERROR, None))).collect()
}

fn creatable(request: &TopicRequest) -> CreatableTopic {
    let configs = request.configs.iter().map(|(name, value)| {
        CreatableTopicConfig::default().with_name(name.clone().into()).with_value(Some(value.clone().into()))
    });
    CreatableTopic::default()
        .with_name(TopicName(request.name.clone().into()))
        .with_num_partitions(request.partitions)
        .with_replication_factor(request.replication_factor)
        .with_configs(configs.collect())
}

/// The group the member heartbeats in.
pub fn checked_name(body: &RequestKind) -> Option<&str> {
    let RequestKind::StreamsGroupHeartbeat(body) = body else { return None };
    Some(&body.group_id.0)
}

/// The request refused with `code`.
pub fn refused(_body: &RequestKind, code: i16) -> ResponseKind {
    ResponseKind::StreamsGroupHeartbeat(StreamsGroupHeartbeatResponse::default().with_error_code(code))
}

//! ConsumerGroupHeartbeat (key 68), v0–v1: KIP-848's consumer group protocol
//! (`group.protocol=consumer`). The group's state machine is `onelog_state::consumer_group`;
//! this handler turns the request into its input, runs it against a copy of the applied
//! group, and proposes a `ConsumerGroupHeartbeat` op only when the copy changed (a join, a
//! leave, a new subscription, a step of reconciliation): a steady heartbeat writes nothing
//! (DESIGN §9). The op's answer, computed again by apply against the state it meets, is the
//! response. The leader's session and revocation deadlines are re-armed from it
//! (`coord::consumer`).
//!
//! Served once the cluster finalized `group.version` 1; before that every request is answered
//! UNSUPPORTED_VERSION, as Kafka answers when the new protocol is not enabled, and Java tells
//! its user to set `group.protocol=classic`. A follower answers NOT_COORDINATOR. An id a
//! KIP-1071 Streams group or a KIP-932 share group holds, empty or not, is answered
//! GROUP_ID_NOT_FOUND "Group <id> is not a consumer group." (Kafka's
//! `getOrMaybeCreateConsumerGroup`), here and in apply (`apply_streams::not_consumer`).
//!
//! Access: GROUP READ, checked by the pipeline; then DESCRIBE on each subscribed topic name
//! (TOPIC_AUTHORIZATION_FAILED), as Kafka 4.1's `KafkaApis` checks.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, RequestKind, ResponseKind,
};
use onelog_state::apply_consumer::classic_group_has_members;
use onelog_state::apply_streams::not_consumer;
use onelog_state::command::ConsumerGroupHeartbeatOp;
use onelog_state::consumer_group::{self as cg, HeartbeatAnswer, Refusal};
use onelog_state::features::GROUP_VERSION;
use onelog_state::BrokerState;

use super::util::{adopt_group, group_op_failed, log_heartbeat_refusal, str_bytes, uuid, uuid_bytes};
use super::HandlerResult;
use crate::clock::wall_clock_ms;
use crate::coord::group::Snapshot;
use crate::ctx::{Ctx, Lane, SharedCtx};
use crate::incident::Incident;
use crate::security::authz::{op, rt, Subject};

pub const KEY: ApiKey = ApiKey::ConsumerGroupHeartbeat;
pub const VERSIONS: (i16, i16) = (0, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

const NOT_ENABLED: &str = "The new consumer group protocol is not enabled: the cluster has not finalized \
     group.version 1 (kafka-features.sh upgrade --feature group.version=1); set group.protocol=classic";

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::ConsumerGroupHeartbeat(body) = &req.body else {
        anyhow::bail!("not a ConsumerGroupHeartbeat body")
    };
    let hb = input(&req, body);
    let (group_id, member_id) = (hb.group_id.clone(), hb.member_id.clone());
    let answer = match check(&ctx, &req, &hb) {
        Err(refusal) => Err(refusal),
        Ok(lane) => heartbeat(&ctx, lane, hb).await,
    };
    if let Err(refusal) = &answer {
        log_refusal(&group_id, &member_id, refusal);
    }
    Ok(Some(ResponseKind::ConsumerGroupHeartbeat(response(answer))))
}

/// Refused heartbeats: counted, and one log line per interval (a client looping on a bad
/// request must not flood the log). A coordinator move is routine and not logged.
static REFUSED: Incident = Incident::new();

fn log_refusal(group_id: &str, member_id: &str, refusal: &Refusal) {
    let message = refusal.message.as_deref();
    log_heartbeat_refusal(&REFUSED, "ConsumerGroupHeartbeat", (group_id, member_id), refusal.code, message);
}

/// What refuses the request before the group is looked at; else the lane of the group's Raft
/// group, which this node leads.
fn check<'a>(ctx: &'a Ctx, req: &Request, hb: &cg::Heartbeat) -> Result<Lane<'a>, Refusal> {
    if ctx.applied.state(|s| s.features.level(GROUP_VERSION)) < 1 {
        return Err(Refusal::new(error_code::UNSUPPORTED_VERSION, NOT_ENABLED));
    }
    let Some(lane) = ctx.group_lane(&hb.group_id).filter(|lane| lane.is_leader()) else {
        return Err(Refusal { code: error_code::NOT_COORDINATOR, message: None });
    };
    let names = hb.subscribed_topic_names.iter().flatten().map(String::as_str);
    let who = Subject::of(req);
    if !ctx.authorizer.allowed_each(&who, rt::TOPIC, names, op::DESCRIBE).iter().all(|ok| *ok) {
        let message = "The member is not authorized to describe one of its subscribed topics";
        return Err(Refusal::new(error_code::TOPIC_AUTHORIZATION_FAILED, message));
    }
    cg::validate(hb, &ctx.config.settings.consumer_group.settings)?;
    Ok(lane)
}

/// The state machine's input. A v0 join without a member id gets one here, on the leader,
/// before the op: apply must not draw randomness.
fn input(req: &Request, body: &ConsumerGroupHeartbeatRequest) -> cg::Heartbeat {
    let text = |s: &Option<kafka_protocol::protocol::StrBytes>| s.as_ref().map(|s| s.to_string());
    let mut member_id = body.member_id.to_string();
    if member_id.is_empty() && body.member_epoch == 0 && req.api_version == 0 {
        member_id = uuid::Uuid::new_v4().to_string();
    }
    cg::Heartbeat {
        version: req.api_version,
        group_id: body.group_id.0.to_string(),
        member_id,
        member_epoch: body.member_epoch,
        instance_id: text(&body.instance_id),
        rack_id: text(&body.rack_id),
        rebalance_timeout_ms: body.rebalance_timeout_ms,
        subscribed_topic_names: body
            .subscribed_topic_names
            .as_ref()
            .map(|n| n.iter().map(|t| t.0.to_string()).collect()),
        subscribed_topic_regex: text(&body.subscribed_topic_regex),
        server_assignor: text(&body.server_assignor),
        topic_partitions: body.topic_partitions.as_ref().map(|owned| {
            owned
                .iter()
                .map(|tp| cg::TopicPartitions {
                    topic_id: uuid_bytes(&tp.topic_id),
                    partitions: tp.partitions.clone(),
                })
                .collect()
        }),
        client_id: req.header.client_id.as_ref().map_or_else(String::new, |c| c.to_string()),
        client_host: req.client_address.map_or_else(String::new, |a| format!("/{a}")),
    }
}

/// Runs the heartbeat against a copy of the applied group; proposes it when it changes the
/// group, and re-arms the member's deadlines from the answer. The settings are the broker's
/// with the group's own configs layered on top (`consumer.session.timeout.ms`,
/// `consumer.heartbeat.interval.ms`, `consumer.assignment.interval.ms`), read on every
/// heartbeat so that a change applies at the next one; the op carries them, so apply needs no
/// config of its own. A join onto a live classic group carries the classic coordinator's
/// snapshot of it (online upgrade), which the group is handed over for once it is in the log.
async fn heartbeat(ctx: &Ctx, lane: Lane<'_>, hb: cg::Heartbeat) -> Result<HeartbeatAnswer, Refusal> {
    let now_ms = wall_clock_ms();
    let settings = ctx.config.settings.consumer_group.for_group(ctx.group_overrides(&hb.group_id).as_ref());
    let upgrade = upgrade_snapshot(lane, &hb, &settings)?;
    let (dry_run, changed) =
        lane.applied.state(|s| dry_run(lane, s, &hb, upgrade.as_ref(), &settings, now_ms));
    let answer = match dry_run {
        Ok(_) if changed => propose(lane, &hb, settings.clone(), now_ms, upgrade.clone()).await,
        other => other,
    };
    if let Ok(answer) = &answer {
        let classic = &lane.coordinators.classic;
        if upgrade.is_some() {
            classic.hand_over(&hb.group_id);
        }
        // The id is the consumer group's now (`apply_consumer::retire_classic_generation`).
        classic.forget_empty(&hb.group_id);
        rearm(lane, &hb, answer, &settings);
    }
    answer
}

/// The heartbeat against a copy of the applied state: its answer, and whether it changed the
/// group (or converts a classic group, which always does).
fn dry_run(
    lane: Lane,
    s: &BrokerState,
    hb: &cg::Heartbeat,
    upgrade: Option<&cg::ClassicGroupSnapshot>,
    settings: &cg::GroupSettings,
    now_ms: i64,
) -> (Result<HeartbeatAnswer, Refusal>, bool) {
    // A Streams or share group's id, empty or not, is never a consumer group's (the log
    // decides alike).
    if let Some(refusal) = not_consumer(s, &hb.group_id) {
        return (Err(refusal), false);
    }
    let is_consumer = s.consumer_groups.groups.contains_key(&hb.group_id);
    if let Some(snapshot) = upgrade.filter(|_| !is_consumer) {
        let answer =
            cg::upgrade_and_join(snapshot, &s.topics, hb, settings, now_ms).map(|(_, answer)| answer);
        return (answer, true);
    }
    let classic = classic_group_has_members(s, &hb.group_id) || lane.coordinators.classic.holds(&hb.group_id);
    if classic && !is_consumer {
        let message = format!("Group {} is not a consumer group.", hb.group_id);
        return (Err(Refusal::new(error_code::GROUP_ID_NOT_FOUND, message)), false);
    }
    s.consumer_groups.trial(&hb.group_id, |copy| copy.heartbeat(&s.topics, hb, settings, now_ms))
}

/// A join (epoch 0) onto a classic group with live members: the classic coordinator's
/// snapshot for the upgrade. A group this leader adopted from the log has no subscriptions
/// until it rebalances, which the snapshot starts: the join is answered
/// COORDINATOR_LOAD_IN_PROGRESS meanwhile, and the client retries.
fn upgrade_snapshot(
    lane: Lane,
    hb: &cg::Heartbeat,
    settings: &cg::GroupSettings,
) -> Result<Option<cg::ClassicGroupSnapshot>, Refusal> {
    // Only a join can convert: the steady heartbeats of the hot path stop here.
    if hb.member_epoch != 0 {
        return Ok(None);
    }
    if lane.applied.state(|s| s.consumer_groups.groups.contains_key(&hb.group_id)) {
        return Ok(None);
    }
    adopt_group(lane, &hb.group_id);
    let max_members =
        settings.migration.policy.upgrades().then(|| usize::try_from(settings.max_size).unwrap_or(0));
    match lane.coordinators.classic.snapshot(&hb.group_id, max_members) {
        Snapshot::NotLive => Ok(None),
        Snapshot::Ready(snapshot) => Ok(Some(snapshot)),
        Snapshot::Loading => {
            let message = format!("Classic group {} is being loaded; its members rejoin first.", hb.group_id);
            Err(Refusal::new(error_code::COORDINATOR_LOAD_IN_PROGRESS, message))
        }
    }
}

async fn propose(
    lane: Lane<'_>,
    hb: &cg::Heartbeat,
    settings: cg::GroupSettings,
    now_ms: i64,
    upgrade: Option<cg::ClassicGroupSnapshot>,
) -> Result<HeartbeatAnswer, Refusal> {
    let op = Box::new(ConsumerGroupHeartbeatOp { heartbeat: hb.clone(), settings, now_ms, upgrade });
    match lane.proposer.propose(op).await {
        Ok(answer) => answer,
        Err(e) => Err(Refusal { code: group_op_failed(&e), message: None }),
    }
}

/// A leave forgets the member's deadlines, except a static member's temporary leave (-2),
/// whose session keeps running until it comes back (spec §3.9).
fn rearm(lane: Lane, hb: &cg::Heartbeat, answer: &HeartbeatAnswer, settings: &cg::GroupSettings) {
    let coordinator = &lane.coordinators.consumer;
    match hb.member_epoch {
        cg::LEAVE_GROUP_MEMBER_EPOCH => coordinator.left(&hb.group_id, &answer.member_id),
        cg::LEAVE_GROUP_STATIC_MEMBER_EPOCH => {}
        _ => coordinator.heartbeat(
            &hb.group_id,
            &answer.member_id,
            settings.session_timeout_ms,
            answer.revocation_timer,
            wall_clock_ms(),
        ),
    }
}

fn response(answer: Result<HeartbeatAnswer, Refusal>) -> ConsumerGroupHeartbeatResponse {
    match answer {
        Err(refusal) => ConsumerGroupHeartbeatResponse::default()
            .with_error_code(refusal.code)
            .with_error_message(refusal.message.map(str_bytes)),
        Ok(answer) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(str_bytes(answer.member_id)))
            .with_member_epoch(answer.member_epoch)
            .with_heartbeat_interval_ms(answer.heartbeat_interval_ms)
            .with_assignment(answer.assignment.map(|assigned| {
                let topic_partitions = assigned
                    .iter()
                    .map(|(topic_id, partitions)| {
                        TopicPartitions::default()
                            .with_topic_id(uuid(topic_id))
                            .with_partitions(partitions.iter().copied().collect())
                    })
                    .collect();
                Assignment::default().with_topic_partitions(topic_partitions)
            })),
    }
}

/// The group the member heartbeats in.
pub fn checked_name(body: &RequestKind) -> Option<&str> {
    let RequestKind::ConsumerGroupHeartbeat(body) = body else { return None };
    Some(&body.group_id.0)
}

/// The request refused with `code` (`ConsumerGroupHeartbeatRequest.getErrorResponse`).
pub fn refused(_body: &RequestKind, code: i16) -> ResponseKind {
    ResponseKind::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatResponse::default().with_error_code(code))
}

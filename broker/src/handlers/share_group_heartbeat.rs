//! ShareGroupHeartbeat (key 76), v1: KIP-932 share groups' membership. The group's state
//! machine is `onelog_state::share_group`; this handler runs the heartbeat against a copy of
//! the applied group and proposes a `ShareGroupHeartbeat` op only when the copy changed: a
//! steady heartbeat writes nothing (DESIGN §9). The member's session deadline is re-armed
//! from the answer (`coord::share`); a leave releases what the member holds, in the same op.
//!
//! Served once the cluster finalized `share.version` 1; before that every request is answered
//! UNSUPPORTED_VERSION, as Kafka answers when share groups are not enabled. A follower answers
//! NOT_COORDINATOR.
//!
//! Access: GROUP READ, checked by the pipeline; DESCRIBE on every subscribed topic
//! (TOPIC_AUTHORIZATION_FAILED), as Kafka 4.4's `KafkaApis` checks.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind, ShareGroupHeartbeatResponse};
use onelog_state::apply_share::other_type;
use onelog_state::command::ShareGroupHeartbeatOp;
use onelog_state::consumer_group::Refusal;
use onelog_state::features::SHARE_VERSION;
use onelog_state::share_group::{self as shg, HeartbeatAnswer, LEAVE_GROUP_MEMBER_EPOCH};

use super::util::{group_op_failed, log_heartbeat_refusal, str_bytes, uuid};
use super::HandlerResult;
use crate::clock::wall_clock_ms;
use crate::ctx::{Ctx, Lane, SharedCtx};
use crate::incident::Incident;
use crate::security::authz::{op, rt, Subject};

pub const KEY: ApiKey = ApiKey::ShareGroupHeartbeat;
pub const VERSIONS: (i16, i16) = (1, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 1;

/// Kafka's `isMemberIdValid`: ShareFetch, ShareAcknowledge and this API take member ids of 1
/// to 36 characters (a UUID's text).
pub const MEMBER_ID_CHARS_MAX: usize = 36;

pub const NOT_ENABLED: &str = "Share groups are not enabled: the cluster has not finalized share.version 1 \
     (kafka-features.sh upgrade --feature share.version=1)";

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::ShareGroupHeartbeat(body) = &req.body else {
        anyhow::bail!("not a ShareGroupHeartbeat body")
    };
    let text = |s: &Option<kafka_protocol::protocol::StrBytes>| s.as_ref().map(|s| s.to_string());
    let hb = shg::Heartbeat {
        group_id: body.group_id.0.to_string(),
        member_id: body.member_id.to_string(),
        member_epoch: body.member_epoch,
        rack_id: text(&body.rack_id),
        subscribed_topic_names: body
            .subscribed_topic_names
            .as_ref()
            .map(|n| n.iter().map(|t| t.0.to_string()).collect()),
        client_id: req.header.client_id.as_ref().map_or_else(String::new, |c| c.to_string()),
        client_host: req.client_address.map_or_else(String::new, |a| format!("/{a}")),
    };
    let answer = match check(&ctx, &req, &hb) {
        Err(refusal) => Err(refusal),
        Ok(lane) => heartbeat(&ctx, lane, &hb).await,
    };
    if let Err(refusal) = &answer {
        let message = refusal.message.as_deref();
        log_heartbeat_refusal(
            &REFUSED,
            "ShareGroupHeartbeat",
            (&hb.group_id, &hb.member_id),
            refusal.code,
            message,
        );
    }
    Ok(Some(ResponseKind::ShareGroupHeartbeat(response(answer))))
}

/// Refused heartbeats: counted, one log line per interval. A coordinator move is routine.
static REFUSED: Incident = Incident::new();

/// What refuses the request before the group is looked at, in Kafka's order; else the group's
/// lane. The group's members are assigned partitions of any Raft group: each is read where its
/// topic lives (`share_common`).
fn check<'a>(ctx: &'a Ctx, req: &Request, hb: &shg::Heartbeat) -> Result<Lane<'a>, Refusal> {
    if ctx.applied.state(|s| s.features.level(SHARE_VERSION)) < 1 {
        return Err(Refusal::new(error_code::UNSUPPORTED_VERSION, NOT_ENABLED));
    }
    if hb.member_id.is_empty() || hb.member_id.chars().count() > MEMBER_ID_CHARS_MAX {
        return Err(Refusal::new(error_code::INVALID_REQUEST, "Invalid member id in the request."));
    }
    let names = hb.subscribed_topic_names.as_deref().unwrap_or_default();
    let who = Subject::of(req);
    if !ctx
        .authorizer
        .allowed_each(&who, rt::TOPIC, names.iter().map(String::as_str), op::DESCRIBE)
        .iter()
        .all(|ok| *ok)
    {
        return Err(Refusal { code: error_code::TOPIC_AUTHORIZATION_FAILED, message: None });
    }
    ctx.group_lane(&hb.group_id)
        .filter(|lane| lane.is_leader())
        .ok_or(Refusal { code: error_code::NOT_COORDINATOR, message: None })
}

/// Runs the heartbeat against a copy of the applied group; proposes it when it changes the
/// group, and re-arms the member's session.
async fn heartbeat(ctx: &Ctx, lane: Lane<'_>, hb: &shg::Heartbeat) -> Result<HeartbeatAnswer, Refusal> {
    let now_ms = wall_clock_ms();
    let term = lane.leadership.term();
    let group = ctx.share_group_settings(&hb.group_id);
    let (dry_run, changed) = lane.applied.state(|s| {
        if let Some(refusal) = other_type(s, &hb.group_id) {
            return (Err(refusal), false);
        }
        s.share_groups.trial(&hb.group_id, |copy| copy.heartbeat(&s.topics, hb, &group.settings, now_ms))
    });
    let answer = match dry_run {
        Ok(_) if changed => {
            let op = ShareGroupHeartbeatOp {
                heartbeat: hb.clone(),
                settings: group.settings.clone(),
                limits: group.limits,
                now_ms,
            };
            match lane.proposer.propose(Box::new(op)).await {
                Ok(answer) => answer,
                Err(e) => Err(Refusal { code: group_op_failed(&e), message: None }),
            }
        }
        other => other,
    };
    if let Ok(answer) = &answer {
        let coordinator = &lane.coordinators.share;
        if hb.member_epoch == LEAVE_GROUP_MEMBER_EPOCH {
            coordinator.left(term, &hb.group_id, &hb.member_id);
        } else {
            coordinator.heartbeat(
                term,
                &hb.group_id,
                &answer.member_id,
                group.settings.session_timeout_ms,
                now_ms,
            );
        }
    }
    answer
}

fn response(answer: Result<HeartbeatAnswer, Refusal>) -> ShareGroupHeartbeatResponse {
    match answer {
        Err(refusal) => ShareGroupHeartbeatResponse::default()
            .with_error_code(refusal.code)
            .with_error_message(refusal.message.map(str_bytes)),
        Ok(answer) => ShareGroupHeartbeatResponse::default()
            .with_member_id(Some(str_bytes(answer.member_id)))
            .with_member_epoch(answer.member_epoch)
            .with_heartbeat_interval_ms(answer.heartbeat_interval_ms)
            .with_assignment(answer.assignment.map(|a| {
                let topics = a
                    .into_iter()
                    .map(|(id, partitions)| {
                        TopicPartitions::default()
                            .with_topic_id(uuid(&id))
                            .with_partitions(partitions.into_iter().collect())
                    })
                    .collect();
                Assignment::default().with_topic_partitions(topics)
            })),
    }
}

/// The group the member heartbeats in.
pub fn checked_name(body: &RequestKind) -> Option<&str> {
    let RequestKind::ShareGroupHeartbeat(body) = body else { return None };
    Some(&body.group_id.0)
}

/// The request refused with `code`.
pub fn refused(_body: &RequestKind, code: i16) -> ResponseKind {
    ResponseKind::ShareGroupHeartbeat(ShareGroupHeartbeatResponse::default().with_error_code(code))
}

//! Heartbeat (key 12), v0–v4: keeps a member's session alive; REBALANCE_IN_PROGRESS tells it
//! to rejoin, ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID that it was fenced (see `coord::group`).
//! An empty or over-long group id is INVALID_GROUP_ID, as in every group API. A classic member
//! inside a KIP-848 consumer group (online migration) is answered by `consumer_group_classic`.
//!
//! Access: GROUP READ, checked by the pipeline (`handlers::HANDLERS`).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::{ApiKey, HeartbeatResponse, RequestKind, ResponseKind};

use super::util::{adopt_group, group_id_invalid};
use super::HandlerResult;
use super::{consumer_group_classic, group_kind};
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::Heartbeat;
pub const VERSIONS: (i16, i16) = (0, 4);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::Heartbeat(body) = req.body else { anyhow::bail!("not a Heartbeat body") };
    let group_id = &body.group_id.0;
    let code = match ctx.group_lane(group_id).filter(|lane| lane.is_leader()) {
        _ if group_id_invalid(group_id) => error_code::INVALID_GROUP_ID,
        None => error_code::NOT_COORDINATOR,
        // Online migration: a classic member inside a consumer group.
        Some(lane) if group_kind::consumer_group_has_members(lane, group_id) => {
            consumer_group_classic::heartbeat(lane, &body)
        }
        Some(lane) => {
            adopt_group(lane, group_id);
            let member = (&body.member_id, body.group_instance_id.as_deref());
            lane.coordinators.classic.heartbeat(group_id, body.generation_id, member.0, member.1)
        }
    };
    Ok(Some(ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(code))))
}

/// The group the member heartbeats in.
pub fn checked_name(body: &RequestKind) -> Option<&str> {
    let RequestKind::Heartbeat(body) = body else { return None };
    Some(&body.group_id.0)
}

/// The request refused with `code` (`HeartbeatRequest.getErrorResponse`).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::Heartbeat(_) = body else { return ResponseKind::Heartbeat(Default::default()) };
    ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(code))
}

//! LeaveGroup (key 13), v0–v5: members leave at once instead of waiting for their session to
//! expire; the rest rebalance (see `coord::group`). v3+ (KIP-345) batches members, each answered
//! with its own code, and a static member may be named by its instance id alone; before v3
//! the one member's code is the request's. An empty or over-long group id is INVALID_GROUP_ID
//! for the whole request. Classic members inside a KIP-848 consumer group (online migration)
//! leave through `consumer_group_classic`.
//!
//! Access: GROUP READ, checked by the pipeline (`handlers::HANDLERS`).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{ApiKey, LeaveGroupRequest, LeaveGroupResponse, RequestKind, ResponseKind};

use super::util::{adopt_group, group_id_invalid};
use super::HandlerResult;
use super::{consumer_group_classic, group_kind};
use crate::ctx::{Lane, SharedCtx};

pub const KEY: ApiKey = ApiKey::LeaveGroup;
pub const VERSIONS: (i16, i16) = (0, 5);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::LeaveGroup(body) = req.body else { anyhow::bail!("not a LeaveGroup body") };
    let lane = ctx.group_lane(&body.group_id.0).filter(|lane| lane.is_leader());
    if let Some(lane) = lane {
        adopt_group(lane, &body.group_id.0);
    }
    let response = if group_id_invalid(&body.group_id.0) {
        LeaveGroupResponse::default().with_error_code(error_code::INVALID_GROUP_ID)
    } else if let Some(lane) = lane.filter(|l| group_kind::consumer_group_has_members(*l, &body.group_id.0)) {
        classic_members_leave(lane, body, req.api_version).await
    } else if req.api_version >= 3 {
        if let Some(lane) = lane {
            let members = body
                .members
                .into_iter()
                .map(|m| {
                    let instance = m.group_instance_id.as_deref();
                    let code = lane.coordinators.classic.leave(&body.group_id.0, &m.member_id, instance);
                    MemberResponse::default()
                        .with_member_id(m.member_id)
                        .with_group_instance_id(m.group_instance_id)
                        .with_error_code(code)
                })
                .collect();
            LeaveGroupResponse::default().with_members(members)
        } else {
            LeaveGroupResponse::default().with_error_code(error_code::NOT_COORDINATOR)
        }
    } else {
        let code = match lane {
            Some(lane) => lane.coordinators.classic.leave(&body.group_id.0, &body.member_id, None),
            None => error_code::NOT_COORDINATOR,
        };
        LeaveGroupResponse::default().with_error_code(code)
    };
    Ok(Some(ResponseKind::LeaveGroup(response)))
}

/// Online migration: classic members leaving a consumer group (`consumer_group_classic`).
async fn classic_members_leave(lane: Lane<'_>, body: LeaveGroupRequest, v: i16) -> LeaveGroupResponse {
    let members: Vec<(String, Option<String>)> = if v >= 3 {
        body.members
            .iter()
            .map(|m| (m.member_id.to_string(), m.group_instance_id.as_ref().map(|i| i.to_string())))
            .collect()
    } else {
        vec![(body.member_id.to_string(), None)]
    };
    let codes = consumer_group_classic::leave(lane, &body.group_id.0, members).await;
    if v < 3 {
        return LeaveGroupResponse::default().with_error_code(codes.first().copied().unwrap_or_default());
    }
    let responses = body
        .members
        .into_iter()
        .zip(codes)
        .map(|(m, code)| {
            MemberResponse::default()
                .with_member_id(m.member_id)
                .with_group_instance_id(m.group_instance_id)
                .with_error_code(code)
        })
        .collect();
    LeaveGroupResponse::default().with_members(responses)
}

/// The group the members leave.
pub fn checked_name(body: &RequestKind) -> Option<&str> {
    let RequestKind::LeaveGroup(body) = body else { return None };
    Some(&body.group_id.0)
}

/// The whole request refused with `code` at the top level, no member listed
/// (`LeaveGroupRequest.getErrorResponse`).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::LeaveGroup(_) = body else { return ResponseKind::LeaveGroup(Default::default()) };
    ResponseKind::LeaveGroup(LeaveGroupResponse::default().with_error_code(code))
}

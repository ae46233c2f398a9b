//! JoinGroup (key 11), v0–v9: joins a member to a group's next generation (see `coord::group`).
//!
//! The answer comes when the rebalance completes, so the handler runs concurrently (responses
//! still leave in request order). KIP-394: v4+ first joins without a member id are answered
//! MEMBER_ID_REQUIRED with the id to use. v0 has no rebalance timeout: the session timeout is
//! used, as Kafka does. A follower answers NOT_COORDINATOR. A KIP-848 consumer group with
//! members serves the join itself (online migration, `consumer_group_classic`); an empty one
//! is converted to a classic group when the generation reaches the log
//! (`apply_consumer::complete_generation`). A KIP-1071 Streams group with members refuses the
//! join INCONSISTENT_GROUP_PROTOCOL with an empty member id, an empty one is converted like an
//! empty consumer group (Kafka's `classicGroupJoin`, `apply_streams::yield_to_classic`). A
//! KIP-932 share group refuses it alike, empty or not (`classicGroupJoin` converts no share
//! group; apply records no generation over one either).
//!
//! Access: GROUP READ, checked by the pipeline (`handlers::HANDLERS`).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{ApiKey, JoinGroupRequest, JoinGroupResponse, RequestKind, ResponseKind};

use super::util::{adopt_group, group_id_invalid, str_bytes};
use super::HandlerResult;
use super::{consumer_group_classic, group_kind};
use crate::coord::group::{JoinRequest, JoinResult};
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::JoinGroup;
pub const VERSIONS: (i16, i16) = (0, 9);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::JoinGroup(body) = &req.body else { anyhow::bail!("not a JoinGroup body") };
    let v = req.api_version;
    let member_id = body.member_id.to_string();
    let group_id = &body.group_id.0;
    let result = match ctx.group_lane(group_id).filter(|lane| lane.is_leader()) {
        _ if group_id_invalid(group_id) => error(error_code::INVALID_GROUP_ID, &member_id),
        None => error(error_code::NOT_COORDINATOR, &member_id),
        // Online migration: the consumer group serves the classic member.
        Some(lane) if group_kind::consumer_group_has_members(lane, group_id) => {
            consumer_group_classic::join(&ctx, lane, &req, body).await
        }
        Some(lane)
            if group_kind::streams_group_has_members(lane, group_id)
                || group_kind::share_group_holds(lane, group_id) =>
        {
            error(error_code::INCONSISTENT_GROUP_PROTOCOL, "")
        }
        Some(lane) => {
            adopt_group(lane, group_id);
            lane.coordinators.classic.join(join_request(&req, body, member_id)).await
        }
    };
    Ok(Some(ResponseKind::JoinGroup(response(result, v))))
}

/// What the classic coordinator is asked.
fn join_request(req: &Request, body: &JoinGroupRequest, member_id: String) -> JoinRequest {
    let v = req.api_version;
    JoinRequest {
        group_id: body.group_id.0.to_string(),
        member_id,
        group_instance_id: body.group_instance_id.as_ref().map(|s| s.to_string()),
        client_id: req.header.client_id.as_ref().map(|s| s.to_string()).unwrap_or_default(),
        // Kafka reports the host as `InetAddress.toString()` with no name: "/127.0.0.1".
        client_host: req.client_address.map(|ip| format!("/{ip}")).unwrap_or_default(),
        session_timeout_ms: body.session_timeout_ms,
        rebalance_timeout_ms: if v >= 1 { body.rebalance_timeout_ms } else { body.session_timeout_ms },
        protocol_type: body.protocol_type.to_string(),
        protocols: body.protocols.iter().map(|p| (p.name.to_string(), p.metadata.clone())).collect(),
        require_known_member_id: v >= 4,
    }
}

fn error(code: i16, member_id: &str) -> JoinResult {
    JoinResult { error_code: code, generation_id: -1, member_id: member_id.to_string(), ..Default::default() }
}

fn response(r: JoinResult, v: i16) -> JoinGroupResponse {
    let members = r
        .members
        .into_iter()
        .map(|(id, instance, metadata)| {
            JoinGroupResponseMember::default()
                .with_member_id(str_bytes(id))
                .with_group_instance_id(instance.filter(|_| v >= 5).map(str_bytes))
                .with_metadata(metadata)
        })
        .collect();
    JoinGroupResponse::default()
        .with_error_code(r.error_code)
        .with_generation_id(r.generation_id)
        .with_protocol_type(r.protocol_type.filter(|_| v >= 7).map(str_bytes))
        // Before v7 the protocol name is not nullable.
        .with_protocol_name(Some(str_bytes(r.protocol_name.unwrap_or_default())))
        .with_leader(str_bytes(r.leader))
        .with_member_id(str_bytes(r.member_id))
        .with_members(members)
}

/// The group the request joins.
pub fn checked_name(body: &RequestKind) -> Option<&str> {
    let RequestKind::JoinGroup(body) = body else { return None };
    Some(&body.group_id.0)
}

/// The request refused with `code`; every other field is Kafka's "unknown" (generation -1, no
/// member id, leader or members), as `JoinGroupRequest.getErrorResponse`.
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::JoinGroup(_) = body else { return ResponseKind::JoinGroup(Default::default()) };
    ResponseKind::JoinGroup(JoinGroupResponse::default().with_error_code(code).with_generation_id(-1))
}

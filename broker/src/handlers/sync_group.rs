//! SyncGroup (key 14), v0–v5: the leader member hands in the assignments; every member gets
//! its own (see `coord::group`). A follower's request waits until the leader's arrives.
//!
//! The leader's SyncGroup completes the generation: one `CompleteGeneration` log op records
//! it (group, generation, protocol, member ids) before any member is answered: a follower that
//! has its assignment may commit offsets with the new generation at once, and apply fences
//! commits against the generation in the log.
//! v5 (KIP-559) carries protocol type and name; a mismatch with the group's is
//! INCONSISTENT_GROUP_PROTOCOL, as Kafka answers. An empty or over-long group id is
//! INVALID_GROUP_ID. Assignment bytes are carried untouched, parsed or not. A classic member
//! inside a KIP-848 consumer group (online migration) is answered by `consumer_group_classic`.
//!
//! Access: GROUP READ, checked by the pipeline (`handlers::HANDLERS`).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind, SyncGroupRequest, SyncGroupResponse};

use super::util::{adopt_group, group_id_invalid, str_bytes};
use super::HandlerResult;
use super::{consumer_group_classic, group_kind};
use crate::coord::group::{SyncOutcome, SyncResult};
use crate::ctx::{Lane, SharedCtx};
use crate::leader::proposer::ProposeError;
use onelog_state::command::GenerationOp;

pub const KEY: ApiKey = ApiKey::SyncGroup;
pub const VERSIONS: (i16, i16) = (0, 5);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::SyncGroup(body) = req.body else { anyhow::bail!("not a SyncGroup body") };
    let group_id = body.group_id.0.to_string();
    let code = |error_code| SyncResult { error_code, ..Default::default() };
    let result = match ctx.group_lane(&group_id).filter(|lane| lane.is_leader()) {
        _ if group_id_invalid(&group_id) => code(error_code::INVALID_GROUP_ID),
        None => code(error_code::NOT_COORDINATOR),
        // Online migration: a classic member inside a consumer group.
        Some(lane) if group_kind::consumer_group_has_members(lane, &group_id) => {
            consumer_group_classic::sync(lane, &body)
        }
        Some(lane) => match protocol_mismatch(lane, &group_id, &body) {
            Some(mismatch) => code(mismatch),
            None => sync(&ctx, lane, &group_id, &body).await,
        },
    };
    let v = req.api_version;
    let response = SyncGroupResponse::default()
        .with_error_code(result.error_code)
        .with_protocol_type(result.protocol_type.filter(|_| v >= 5).map(str_bytes))
        .with_protocol_name(result.protocol_name.filter(|_| v >= 5).map(str_bytes))
        .with_assignment(result.assignment);
    Ok(Some(ResponseKind::SyncGroup(response)))
}

/// The classic coordinator's SyncGroup; a generation it completes is recorded first.
async fn sync(ctx: &SharedCtx, lane: Lane<'_>, group_id: &str, body: &SyncGroupRequest) -> SyncResult {
    adopt_group(lane, group_id);
    let assignments =
        body.assignments.iter().map(|a| (a.member_id.to_string(), a.assignment.clone())).collect();
    let outcome = lane
        .coordinators
        .classic
        .sync(group_id, body.generation_id, (&body.member_id, body.group_instance_id.as_deref()), assignments)
        .await;
    match outcome {
        SyncOutcome::Answered(result) => result,
        // Spawned: the group waits for `recorded`, which must run even if this request's
        // connection goes away meanwhile.
        SyncOutcome::Record(generation) => {
            let (ctx, leader) = (ctx.clone(), body.member_id.to_string());
            let recording = tokio::spawn(async move {
                let Some(lane) = ctx.group_lane(&generation.group_id) else {
                    return SyncResult { error_code: error_code::NOT_COORDINATOR, ..Default::default() };
                };
                let committed = record(lane, &generation).await;
                lane.coordinators.classic.recorded(&generation, &leader, committed)
            });
            recording.await.unwrap_or_else(|_| SyncResult {
                error_code: error_code::NOT_COORDINATOR,
                ..Default::default()
            })
        }
    }
}

/// The completed generation goes into the log before any member hears back (Kafka stores the
/// group before answering SyncGroup): one `CompleteGeneration` op. Whether it committed; if not
/// (leadership lost), NOT_COORDINATOR sends the members to the new leader.
async fn record(lane: Lane<'_>, generation: &GenerationOp) -> bool {
    tracing::info!(group = %generation.group_id, generation = generation.generation_id,
        members = generation.members.len(), protocol = %generation.protocol_name, "generation completed");
    crate::fault::delay("group.record_generation").await;
    let committed = match lane.proposer.submit(generation.clone()).await {
        Ok(pending) => pending.await.map(|_| ()),
        Err(e) => Err(e),
    };
    if let Err(ProposeError::Fatal(e)) = &committed {
        tracing::warn!(error = %e, "CompleteGeneration not committed");
    }
    committed.is_ok()
}

fn protocol_mismatch(lane: Lane<'_>, group_id: &str, body: &SyncGroupRequest) -> Option<i16> {
    let view = lane.coordinators.classic.describe(group_id)?;
    let type_differs = body.protocol_type.as_ref().is_some_and(|t| **t != *view.protocol_type);
    let name_differs = body.protocol_name.as_ref().is_some_and(|n| **n != *view.protocol_name);
    (type_differs || name_differs).then_some(error_code::INCONSISTENT_GROUP_PROTOCOL)
}

/// The group the request syncs.
pub fn checked_name(body: &RequestKind) -> Option<&str> {
    let RequestKind::SyncGroup(body) = body else { return None };
    Some(&body.group_id.0)
}

/// The request refused with `code` and an empty assignment (`SyncGroupRequest.getErrorResponse`).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::SyncGroup(_) = body else { return ResponseKind::SyncGroup(Default::default()) };
    ResponseKind::SyncGroup(SyncGroupResponse::default().with_error_code(code))
}

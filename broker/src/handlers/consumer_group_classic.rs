//! Classic members inside a KIP-848 consumer group (online migration, around-spec §4.4): the
//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup handlers hand a request here when its group
//! id holds a consumer group with members. The group logic is the state machine's
//! (`onelog_state::consumer_group::classic`); this runs it against the applied state, puts the
//! JoinGroups and LeaveGroups that change the group in the log (a JoinGroup that changes
//! nothing writes nothing, as a steady heartbeat), and arms the member's timers on the
//! leader's consumer coordinator: its session from its own session timeout, the sync deadline
//! after a JoinGroup and the join deadline after a REBALANCE_IN_PROGRESS.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::{HeartbeatRequest, JoinGroupRequest, SyncGroupRequest};
use onelog_state::command::{ClassicJoinOp, ClassicLeaveOp};
use onelog_state::consumer_group::{self as cg, ClassicJoin, ClassicProtocol, ConsumerGroups, Refusal};

use super::util::group_op_failed;
use crate::clock::wall_clock_ms;
use crate::coord::group::{JoinResult, SyncResult};
use crate::ctx::{Ctx, Lane};

/// JoinGroup from a classic member: MEMBER_ID_REQUIRED, a refusal, or the member's epoch as
/// its generation. The answer names no leader and no members: the consumer group assigns.
pub async fn join(ctx: &Ctx, lane: Lane<'_>, req: &Request, body: &JoinGroupRequest) -> JoinResult {
    let limits = &ctx.config.settings.group;
    let session_ms = body.session_timeout_ms;
    if !(limits.min_session_timeout_ms..=limits.max_session_timeout_ms).contains(&session_ms) {
        return refused(error_code::INVALID_SESSION_TIMEOUT, body.member_id.to_string());
    }
    let join = input(req, body);
    let now_ms = wall_clock_ms();
    let settings = ctx.config.settings.consumer_group.for_group(ctx.group_overrides(&join.group_id).as_ref());
    let (dry_run, changed) = lane.applied.state(|s| {
        let trial = |copy: &mut ConsumerGroups| copy.classic_join(&s.topics, &join, &settings, now_ms);
        let (answer, changed) = s.consumer_groups.trial(&join.group_id, trial);
        (answer, changed)
    });
    let answer = match dry_run {
        Ok(_) if changed => {
            let op = Box::new(ClassicJoinOp { join: join.clone(), settings, now_ms });
            lane.proposer
                .propose(op)
                .await
                .unwrap_or_else(|e| Err(Refusal { code: group_op_failed(&e), message: None }))
        }
        other => other,
    };
    match answer {
        Err(refusal) => refused(refusal.code, join.member_id),
        Ok(answer) => {
            let key = (join.group_id.as_str(), answer.member_id.as_str());
            let timeouts = (join.session_timeout_ms, join.rebalance_timeout_ms);
            lane.coordinators.consumer.classic_joined(
                key,
                timeouts,
                answer.revocation_timer,
                wall_clock_ms(),
            );
            JoinResult {
                error_code: error_code::NONE,
                generation_id: answer.generation_id,
                protocol_type: Some(cg::CONSUMER_PROTOCOL_TYPE.to_string()),
                protocol_name: Some(answer.protocol_name),
                leader: String::new(),
                member_id: answer.member_id,
                members: Vec::new(),
            }
        }
    }
}

/// A refused join keeps the member id it came with, or was given (MEMBER_ID_REQUIRED).
fn refused(code: i16, member_id: String) -> JoinResult {
    JoinResult { error_code: code, generation_id: -1, member_id, ..Default::default() }
}

/// The state machine's input. A join without a member id gets one here, on the leader.
fn input(req: &Request, body: &JoinGroupRequest) -> ClassicJoin {
    let unknown_member = body.member_id.is_empty();
    let member_id =
        if unknown_member { uuid::Uuid::new_v4().to_string() } else { body.member_id.to_string() };
    let instance_id = body.group_instance_id.as_ref().map(|s| s.to_string());
    let v = req.api_version;
    ClassicJoin {
        group_id: body.group_id.0.to_string(),
        member_id,
        unknown_member,
        requires_known_member_id: unknown_member && instance_id.is_none() && v >= 4,
        instance_id,
        client_id: req.header.client_id.as_ref().map(|s| s.to_string()).unwrap_or_default(),
        client_host: req.client_address.map(|ip| format!("/{ip}")).unwrap_or_default(),
        session_timeout_ms: body.session_timeout_ms,
        rebalance_timeout_ms: if v >= 1 { body.rebalance_timeout_ms } else { body.session_timeout_ms },
        protocol_type: body.protocol_type.to_string(),
        protocols: body
            .protocols
            .iter()
            .map(|p| ClassicProtocol { name: p.name.to_string(), metadata: p.metadata.to_vec() })
            .collect(),
    }
}

/// SyncGroup from a classic member: its current partitions, written nothing.
pub fn sync(lane: Lane<'_>, body: &SyncGroupRequest) -> SyncResult {
    let group_id = body.group_id.0.as_str();
    let member = (body.member_id.as_str(), body.group_instance_id.as_deref());
    let protocol = (body.protocol_type.as_deref(), body.protocol_name.as_deref());
    let synced = lane
        .applied
        .state(|s| s.consumer_groups.classic_sync(&s.topics, group_id, member, body.generation_id, protocol));
    match synced {
        Ok(sync) => {
            let key = (group_id, sync.member_id.as_str());
            lane.coordinators.consumer.classic_seen(
                key,
                sync.session_timeout_ms,
                true,
                None,
                wall_clock_ms(),
            );
            SyncResult {
                error_code: error_code::NONE,
                protocol_type: Some(cg::CONSUMER_PROTOCOL_TYPE.to_string()),
                protocol_name: Some(sync.protocol_name),
                assignment: sync.assignment.into(),
            }
        }
        Err(refusal) => {
            if refusal.code == error_code::REBALANCE_IN_PROGRESS {
                arm_join_deadline(lane, group_id, member);
            }
            SyncResult { error_code: refusal.code, ..Default::default() }
        }
    }
}

/// Heartbeat from a classic member: 0, or REBALANCE_IN_PROGRESS when it must rejoin.
pub fn heartbeat(lane: Lane<'_>, body: &HeartbeatRequest) -> i16 {
    let group_id = body.group_id.0.as_str();
    let member = (body.member_id.as_str(), body.group_instance_id.as_deref());
    let beat =
        lane.applied.state(|s| s.consumer_groups.classic_heartbeat(group_id, member, body.generation_id));
    match beat {
        Ok(beat) => {
            let rejoin =
                (beat.error_code == error_code::REBALANCE_IN_PROGRESS).then_some(beat.rebalance_timeout_ms);
            let key = (group_id, beat.member_id.as_str());
            lane.coordinators.consumer.classic_seen(
                key,
                beat.session_timeout_ms,
                false,
                rejoin,
                wall_clock_ms(),
            );
            beat.error_code
        }
        Err(refusal) => refusal.code,
    }
}

/// The join deadline after a SyncGroup answered REBALANCE_IN_PROGRESS (a member found by
/// instance id has this member id, or the answer was FENCED_INSTANCE_ID).
fn arm_join_deadline(lane: Lane<'_>, group_id: &str, member: (&str, Option<&str>)) {
    let timeouts = lane.applied.state(|s| {
        let m = s.consumer_groups.groups.get(group_id)?.members.get(member.0)?;
        Some((m.classic.as_ref()?.session_timeout_ms, m.rebalance_timeout_ms))
    });
    if let Some((session_ms, rebalance_ms)) = timeouts {
        lane.coordinators.consumer.classic_seen(
            (group_id, member.0),
            session_ms,
            false,
            Some(rebalance_ms),
            wall_clock_ms(),
        );
    }
}

/// LeaveGroup of classic members: one log entry for all of them; each gets its own code.
/// A request in which no member may leave is answered without a log entry.
pub async fn leave(lane: Lane<'_>, group_id: &str, members: Vec<(String, Option<String>)>) -> Vec<i16> {
    let count = members.len();
    let (dry_run, _) = lane.applied.state(|s| {
        s.consumer_groups.trial(group_id, |copy| copy.classic_leave(&s.topics, group_id, &members))
    });
    if dry_run.iter().all(|l| l.error_code != error_code::NONE) {
        return dry_run.into_iter().map(|l| l.error_code).collect();
    }
    let op = ClassicLeaveOp { group_id: group_id.to_string(), members };
    match lane.proposer.propose(op).await {
        Ok(left) => {
            for gone in left.iter().filter(|l| l.error_code == error_code::NONE) {
                lane.coordinators.consumer.left(group_id, &gone.member_id);
            }
            left.into_iter().map(|l| l.error_code).collect()
        }
        Err(e) => vec![group_op_failed(&e); count],
    }
}

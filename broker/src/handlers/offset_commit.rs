//! OffsetCommit (key 8), v2–v9: one log op holding every partition's committed offset.
//!
//! The leader is every group's coordinator (see find_coordinator), so a follower answers
//! NOT_COORDINATOR and the client looks the coordinator up again. On the leader the commits
//! are checked against the applied state with the same pure function apply runs
//! (`Groups::check_commit`); if none would be stored the answer needs no log entry, otherwise
//! the whole request is one `OffsetCommit` op and each partition gets apply's code. Like
//! Produce it is a two-stage handler: queued for the log in the order the connection sent it. Generation
//! -1 commits (simple consumers) are accepted; a member's commit (a real generation) is checked
//! against the coordinator's in-memory membership (`groups`): UNKNOWN_MEMBER_ID,
//! ILLEGAL_GENERATION or REBALANCE_IN_PROGRESS as Kafka answers; apply then checks it against the
//! last generation recorded in the log, so a zombie is fenced on every replica and after a
//! failover (see `state::groups`). A KIP-848 consumer group decides by member epoch instead
//! (`apply_consumer::check_offset_commit`: v9 for its members, STALE_MEMBER_EPOCH,
//! UNKNOWN_MEMBER_ID, the whole request failing with one code as in Kafka), and so does a
//! KIP-1071 Streams group (`apply_streams::check_commit`, Kafka's
//! `StreamsGroup.validateOffsetCommit`). A KIP-932 share group commits no offsets: every
//! partition is answered GROUP_ID_NOT_FOUND, without a log entry (Kafka's
//! `ShareGroup.validateOffsetCommit`, "Group <id> is not a consumer group.").
//!
//! v2–v4 carry `retention_time_ms`; it is ignored, as Kafka ≥ 2.1 (KIP-211) ignores it for
//! groups: offsets are kept until the topic is deleted (offset expiry is not built yet).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, OffsetCommitRequest, OffsetCommitResponse, RequestKind, ResponseKind,
};

use super::util::{adopt_group, group_op_failed, topic_name};
use super::HandlerFuture;
use crate::ctx::{Lane, SharedCtx};
use crate::leader::proposer::ProposeError;
use crate::limits;
use crate::security::authz::{self, code, op, rt, Subject};
use onelog_state::apply_consumer;
use onelog_state::apply_share::is_share_group;
use onelog_state::command::{ItemResult, OffsetCommitEntry, OffsetCommitOp};
use onelog_state::groups::CommitResult;

pub const KEY: ApiKey = ApiKey::OffsetCommit;
pub const VERSIONS: (i16, i16) = (2, 9);
pub const ACCEPTED_MIN_VERSION: i16 = 2;

/// Stage one, in the connection's read loop: check and queue for the log in request order, so
/// that two commits sent on one connection (`commitAsync` twice) apply in the order sent.
pub async fn submit(ctx: SharedCtx, req: Request) -> anyhow::Result<HandlerFuture> {
    let who = Subject::of(&req);
    let req_version = req.api_version;
    let RequestKind::OffsetCommit(body) = req.body else { anyhow::bail!("not an OffsetCommit body") };
    let mut op = to_op(&body);
    // KafkaApis: READ on the group (else every partition GROUP_AUTHORIZATION_FAILED), then
    // READ on each topic: a refused topic's partitions get TOPIC_AUTHORIZATION_FAILED and the
    // others are committed.
    let group_allowed = ctx.authorizer.allowed(&who, rt::GROUP, &op.group_id, op::READ);
    let readable =
        ctx.authorizer.allowed_each(&who, rt::TOPIC, op.commits.iter().map(|c| c.topic.as_str()), op::READ);
    let mut keep = readable.iter();
    op.commits.retain(|_| *keep.next().unwrap_or(&false));
    let n = op.commits.len();
    let lane = ctx.group_lane(&op.group_id).filter(|lane| lane.may_propose());
    let decided = if !group_allowed {
        Some(vec![(code::GROUP_AUTHORIZATION_FAILED, None); n])
    } else if n == 0 && !readable.is_empty() {
        Some(Vec::new())
    } else if op.group_id.len() > limits::GROUP_ID_BYTES_MAX {
        let message = format!("group id longer than {} bytes", limits::GROUP_ID_BYTES_MAX);
        Some(vec![(error_code::INVALID_GROUP_ID, Some(message)); n])
    } else if let Some(lane) = lane {
        match member_check(lane, &op, body.group_instance_id.as_deref()) {
            Some(code) if code != error_code::NONE => Some(vec![(code, None); n]),
            // Apply checks the generation again against the log's record.
            _ => check(lane, &op, req_version),
        }
    } else {
        Some(vec![(error_code::NOT_COORDINATOR, None); n])
    };
    tracing::debug!(
        group = %op.group_id,
        member = %op.member_id,
        generation = op.generation_id,
        commits = ?op.commits.iter().map(|c| (c.partition, c.offset)).collect::<Vec<_>>(),
        refused = ?decided.as_ref().map(|r| r.first().map(|(code, _)| *code)),
        "OffsetCommit"
    );
    let pending = match (decided, lane) {
        (None, Some(lane)) => Ok(lane.proposer.submit(op).await),
        (decided, _) => Err(decided.unwrap_or_else(|| vec![(error_code::NOT_COORDINATOR, None); n])),
    };
    // Stage two, spawned: wait for the commit and answer.
    Ok(Box::pin(async move {
        let results = match pending {
            Err(results) => results,
            Ok(Ok(result)) => outcome(result.await, n),
            Ok(Err(e)) => outcome(Err(e), n),
        };
        let refused =
            if group_allowed { code::TOPIC_AUTHORIZATION_FAILED } else { code::GROUP_AUTHORIZATION_FAILED };
        let results = authz::merge_refused(&readable, results, (refused, None));
        Ok(Some(ResponseKind::OffsetCommit(response(&body, &results))))
    }))
}

fn to_op(body: &OffsetCommitRequest) -> OffsetCommitOp {
    let commits = body
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| OffsetCommitEntry {
                topic: t.name.0.to_string(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
            })
        })
        .collect();
    OffsetCommitOp {
        group_id: body.group_id.0.to_string(),
        generation_id: body.generation_id_or_member_epoch,
        member_id: body.member_id.to_string(),
        commits,
    }
}

/// A commit checked against the coordinator's membership, as Kafka's
/// `ClassicGroup.validateOffsetCommit`; None when the coordinator does not know the group
/// (the applied state answers), and for a Streams group, whose members the log holds: the
/// classic record of a group it took over must not refuse them as unknown. None for a share
/// group too: the applied state refuses every commit to it (`apply_consumer::check_offset_commit`).
pub(super) fn member_check(lane: Lane, op: &OffsetCommitOp, instance_id: Option<&str>) -> Option<i16> {
    let in_log = |s: &onelog_state::BrokerState| {
        s.streams_groups.groups.contains_key(&op.group_id) || is_share_group(s, &op.group_id)
    };
    if lane.applied.state(in_log) {
        return None;
    }
    adopt_group(lane, &op.group_id);
    lane.coordinators.classic.check_commit(&op.group_id, op.generation_id, &op.member_id, instance_id)
}

/// The answer without a log entry when nothing would be stored, as apply would decide it now.
/// A consumer-protocol group (KIP-848) decides membership by member epoch first; before v9 a
/// member of one is answered UNSUPPORTED_VERSION, as Kafka does.
fn check(lane: Lane, op: &OffsetCommitOp, version: i16) -> Option<Vec<CommitResult>> {
    let checked = lane.applied.state(|s| {
        let rules = s.commit_rules();
        match apply_consumer::check_offset_commit(s, op, version) {
            Some(code) if code != error_code::NONE => vec![(code, None); op.commits.len()],
            Some(_) => s.groups.check_commit(&s.topics, &apply_consumer::admitted(op), rules),
            None => s.groups.check_commit(&s.topics, op, rules),
        }
    });
    checked.iter().all(|(code, _)| *code != error_code::NONE).then_some(checked)
}

fn outcome(result: Result<Vec<ItemResult>, ProposeError>, n: usize) -> Vec<CommitResult> {
    match result {
        Ok(results) => results,
        // Retriable for every client: it finds the coordinator again and retries.
        Err(e) => vec![(group_op_failed(&e), Some(e.to_string())); n],
    }
}

/// One partition per commit, grouped by topic as the request was.
fn response(body: &OffsetCommitRequest, results: &[CommitResult]) -> OffsetCommitResponse {
    let mut results = results.iter();
    let topics = body
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let code = results.next().map_or(error_code::UNKNOWN_SERVER_ERROR, |(c, _)| *c);
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            OffsetCommitResponseTopic::default()
                .with_name(topic_name(t.name.0.to_string()))
                .with_partitions(partitions)
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

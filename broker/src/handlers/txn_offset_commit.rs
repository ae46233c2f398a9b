//! TxnOffsetCommit (key 28), v0–v5: offsets a transaction commits with its writes.
//!
//! One `TxnOffsetCommit` op holding the offsets in the transaction (DESIGN §1); they become
//! the group's committed offsets only when the EndTxn entry commits, and are dropped if it
//! aborts. KIP-447 (v3+): a consumer's generation and member id are checked like a member's
//! OffsetCommit, so a zombie that lost its partitions is fenced.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, RequestKind, ResponseKind, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};

use onelog_state::command::{OffsetCommitEntry, OffsetCommitOp, TxnOffsetCommitOp};
use onelog_state::xgroup::producer_id_group;

use super::util::{producer, topic_name};
use super::{offset_commit, HandlerResult};
use crate::coord::xgroup::participant::{self, Remote};
use crate::ctx::{Lane, SharedCtx};
use crate::errors::txn_failure_code;
use crate::limits;
use crate::security::authz::{self, code, op, rt, Subject};

pub const KEY: ApiKey = ApiKey::TxnOffsetCommit;
/// v5 (KIP-890 part 2) adds the group implicitly; AddOffsetsToTxn is never required here.
pub const VERSIONS: (i16, i16) = (0, 5);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::TxnOffsetCommit(body) = req.body else { anyhow::bail!("not a TxnOffsetCommit body") };
    let mut op = to_op(&body);
    // KafkaApis: WRITE on the transactional id, READ on the group, then READ on each topic:
    // a refused topic's partitions get TOPIC_AUTHORIZATION_FAILED, the others are committed.
    let readable =
        ctx.authorizer.allowed_each(&who, rt::TOPIC, op.commits.iter().map(|c| c.topic.as_str()), op::READ);
    let refused_all = if !ctx.authorizer.allowed(&who, rt::TRANSACTIONAL_ID, &op.transactional_id, op::WRITE)
    {
        Some(code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    } else if !ctx.authorizer.allowed(&who, rt::GROUP, &op.group_id, op::READ) {
        Some(code::GROUP_AUTHORIZATION_FAILED)
    } else {
        None
    };
    let mut keep = readable.iter();
    op.commits.retain(|_| *keep.next().unwrap_or(&false));
    let n = op.commits.len();
    let codes: Vec<i16> = if let Some(refused) = refused_all {
        vec![refused; readable.len()]
    } else if n == 0 {
        Vec::new() // every topic refused (or none sent): nothing to put in the log
    } else if op.group_id.len() > limits::GROUP_ID_BYTES_MAX {
        vec![error_code::INVALID_GROUP_ID; n]
    } else if let Some(lane) = ctx.group_lane(&op.group_id).filter(|lane| lane.is_leader()) {
        let member = OffsetCommitOp {
            group_id: op.group_id.clone(),
            generation_id: op.generation_id,
            member_id: op.member_id.clone(),
            commits: Vec::new(),
        };
        let instance = body.group_instance_id.as_deref();
        match offset_commit::member_check(lane, &member, instance) {
            Some(code) if code != error_code::NONE && op.generation_id >= 0 => vec![code; n],
            _ => propose(&ctx, lane, op, req.api_version).await,
        }
    } else {
        vec![error_code::NOT_COORDINATOR; n]
    };
    // The refused topics' codes back in request order.
    let codes: Vec<i16> = if refused_all.is_some() {
        codes
    } else {
        authz::merge_refused(&readable, codes, code::TOPIC_AUTHORIZATION_FAILED)
    };
    Ok(Some(ResponseKind::TxnOffsetCommit(response(&body, &codes))))
}

/// The offsets go in the log of the consumer group's Raft group (`lane`): in the transaction's
/// own entry where that group coordinates it, else as a participant that joins a transaction
/// another group coordinates (docs/SCALING.md §3.1).
async fn propose(ctx: &SharedCtx, lane: Lane<'_>, op: TxnOffsetCommitOp, version: i16) -> Vec<i16> {
    let n = op.commits.len();
    let coordinator = producer_id_group(op.producer.producer_id);
    if coordinator != lane.group && !ctx.single_group() {
        let remote = Remote { participant: lane.group, coordinator, producer: op.producer };
        return participant::commit_offsets(ctx, remote, op, version).await;
    }
    match lane.txns.txn_offset_commit(op).await {
        Ok(results) => results.into_iter().map(|(code, _)| code).collect(),
        Err(failure) => {
            tracing::debug!(?failure, "TxnOffsetCommit refused");
            vec![txn_failure_code(&failure, KEY, version); n]
        }
    }
}

fn to_op(body: &TxnOffsetCommitRequest) -> TxnOffsetCommitOp {
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
    TxnOffsetCommitOp {
        transactional_id: body.transactional_id.0.to_string(),
        producer: producer(body.producer_id, body.producer_epoch),
        group_id: body.group_id.0.to_string(),
        // GenerationId in Kafka 4.1's schema, renamed by 4.4's (same wire bytes): a classic
        // group's generation, or a consumer-protocol member's epoch.
        generation_id: body.generation_id_or_member_epoch,
        member_id: body.member_id.to_string(),
        commits,
    }
}

fn response(body: &TxnOffsetCommitRequest, codes: &[i16]) -> TxnOffsetCommitResponse {
    let mut codes = codes.iter();
    let topics = body
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(*codes.next().unwrap_or(&error_code::UNKNOWN_SERVER_ERROR))
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic_name(t.name.0.to_string()))
                .with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

//! DeleteRecords (key 21, KIP-107): moves partitions' log start offsets forward through one
//! Raft entry (`Op::DeleteRecords`). The leader answers; followers answer
//! NOT_LEADER_OR_FOLLOWER per partition, and clients look the leader up again.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{ApiKey, DeleteRecordsResponse, RequestKind, ResponseKind};

use super::HandlerResult;
use crate::ctx::{Ctx, Lane, SharedCtx};
use crate::errors::{propose_error_code, Addressed};
use crate::security::authz::{self, code, op, rt, Subject};
use onelog_state::command::{DeleteRecordsOp, LowWatermark, TrimLog};

pub const KEY: ApiKey = ApiKey::DeleteRecords;
pub const VERSIONS: (i16, i16) = (0, 2);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::DeleteRecords(body) = req.body else { anyhow::bail!("not a DeleteRecords body") };
    let requested: Vec<TrimLog> = body
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| TrimLog {
                topic: t.name.to_string(),
                partition: p.partition_index,
                log_start_offset: p.offset,
            })
        })
        .collect();
    // KafkaApis: DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED for its partitions.
    let deletable =
        ctx.authorizer.allowed_each(&who, rt::TOPIC, requested.iter().map(|r| r.topic.as_str()), op::DELETE);
    let mut keep = deletable.iter();
    let mut requested = requested;
    requested.retain(|_| *keep.next().unwrap_or(&false));
    let deleted = delete(&ctx, requested).await;
    let mut results =
        authz::merge_refused(&deletable, deleted, (code::TOPIC_AUTHORIZATION_FAILED, -1)).into_iter();
    let topics = body
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let (code, low_watermark) =
                        results.next().unwrap_or((error_code::UNKNOWN_SERVER_ERROR, -1));
                    DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                        .with_low_watermark(low_watermark)
                })
                .collect();
            DeleteRecordsTopicResult::default().with_name(t.name.clone()).with_partitions(partitions)
        })
        .collect();
    Ok(Some(ResponseKind::DeleteRecords(DeleteRecordsResponse::default().with_topics(topics))))
}

/// One result per partition, in request order: each Raft group's partitions trimmed by one
/// entry in that group's log, where this node leads it (issue 32).
async fn delete(ctx: &Ctx, requested: Vec<TrimLog>) -> Vec<LowWatermark> {
    let groups: Vec<u32> = requested.iter().map(|r| ctx.topic_group(&r.topic)).collect();
    let mut results = vec![(error_code::UNKNOWN_SERVER_ERROR, -1); requested.len()];
    for group in crate::ctx::distinct(&groups) {
        let (indexes, part): (Vec<usize>, Vec<TrimLog>) = requested
            .iter()
            .enumerate()
            .filter(|(i, _)| groups[*i] == group)
            .map(|(i, r)| (i, r.clone()))
            .unzip();
        let answered = delete_in(ctx, ctx.lane(group), part).await;
        for (i, answer) in indexes.into_iter().zip(answered) {
            results[i] = answer;
        }
    }
    results
}

/// One group's part. Kafka refuses a topic whose cleanup policy does not include `delete`
/// (POLICY_VIOLATION); everything else apply decides.
async fn delete_in(ctx: &Ctx, lane: Option<Lane<'_>>, requested: Vec<TrimLog>) -> Vec<LowWatermark> {
    let Some(lane) = lane.filter(|l| l.leadership.may_propose()) else {
        return vec![(error_code::NOT_LEADER_OR_FOLLOWER, -1); requested.len()];
    };
    let refused: Vec<Option<i16>> = ctx.applied.state(|state| {
        requested
            .iter()
            .map(|p| (!deletable(ctx, state, &p.topic)).then_some(error_code::POLICY_VIOLATION))
            .collect()
    });
    let allowed: Vec<TrimLog> =
        requested.iter().zip(&refused).filter(|(_, r)| r.is_none()).map(|(p, _)| p.clone()).collect();
    let n = allowed.len();
    let mut applied = if n == 0 {
        Vec::new()
    } else {
        lane.proposer
            .propose(DeleteRecordsOp { partitions: allowed })
            .await
            .unwrap_or_else(|e| vec![(propose_error_code(&e, Addressed::PartitionLeader), -1); n])
    }
    .into_iter();
    refused
        .into_iter()
        .map(|r| match r {
            Some(code) => (code, -1),
            None => applied.next().unwrap_or((error_code::UNKNOWN_SERVER_ERROR, -1)),
        })
        .collect()
}

/// Whether the topic's effective `cleanup.policy` (topic, dynamic broker, static broker)
/// includes `delete`; an unknown topic is left to apply, which answers it.
fn deletable(ctx: &Ctx, state: &onelog_state::BrokerState, topic: &str) -> bool {
    let set = state.topics.get(topic).and_then(|t| t.configs.get("cleanup.policy")).map(String::as_str);
    let dynamic = || state.configs.broker_value(ctx.config.node_id, "log.cleanup.policy").map(|(v, _)| v);
    let policy = set.or_else(dynamic).or_else(|| ctx.config.get("log.cleanup.policy")).unwrap_or("delete");
    policy.split(',').any(|p| p.trim() == "delete")
}

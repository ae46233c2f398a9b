//! CreatePartitions (key 37): grow a topic's partition count, in one Raft entry, with the
//! replicas a client assigns to each new partition (checked as Kafka checks them,
//! `onelog_state::assignment`) recorded for Metadata. A follower forwards it to the leader at
//! dispatch (`Route::Leader` on its registry row); `validate_only` is answered where it
//! arrives.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{ApiKey, CreatePartitionsResponse, RequestKind, ResponseKind};

use super::util::str_bytes;
use super::{Forwarded, HandlerResult};
use crate::controller;
use crate::ctx::SharedCtx;
use crate::security::authz::{self, code, op, rt, Subject};
use onelog_state::assignment;
use onelog_state::command::NewPartitions;
use onelog_state::BrokerState;

pub const KEY: ApiKey = ApiKey::CreatePartitions;
pub const VERSIONS: (i16, i16) = (0, 3);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub const FORWARDED: Forwarded = Forwarded {
    when: |body| matches!(body, RequestKind::CreatePartitions(b) if !b.validate_only),
    settled: grown,
};

/// Every topic the leader grew has its new partitions here too.
fn grown(request: &RequestKind, response: &ResponseKind, state: &BrokerState) -> bool {
    let (RequestKind::CreatePartitions(body), ResponseKind::CreatePartitions(r)) = (request, response) else {
        return true;
    };
    let ok = |n: &str| r.results.iter().any(|t| t.name.0.as_str() == n && t.error_code == 0);
    body.topics.iter().filter(|t| ok(t.name.0.as_str())).all(|t| {
        state.topics.get(t.name.0.as_str()).is_none_or(|s| s.partitions.len() >= t.count.max(0) as usize)
    })
}

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::CreatePartitions(body) = req.body else { anyhow::bail!("not a CreatePartitions body") };
    let items: Vec<NewPartitions> = body
        .topics
        .iter()
        .map(|t| {
            let assigned = t.assignments.iter().flatten();
            let assignments = assigned.map(|a| a.broker_ids.iter().map(|b| b.0).collect()).collect();
            NewPartitions { topic: t.name.0.to_string(), count: t.count, assignments }
        })
        .collect();
    // KafkaApis: ALTER on each topic, else TOPIC_AUTHORIZATION_FAILED for it.
    let alterable =
        ctx.authorizer.allowed_each(&who, rt::TOPIC, items.iter().map(|i| i.topic.as_str()), op::ALTER);
    let mut keep = alterable.iter();
    let mut items = items;
    items.retain(|_| *keep.next().unwrap_or(&false));
    let outcomes = if body.validate_only {
        let brokers = controller::broker_ids(&ctx);
        ctx.applied.read(|applied| {
            items
                .iter()
                .map(|i| match applied.state.topics.get(&i.topic) {
                    None => (
                        error_code::UNKNOWN_TOPIC_OR_PARTITION,
                        Some(format!("Topic '{}' does not exist.", i.topic)),
                    ),
                    Some(t) if i.count <= t.partitions.len() as i32 => (
                        error_code::INVALID_PARTITIONS,
                        Some(format!("Topic currently has {} partitions.", t.partitions.len())),
                    ),
                    Some(t) => {
                        match assignment::problem(i, t.partitions.len(), t.replication_factor, Some(&brokers))
                        {
                            Some(why) => (error_code::INVALID_REPLICA_ASSIGNMENT, Some(why)),
                            None => (error_code::NONE, None),
                        }
                    }
                })
                .collect()
        })
    } else {
        controller::create_partitions(&ctx, items).await
    };
    let outcomes = authz::merge_refused(&alterable, outcomes, (code::TOPIC_AUTHORIZATION_FAILED, None));
    let results = body
        .topics
        .into_iter()
        .zip(outcomes)
        .map(|(t, (code, message))| {
            CreatePartitionsTopicResult::default()
                .with_name(t.name)
                .with_error_code(code)
                .with_error_message(message.map(str_bytes))
        })
        .collect();
    Ok(Some(ResponseKind::CreatePartitions(CreatePartitionsResponse::default().with_results(results))))
}

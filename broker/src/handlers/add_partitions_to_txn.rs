//! AddPartitionsToTxn (key 24), v0–v3: the partitions a transaction will write.
//!
//! No log entry (DESIGN §1): the producer is checked against the applied state and the
//! partitions are recorded in the transaction coordinator's memory (`coord::txn`), which Produce consults
//! (KIP-890 part 1). v4+ (broker-to-broker verification, KIP-890) is not needed: onelog's
//! partitions and coordinator are the same process.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnResponse, ApiKey, RequestKind, ResponseKind};

use super::util::producer;
use super::HandlerResult;
use crate::ctx::{Ctx, SharedCtx};
use crate::errors::txn_failure_code;
use crate::security::authz::{code, op, rt, Subject};

pub const KEY: ApiKey = ApiKey::AddPartitionsToTxn;
pub const VERSIONS: (i16, i16) = (0, 3);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

/// KafkaApis: WRITE on the transactional id, then on each topic; with any topic refused
/// nothing is added (OPERATION_NOT_ATTEMPTED for the rest). Then onelog's own rule: below
/// `onelog.version` 8 a cluster of several Raft groups cannot run a transaction across them
/// (docs/SCALING.md §3 needs each group to know its number), so a topic placed outside group 0
/// is refused and nothing is added.
fn admissible(ctx: &Ctx, who: &Subject, tid: &str, wanted: &[(String, i32)]) -> Result<(), Vec<i16>> {
    let writable =
        ctx.authorizer.allowed_each(who, rt::TOPIC, wanted.iter().map(|(t, _)| t.as_str()), op::WRITE);
    let across = !ctx.single_group() && !ctx.placed_coordinators();
    let outside: Vec<bool> = wanted.iter().map(|(t, _)| across && ctx.topic_group(t) != 0).collect();
    let each = |refused: &[bool], code: i16| {
        refused.iter().map(|r| if *r { code } else { error_code::OPERATION_NOT_ATTEMPTED }).collect()
    };
    if !ctx.authorizer.allowed(who, rt::TRANSACTIONAL_ID, tid, op::WRITE) {
        Err(vec![code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED; wanted.len()])
    } else if writable.iter().any(|w| !w) {
        let denied: Vec<bool> = writable.iter().map(|w| !w).collect();
        Err(each(&denied, code::TOPIC_AUTHORIZATION_FAILED))
    } else if outside.iter().any(|o| *o) {
        Err(each(&outside, error_code::POLICY_VIOLATION))
    } else {
        Ok(())
    }
}

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::AddPartitionsToTxn(body) = req.body else {
        anyhow::bail!("not an AddPartitionsToTxn body")
    };
    let tid = body.v3_and_below_transactional_id.0.as_str();
    let id = producer(body.v3_and_below_producer_id, body.v3_and_below_producer_epoch);
    let wanted: Vec<(String, i32)> = body
        .v3_and_below_topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.0.to_string(), *p)))
        .collect();
    // One code for every partition unless only some are unknown (Kafka: those get
    // UNKNOWN_TOPIC_OR_PARTITION, the rest OPERATION_NOT_ATTEMPTED).
    let authorized = admissible(&ctx, &who, tid, &wanted);
    // Group 0 holds every topic's metadata, also of topics placed in other groups.
    let unknown: Vec<bool> =
        ctx.applied.state(|s| wanted.iter().map(|(t, p)| s.partition(t, *p).is_none()).collect());
    let added = |()| ctx.txn_coordinator(tid).and_then(|txns| txns.add_partitions(tid, id, &wanted, unknown));
    let codes: Vec<i16> = match authorized.map(added) {
        Err(codes) => codes,
        Ok(Err(failure)) => {
            tracing::debug!(transactional_id = %tid, ?failure, "AddPartitionsToTxn refused");
            vec![txn_failure_code(&failure, KEY, req.api_version); wanted.len()]
        }
        Ok(Ok(unknown)) if unknown.iter().any(|u| *u) => unknown
            .iter()
            .map(|u| {
                if *u {
                    error_code::UNKNOWN_TOPIC_OR_PARTITION
                } else {
                    error_code::OPERATION_NOT_ATTEMPTED
                }
            })
            .collect(),
        Ok(Ok(_)) => vec![error_code::NONE; wanted.len()],
    };
    let mut results: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for ((topic, partition), code) in wanted.into_iter().zip(codes) {
        let result = AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(partition)
            .with_partition_error_code(code);
        match results.last_mut() {
            Some(t) if t.name.0.as_str() == topic => t.results_by_partition.push(result),
            _ => results.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(super::util::topic_name(topic))
                    .with_results_by_partition(vec![result]),
            ),
        }
    }
    let response = AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results);
    Ok(Some(ResponseKind::AddPartitionsToTxn(response)))
}

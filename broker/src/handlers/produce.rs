//! Produce (key 0): validate each partition's batches, then one all-or-nothing op in the log.
//!
//! Partitions that fail validation (unknown topic, bad CRC, too large) get their own error and
//! are left out; the rest of the request is one `Produce` op, so a request spanning several
//! topics applies all-or-nothing (DRMQ's atomic write). acks=0 gets no response; acks=1 and
//! acks=all both reply after the entry is committed and applied — stronger than Kafka's acks=1.

use std::time::Duration;

use kafka_compat::batch::validate_record_set;
use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ApiKey, ProduceResponse, RequestKind, ResponseKind};

use super::util::{str_bytes, topic_name};
use super::HandlerFuture;
use crate::ctx::{Ctx, SharedCtx};
use crate::proposer::{is_log_append_time, Proposal, UnstampedAppend};
use crate::state::command::OpResult;

pub const KEY: ApiKey = ApiKey::Produce;
/// v0–v2 are advertised so that old librdkafka keeps compression on, but not served (DESIGN §6).
pub const VERSIONS: (i16, i16) = (0, 11);
pub const ACCEPTED_MIN_VERSION: i16 = 3;

/// One partition's outcome, filled in as validation and the log decide.
struct Slot {
    topic: String,
    partition: i32,
    error_code: i16,
    message: Option<String>,
    base_offset: i64,
    log_start_offset: i64,
    log_append_time: i64,
}

/// Stage one, in the connection's read loop: validate and queue for the log in request order.
pub async fn submit(ctx: SharedCtx, req: Request) -> anyhow::Result<HandlerFuture> {
    let RequestKind::Produce(body) = req.body else { anyhow::bail!("not a Produce body") };
    let acks = body.acks;
    let mut slots = Vec::new();
    let mut appends = Vec::new();
    let mut owners = Vec::new(); // slot index of each append
    let not_leader = !ctx.is_leader();
    for topic in body.topic_data {
        let name = topic.name.0.to_string();
        for p in topic.partition_data {
            let mut slot = Slot {
                topic: name.clone(),
                partition: p.index,
                error_code: error_code::NONE,
                message: None,
                base_offset: -1,
                log_start_offset: -1,
                log_append_time: -1,
            };
            let checked = if not_leader {
                Err((error_code::NOT_LEADER_OR_FOLLOWER, None))
            } else if !(acks == 0 || acks == 1 || acks == -1) {
                Err((error_code::INVALID_REQUIRED_ACKS, None))
            } else {
                check_partition(&ctx, &name, p.index, p.records.unwrap_or_default())
            };
            match checked {
                Ok(batches)
                    if appends
                        .iter()
                        .any(|a: &UnstampedAppend| a.topic == name && a.partition == p.index) =>
                {
                    let _ = batches;
                    slot.error_code = error_code::INVALID_REQUEST;
                    slot.message = Some("partition appears twice in the request".into());
                }
                Ok(batches) => {
                    owners.push(slots.len());
                    appends.push(UnstampedAppend { topic: name.clone(), partition: p.index, batches });
                }
                Err((code, message)) => {
                    tracing::debug!(topic = %name, partition = p.index, code, ?message, "produce partition refused");
                    slot.error_code = code;
                    slot.message = message;
                }
            }
            slots.push(slot);
        }
    }
    let timeout = Duration::from_millis(body.timeout_ms.max(0) as u64).max(Duration::from_millis(1));
    let append_time = log_append_times(&ctx, &appends);
    let pending =
        if appends.is_empty() { None } else { Some(ctx.proposer.submit(Proposal::Produce(appends)).await) };
    // Stage two, spawned: wait for the commit and answer.
    Ok(Box::pin(async move {
        if let Some(pending) = pending {
            let outcome = match pending {
                Ok(result) => tokio::time::timeout(timeout, result).await,
                Err(e) => Ok(Err(e)),
            };
            record_outcome(&mut slots, &owners, outcome, &append_time);
        }
        if acks == 0 {
            return Ok(None);
        }
        Ok(Some(ResponseKind::Produce(response(slots))))
    }))
}

type Checked = Result<Vec<kafka_compat::batch::ValidBatch>, (i16, Option<String>)>;

fn check_partition(ctx: &Ctx, topic: &str, partition: i32, records: bytes::Bytes) -> Checked {
    let max_bytes = {
        let applied = ctx.sm.applied.read().expect("applied lock");
        let Some(t) = applied.state.topics.get(topic) else {
            return Err((error_code::UNKNOWN_TOPIC_OR_PARTITION, Some(format!("unknown topic {topic}"))));
        };
        if partition < 0 || partition as usize >= t.partitions.len() {
            return Err((
                error_code::UNKNOWN_TOPIC_OR_PARTITION,
                Some(format!("unknown partition {topic}-{partition}")),
            ));
        }
        t.configs
            .get("max.message.bytes")
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or_else(|| ctx.config().i64("message.max.bytes"))
    };
    validate_record_set(&records, max_bytes.max(0) as usize)
        .map_err(|e| (e.error_code(), Some(e.to_string())))
}

/// Per append: whether its topic uses LogAppendTime (the response then carries the time the
/// leader stamped, which the applied op reports).
fn log_append_times(ctx: &Ctx, appends: &[UnstampedAppend]) -> Vec<bool> {
    let applied = ctx.sm.applied.read().expect("applied lock");
    appends.iter().map(|a| is_log_append_time(&applied.state, ctx.config(), &a.topic)).collect()
}

type Outcome = Result<Result<OpResult, crate::proposer::ProposeError>, tokio::time::error::Elapsed>;

fn record_outcome(slots: &mut [Slot], owners: &[usize], outcome: Outcome, log_append_time: &[bool]) {
    match outcome {
        Ok(Ok(OpResult::Produced { base_offsets, log_start_offsets, append_time_ms })) => {
            for (i, slot_index) in owners.iter().enumerate() {
                let slot = &mut slots[*slot_index];
                slot.base_offset = base_offsets[i];
                slot.log_start_offset = log_start_offsets[i];
                if log_append_time[i] {
                    slot.log_append_time = append_time_ms;
                }
            }
        }
        other => {
            let (code, message) = match other {
                Ok(Ok(OpResult::Refused { error_code, message })) => (error_code, Some(message)),
                Ok(Ok(unexpected)) => (error_code::UNKNOWN_SERVER_ERROR, Some(format!("{unexpected:?}"))),
                Ok(Err(e)) => (e.error_code(), Some(e.to_string())),
                Err(_) => (error_code::REQUEST_TIMED_OUT, Some("not committed within timeout_ms".into())),
            };
            for slot_index in owners {
                slots[*slot_index].error_code = code;
                slots[*slot_index].message = message.clone();
            }
        }
    }
}

fn response(slots: Vec<Slot>) -> ProduceResponse {
    let mut topics: Vec<TopicProduceResponse> = Vec::new();
    for slot in slots {
        let partition = PartitionProduceResponse::default()
            .with_index(slot.partition)
            .with_error_code(slot.error_code)
            .with_error_message(slot.message.map(str_bytes))
            .with_base_offset(slot.base_offset)
            .with_log_append_time_ms(slot.log_append_time)
            .with_log_start_offset(slot.log_start_offset);
        match topics.last_mut() {
            Some(t) if t.name.0.as_str() == slot.topic => t.partition_responses.push(partition),
            _ => topics.push(
                TopicProduceResponse::default()
                    .with_name(topic_name(slot.topic))
                    .with_partition_responses(vec![partition]),
            ),
        }
    }
    ProduceResponse::default().with_responses(topics)
}

//! Fetch (key 1): whole stored batches from the fetch offset, up to the high watermark
//! (read_uncommitted) or the last stable offset (read_committed), with long polling.
//!
//! Fetch sessions (KIP-227) are declined with session id 0, so clients send full requests.
//! The first batch is always returned whole even if larger than the limits (KIP-74).
//! Each topic is read from the Raft group holding it (issue 32), by that group's leader.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_compat::isolation_level::READ_COMMITTED;
use kafka_protocol::messages::fetch_request::FetchRequest;
use kafka_protocol::messages::fetch_response::{AbortedTransaction, FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{ApiKey, FetchResponse, ProducerId, RequestKind, ResponseKind};

use super::util::uuid_bytes;
use super::HandlerResult;
use crate::clock::wall_clock_ms;
use crate::ctx::{Ctx, SharedCtx};
use crate::internal_topic;
use crate::limits;
use crate::security::authz::{code, op, rt, Subject};
use crate::security::quotas::{Governing, QuotaKind, QuotaManager};

pub const KEY: ApiKey = ApiKey::Fetch;
pub const VERSIONS: (i16, i16) = (4, 16);
pub const ACCEPTED_MIN_VERSION: i16 = 4;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::Fetch(body) = req.body else { anyhow::bail!("not a Fetch body") };
    let readable = readable_topics(&ctx, &who, &body, req.api_version);
    let client_id = req.header.client_id.as_ref().map(|c| c.as_str());
    let quota = QuotaManager::governing_for(&ctx.applied, QuotaKind::Fetch, &req.principal.name, client_id);
    // Kafka caps a fetch at what the quota allows in one window, so that one response cannot
    // be throttled for certain.
    let cap = quota.as_ref().map_or(usize::MAX, Governing::max_bytes_in_window);
    let wait_ms = i64::from(body.max_wait_ms).clamp(0, limits::FETCH_WAIT_MS_MAX) as u64;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
    let routes = routes(&ctx, &body, req.api_version);
    let mut applied: Vec<_> = crate::ctx::distinct(&routes)
        .filter_map(|g| ctx.lane(g))
        .map(|l| l.applied.applied_index())
        .collect();
    let (response, bytes) = loop {
        applied.iter_mut().for_each(|a| a.mark_unchanged());
        let serves = ctx.serves_reads_of(&routes).await;
        let (response, bytes, errors) =
            read_all(&ctx, &body, req.api_version, cap, (&routes, &serves), &readable)?;
        let satisfied = bytes >= body.min_bytes.max(0) as usize || errors;
        if satisfied || tokio::time::Instant::now() >= deadline {
            break (response, bytes);
        }
        if tokio::time::timeout_at(deadline, any_changed(&mut applied)).await.is_err() {
            let serves = ctx.serves_reads_of(&routes).await;
            let (response, bytes, _) =
                read_all(&ctx, &body, req.api_version, cap, (&routes, &serves), &readable)?;
            break (response, bytes);
        }
    };
    let Some(quota) = quota else { return Ok(Some(ResponseKind::Fetch(response))) };
    Ok(Some(ResponseKind::Fetch(throttled(&ctx, &quota, response, bytes))))
}

/// Counts a response's bytes against the client's `consumer_byte_rate`. Over the quota, the
/// client gets an empty response with the throttle time and the bytes are taken back, as
/// Kafka does (`getThrottledResponse`): the data is not sent, so it does not count.
fn throttled(ctx: &Ctx, quota: &Governing, response: FetchResponse, bytes: usize) -> FetchResponse {
    let now = wall_clock_ms();
    let throttle_ms = ctx.quotas.record(quota, bytes, now);
    if throttle_ms == 0 {
        return response;
    }
    ctx.quotas.unrecord(quota, bytes, now);
    FetchResponse::default().with_session_id(0).with_throttle_time_ms(throttle_ms)
}

/// KafkaApis: READ on each topic, checked once per request (not per long-poll pass); one
/// flag per requested topic, in order.
fn readable_topics(ctx: &Ctx, who: &Subject, body: &FetchRequest, version: i16) -> Vec<bool> {
    if !ctx.authorizer.enabled() {
        return vec![true; body.topics.len()];
    }
    let names: Vec<String> = body
        .topics
        .iter()
        .map(|t| {
            let name = if version >= 13 {
                resolve_name(ctx, &uuid_bytes(&t.topic_id))
            } else {
                Some(t.topic.0.to_string())
            };
            name.unwrap_or_default()
        })
        .collect();
    ctx.authorizer.allowed_each(who, rt::TOPIC, names.iter().map(String::as_str), op::READ)
}

/// The Raft group holding each requested topic, in request order (issue 32; all 0 with one
/// group): its leader serves the topic's reads, from its applied state.
fn routes(ctx: &Ctx, body: &FetchRequest, version: i16) -> Vec<u32> {
    if ctx.single_group() {
        // No name to resolve (v13+ names topics by id, a lookup under the state's lock).
        return vec![0; body.topics.len()];
    }
    let name = |t: &kafka_protocol::messages::fetch_request::FetchTopic| {
        if version >= 13 {
            resolve_name(ctx, &uuid_bytes(&t.topic_id))
        } else {
            Some(t.topic.0.to_string())
        }
    };
    body.topics.iter().map(|t| name(t).map_or(0, |n| ctx.topic_group(&n))).collect()
}

/// Until one of the groups applies something (a long poll's wake-up).
async fn any_changed(applied: &mut [tokio::sync::watch::Receiver<u64>]) {
    if applied.is_empty() {
        return std::future::pending().await;
    }
    let changes = applied.iter_mut().map(|a| Box::pin(a.changed()));
    let _ = futures_util::future::select_all(changes).await;
}

/// One pass over every requested partition: (response, record bytes, any partition error).
fn read_all(
    ctx: &Ctx,
    body: &FetchRequest,
    version: i16,
    cap: usize,
    (routes, serving): (&[u32], &BTreeMap<u32, bool>),
    readable: &[bool],
) -> anyhow::Result<(FetchResponse, usize, bool)> {
    let mut budget = (body.max_bytes.max(0) as usize).min(limits::FETCH_RESPONSE_BYTES_MAX).min(cap);
    let mut total = 0usize;
    let mut errors = false;
    let mut topics = Vec::with_capacity(body.topics.len());
    for (index, topic) in body.topics.iter().enumerate() {
        let group = routes.get(index).copied().unwrap_or(0);
        let is_leader = serving.get(&group).copied().unwrap_or(false);
        let lane = ctx.lane(group).filter(|_| is_leader);
        let epoch = lane.map_or(-1, |l| l.leadership.leader_epoch());
        let denied = !readable.get(index).copied().unwrap_or(false);
        // KIP-516: v13+ names topics by id only.
        let name = if version >= 13 {
            resolve_name(ctx, &uuid_bytes(&topic.topic_id))
        } else {
            Some(topic.topic.0.to_string())
        };
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let mut data = PartitionData::default().with_partition_index(p.partition);
            let code = match &name {
                None => error_code::UNKNOWN_TOPIC_ID,
                Some(_) if denied => code::TOPIC_AUTHORIZATION_FAILED,
                Some(_) if !is_leader => error_code::NOT_LEADER_OR_FOLLOWER,
                Some(_) if p.current_leader_epoch > epoch => error_code::UNKNOWN_LEADER_EPOCH,
                Some(_) if p.current_leader_epoch >= 0 && p.current_leader_epoch < epoch => {
                    error_code::FENCED_LEADER_EPOCH
                }
                Some(n) => {
                    let max = (p.partition_max_bytes.max(0) as usize).min(budget);
                    let first = total == 0;
                    read_partition(
                        lane.map_or(&ctx.applied, |l| l.applied),
                        n,
                        p.partition,
                        p.fetch_offset,
                        max,
                        first,
                        body.isolation_level,
                        &mut data,
                    )?
                }
            };
            errors |= code != error_code::NONE;
            let bytes = data.records.as_ref().map_or(0, |r| r.len());
            total += bytes;
            budget = budget.saturating_sub(bytes);
            partitions.push(data.with_error_code(code));
        }
        let mut t = FetchableTopicResponse::default().with_partitions(partitions);
        if version >= 13 {
            t = t.with_topic_id(topic.topic_id);
        } else {
            t = t.with_topic(topic.topic.clone());
        }
        topics.push(t);
    }
    let response = FetchResponse::default().with_session_id(0).with_responses(topics);
    Ok((response, total, errors))
}

fn resolve_name(ctx: &Ctx, id: &[u8; 16]) -> Option<String> {
    let found = ctx.applied.read(|applied| applied.state.topic_by_id(id).map(|(n, _)| n.clone()));
    found.or_else(|| internal_topic::is_internal_id(id).then(|| internal_topic::NAME.to_string()))
}

/// A read of the virtual `__consumer_offsets` (`internal_topic`): one partition, always empty.
fn read_internal(partition: i32, offset: i64, isolation_level: i8, data: &mut PartitionData) -> i16 {
    if !(0..internal_topic::PARTITIONS).contains(&partition) {
        return error_code::UNKNOWN_TOPIC_OR_PARTITION;
    }
    (data.high_watermark, data.last_stable_offset, data.log_start_offset) = (0, 0, 0);
    if isolation_level == READ_COMMITTED {
        data.aborted_transactions = Some(Vec::new());
    }
    if offset != 0 {
        return error_code::OFFSET_OUT_OF_RANGE;
    }
    data.records = Some(bytes::Bytes::new());
    error_code::NONE
}

#[allow(clippy::too_many_arguments)]
fn read_partition(
    applied: &crate::raft::applied::AppliedView,
    topic: &str,
    partition: i32,
    offset: i64,
    max_bytes: usize,
    first: bool,
    isolation_level: i8,
    data: &mut PartitionData,
) -> anyhow::Result<i16> {
    // Only the three offsets are copied out under the lock (not the whole partition state):
    // this runs for every partition of every fetch.
    let read = applied.with_partitions(|applied, partitions| {
        let t = applied.state.topics.get(topic)?;
        let ps = usize::try_from(partition).ok().and_then(|i| t.partitions.get(i))?;
        let log = partitions.get(&t.topic_id, partition);
        // The chaos checker's own test (issue 14): a broken read_committed that reads up to
        // the high watermark, open transactions included. Only a test-only flag sets it.
        let last_stable = if crate::fault::flag("bug.read-committed-to-hw") {
            ps.high_watermark()
        } else {
            ps.last_stable_offset()
        };
        // DESIGN §5: the aborted transactions overlapping what this read can return.
        let aborted: Vec<AbortedTransaction> = if isolation_level == READ_COMMITTED {
            ps.aborted_in(offset, last_stable)
                .map(|a| {
                    AbortedTransaction::default()
                        .with_producer_id(ProducerId(a.producer_id))
                        .with_first_offset(a.first_offset)
                })
                .collect()
        } else {
            Vec::new()
        };
        Some((log, (ps.log_start_offset, ps.high_watermark(), last_stable), aborted))
    });
    let Some((log, (log_start, high_watermark, last_stable), aborted)) = read else {
        if internal_topic::is_internal(topic) {
            return Ok(read_internal(partition, offset, isolation_level, data));
        }
        return Ok(error_code::UNKNOWN_TOPIC_OR_PARTITION);
    };
    data.high_watermark = high_watermark;
    data.last_stable_offset = last_stable;
    data.log_start_offset = log_start;
    if isolation_level == READ_COMMITTED {
        data.aborted_transactions = Some(aborted);
    }
    if offset < log_start || offset > high_watermark {
        return Ok(error_code::OFFSET_OUT_OF_RANGE);
    }
    let upper = if isolation_level == READ_COMMITTED { last_stable } else { high_watermark };
    let Some(log) = log else { return Ok(error_code::UNKNOWN_TOPIC_OR_PARTITION) };
    if offset >= upper || (max_bytes == 0 && !first) {
        data.records = Some(bytes::Bytes::new());
        return Ok(error_code::NONE);
    }
    let read = log.lock().read(offset, max_bytes.max(1), upper)?;
    data.records = Some(read.map(|r| r.bytes).unwrap_or_default());
    Ok(error_code::NONE)
}

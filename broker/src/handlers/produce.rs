//! Produce (key 0): validate each partition's batches, then one all-or-nothing op in the log.
//!
//! Partitions that fail validation (unknown topic, bad CRC, too large) get their own error and
//! are left out; the rest of the request is one `Produce` op, so a request spanning several
//! topics applies all-or-nothing (DRMQ's atomic write). acks=0 gets no response; acks=1 and
//! acks=all both reply after the entry is committed and applied — stronger than Kafka's acks=1.
//!
//! Transactional batches too are answered once their entry is committed (issue 17: a leader
//! change then loses nothing a client was told about, and transactions carry on with the next
//! leader). Writes need only Raft leadership (`Leadership::may_propose`), not the read lease:
//! a leader descheduled for a moment keeps taking them.
//!
//! Idempotent batches (KIP-98) are sequence-checked by the proposer; each partition's answer
//! (its error, its offset, or a duplicate's original offset) comes back per partition.
//!
//! While the data directory has less free space than `log.dir.free.bytes.min`, every partition
//! gets KAFKA_STORAGE_ERROR, which clients retry (see `storage::free_space`).

use std::collections::BTreeSet;
use std::time::Duration;

use kafka_compat::batch::{parse_header, validate, Budget};
use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::produce_request::TopicProduceData;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{
    ApiKey, ProduceRequest, ProduceResponse, RequestHeader, RequestKind, ResponseKind,
};

use onelog_state::entry::{is_log_append_time, produce_entry_bytes, UnstampedAppend};
use onelog_state::txns::ProducerIdEpoch;

use super::util::{str_bytes, topic_name};
use super::HandlerFuture;
use crate::authz::{self, code, op, rt, Subject};
use crate::coord::txn::WriteRefusal;
use crate::ctx::{Ctx, SharedCtx};
use crate::errors::{propose_error_code, write_refusal_code, Addressed};
use crate::leader::proposer::Produced;
use crate::limits;
use crate::quotas::QuotaKind;

pub const KEY: ApiKey = ApiKey::Produce;
/// v0–v2 are advertised so that old librdkafka keeps compression on, but not served (DESIGN §6).
pub const VERSIONS: (i16, i16) = (0, 12);
/// KIP-890 part 2: a transactional batch in Produce v12+ adds its partition to the
/// transaction (transactions-v2 clients send no AddPartitionsToTxn).
const IMPLICIT_ADD_FROM_VERSION: i16 = 12;
pub const ACCEPTED_MIN_VERSION: i16 = 3;

/// One partition's outcome, filled in as validation and the log decide.
struct Slot {
    topic: String,
    partition: i32,
    error_code: i16,
    message: Option<String>,
    /// Produce v8+ (KIP-467): the records of the batch that were rejected, by index.
    record_errors: Vec<(i32, String)>,
    base_offset: i64,
    log_start_offset: i64,
    log_append_time: i64,
}

/// Stage one, in the connection's read loop: validate and queue for the log in request order.
pub async fn submit(ctx: SharedCtx, req: Request) -> anyhow::Result<HandlerFuture> {
    let who = Subject::of(&req);
    let RequestKind::Produce(mut body) = req.body else { anyhow::bail!("not a Produce body") };
    let acks = body.acks;
    let throttle_ms = record_quota(&ctx, &req.principal.name, &req.header, &body);
    let topic_data = std::mem::take(&mut body.topic_data);
    let heavy = record_bytes(&topic_data) >= limits::PRODUCE_VALIDATE_ON_WORKER_BYTES_MAX;
    // KafkaApis: WRITE on each topic, else TOPIC_AUTHORIZATION_FAILED for its partitions.
    let names = topic_data.iter().map(|t| t.name.0.as_str());
    let writable = authz::allowed_each(&ctx, &who, rt::TOPIC, names, op::WRITE);
    let denied: BTreeSet<String> =
        topic_data.iter().zip(writable).filter(|(_, w)| !w).map(|(t, _)| t.name.0.to_string()).collect();
    let transactional_records = has_transactional_records(&topic_data);
    let Checks { mut slots, mut appends, mut owners } =
        off_the_worker_if(heavy, || check_request(&ctx, topic_data, acks, req.api_version, &denied));
    if !transactional_write_allowed(
        &ctx,
        &who,
        body.transactional_id.as_ref().map(|t| t.0.as_str()),
        transactional_records,
    ) {
        // KafkaApis answers the whole request with the error, and nothing reaches the log.
        for slot in &mut slots {
            slot.error_code = code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
            slot.message = None;
            slot.record_errors.clear();
        }
        appends.clear();
        owners.clear();
    }
    let timeout = Duration::from_millis(body.timeout_ms.max(0) as u64).max(Duration::from_millis(1));
    // A request whose every batch is transactional is one proposal whatever its size
    // (`Proposer::submit_produce`); every request is answered once its entry commits.
    let transactional = appends.iter().all(|a| a.batches.iter().all(|b| b.header.is_transactional()));
    let (appends, owners) = refuse_oversized(&mut slots, appends, owners, transactional);
    let append_time = log_append_times(&ctx, &appends);
    let pending = if appends.is_empty() {
        None
    } else {
        Some(ctx.proposer.submit_produce(appends, transactional).await)
    };
    if acks == 0 && throttle_ms > 0 {
        tokio::time::sleep(Duration::from_millis(throttle_ms as u64)).await;
    }
    // Stage two, spawned: wait for the commit and answer.
    let ctx = ctx.clone();
    Ok(Box::pin(async move {
        if let Some(pending) = pending {
            let outcome = match pending {
                Ok(result) => wait_committed(&ctx, result, timeout).await,
                Err(e) => Some(Err(e)),
            };
            record_outcome(&mut slots, &owners, outcome, &append_time);
        }
        if acks == 0 {
            return Ok(None);
        }
        Ok(Some(ResponseKind::Produce(response(slots).with_throttle_time_ms(throttle_ms))))
    }))
}

/// Issue 13, reproduction 1: what cannot be one Raft entry is refused with
/// RECORD_LIST_TOO_LARGE before anything is proposed (raft-store refuses a larger entry, and a
/// refused log write stops the node): one partition's records, which Kafka appends as one
/// unit, and a transactional request as a whole, which is one proposal (its batches are
/// stamped and answered together). A larger non-transactional request is split by the
/// proposer. No client meets this: Java's `max.request.size` and librdkafka's
/// `message.max.bytes` cap a request at 1 MiB by default.
fn refuse_oversized(
    slots: &mut [Slot],
    appends: Vec<UnstampedAppend>,
    owners: Vec<usize>,
    transactional: bool,
) -> (Vec<UnstampedAppend>, Vec<usize>) {
    let max = limits::ENTRY_BYTES_MAX;
    let whole_too_large = transactional && produce_entry_bytes(&appends) > max;
    let mut kept = (Vec::new(), Vec::new());
    for (append, owner) in appends.into_iter().zip(owners) {
        let bytes = produce_entry_bytes(std::slice::from_ref(&append));
        if whole_too_large || bytes > max {
            let slot = &mut slots[owner];
            slot.error_code = error_code::RECORD_LIST_TOO_LARGE;
            slot.message = Some(if whole_too_large {
                format!("the transactional request needs more than the {max} bytes of one Raft entry")
            } else {
                format!("the partition's records need {bytes} bytes, over the {max} bytes of one Raft entry")
            });
        } else {
            kept.0.push(append);
            kept.1.push(owner);
        }
    }
    kept
}

/// Each partition's slot, the appends that passed validation, and the slot of each append.
struct Checks {
    slots: Vec<Slot>,
    appends: Vec<UnstampedAppend>,
    owners: Vec<usize>,
}

/// KafkaApis: a request with transactional records needs WRITE on its transactional id (a
/// request without one is refused too).
fn transactional_write_allowed(
    ctx: &Ctx,
    who: &Subject,
    transactional_id: Option<&str>,
    transactional: bool,
) -> bool {
    !transactional
        || transactional_id.is_some_and(|id| authz::allowed(ctx, who, rt::TRANSACTIONAL_ID, id, op::WRITE))
}

/// Whether any batch of the request is transactional, read from the batch headers before any
/// validation (Kafka's `hasTransactionalRecords`). A header that does not parse is left to
/// validation.
fn has_transactional_records(topics: &[TopicProduceData]) -> bool {
    topics.iter().flat_map(|t| &t.partition_data).any(|p| {
        let mut rest: &[u8] = p.records.as_deref().unwrap_or_default();
        while let Ok(header) = parse_header(rest) {
            if header.is_transactional() {
                return true;
            }
            let Some(next) = rest.get(header.size_bytes..) else { return false };
            rest = next;
        }
        false
    })
}

/// Validates every partition of a request (authorization, leadership, acks, topic, batches,
/// producer rules); `denied` are the topics the principal may not write.
fn check_request(
    ctx: &Ctx,
    topic_data: Vec<TopicProduceData>,
    acks: i16,
    version: i16,
    denied: &BTreeSet<String>,
) -> Checks {
    let mut slots = Vec::new();
    let mut appends = Vec::new();
    let mut owners = Vec::new(); // slot index of each append
    let not_leader = !ctx.may_propose();
    let disk_full = if not_leader { None } else { disk_refusal(ctx) };
    // Inflating compressed batches to validate them is bounded per request (DESIGN §8).
    let mut inflated_bytes_left = limits::PRODUCE_INFLATED_BYTES_MAX;
    for topic in topic_data {
        let name = topic.name.0.to_string();
        for p in topic.partition_data {
            let mut slot = Slot {
                topic: name.clone(),
                partition: p.index,
                error_code: error_code::NONE,
                message: None,
                record_errors: Vec::new(),
                base_offset: -1,
                log_start_offset: -1,
                log_append_time: -1,
            };
            // Kafka refuses an append to an internal topic before it looks for the leader.
            let checked = if denied.contains(&name) {
                Err(Refused::from((code::TOPIC_AUTHORIZATION_FAILED, None)))
            } else if let Some(refused) = internal_refusal(ctx, &name) {
                Err(refused)
            } else if not_leader {
                Err(Refused::from((error_code::NOT_LEADER_OR_FOLLOWER, None)))
            } else if !(acks == 0 || acks == 1 || acks == -1) {
                Err(Refused::from((error_code::INVALID_REQUIRED_ACKS, None)))
            } else if let Some(why) = &disk_full {
                Err(Refused::from((error_code::KAFKA_STORAGE_ERROR, Some(why.clone()))))
            } else {
                let records = p.records.unwrap_or_default();
                check_partition(ctx, &name, p.index, records, version, &mut inflated_bytes_left)
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
                Err(Refused { code, message, record_errors }) => {
                    tracing::debug!(topic = %name, partition = p.index, code, ?message, "produce partition refused");
                    slot.error_code = code;
                    slot.message = message;
                    slot.record_errors = record_errors;
                }
            }
            slots.push(slot);
        }
    }
    Checks { slots, appends, owners }
}

/// Bytes of records in a request's partitions.
fn record_bytes(topics: &[TopicProduceData]) -> usize {
    topics.iter().flat_map(|t| &t.partition_data).map(|p| p.records.as_ref().map_or(0, |r| r.len())).sum()
}

/// Runs `f` (validating a request's batches: CRC, records, inflation, up to
/// `PRODUCE_INFLATED_BYTES_MAX`) where it does not hold up other connections: with `heavy`, in
/// `block_in_place`, so the worker's other tasks move to another thread meanwhile.
fn off_the_worker_if<T>(heavy: bool, f: impl FnOnce() -> T) -> T {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if heavy && multi_thread {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

/// Why the data directory cannot take more client data now, if it cannot: the reserve is
/// this node's dynamic `log.dir.free.bytes.min` (or the cluster default, or the static value).
fn disk_refusal(ctx: &Ctx) -> Option<String> {
    let static_reserve = ctx.config.settings.log_dir_free_bytes_min;
    let reserve =
        ctx.applied.state(|state| ctx.config.dynamic_int(state, "log.dir.free.bytes.min", static_reserve));
    crate::storage::free_space::refusal(&ctx.data_dir, reserve.max(0) as u64)
}

/// Counts the request's record bytes against the client's `producer_byte_rate` (Kafka counts
/// the whole request; the records are all but a few bytes of it) and returns the throttle. An
/// acks=0 producer gets no response to carry it, so its connection is muted here, in the read
/// loop, as Kafka mutes the channel.
fn record_quota(ctx: &Ctx, user: &str, header: &RequestHeader, body: &ProduceRequest) -> i32 {
    let bytes = record_bytes(&body.topic_data);
    let client_id = header.client_id.as_ref().map(|c| c.as_str());
    ctx.quotas.record_for(&ctx.applied, QuotaKind::Produce, user, client_id, bytes)
}

/// The refusal of an append to the virtual `__consumer_offsets`, unless a real topic of that
/// name shadows it (`internal_topic`).
fn internal_refusal(ctx: &Ctx, topic: &str) -> Option<Refused> {
    let virtual_internal = crate::internal_topic::is_internal(topic)
        && !ctx.applied.state(|state| state.topics.contains_key(topic));
    virtual_internal.then(|| {
        let message = format!("Cannot append to internal topic {topic}");
        Refused::from((error_code::INVALID_TOPIC_EXCEPTION, Some(message)))
    })
}

type Checked = Result<Vec<kafka_compat::batch::ValidBatch>, Refused>;

/// Why a partition's batches were refused: the code, the message, and which records.
struct Refused {
    code: i16,
    message: Option<String>,
    record_errors: Vec<(i32, String)>,
}

impl From<(i16, Option<String>)> for Refused {
    fn from((code, message): (i16, Option<String>)) -> Self {
        Refused { code, message, record_errors: Vec::new() }
    }
}

fn check_partition(
    ctx: &Ctx,
    topic: &str,
    partition: i32,
    records: bytes::Bytes,
    version: i16,
    inflated_bytes_left: &mut usize,
) -> Checked {
    let (max_bytes, compacted) = ctx
        .applied
        .state(|state| {
            let Some(t) = state.topics.get(topic) else {
                return Err((error_code::UNKNOWN_TOPIC_OR_PARTITION, Some(format!("unknown topic {topic}"))));
            };
            if partition < 0 || partition as usize >= t.partitions.len() {
                return Err((
                    error_code::UNKNOWN_TOPIC_OR_PARTITION,
                    Some(format!("unknown partition {topic}-{partition}")),
                ));
            }
            // Dynamic: a topic or broker alteration takes effect from the next request.
            let config = &ctx.config;
            let max_bytes =
                config.topic_int(state, topic, "max.message.bytes", config.settings.message_max_bytes);
            let policy = config.topic_str(state, topic, "cleanup.policy");
            let compacted = policy.split(',').any(|p| p.trim() == "compact");
            Ok((max_bytes, compacted))
        })
        .map_err(Refused::from)?;
    // A topic whose max.message.bytes predates the cap is held to it too: a larger batch could
    // not fit one Raft entry.
    let batch_bytes_max = (max_bytes.max(0) as usize).min(onelog_state::limits::MESSAGE_BYTES_MAX as usize);
    let budget = Budget { batch_bytes_max, inflated_bytes_max: *inflated_bytes_left };
    let validated = validate(&records, budget).map_err(|e| (e.error_code(), Some(e.to_string())))?;
    *inflated_bytes_left -= validated.inflated_bytes;
    let batches = validated.batches;
    if compacted {
        check_keys(&batches, topic, partition)?;
    }
    check_idempotent(&batches)?;
    check_transactional(ctx, topic, partition, &batches, version)?;
    Ok(batches)
}

/// Kafka's `LogValidator.validateKey`: a compacted topic keeps the last record per key, so a
/// record without one is refused, INVALID_RECORD with every such record's index in its batch
/// (Produce v8+ carries the list; older versions only the code, as Kafka answers them). The
/// validator found them while walking the records.
fn check_keys(
    batches: &[kafka_compat::batch::ValidBatch],
    topic: &str,
    partition: i32,
) -> Result<(), Refused> {
    let why =
        format!("Compacted topic cannot accept message without key in topic partition {topic}-{partition}.");
    let mut record_errors = Vec::new();
    for batch in batches {
        record_errors.extend(batch.keyless_records.iter().map(|i| (*i, why.clone())));
    }
    if record_errors.is_empty() {
        return Ok(());
    }
    let shown: Vec<String> =
        record_errors.iter().take(3).map(|(i, m)| format!("(batchIndex={i}, message='{m}')")).collect();
    let message = format!(
        "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
        record_errors.len(),
        shown.join(", ")
    );
    Err(Refused { code: error_code::INVALID_RECORD, message: Some(message), record_errors })
}

/// A transactional batch must come from the current epoch of its transactional id and go to
/// a partition the transaction added (KIP-890 part 1); the transaction coordinator decides.
fn check_transactional(
    ctx: &Ctx,
    topic: &str,
    partition: i32,
    batches: &[kafka_compat::batch::ValidBatch],
    version: i16,
) -> Result<(), (i16, Option<String>)> {
    let Some(header) = batches.iter().map(|b| &b.header).find(|h| h.is_transactional()) else {
        return Ok(());
    };
    // Answered from its committed entry like any acks=all write (issue 17), so only Raft
    // leadership is needed (`may_propose`, checked in `check_request`), not the read lease.
    let id = ProducerIdEpoch { producer_id: header.producer_id, producer_epoch: header.producer_epoch };
    let implicit_add = version >= IMPLICIT_ADD_FROM_VERSION;
    ctx.txns.admit_write(id, topic, partition, implicit_add).map_err(|refusal| {
        let message = match &refusal {
            WriteRefusal::Txn(e) => format!("transactional batch of producer {}: {e:?}", id.producer_id),
            WriteRefusal::NotAdded { transactional_id } => {
                format!("{topic}-{partition} was not added to transaction '{transactional_id}'")
            }
        };
        (write_refusal_code(&refusal, version), Some(message))
    })
}

/// Kafka's rules for batches carrying a producer id: one batch per partition per request
/// (Produce v3+), and a real epoch and sequence (LogValidator), or INVALID_RECORD.
fn check_idempotent(batches: &[kafka_compat::batch::ValidBatch]) -> Result<(), (i16, Option<String>)> {
    let invalid = |why: &str| Err((error_code::INVALID_RECORD, Some(why.to_string())));
    let with_pid = batches.iter().filter(|b| b.header.producer_id >= 0);
    for batch in with_pid.clone() {
        if batch.header.base_sequence < 0 || batch.header.producer_epoch < 0 {
            return invalid("a batch with a producer id needs a sequence and epoch of at least 0");
        }
    }
    if with_pid.count() > 0 && batches.len() > 1 {
        return invalid("produce requests carry one batch per partition when it has a producer id");
    }
    Ok(())
}

/// Per append: whether its topic uses LogAppendTime (the response then carries the time the
/// leader stamped, which the applied op reports).
fn log_append_times(ctx: &Ctx, appends: &[UnstampedAppend]) -> Vec<bool> {
    let options = ctx.config.settings.entry_options(ctx.node_id);
    ctx.applied.state(|state| appends.iter().map(|a| is_log_append_time(state, &options, &a.topic)).collect())
}

/// `None`: no outcome within `timeout_ms`, or this node was cut off meanwhile.
type Outcome = Option<Produced>;

/// Waits for the commit at most `timeout_ms` (Kafka's produce timeout), and no longer than
/// this node stays in contact with a quorum: a leader cut off (check-quorum, see
/// `Leadership::is_cut_off`), e.g. resumed after a SIGSTOP or isolated, answers every waiting
/// write at once with REQUEST_TIMED_OUT (its outcome is unknown: the entry may still commit)
/// and the client retries at the leader it finds next. Regression (issue 14): a 3 s SIGSTOP
/// of the leader kept clients waiting on the frozen connection.
async fn wait_committed(
    ctx: &SharedCtx,
    result: impl std::future::Future<Output = Produced>,
    timeout: Duration,
) -> Outcome {
    let cut_off = async {
        while !ctx.leadership.is_cut_off() {
            tokio::time::sleep(Duration::from_millis(limits::PAUSE_CHECK_INTERVAL_MS)).await;
        }
    };
    tokio::select! {
        produced = tokio::time::timeout(timeout, result) => produced.ok(),
        () = cut_off => None,
    }
}

fn record_outcome(slots: &mut [Slot], owners: &[usize], outcome: Outcome, log_append_time: &[bool]) {
    let (code, message) = match outcome {
        // One answer per append, in order (the proposer merges what it decided itself).
        Some(Ok(parts)) => {
            assert_eq!(parts.len(), owners.len(), "the proposer answers every partition it was given");
            for (i, part) in parts.into_iter().enumerate() {
                let slot = &mut slots[owners[i]];
                slot.error_code = part.error_code;
                slot.message = part.message;
                slot.base_offset = part.base_offset;
                slot.log_start_offset = part.log_start_offset;
                if log_append_time[i] && part.error_code == error_code::NONE {
                    slot.log_append_time = part.append_time_ms;
                }
            }
            return;
        }
        Some(Err(e)) => (propose_error_code(&e, Addressed::PartitionLeader), Some(e.to_string())),
        None => (
            error_code::REQUEST_TIMED_OUT,
            Some("not committed within timeout_ms, or this node was cut off from the quorum".into()),
        ),
    };
    for slot_index in owners {
        slots[*slot_index].error_code = code;
        slots[*slot_index].message = message.clone();
    }
}

fn response(slots: Vec<Slot>) -> ProduceResponse {
    let mut topics: Vec<TopicProduceResponse> = Vec::new();
    for slot in slots {
        let partition = PartitionProduceResponse::default()
            .with_index(slot.partition)
            .with_error_code(slot.error_code)
            .with_error_message(slot.message.map(str_bytes))
            .with_record_errors(
                slot.record_errors
                    .into_iter()
                    .map(|(i, m)| {
                        BatchIndexAndErrorMessage::default()
                            .with_batch_index(i)
                            .with_batch_index_error_message(Some(str_bytes(m)))
                    })
                    .collect(),
            )
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

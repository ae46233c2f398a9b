//! Produce (key 0): validate each partition's batches, then one all-or-nothing op in the log.
//!
//! Partitions that fail validation (unknown topic, bad CRC, too large) get their own error and
//! are left out; the rest of the request is one `Produce` op, so a request spanning several
//! topics applies all-or-nothing (DRMQ's atomic write) within a Raft group. acks=0 gets no response; acks=1 and
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
//! With several Raft groups (issue 32) each topic's batches go to the group it is placed in:
//! one entry per group, proposed where this node leads that group (NOT_LEADER_OR_FOLLOWER
//! elsewhere), so such a request is all-or-nothing per group only. Transactional batches of a
//! producer another group coordinates (its producer id is of that group's range) join that
//! transaction through the cross-group protocol (`remote`, docs/SCALING.md §3.1): their
//! JoinTxn is asked here, in the connection's order, and they are answered once written here
//! and registered there.
//!
//! While the data directory has less free space than `log.dir.free.bytes.min`, every partition
//! gets KAFKA_STORAGE_ERROR, which clients retry (see `storage::free_space`).

mod checks;
mod remote;
mod snapshot;

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::produce_request::TopicProduceData;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ApiKey, ProduceResponse, RequestKind, ResponseKind};
use onelog_state::entry::{produce_entry_bytes, UnstampedAppend};

use super::util::{str_bytes, topic_name};
use super::HandlerFuture;
use crate::clock::wall_clock_ms;
use crate::coord::xgroup::participant::ProducedFuture;
use crate::ctx::{Ctx, SharedCtx};
use crate::errors::{propose_error_code, Addressed};
use crate::leader::proposer::Produced;
use crate::limits;
use crate::security::authz::{code, Subject};
use checks::{check_request, has_transactional_records, Checks};
use snapshot::{Asked, Snapshot};

pub const KEY: ApiKey = ApiKey::Produce;
/// v0–v2 are advertised so that old librdkafka keeps compression on, but not served (DESIGN §6).
pub const VERSIONS: (i16, i16) = (0, 12);
/// KIP-890 part 2: a transactional batch in Produce v12+ adds its partition to the
/// transaction (transactions-v2 clients send no AddPartitionsToTxn).
pub(super) const IMPLICIT_ADD_FROM_VERSION: i16 = 12;
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

impl Slot {
    fn new(topic: &str, partition: i32) -> Self {
        Slot::refused(topic, partition, error_code::NONE)
    }

    fn refused(topic: &str, partition: i32, error_code: i16) -> Self {
        Slot {
            topic: topic.to_string(),
            partition,
            error_code,
            message: None,
            record_errors: Vec::new(),
            base_offset: -1,
            log_start_offset: -1,
            log_append_time: -1,
        }
    }
}

/// Stage one, in the connection's read loop: authorize, validate and queue for the log in
/// request order, against one read of the applied state (`snapshot`).
pub async fn submit(ctx: SharedCtx, req: Request) -> anyhow::Result<HandlerFuture> {
    let who = Subject::of(&req);
    let RequestKind::Produce(mut body) = req.body else { anyhow::bail!("not a Produce body") };
    let acks = body.acks;
    let topic_data = std::mem::take(&mut body.topic_data);
    let transactional_records = has_transactional_records(&topic_data);
    let asked = Asked {
        who: &who,
        transactional_id: body.transactional_id.as_ref().map(|t| t.0.as_str()),
        client_id: req.header.client_id.as_ref().map(|c| c.as_str()),
        topics: &topic_data,
    };
    let snapshot = Snapshot::read(&ctx, &asked);
    // Kafka's handleProduceRequest: the transactional id first, so that a refused id learns
    // nothing about the topics and nothing is validated, counted or written.
    if transactional_records && !snapshot.transactional_id_writable {
        let refused = refuse_all(topic_data, code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
        return Ok(Box::pin(async move { Ok((acks != 0).then_some(ResponseKind::Produce(refused))) }));
    }
    let throttle_ms = record_quota(&ctx, &snapshot, &topic_data);
    let heavy = record_bytes(&topic_data) >= limits::PRODUCE_VALIDATE_ON_WORKER_BYTES_MAX;
    let Checks { mut slots, appends, owners } =
        off_the_worker_if(heavy, || check_request(&ctx, &snapshot, topic_data, acks, req.api_version));
    let timeout = Duration::from_millis(body.timeout_ms.max(0) as u64).max(Duration::from_millis(1));
    let deadline = tokio::time::Instant::now() + timeout;
    let mut pending = Vec::new();
    for (group, (appends, owners)) in by_group(&snapshot, appends, owners) {
        let (local, remote) = remote::split(&ctx, group, appends, owners);
        for (producer, (appends, owners)) in remote {
            let (appends, owners) = refuse_oversized(&mut slots, appends, owners, true);
            let append_time = append_time(&snapshot, &appends);
            if appends.is_empty() {
                continue;
            }
            let implicit_add = req.api_version >= IMPLICIT_ADD_FROM_VERSION;
            let written =
                remote::submit(&ctx, (group, producer), appends, (implicit_add, req.api_version)).await;
            pending.push((group, written, owners, append_time));
        }
        // A request whose every batch is transactional is one proposal whatever its size
        // (`Proposer::submit_produce`); every request is answered once its entry commits.
        let (appends, owners) = local;
        let transactional = appends.iter().all(|a| a.batches.iter().all(|b| b.header.is_transactional()));
        let (appends, owners) = refuse_oversized(&mut slots, appends, owners, transactional);
        let append_time = append_time(&snapshot, &appends);
        // The checks found this node leading the group, so it runs it.
        let Some(lane) = ctx.lane(group).filter(|_| !appends.is_empty()) else { continue };
        let written: ProducedFuture = match lane.proposer.submit_produce(appends, transactional).await {
            Ok(future) => Box::pin(future),
            Err(e) => Box::pin(std::future::ready(Err(e))),
        };
        pending.push((group, written, owners, append_time));
    }
    if acks == 0 && throttle_ms > 0 {
        tokio::time::sleep(Duration::from_millis(throttle_ms as u64)).await;
    }
    // Stage two, spawned: wait for the commit and answer.
    let ctx = ctx.clone();
    Ok(Box::pin(async move {
        for (group, written, owners, append_time) in pending {
            let outcome = wait_committed(&ctx, group, written, deadline).await;
            record_outcome(&mut slots, &owners, outcome, &append_time);
        }
        if acks == 0 {
            return Ok(None);
        }
        Ok(Some(ResponseKind::Produce(response(slots).with_throttle_time_ms(throttle_ms))))
    }))
}

/// Whether each append's topic stamps LogAppendTime.
fn append_time(snapshot: &Snapshot, appends: &[UnstampedAppend]) -> Vec<bool> {
    appends.iter().map(|a| snapshot.topics.get(&a.topic).is_some_and(|t| t.log_append_time)).collect()
}

/// The checked appends (and the slots they answer) split by the Raft group holding their topic
/// (issue 32): each group's part is its own entry in its own log, so a request naming topics
/// of several groups is atomic per group only (docs/SCALING.md §7). With one group, one part.
fn by_group(
    snapshot: &Snapshot,
    appends: Vec<UnstampedAppend>,
    owners: Vec<usize>,
) -> BTreeMap<u32, (Vec<UnstampedAppend>, Vec<usize>)> {
    let mut parts: BTreeMap<u32, (Vec<UnstampedAppend>, Vec<usize>)> = BTreeMap::new();
    for (append, owner) in appends.into_iter().zip(owners) {
        let group = snapshot.topics.get(&append.topic).map_or(0, |t| t.group);
        let part = parts.entry(group).or_default();
        part.0.push(append);
        part.1.push(owner);
    }
    parts
}

/// Every partition of the request refused with `code` (Kafka's error response).
fn refuse_all(topic_data: Vec<TopicProduceData>, code: i16) -> ProduceResponse {
    let slots = topic_data
        .into_iter()
        .flat_map(|t| {
            let name = t.name.0.to_string();
            t.partition_data.into_iter().map(move |p| Slot::refused(&name, p.index, code))
        })
        .collect();
    response(slots)
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

/// Counts the request's record bytes against the client's `producer_byte_rate` (Kafka counts
/// the whole request; the records are all but a few bytes of it) and returns the throttle. An
/// acks=0 producer gets no response to carry it, so its connection is muted here, in the read
/// loop, as Kafka mutes the channel.
fn record_quota(ctx: &Ctx, snapshot: &Snapshot, topic_data: &[TopicProduceData]) -> i32 {
    let governing = snapshot.byte_quota.as_ref();
    governing.map_or(0, |g| ctx.quotas.record(g, record_bytes(topic_data), wall_clock_ms()))
}

/// `None`: no outcome within `timeout_ms`, or this node was cut off meanwhile.
type Outcome = Option<Produced>;

/// Waits for the commit of one group's part until `timeout_ms` (Kafka's produce timeout) is up, and no longer than
/// this node stays in contact with a quorum: a leader cut off (check-quorum, see
/// `Leadership::is_cut_off`), e.g. resumed after a SIGSTOP or isolated, answers every waiting
/// write at once with REQUEST_TIMED_OUT (its outcome is unknown: the entry may still commit)
/// and the client retries at the leader it finds next. Regression (issue 14): a 3 s SIGSTOP
/// of the leader kept clients waiting on the frozen connection.
async fn wait_committed(
    ctx: &SharedCtx,
    group: u32,
    result: impl std::future::Future<Output = Produced>,
    deadline: tokio::time::Instant,
) -> Outcome {
    let lane = ctx.lane(group)?;
    let cut_off = async {
        while !lane.leadership.is_cut_off() {
            tokio::time::sleep(Duration::from_millis(limits::PAUSE_CHECK_INTERVAL_MS)).await;
        }
    };
    tokio::select! {
        produced = tokio::time::timeout_at(deadline, result) => produced.ok(),
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

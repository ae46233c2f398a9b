//! ShareFetch (key 78), v1–v2: KIP-932's fetch for share groups. In order, as Kafka 4.4's
//! `KafkaApis.handleShareFetchRequest`: the request checks (`share_common`), the share session
//! step (`coord::share::sessions`: open, next, or close with epoch -1), the piggybacked
//! acknowledgements (`share_acknowledgements`), then the acquisition: the leader reads the
//! batches each partition may hand out (`share_read`) and proposes one `ShareAcquire` op; the
//! records acquired in its apply (locked to the member, delivery counts raised) are the ones
//! returned, so nothing is handed out before its acquisition is durable. With nothing to
//! acquire the request waits for the log (MaxWaitMs), as Kafka's delayed share fetch does.
//!
//! A partition is served by the leader of the Raft group holding its topic, where its share
//! state lives (`share_common`), as Kafka's partition leader serves it, whatever group holds
//! the share group's membership: another node answers it NOT_LEADER_OR_FOLLOWER with the
//! leader it knows. One request may name partitions of several groups this node leads: each
//! group's acquisition is its own op, and the request waits on every group's log.
//!
//! Access: READ on the group, then READ on each topic (TOPIC_AUTHORIZATION_FAILED for the
//! partition), as Kafka checks.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::Bytes;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, NodeEndpoint, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind, ShareFetchRequest, ShareFetchResponse};
use onelog_state::apply_share::would_acquire;
use onelog_state::command::{AcquirePartition, ShareAcquireOp};
use onelog_state::share_partition::{AckBatch, Acquired};

use super::share_acknowledgements::{acknowledge_by_group, topic_problem, types, Outcomes, Requested};
use super::share_common::{
    by_group, check, close, data_group, led, log_refusal, release_session, take_over, terms, with_groups,
    Refused,
};
use super::share_read::{batches, readable, records, Readable};
use super::util::{str_bytes, uuid, uuid_bytes};
use super::HandlerResult;
use crate::clock::wall_clock_ms;
use crate::config::share_group::ShareGroupSettings;
use crate::coord::share::sessions::{Context, SharePartitionKey, INITIAL_EPOCH};
use crate::ctx::{Ctx, Lane, SharedCtx};
use crate::limits;
use crate::security::authz::Subject;

pub const KEY: ApiKey = ApiKey::ShareFetch;
pub const VERSIONS: (i16, i16) = (1, 2);
pub const ACCEPTED_MIN_VERSION: i16 = 1;

/// One partition's answer.
#[derive(Default)]
struct Answer {
    code: i16,
    acquired: Vec<Acquired>,
    records: Option<bytes::Bytes>,
}

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::ShareFetch(body) = &req.body else { anyhow::bail!("not a ShareFetch body") };
    let response = match serve(&ctx, &req, body).await? {
        Ok(response) => response,
        Err((code, message)) => {
            ShareFetchResponse::default().with_error_code(code).with_error_message(message.map(str_bytes))
        }
    };
    let partitions = response.responses.iter().flat_map(|t| &t.partitions);
    let codes: Vec<(i16, i16)> = partitions.map(|p| (p.error_code, p.acknowledge_error_code)).collect();
    log_refusal("ShareFetch", body.group_id.as_ref().map(|g| g.0.as_str()), response.error_code, &codes);
    Ok(Some(ResponseKind::ShareFetch(response)))
}

async fn serve(
    ctx: &Ctx,
    req: &Request,
    body: &ShareFetchRequest,
) -> anyhow::Result<Result<ShareFetchResponse, Refused>> {
    let checked = check(ctx, req, body.group_id.as_ref().map(|g| g.0.as_str()), body.member_id.as_deref());
    let (group_id, member_id) = match checked {
        Ok(ids) => ids,
        Err(refused) => return Ok(Err(refused)),
    };
    if let Some(problem) = renew_problem(req.api_version, body) {
        return Ok(Err((error_code::INVALID_REQUEST, Some(problem))));
    }
    let (add, forget, acks) = partitions(body);
    let requested = by_group(ctx, add.iter().chain(acks.keys()).copied());
    if body.share_session_epoch == INITIAL_EPOCH && !requested.keys().any(|g| led(ctx, *g).is_some()) {
        // A node leading none of the partitions opens no session: each partition learns its
        // leader from the answer.
        let answers = requested.into_values().flatten().map(|k| (k, not_leader_answer())).collect();
        return Ok(Ok(response(ctx, req, answers, Outcomes::new())));
    }
    let key = (group_id.clone(), member_id.clone());
    let connection = (req.connection_id, ctx.config.settings.share_group.max_share_sessions);
    let step = with_groups(ctx, terms(ctx, requested.keys()), |groups| {
        let step = (body.share_session_epoch, (&add[..], &forget[..]), !acks.is_empty());
        ctx.coordinators.share.sessions.with(|s| s.fetch(&key, step.0, step.1, step.2, connection, groups))
    });
    let (context, replaced) = match step {
        Ok(step) => step,
        Err(code) => return Ok(Err((code, None))),
    };
    if let Some(old) = replaced {
        release_session(ctx, (&group_id, &member_id), old).await;
    }
    let fetching = match &context {
        Context::Opened(keys) | Context::Next(keys) => keys.clone(),
        Context::Final => Vec::new(),
    };
    for group in by_group(ctx, fetching.iter().chain(acks.keys()).copied()).into_keys() {
        if let Some(lane) = led(ctx, group) {
            take_over(ctx, lane).await;
        }
    }
    let group = ctx.share_group_settings(&group_id);
    let who = Subject::of(req);
    let ids = (group_id.as_str(), member_id.as_str());
    let outcomes = acknowledge_by_group(ctx, req, ids, body.is_renew_ack, acks).await;
    let answers = match &context {
        Context::Final => {
            close(ctx, &key).await;
            BTreeMap::new()
        }
        _ if body.is_renew_ack => BTreeMap::new(),
        Context::Opened(_) | Context::Next(_) => fetch(ctx, &who, ids, &fetching, body, &group).await?,
    };
    let lock_ms = i32::try_from(group.lock_ms).unwrap_or(i32::MAX);
    Ok(Ok(response(ctx, req, answers, outcomes).with_acquisition_lock_timeout_ms(lock_ms)))
}

/// KIP-1222: a renew-only request fetches nothing; Kafka names every limit that is not 0.
fn renew_problem(version: i16, body: &ShareFetchRequest) -> Option<String> {
    if version < 2 || !body.is_renew_ack {
        return None;
    }
    let limits = [
        ("maxBytes", body.max_bytes),
        ("minBytes", body.min_bytes),
        ("maxRecords", body.max_records),
        ("maxWaitMs", body.max_wait_ms),
    ];
    let named: String =
        limits.iter().filter(|(_, v)| *v != 0).map(|(n, _)| format!("{n} must be set to 0, ")).collect();
    (!named.is_empty()).then(|| format!("{named}if isRenewAck is true."))
}

/// The partitions to add to the session, to forget, and the acknowledgements per partition.
fn partitions(body: &ShareFetchRequest) -> (Vec<SharePartitionKey>, Vec<SharePartitionKey>, Requested) {
    let mut add = Vec::new();
    let mut acks = Requested::new();
    for t in &body.topics {
        let id = uuid_bytes(&t.topic_id);
        for p in &t.partitions {
            add.push((id, p.partition_index));
            if !p.acknowledgement_batches.is_empty() {
                let batches = p.acknowledgement_batches.iter().map(|b| AckBatch {
                    first_offset: b.first_offset,
                    last_offset: b.last_offset,
                    types: types(&b.acknowledge_types),
                });
                acks.entry((id, p.partition_index)).or_default().extend(batches);
            }
        }
    }
    let forget = body
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (uuid_bytes(&t.topic_id), *p)))
        .collect();
    (add, forget, acks)
}

/// Acquires for the member from the session's partitions, in each Raft group this node leads,
/// waiting up to MaxWaitMs (on every such group's log) while there is nothing to acquire.
async fn fetch(
    ctx: &Ctx,
    who: &Subject,
    ids: (&str, &str),
    keys: &[SharePartitionKey],
    body: &ShareFetchRequest,
    group: &ShareGroupSettings,
) -> anyhow::Result<BTreeMap<SharePartitionKey, Answer>> {
    let wait_ms = i64::from(body.max_wait_ms).clamp(0, limits::FETCH_WAIT_MS_MAX) as u64;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
    let mut refused = BTreeMap::new();
    let mut lanes = Vec::new();
    for (g, keys) in by_group(ctx, rotated(keys, body.share_session_epoch)) {
        match led(ctx, g) {
            Some(lane) => lanes.push((lane, keys)),
            None => refused.extend(keys.into_iter().map(|k| (k, not_leader_answer()))),
        }
    }
    let mut watches: Vec<_> = lanes.iter().map(|(lane, _)| lane.applied.applied_index()).collect();
    let total: usize = lanes.iter().map(|(_, keys)| keys.len()).sum();
    let budget =
        usize::try_from(body.max_bytes.max(1)).unwrap_or(usize::MAX).min(limits::FETCH_RESPONSE_BYTES_MAX);
    let per_partition = (budget / total.max(1)).max(1);
    loop {
        watches.iter_mut().for_each(|w| w.mark_unchanged());
        let mut answers = BTreeMap::new();
        let mut empty = Vec::new();
        let mut left = if body.max_records > 0 { body.max_records } else { i32::MAX };
        let mut done = false;
        for (lane, keys) in &lanes {
            let round = acquire_in(ctx, *lane, who, ids, keys, body, group, (per_partition, left)).await?;
            left = left.saturating_sub(round.acquired);
            done |= round.acquired > 0 || round.moved;
            answers.extend(round.answers);
            empty.extend(round.empty);
        }
        let waited = done || watches.is_empty() || !changed(&mut watches, deadline).await;
        if waited {
            let nothing =
                || Answer { code: error_code::NONE, acquired: Vec::new(), records: Some(Bytes::new()) };
            answers.extend(empty.into_iter().map(|k| (k, nothing())));
            answers.extend(std::mem::take(&mut refused));
            return Ok(answers);
        }
    }
}

/// Whether one of the logs applied an entry before `deadline`.
async fn changed(watches: &mut [tokio::sync::watch::Receiver<u64>], deadline: tokio::time::Instant) -> bool {
    let any = futures_util::future::select_all(watches.iter_mut().map(|w| Box::pin(w.changed())));
    tokio::time::timeout_at(deadline, any).await.is_ok()
}

/// One pass over the partitions of one Raft group.
#[derive(Default)]
struct Round {
    /// Partitions answered: refused, or with records acquired.
    answers: BTreeMap<SharePartitionKey, Answer>,
    /// Readable partitions that acquired nothing.
    empty: Vec<SharePartitionKey>,
    /// Records acquired.
    acquired: i32,
    /// The group's leadership moved: its partitions are answered NOT_LEADER_OR_FOLLOWER.
    moved: bool,
}

/// Reads the partitions `keys` of `lane` and proposes their acquisition (at most `max_records`,
/// `per_partition` bytes of batches each) if a dry run acquires anything.
#[allow(clippy::too_many_arguments)]
async fn acquire_in(
    ctx: &Ctx,
    lane: Lane<'_>,
    who: &Subject,
    ids: (&str, &str),
    keys: &[SharePartitionKey],
    body: &ShareFetchRequest,
    group: &ShareGroupSettings,
    (per_partition, max_records): (usize, i32),
) -> anyhow::Result<Round> {
    let mut round = Round::default();
    let mut reads = Vec::new();
    for key in keys {
        let code = match topic_problem(ctx, who, &key.0, key.1) {
            Some(code) => code,
            None => match readable(lane, ids.0, *key, group) {
                Some(r) => {
                    reads.push((*key, r));
                    continue;
                }
                None => error_code::UNKNOWN_TOPIC_OR_PARTITION,
            },
        };
        round.answers.insert(*key, Answer { code, ..Answer::default() });
    }
    let Some(op) = acquisition(lane, ids, &reads, body, group, (per_partition, max_records))? else {
        round.empty = reads.into_iter().map(|(key, _)| key).collect();
        return Ok(round);
    };
    let Ok(acquired) = lane.proposer.propose(Box::new(op)).await else {
        round.moved = true;
        round.answers.extend(reads.into_iter().map(|(key, _)| (key, not_leader_answer())));
        return Ok(round);
    };
    // Nothing acquired (a first read that only started the share state, or another fetch of
    // the same entry took the records): the partition waits like an empty fetch.
    for ((key, r), acquired) in reads.iter().zip(acquired) {
        if acquired.is_empty() {
            round.empty.push(*key);
            continue;
        }
        let n: i64 = acquired.iter().map(|a| a.last_offset - a.first_offset + 1).sum();
        round.acquired = round.acquired.saturating_add(i32::try_from(n).unwrap_or(i32::MAX));
        let bytes = records(&r.log, &acquired, r.high_watermark)?;
        round.answers.insert(*key, Answer { code: error_code::NONE, acquired, records: Some(bytes) });
    }
    Ok(round)
}

fn not_leader_answer() -> Answer {
    Answer { code: error_code::NOT_LEADER_OR_FOLLOWER, ..Answer::default() }
}

/// Kafka rotates a share fetch's partitions so that no partition always goes first.
fn rotated(keys: &[SharePartitionKey], epoch: i32) -> Vec<SharePartitionKey> {
    let mut keys = keys.to_vec();
    if !keys.is_empty() {
        let by = usize::try_from(epoch.max(0)).unwrap_or(0) % keys.len();
        keys.rotate_left(by);
    }
    keys
}

/// The `ShareAcquire` op for what the partitions may hand out, or None if a dry run against
/// the applied state acquires nothing and starts no share state (no log entry for an empty
/// fetch).
fn acquisition(
    lane: Lane,
    (group_id, member_id): (&str, &str),
    reads: &[(SharePartitionKey, Readable)],
    body: &ShareFetchRequest,
    group: &ShareGroupSettings,
    (per_partition, max_records): (usize, i32),
) -> anyhow::Result<Option<ShareAcquireOp>> {
    if reads.is_empty() || max_records <= 0 {
        return Ok(None);
    }
    let mut partitions = Vec::with_capacity(reads.len());
    for ((topic_id, partition), r) in reads {
        let batches = batches(r, per_partition)?;
        partitions.push(AcquirePartition {
            topic_id: *topic_id,
            partition: *partition,
            start_offset: r.start_offset,
            batches,
        });
    }
    let op = ShareAcquireOp {
        group_id: group_id.to_string(),
        member_id: member_id.to_string(),
        deadline_ms: wall_clock_ms() + group.lock_ms,
        max_records,
        batch_size: body.batch_size,
        record_limit_mode: body.share_acquire_mode == 1,
        limits: group.limits,
        partitions,
    };
    Ok(lane.applied.state(|s| would_acquire(s, &op)).then_some(op))
}

/// Every partition fetched or acknowledged, grouped by topic id, each naming the leader of its
/// topic's Raft group this node knows; with the addresses of the leaders named to partitions
/// answered NOT_LEADER_OR_FOLLOWER (Kafka's NodeEndpoints: a Java client moves to a new leader
/// from this answer only with both).
fn response(
    ctx: &Ctx,
    req: &Request,
    answers: BTreeMap<SharePartitionKey, Answer>,
    mut outcomes: Outcomes,
) -> ShareFetchResponse {
    let mut hints: BTreeMap<[u8; 16], (i32, i32)> = BTreeMap::new();
    let mut hint =
        |id: &[u8; 16]| *hints.entry(*id).or_insert_with(|| ctx.group_leader_hint(data_group(ctx, id)));
    let mut moved = BTreeSet::new();
    let mut topics: BTreeMap<[u8; 16], Vec<PartitionData>> = BTreeMap::new();
    for (key, answer) in answers {
        let (ack_code, ack_message) = outcomes.remove(&key).unwrap_or((error_code::NONE, None));
        let leader = hint(&key.0);
        if answer.code == error_code::NOT_LEADER_OR_FOLLOWER || ack_code == error_code::NOT_LEADER_OR_FOLLOWER
        {
            moved.insert(leader.0);
        }
        let acquired = answer
            .acquired
            .iter()
            .map(|a| {
                AcquiredRecords::default()
                    .with_first_offset(a.first_offset)
                    .with_last_offset(a.last_offset)
                    .with_delivery_count(a.delivery_count)
            })
            .collect();
        let data = PartitionData::default()
            .with_partition_index(key.1)
            .with_error_code(answer.code)
            .with_acknowledge_error_code(ack_code)
            .with_acknowledge_error_message(ack_message.map(str_bytes))
            .with_current_leader(leader_and_epoch(leader))
            .with_records(answer.records.or(Some(Bytes::new())))
            .with_acquired_records(acquired);
        topics.entry(key.0).or_default().push(data);
    }
    for (key, (code, message)) in outcomes {
        let leader = hint(&key.0);
        if code == error_code::NOT_LEADER_OR_FOLLOWER {
            moved.insert(leader.0);
        }
        let data = PartitionData::default()
            .with_partition_index(key.1)
            .with_acknowledge_error_code(code)
            .with_acknowledge_error_message(message.map(str_bytes))
            .with_current_leader(leader_and_epoch(leader))
            .with_records(Some(Bytes::new()));
        topics.entry(key.0).or_default().push(data);
    }
    let responses = topics
        .into_iter()
        .map(|(id, partitions)| {
            ShareFetchableTopicResponse::default().with_topic_id(uuid(&id)).with_partitions(partitions)
        })
        .collect();
    ShareFetchResponse::default().with_responses(responses).with_node_endpoints(endpoints(ctx, req, &moved))
}

fn leader_and_epoch((leader, epoch): (i32, i32)) -> LeaderIdAndEpoch {
    LeaderIdAndEpoch::default().with_leader_id(leader).with_leader_epoch(epoch)
}

/// The addresses of the nodes `leaders` on the request's listener.
fn endpoints(ctx: &Ctx, req: &Request, leaders: &BTreeSet<i32>) -> Vec<NodeEndpoint> {
    if leaders.is_empty() {
        return Vec::new();
    }
    ctx.leadership
        .brokers_on(req.listener.as_deref())
        .into_iter()
        .filter(|b| leaders.contains(&b.node_id))
        .map(|b| {
            NodeEndpoint::default()
                .with_node_id(b.node_id.into())
                .with_host(str_bytes(b.host))
                .with_port(b.port)
        })
        .collect()
}

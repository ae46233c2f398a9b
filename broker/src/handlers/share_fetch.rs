//! ShareFetch (key 78), v1–v2: KIP-932's fetch for share groups. In order, as Kafka 4.4's
//! `KafkaApis.handleShareFetchRequest`: the request checks (`share_common`), the share session
//! step (`coord::share::sessions`: open, next, or close with epoch -1), the piggybacked
//! acknowledgements (`share_acknowledgements`), then the acquisition: the leader reads the
//! batches each partition may hand out (`share_read`) and proposes one `ShareAcquire` op; the
//! records acquired in its apply (locked to the member, delivery counts raised) are the ones
//! returned, so nothing is handed out before its acquisition is durable. With nothing to
//! acquire the request waits for the log (MaxWaitMs), as Kafka's delayed share fetch does.
//!
//! Only the Raft leader (the leader of every partition) serves share fetches; a follower
//! answers each partition NOT_LEADER_OR_FOLLOWER with the leader it knows.
//!
//! Access: READ on the group, then READ on each topic (TOPIC_AUTHORIZATION_FAILED for the
//! partition), as Kafka checks.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, NodeEndpoint, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind, ShareFetchRequest, ShareFetchResponse};
use onelog_state::apply_share::would_acquire;
use onelog_state::command::{AcquirePartition, ShareAcquireOp};
use onelog_state::share_partition::{AckBatch, Acquired};

use super::share_acknowledgements::{acknowledge, topic_problem, types, Outcomes, Requested};
use super::share_common::{check, close, log_refusal, release, take_over, Refused};
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
    let Some(lane) = ctx.group_lane(&group_id).filter(|lane| lane.is_leader()) else {
        // A follower holds no share session (they live on the leader): a session's next
        // request gets SHARE_SESSION_NOT_FOUND, as a Kafka broker without the session answers,
        // and the client opens one anew, whose partitions learn the leader.
        if body.share_session_epoch != INITIAL_EPOCH {
            return Ok(Err((error_code::SHARE_SESSION_NOT_FOUND, None)));
        }
        let keys: Vec<SharePartitionKey> = add.iter().chain(acks.keys()).copied().collect();
        return Ok(Ok(not_leader(ctx, ctx.group_id_group(&group_id), req, &keys)));
    };
    take_over(ctx, lane).await;
    let term = lane.leadership.term();
    let key = (group_id.clone(), member_id.clone());
    let connection = (req.connection_id, ctx.config.settings.share_group.max_share_sessions);
    let step = lane.coordinators.share.fetch_session(
        term,
        &key,
        body.share_session_epoch,
        (&add, &forget),
        !acks.is_empty(),
        connection,
    );
    let (context, replaced) = match step {
        Ok(step) => step,
        Err(code) => return Ok(Err((code, None))),
    };
    if let Some(old) = replaced {
        release(ctx, lane, &group_id, &member_id, old.partitions.into_iter().collect()).await;
    }
    let group = ctx.share_group_settings(&group_id);
    let who = Subject::of(req);
    let outcomes = acknowledge(ctx, lane, req, (&group_id, &member_id), body.is_renew_ack, acks).await;
    let answers = match &context {
        Context::Final => {
            close(ctx, lane, term, &key).await;
            BTreeMap::new()
        }
        _ if body.is_renew_ack => BTreeMap::new(),
        Context::Opened(keys) | Context::Next(keys) => {
            fetch(ctx, lane, &who, (&group_id, &member_id), keys, body, &group).await?
        }
    };
    let lock_ms = i32::try_from(group.lock_ms).unwrap_or(i32::MAX);
    let hint = ctx.group_leader_hint(lane.group);
    Ok(Ok(response(hint, answers, outcomes).with_acquisition_lock_timeout_ms(lock_ms)))
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

/// Acquires for the member from the session's partitions, waiting up to MaxWaitMs while there
/// is nothing to acquire.
async fn fetch(
    ctx: &Ctx,
    lane: Lane<'_>,
    who: &Subject,
    (group_id, member_id): (&str, &str),
    keys: &[SharePartitionKey],
    body: &ShareFetchRequest,
    group: &ShareGroupSettings,
) -> anyhow::Result<BTreeMap<SharePartitionKey, Answer>> {
    let wait_ms = i64::from(body.max_wait_ms).clamp(0, limits::FETCH_WAIT_MS_MAX) as u64;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
    let mut applied = lane.applied.applied_index();
    loop {
        applied.mark_unchanged();
        let mut answers = BTreeMap::new();
        let mut reads = Vec::new();
        for key in rotated(keys, body.share_session_epoch) {
            match topic_problem(ctx, who, &key.0, key.1) {
                Some(code) => {
                    answers.insert(key, Answer { code, ..Answer::default() });
                }
                None => match readable(lane, group_id, key, group) {
                    Some(r) => reads.push((key, r)),
                    None => {
                        answers.insert(
                            key,
                            Answer { code: error_code::UNKNOWN_TOPIC_OR_PARTITION, ..Answer::default() },
                        );
                    }
                },
            }
        }
        if let Some(op) = acquisition(lane, (group_id, member_id), &reads, body, group)? {
            let Ok(acquired) = lane.proposer.propose(Box::new(op)).await else {
                // Leadership moved: the client finds the new leader.
                for (key, _) in reads {
                    answers.insert(
                        key,
                        Answer { code: error_code::NOT_LEADER_OR_FOLLOWER, ..Answer::default() },
                    );
                }
                return Ok(answers);
            };
            // Nothing acquired (a first read that only started the share state, or another
            // fetch of the same entry took the records): wait like an empty fetch.
            if acquired.iter().any(|a| !a.is_empty()) {
                for ((key, r), acquired) in reads.iter().zip(acquired) {
                    let bytes = records(&r.log, &acquired, r.high_watermark)?;
                    answers.insert(*key, Answer { code: error_code::NONE, acquired, records: Some(bytes) });
                }
                return Ok(answers);
            }
        }
        let now = tokio::time::Instant::now();
        if now >= deadline || tokio::time::timeout_at(deadline, applied.changed()).await.is_err() {
            for (key, _) in reads {
                answers.insert(
                    key,
                    Answer {
                        code: error_code::NONE,
                        acquired: Vec::new(),
                        records: Some(bytes::Bytes::new()),
                    },
                );
            }
            return Ok(answers);
        }
    }
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
) -> anyhow::Result<Option<ShareAcquireOp>> {
    let budget =
        usize::try_from(body.max_bytes.max(1)).unwrap_or(usize::MAX).min(limits::FETCH_RESPONSE_BYTES_MAX);
    let per_partition = (budget / reads.len().max(1)).max(1);
    let max_records = if body.max_records > 0 { body.max_records } else { i32::MAX };
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

/// Every partition NOT_LEADER_OR_FOLLOWER, with the leader of the share group's Raft group
/// `group` this node knows and its address (Kafka's NodeEndpoints): a Java client moves to a
/// new leader from this answer only with both.
fn not_leader(ctx: &Ctx, group: u32, req: &Request, keys: &[SharePartitionKey]) -> ShareFetchResponse {
    let answers = keys
        .iter()
        .map(|k| (*k, Answer { code: error_code::NOT_LEADER_OR_FOLLOWER, ..Answer::default() }))
        .collect();
    let hint = ctx.group_leader_hint(group);
    let leader = (hint.0 >= 0).then_some(hint.0);
    let endpoints = ctx
        .leadership
        .brokers_on(req.listener.as_deref())
        .into_iter()
        .filter(|b| Some(b.node_id) == leader)
        .map(|b| {
            NodeEndpoint::default()
                .with_node_id(b.node_id.into())
                .with_host(str_bytes(b.host))
                .with_port(b.port)
        })
        .collect();
    response(hint, answers, Outcomes::new()).with_node_endpoints(endpoints)
}

/// Every partition fetched or acknowledged, grouped by topic id.
/// The answer, each partition naming `(leader, epoch)` as its current leader.
fn response(
    (leader, epoch): (i32, i32),
    answers: BTreeMap<SharePartitionKey, Answer>,
    mut outcomes: Outcomes,
) -> ShareFetchResponse {
    let leader = LeaderIdAndEpoch::default().with_leader_id(leader).with_leader_epoch(epoch);
    let mut topics: BTreeMap<[u8; 16], Vec<PartitionData>> = BTreeMap::new();
    let mut add = |key: SharePartitionKey, data: PartitionData| topics.entry(key.0).or_default().push(data);
    for (key, answer) in answers {
        let (ack_code, ack_message) = outcomes.remove(&key).unwrap_or((error_code::NONE, None));
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
            .with_current_leader(leader.clone())
            .with_records(answer.records.or(Some(bytes::Bytes::new())))
            .with_acquired_records(acquired);
        add(key, data);
    }
    for (key, (code, message)) in outcomes {
        let data = PartitionData::default()
            .with_partition_index(key.1)
            .with_acknowledge_error_code(code)
            .with_acknowledge_error_message(message.map(str_bytes))
            .with_current_leader(leader.clone())
            .with_records(Some(bytes::Bytes::new()));
        add(key, data);
    }
    let responses = topics
        .into_iter()
        .map(|(id, partitions)| {
            ShareFetchableTopicResponse::default().with_topic_id(uuid(&id)).with_partitions(partitions)
        })
        .collect();
    ShareFetchResponse::default().with_responses(responses)
}

//! What ShareFetch and ShareAcknowledge share: Kafka 4.4's request checks before any
//! partition is looked at, in its order (share groups enabled, a group id, READ on the group,
//! a member id of 1 to 36 characters), the once-per-term release of what earlier terms'
//! sessions held, and the release of what a session held when it closes (epoch -1), when a new
//! one replaces it or when its connection closes, as Kafka's `ShareSessionCache` and
//! `SharePartitionManager.releaseSession` do. A release the log does not take (leadership
//! moved) is not lost: the records' locks still expire.
//!
//! A share partition's records are acquired and acknowledged in the log of the Raft group
//! holding its topic, whatever group holds the share group's membership (docs/SCALING.md §2),
//! as Kafka keeps a share partition on its partition's leader: a request's partitions are
//! served per Raft group ([`by_group`]), each by this node if it leads that group.

use std::collections::BTreeMap;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use onelog_state::command::ShareReleaseOp;
use onelog_state::consumer_group::TopicId;
use onelog_state::features::SHARE_VERSION;
use onelog_state::xgroup::placement::recorded_topic_group;

use super::share_group_heartbeat::{MEMBER_ID_CHARS_MAX, NOT_ENABLED};
use crate::coord::liveness::MemberKey;
use crate::coord::share::sessions::{Groups, SharePartitionKey, ShareSession, Terms};
use crate::ctx::{Ctx, Lane, SharedCtx};
use crate::incident::Incident;
use crate::security::authz::{op, rt, Subject};

/// A request refused as a whole: its top-level error code and message.
pub type Refused = (i16, Option<String>);

/// The group and member a share request names, once Kafka's checks passed.
pub fn check(
    ctx: &Ctx,
    req: &Request,
    group_id: Option<&str>,
    member_id: Option<&str>,
) -> Result<(String, String), Refused> {
    if ctx.applied.state(|s| s.features.level(SHARE_VERSION)) < 1 {
        return Err((error_code::UNSUPPORTED_VERSION, Some(NOT_ENABLED.to_string())));
    }
    let Some(group_id) = group_id else {
        return Err((error_code::INVALID_REQUEST, Some("Invalid group id in the request.".to_string())));
    };
    if !ctx.authorizer.allowed(&Subject::of(req), rt::GROUP, group_id, op::READ) {
        return Err((error_code::GROUP_AUTHORIZATION_FAILED, None));
    }
    match member_id {
        Some(m) if !m.is_empty() && m.chars().count() <= MEMBER_ID_CHARS_MAX => {
            Ok((group_id.to_string(), m.to_string()))
        }
        _ => Err((error_code::INVALID_REQUEST, Some("Invalid member id in the request.".to_string()))),
    }
}

/// Before this term's first acquisition or acknowledgement in `lane` (a Raft group holding
/// share partitions): releases every record its share groups hold, since the sessions that acquired them were
/// an earlier leader's (a client opens a new session here and cannot acknowledge them). Once
/// per term.
pub async fn take_over(ctx: &Ctx, lane: Lane<'_>) {
    let term = lane.leadership.term();
    lane.coordinators
        .share
        .take_over(term, || async {
            let held: Vec<String> = lane
                .applied
                .state(|s| s.share_states.deadlines().into_keys().map(|g| g.to_string()).collect());
            let groups: Vec<_> = held.into_iter().map(|g| (ctx.share_group_settings(&g).limits, g)).collect();
            if !groups.is_empty() {
                tracing::info!(
                    groups = groups.len(),
                    "a new leader releases what earlier terms' share sessions held"
                );
            }
            for (limits, group_id) in groups {
                let op = ShareReleaseOp { group_id, member_id: None, partitions: None, limits };
                if lane.proposer.propose(op).await.is_err() {
                    return false;
                }
            }
            true
        })
        .await;
}

/// Releases what `member_id` holds in `partitions` (a closed or replaced session).
pub async fn release(
    ctx: &Ctx,
    lane: Lane<'_>,
    group_id: &str,
    member_id: &str,
    partitions: Vec<SharePartitionKey>,
) {
    if partitions.is_empty() {
        return;
    }
    let limits = ctx.share_group_settings(group_id).limits;
    let op = ShareReleaseOp {
        group_id: group_id.to_string(),
        member_id: Some(member_id.to_string()),
        partitions: Some(partitions),
        limits,
    };
    if let Err(e) = lane.proposer.propose(op).await {
        // Not lost: the records' locks still expire.
        RELEASE_FAILED.record(|tally| {
            tracing::warn!(group_id, member_id, error = %e, suppressed = tally.suppressed,
                "could not release a closed share session's records; their locks will expire")
        });
    }
}

static RELEASE_FAILED: Incident = Incident::new();

/// The Raft group holding the records of topic `topic_id`, as group 0 recorded it at creation
/// (0 for a topic it does not know: its partitions are answered UNKNOWN_TOPIC_OR_PARTITION).
pub fn data_group(ctx: &Ctx, topic_id: &TopicId) -> u32 {
    if ctx.single_group() {
        return 0;
    }
    ctx.applied.state(|s| s.topic_by_id(topic_id).map_or(0, |(_, t)| recorded_topic_group(&t.configs)))
}

/// `keys` by the Raft group holding their records.
pub fn by_group(
    ctx: &Ctx,
    keys: impl IntoIterator<Item = SharePartitionKey>,
) -> BTreeMap<u32, Vec<SharePartitionKey>> {
    let mut out: BTreeMap<u32, Vec<SharePartitionKey>> = BTreeMap::new();
    for key in keys {
        out.entry(data_group(ctx, &key.0)).or_default().push(key);
    }
    out
}

/// The lane of Raft group `group` if this node leads it.
pub fn led(ctx: &Ctx, group: u32) -> Option<Lane<'_>> {
    ctx.lane(group).filter(|lane| lane.is_leader())
}

/// The terms of the groups in `groups` this node leads, for a session step: a session remembers
/// them, and is gone once one moved on (`coord::share::sessions`).
pub fn terms<'a>(ctx: &Ctx, groups: impl IntoIterator<Item = &'a u32>) -> Terms {
    groups.into_iter().filter_map(|g| led(ctx, *g).map(|lane| (*g, lane.leadership.term()))).collect()
}

/// Runs a session step with the request's groups' terms.
pub fn with_groups<T>(ctx: &Ctx, terms: Terms, step: impl FnOnce(&Groups) -> T) -> T {
    let moved = |group: u32, term: u64| ctx.lane(group).is_none_or(|lane| lane.leadership.term() != term);
    step(&Groups { terms, moved: &moved })
}

/// Releases what `member_id` held in a closed or replaced session, in each Raft group of its
/// partitions this node still leads in the term the session recorded (a later term's leader
/// released them when it took over).
pub async fn release_session(ctx: &Ctx, (group_id, member_id): (&str, &str), session: ShareSession) {
    for (group, partitions) in by_group(ctx, session.partitions) {
        let Some(lane) = led(ctx, group) else { continue };
        if session.terms.get(&group) == Some(&lane.leadership.term()) {
            release(ctx, lane, group_id, member_id, partitions).await;
        }
    }
}

/// Closes the member's share session (epoch -1) and releases what it held.
pub async fn close(ctx: &Ctx, key: &MemberKey) {
    if let Some(session) = ctx.coordinators.share.sessions.with(|s| s.close(key)) {
        release_session(ctx, (&key.0, &key.1), session).await;
    }
}

/// A client connection closed: its share sessions close with it and what they held is
/// released, as Kafka's `ShareSessionCache` does on a disconnect.
pub fn connection_closed(ctx: &SharedCtx, connection: u64) {
    let sessions = ctx.coordinators.share.sessions.with(|s| s.disconnected(connection));
    if sessions.is_empty() {
        return;
    }
    let ctx = ctx.clone();
    tokio::spawn(async move {
        for ((group_id, member_id), session) in sessions {
            release_session(&ctx, (&group_id, &member_id), session).await;
        }
    });
}

/// Share requests refused, whole or for some partitions: counted, one log line per interval.
/// A follower's NOT_LEADER_OR_FOLLOWER is routine after a leader change and logged too, since
/// a client that keeps asking the wrong node is what an operator looks for.
static REFUSED: Incident = Incident::new();

/// Logs a share request's error codes: the top-level one and (fetch, acknowledge) per
/// partition, if any is not 0.
pub fn log_refusal(api: &'static str, group_id: Option<&str>, top: i16, partitions: &[(i16, i16)]) {
    let name = kafka_compat::error_code::name;
    let failed: Vec<String> = partitions
        .iter()
        .filter(|(f, a)| *f != error_code::NONE || *a != error_code::NONE)
        .map(|(f, a)| format!("{}/{}", name(*f), name(*a)))
        .collect();
    if top == error_code::NONE && failed.is_empty() {
        return;
    }
    REFUSED.record(|tally| {
        tracing::info!(group_id = group_id.unwrap_or(""), error = name(top), partitions = ?failed,
            suppressed = tally.suppressed, total = tally.total, "{api} refused")
    });
}

/// What refuses AlterShareGroupOffsets and DeleteShareGroupOffsets before their topics, in
/// Kafka's order: share groups not enabled, the group operation `op` not allowed, an empty
/// group id, a node not leading the group's Raft group; else that group's lane.
pub fn offsets_lane<'a>(ctx: &'a Ctx, who: &Subject, group_id: &str, op: i8) -> Result<Lane<'a>, i16> {
    if ctx.applied.state(|s| s.features.level(SHARE_VERSION)) < 1 {
        return Err(error_code::UNSUPPORTED_VERSION);
    }
    if !ctx.authorizer.allowed(who, rt::GROUP, group_id, op) {
        return Err(crate::security::authz::code::GROUP_AUTHORIZATION_FAILED);
    }
    if super::util::group_id_invalid(group_id) {
        return Err(error_code::INVALID_GROUP_ID);
    }
    ctx.group_lane(group_id).filter(|lane| lane.is_leader()).ok_or(error_code::NOT_COORDINATOR)
}

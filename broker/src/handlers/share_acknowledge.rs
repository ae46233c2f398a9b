//! ShareAcknowledge (key 79), v1–v2: acknowledgements of share-group records outside a
//! ShareFetch. As Kafka 4.4's `KafkaApis.handleShareAcknowledgeRequest`: the request checks
//! (`share_common`), the share session's epoch (`Sessions::acknowledge`: epoch 0 is
//! INVALID_SHARE_SESSION_EPOCH, -1 acknowledges and closes the session), then the
//! acknowledgements (`share_acknowledgements`) in each partition's Raft group, answered once
//! applied; a partition of a group this node does not lead is NOT_LEADER_OR_FOLLOWER.
//!
//! Access: READ on the group, then READ on each topic, as Kafka checks.

use std::collections::BTreeMap;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::share_acknowledge_response::{
    LeaderIdAndEpoch, PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::{
    ApiKey, RequestKind, ResponseKind, ShareAcknowledgeRequest, ShareAcknowledgeResponse,
};
use onelog_state::share_partition::AckBatch;

use super::share_acknowledgements::{acknowledge_by_group, types, Outcomes, Requested};
use super::share_common::{
    by_group, check, close, data_group, led, log_refusal, take_over, terms, with_groups, Refused,
};
use super::util::{str_bytes, uuid, uuid_bytes};
use super::HandlerResult;
use crate::coord::share::sessions::FINAL_EPOCH;
use crate::ctx::{Ctx, SharedCtx};

pub const KEY: ApiKey = ApiKey::ShareAcknowledge;
pub const VERSIONS: (i16, i16) = (1, 2);
pub const ACCEPTED_MIN_VERSION: i16 = 1;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::ShareAcknowledge(body) = &req.body else { anyhow::bail!("not a ShareAcknowledge body") };
    let response = match serve(&ctx, &req, body).await {
        Ok(response) => response,
        Err((code, message)) => ShareAcknowledgeResponse::default()
            .with_error_code(code)
            .with_error_message(message.map(str_bytes)),
    };
    let codes: Vec<(i16, i16)> = response
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| (error_code::NONE, p.error_code))
        .collect();
    log_refusal(
        "ShareAcknowledge",
        body.group_id.as_ref().map(|g| g.0.as_str()),
        response.error_code,
        &codes,
    );
    Ok(Some(ResponseKind::ShareAcknowledge(response)))
}

async fn serve(
    ctx: &Ctx,
    req: &Request,
    body: &ShareAcknowledgeRequest,
) -> Result<ShareAcknowledgeResponse, Refused> {
    let (group_id, member_id) =
        check(ctx, req, body.group_id.as_ref().map(|g| g.0.as_str()), body.member_id.as_deref())?;
    let requested = requested(body);
    let groups = by_group(ctx, requested.keys().copied());
    let key = (group_id.clone(), member_id.clone());
    let epoch = body.share_session_epoch;
    with_groups(ctx, terms(ctx, groups.keys()), |groups| {
        ctx.coordinators.share.sessions.with(|s| s.acknowledge(&key, epoch, groups))
    })
    .map_err(|code| (code, None))?;
    for group in groups.into_keys() {
        if let Some(lane) = led(ctx, group) {
            take_over(ctx, lane).await;
        }
    }
    let ids = (group_id.as_str(), member_id.as_str());
    let outcomes = acknowledge_by_group(ctx, req, ids, body.is_renew_ack, requested).await;
    if epoch == FINAL_EPOCH {
        close(ctx, &key).await;
    }
    let lock_ms = ctx.share_group_settings(&group_id).lock_ms;
    let lock_ms = i32::try_from(lock_ms).unwrap_or(i32::MAX);
    let response = response(ctx, outcomes);
    Ok(if req.api_version >= 2 { response.with_acquisition_lock_timeout_ms(lock_ms) } else { response })
}

fn requested(body: &ShareAcknowledgeRequest) -> Requested {
    let mut out = Requested::new();
    for t in &body.topics {
        for p in &t.partitions {
            let batches = p.acknowledgement_batches.iter().map(|b| AckBatch {
                first_offset: b.first_offset,
                last_offset: b.last_offset,
                types: types(&b.acknowledge_types),
            });
            out.entry((uuid_bytes(&t.topic_id), p.partition_index)).or_default().extend(batches);
        }
    }
    out
}

/// The answer, each partition naming the leader of its topic's Raft group as its current leader.
fn response(ctx: &Ctx, outcomes: Outcomes) -> ShareAcknowledgeResponse {
    let mut topics: BTreeMap<[u8; 16], Vec<PartitionData>> = BTreeMap::new();
    for ((topic_id, partition), (code, message)) in outcomes {
        let (leader, epoch) = ctx.group_leader_hint(data_group(ctx, &topic_id));
        let leader = LeaderIdAndEpoch::default().with_leader_id(leader).with_leader_epoch(epoch);
        let data = PartitionData::default()
            .with_partition_index(partition)
            .with_error_code(code)
            .with_error_message(message.map(str_bytes))
            .with_current_leader(leader.clone());
        topics.entry(topic_id).or_default().push(data);
    }
    let responses = topics
        .into_iter()
        .map(|(id, partitions)| {
            ShareAcknowledgeTopicResponse::default().with_topic_id(uuid(&id)).with_partitions(partitions)
        })
        .collect();
    ShareAcknowledgeResponse::default().with_responses(responses)
}

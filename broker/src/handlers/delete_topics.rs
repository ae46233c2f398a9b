//! DeleteTopics (key 20): by name (v0–5) or by topic id (v6+), in one Raft entry. A follower
//! forwards it to the leader at dispatch (`Route::Leader` on its registry row).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{ApiKey, DeleteTopicsResponse, RequestKind, ResponseKind};

use super::util::{str_bytes, topic_name, uuid, uuid_bytes};
use super::{Forwarded, HandlerResult};
use crate::controller;
use crate::ctx::SharedCtx;
use crate::security::authz::{self, code, op, rt, Subject};
use onelog_state::BrokerState;

pub const KEY: ApiKey = ApiKey::DeleteTopics;
pub const VERSIONS: (i16, i16) = (1, 6);
pub const ACCEPTED_MIN_VERSION: i16 = 1;

pub const FORWARDED: Forwarded = Forwarded { when: |_| true, settled: gone };

/// Every topic the leader deleted is gone here too (named by name, or by id in v6+).
fn gone(_: &RequestKind, response: &ResponseKind, state: &BrokerState) -> bool {
    let ResponseKind::DeleteTopics(r) = response else { return true };
    r.responses.iter().filter(|t| t.error_code == 0).all(|t| match &t.name {
        Some(n) => !state.topics.contains_key(n.as_str()),
        None => state.topic_by_id(&uuid_bytes(&t.topic_id)).is_none(),
    })
}

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::DeleteTopics(body) = req.body else { anyhow::bail!("not a DeleteTopics body") };
    // Resolve every requested topic to (name, id) first; unknown ids are answered directly.
    let wanted: Vec<(Option<String>, [u8; 16])> = if req.api_version >= 6 {
        body.topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), uuid_bytes(&t.topic_id)))
            .collect()
    } else {
        body.topic_names.iter().map(|n| (Some(n.0.to_string()), [0; 16])).collect()
    };
    let resolved: Vec<Option<(String, [u8; 16])>> = {
        ctx.applied.read(|applied| {
            let state = &applied.state;
            wanted
                .iter()
                .map(|(name, id)| match name {
                    Some(n) => Some((n.clone(), state.topics.get(n).map_or([0; 16], |t| t.topic_id))),
                    None => state.topic_by_id(id).map(|(n, t)| (n.clone(), t.topic_id)),
                })
                .collect()
        })
    };
    // KafkaApis: DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED for it.
    let names: Vec<String> = resolved.iter().flatten().map(|(n, _)| n.clone()).collect();
    let deletable =
        ctx.authorizer.allowed_each(&who, rt::TOPIC, names.iter().map(String::as_str), op::DELETE);
    let allowed = names.iter().zip(&deletable).filter(|(_, d)| **d).map(|(n, _)| n.clone()).collect();
    let outcomes = controller::delete_topics(&ctx, allowed).await;
    let mut outcomes =
        authz::merge_refused(&deletable, outcomes, (code::TOPIC_AUTHORIZATION_FAILED, None)).into_iter();
    let responses = wanted
        .iter()
        .zip(resolved)
        .map(|((name, id), found)| match found {
            Some((name, topic_id)) => {
                let (code, message) = outcomes.next().unwrap_or((error_code::UNKNOWN_SERVER_ERROR, None));
                DeletableTopicResult::default()
                    .with_name(Some(topic_name(name)))
                    .with_topic_id(uuid(&topic_id))
                    .with_error_code(code)
                    .with_error_message(message.map(str_bytes))
            }
            None => DeletableTopicResult::default()
                .with_name(name.clone().map(topic_name))
                .with_topic_id(uuid(id))
                .with_error_code(error_code::UNKNOWN_TOPIC_ID),
        })
        .collect();
    Ok(Some(ResponseKind::DeleteTopics(DeleteTopicsResponse::default().with_responses(responses))))
}

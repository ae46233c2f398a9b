//! DeleteShareGroupOffsets (key 92), v0: an empty share group forgets its state of whole
//! topics (`kafka-share-groups.sh --delete-offsets`), as Kafka 4.4: a group with members is
//! NON_EMPTY_GROUP, another type's id GROUP_ID_NOT_FOUND (top level); an unknown topic, or one
//! the group has no state of, UNKNOWN_TOPIC_OR_PARTITION for it ("There is no offset
//! information to delete."). One `ShareDeleteOffsets` op in the group's Raft group, then one in
//! the Raft group of each other topic (`coord::share::remote`); a node not leading the group's
//! Raft group answers NOT_COORDINATOR.
//!
//! Access: DELETE on the group, then READ on each topic (TOPIC_AUTHORIZATION_FAILED for it).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic as Topic;
use kafka_protocol::messages::{
    ApiKey, DeleteShareGroupOffsetsResponse, RequestKind, ResponseKind, TopicName,
};
use onelog_state::command::ShareDeleteOffsetsOp;
use onelog_state::consumer_group::TopicId;

use super::share_common::{data_group, offsets_lane};
use super::util::{group_op_failed, str_bytes, uuid};
use super::HandlerResult;
use crate::coord::share::remote;
use crate::ctx::SharedCtx;
use crate::raft::transport::xgroup::ShareStateChange;
use crate::security::authz::{code, op, rt, Subject};

pub const KEY: ApiKey = ApiKey::DeleteShareGroupOffsets;
pub const VERSIONS: (i16, i16) = (0, 0);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

const NO_STATE: &str = "There is no offset information to delete.";

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::DeleteShareGroupOffsets(body) = &req.body else {
        anyhow::bail!("not a DeleteShareGroupOffsets body")
    };
    let group_id = body.group_id.0.as_str();
    let refused = |code: i16, message: Option<String>| {
        let response = DeleteShareGroupOffsetsResponse::default().with_error_code(code);
        Ok(Some(ResponseKind::DeleteShareGroupOffsets(response.with_error_message(message.map(str_bytes)))))
    };
    let lane = match offsets_lane(&ctx, &who, group_id, op::DELETE) {
        Ok(lane) => lane,
        Err(code) => return refused(code, None),
    };
    let mut answers = Vec::new();
    let mut named = Vec::new();
    for t in &body.topics {
        let name = t.topic_name.0.as_str();
        let answer = |code: i16, message: Option<&str>| {
            Topic::default()
                .with_topic_name(TopicName(str_bytes(name)))
                .with_error_code(code)
                .with_error_message(message.map(str_bytes))
        };
        if !ctx.authorizer.allowed(&who, rt::TOPIC, name, op::READ) {
            answers.push(answer(code::TOPIC_AUTHORIZATION_FAILED, None));
            continue;
        }
        match ctx.applied.state(|s| s.topics.get(name).map(|t| t.topic_id)) {
            Some(id) => named.push((name.to_string(), id)),
            None => answers.push(answer(error_code::UNKNOWN_TOPIC_OR_PARTITION, None)),
        }
    }
    // The group's own Raft group decides (emptiness, type) and forgets what it holds; then the
    // Raft group of each other topic (`coord::share::remote`).
    let groups: Vec<u32> = named.iter().map(|(_, id)| data_group(&ctx, id)).collect();
    let own: Vec<TopicId> =
        named.iter().zip(&groups).filter(|(_, g)| **g == lane.group).map(|((_, id), _)| *id).collect();
    let op = ShareDeleteOffsetsOp { group_id: group_id.to_string(), topics: own };
    let mut own_deleted = match lane.proposer.propose(op).await {
        Ok(Ok(deleted)) => deleted.into_iter(),
        Ok(Err(refusal)) => return refused(refusal.code, refusal.message),
        Err(e) => return refused(group_op_failed(&e), None),
    };
    let mut deleted = Vec::with_capacity(named.len());
    for ((_, id), group) in named.iter().zip(&groups) {
        if *group == lane.group {
            deleted.push(own_deleted.next().unwrap_or(false));
            continue;
        }
        match remote::change(&ctx, *group, group_id, ShareStateChange::Delete(vec![*id])).await {
            Ok(flags) => deleted.push(flags.first().copied().unwrap_or(false)),
            Err((code, message)) => return refused(code, message),
        }
    }
    for ((name, id), had_state) in named.into_iter().zip(deleted) {
        let topic = Topic::default().with_topic_name(TopicName(str_bytes(name))).with_topic_id(uuid(&id));
        answers.push(match had_state {
            true => topic,
            false => topic
                .with_error_code(error_code::UNKNOWN_TOPIC_OR_PARTITION)
                .with_error_message(Some(str_bytes(NO_STATE))),
        });
    }
    Ok(Some(ResponseKind::DeleteShareGroupOffsets(
        DeleteShareGroupOffsetsResponse::default().with_responses(answers),
    )))
}

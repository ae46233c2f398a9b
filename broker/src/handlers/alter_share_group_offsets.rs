//! AlterShareGroupOffsets (key 91), v0: an empty share group's partitions start over at the
//! given offsets (`kafka-share-groups.sh --reset-offsets`), as Kafka 4.4's
//! `alterShareGroupOffsets`: a group no type holds is created empty, one with members is
//! NON_EMPTY_GROUP, another type's id GROUP_ID_NOT_FOUND; an unknown topic or partition is
//! UNKNOWN_TOPIC_OR_PARTITION for it. One `ShareResetOffsets` op in the group's Raft group,
//! then one in each other Raft group holding a named partition (`coord::share::remote`); a
//! node not leading the group's Raft group answers NOT_COORDINATOR.
//!
//! Access: READ on the group, then READ on each topic (TOPIC_AUTHORIZATION_FAILED for its
//! partitions), as Kafka checks.

use std::collections::BTreeMap;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition as Partition, AlterShareGroupOffsetsResponseTopic as Topic,
};
use kafka_protocol::messages::{AlterShareGroupOffsetsResponse, ApiKey, RequestKind, ResponseKind};
use onelog_state::command::ShareResetOffsetsOp;
use onelog_state::consumer_group::TopicId;

use super::share_common::{data_group, offsets_lane};
use super::util::{group_op_failed, str_bytes, uuid};
use super::HandlerResult;
use crate::coord::share::remote;
use crate::ctx::SharedCtx;
use crate::raft::transport::xgroup::ShareStateChange;
use crate::security::authz::{code, op, rt, Subject};

pub const KEY: ApiKey = ApiKey::AlterShareGroupOffsets;
pub const VERSIONS: (i16, i16) = (0, 0);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::AlterShareGroupOffsets(body) = &req.body else {
        anyhow::bail!("not an AlterShareGroupOffsets body")
    };
    let group_id = body.group_id.0.as_str();
    let refused = |code: i16, message: Option<String>| {
        let response = AlterShareGroupOffsetsResponse::default().with_error_code(code);
        Ok(Some(ResponseKind::AlterShareGroupOffsets(response.with_error_message(message.map(str_bytes)))))
    };
    let lane = match offsets_lane(&ctx, &who, group_id, op::READ) {
        Ok(lane) => lane,
        Err(code) => return refused(code, None),
    };
    let mut reset = Vec::new();
    let mut topics = Vec::new();
    for t in &body.topics {
        let name = t.topic_name.0.as_str();
        let allowed = ctx.authorizer.allowed(&who, rt::TOPIC, name, op::READ);
        let found = ctx.applied.state(|s| s.topics.get(name).map(|t| (t.topic_id, t.partitions.len())));
        let mut partitions = Vec::new();
        for p in &t.partitions {
            let exists = found.is_some_and(|(_, n)| usize::try_from(p.partition_index).is_ok_and(|i| i < n));
            let code = match () {
                () if !allowed => code::TOPIC_AUTHORIZATION_FAILED,
                () if !exists => error_code::UNKNOWN_TOPIC_OR_PARTITION,
                () => error_code::NONE,
            };
            if let (error_code::NONE, Some((id, _))) = (code, found) {
                reset.push((id, p.partition_index, p.start_offset));
            }
            partitions
                .push(Partition::default().with_partition_index(p.partition_index).with_error_code(code));
        }
        let id = found.filter(|_| allowed).map_or(uuid::Uuid::nil(), |(id, _)| uuid(&id));
        topics.push(
            Topic::default()
                .with_topic_name(t.topic_name.clone())
                .with_topic_id(id)
                .with_partitions(partitions),
        );
    }
    // The group's own Raft group decides (emptiness, type) and resets what it holds; then each
    // other group holding one of the partitions (`coord::share::remote`).
    let mut by_group: BTreeMap<u32, Vec<(TopicId, i32, i64)>> = BTreeMap::new();
    for p in reset {
        by_group.entry(data_group(&ctx, &p.0)).or_default().push(p);
    }
    let own = by_group.remove(&lane.group).unwrap_or_default();
    let op = ShareResetOffsetsOp { group_id: group_id.to_string(), partitions: own };
    match lane.proposer.propose(op).await {
        Ok(Ok(())) => {}
        Ok(Err(refusal)) => return refused(refusal.code, refusal.message),
        Err(e) => return refused(group_op_failed(&e), None),
    }
    for (group, partitions) in by_group {
        if let Err((code, message)) =
            remote::change(&ctx, group, group_id, ShareStateChange::Reset(partitions)).await
        {
            return refused(code, message);
        }
    }
    Ok(Some(ResponseKind::AlterShareGroupOffsets(
        AlterShareGroupOffsetsResponse::default().with_responses(topics),
    )))
}

//! ConsumerGroupDescribe (key 69), v0–v1: KIP-848's describe for `consumer`-type groups.
//!
//! A consumer group (`onelog_state::consumer_group`) is described from the applied state:
//! its state, epochs, the assignor its next target uses, and each member's identity,
//! subscription, current and target assignment (`consumer_group_view`). Kafka 4.x answers a
//! classic, Streams or share group GROUP_ID_NOT_FOUND "Group <id> is not a consumer group."
//! and an unknown one GROUP_ID_NOT_FOUND "Group <id> not found."
//! (`GroupMetadataManager.consumerGroup`); onelog answers the same, so the admin client falls
//! back to DescribeGroups as it does against Kafka. A follower answers NOT_COORDINATOR (the
//! leader coordinates every group), an empty or over-long id INVALID_GROUP_ID.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::consumer_group_describe_response::DescribedGroup;
use kafka_protocol::messages::{ApiKey, ConsumerGroupDescribeResponse, RequestKind, ResponseKind};

use super::util::{adopt_group, group_id_invalid, str_bytes};
use super::{authorized, HandlerResult};
use super::{consumer_group_view, group_kind};
use crate::ctx::{Lane, SharedCtx};
use crate::security::authz::{code, op, rt, Subject};

pub const KEY: ApiKey = ApiKey::ConsumerGroupDescribe;
pub const VERSIONS: (i16, i16) = (0, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::ConsumerGroupDescribe(body) = req.body else {
        anyhow::bail!("not a ConsumerGroupDescribe body")
    };
    let groups = body
        .group_ids
        .into_iter()
        .map(|id| {
            let operations = authorized::group(&ctx, &who, body.include_authorized_operations, &id.0);
            let (code, message) = if !ctx.authorizer.allowed(&who, rt::GROUP, &id.0, op::DESCRIBE) {
                (code::GROUP_AUTHORIZATION_FAILED, None)
            } else if group_id_invalid(&id.0) {
                (error_code::INVALID_GROUP_ID, None)
            } else if let Some(lane) = ctx.group_lane(&id.0).filter(|lane| lane.is_leader()) {
                if let Some(described) = consumer_group_view::describe(&ctx, lane, &id.0) {
                    return described.with_group_id(id).with_authorized_operations(operations);
                }
                not_a_consumer_group(lane, &id.0)
            } else {
                (error_code::NOT_COORDINATOR, None)
            };
            DescribedGroup::default()
                .with_group_id(id)
                .with_error_code(code)
                .with_error_message(message.map(str_bytes))
                .with_authorized_operations(operations)
        })
        .collect();
    Ok(Some(ResponseKind::ConsumerGroupDescribe(
        ConsumerGroupDescribeResponse::default().with_groups(groups),
    )))
}

/// Why an id with no consumer group is not described: another type holds it, or none does.
fn not_a_consumer_group(lane: Lane, group_id: &str) -> (i16, Option<String>) {
    if is_other_group(lane, group_id) {
        (error_code::GROUP_ID_NOT_FOUND, Some(format!("Group {group_id} is not a consumer group.")))
    } else {
        (error_code::GROUP_ID_NOT_FOUND, Some(format!("Group {group_id} not found.")))
    }
}

/// A group of another type: classic (members in the coordinator or committed offsets in the
/// log), Streams or share.
fn is_other_group(lane: Lane, group_id: &str) -> bool {
    adopt_group(lane, group_id);
    lane.applied.state(|s| group_kind::kind(lane, s, group_id).is_some())
}

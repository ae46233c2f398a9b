//! ShareGroupDescribe (key 77), v1: KIP-932's describe for share groups, from the applied
//! state (Kafka's `ShareGroup.asDescribedGroup`): state, epochs, the assignor and each
//! member's identity, subscriptions and assignment (topic ids with their names). A group of
//! another type is GROUP_ID_NOT_FOUND "Group <id> is not a share group.", an unknown one
//! "Group <id> not found."; before `share.version` 1 the request is UNSUPPORTED_VERSION, as
//! Kafka answers. A follower answers NOT_COORDINATOR.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::share_group_describe_response as rs;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind, ShareGroupDescribeResponse, TopicName};
use onelog_state::consumer_group::Assignment;
use onelog_state::features::SHARE_VERSION;
use onelog_state::share_group::ShareGroup;
use onelog_state::BrokerState;

use super::util::{group_id_invalid, str_bytes, uuid};
use super::{authorized, HandlerResult};
use crate::ctx::SharedCtx;
use crate::security::authz::{code, op, rt, Subject};

pub const KEY: ApiKey = ApiKey::ShareGroupDescribe;
pub const VERSIONS: (i16, i16) = (1, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 1;

/// The assignor Kafka 4.4.0 names (its only one).
const ASSIGNOR: &str = "simple";

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::ShareGroupDescribe(body) = req.body else {
        anyhow::bail!("not a ShareGroupDescribe body")
    };
    if ctx.applied.state(|s| s.features.level(SHARE_VERSION)) < 1 {
        let groups = body
            .group_ids
            .into_iter()
            .map(|id| {
                rs::DescribedGroup::default()
                    .with_group_id(id)
                    .with_error_code(error_code::UNSUPPORTED_VERSION)
            })
            .collect();
        return Ok(Some(ResponseKind::ShareGroupDescribe(
            ShareGroupDescribeResponse::default().with_groups(groups),
        )));
    }
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
                match lane.applied.state(|s| describe(s, &id.0)) {
                    Ok(described) => {
                        return described.with_group_id(id).with_authorized_operations(operations)
                    }
                    Err(message) => (error_code::GROUP_ID_NOT_FOUND, Some(message)),
                }
            } else {
                (error_code::NOT_COORDINATOR, None)
            };
            rs::DescribedGroup::default()
                .with_group_id(id)
                .with_error_code(code)
                .with_error_message(message.map(str_bytes))
                .with_authorized_operations(operations)
        })
        .collect();
    Ok(Some(ResponseKind::ShareGroupDescribe(ShareGroupDescribeResponse::default().with_groups(groups))))
}

fn describe(s: &BrokerState, group_id: &str) -> Result<rs::DescribedGroup, String> {
    let Some(group) = s.share_groups.groups.get(group_id) else {
        return Err(match onelog_state::apply_share::other_type(s, group_id) {
            Some(_) => format!("Group {group_id} is not a share group."),
            None => format!("Group {group_id} not found."),
        });
    };
    let members = group
        .members
        .iter()
        .map(|(id, m)| {
            rs::Member::default()
                .with_member_id(str_bytes(id.clone()))
                .with_rack_id(m.rack_id.clone().map(str_bytes))
                .with_member_epoch(m.member_epoch)
                .with_client_id(str_bytes(m.client_id.clone()))
                .with_client_host(str_bytes(m.client_host.clone()))
                .with_subscribed_topic_names(
                    m.subscribed_topic_names.iter().map(|n| TopicName(str_bytes(n.clone()))).collect(),
                )
                .with_assignment(assignment(s, &m.assignment))
        })
        .collect();
    Ok(rs::DescribedGroup::default()
        .with_group_state(str_bytes(state_name(group)))
        .with_group_epoch(group.group_epoch)
        .with_assignment_epoch(group.assignment_epoch)
        .with_assignor_name(str_bytes(ASSIGNOR))
        .with_members(members))
}

/// Kafka's `ShareGroup.ShareGroupState` names.
pub fn state_name(group: &ShareGroup) -> &'static str {
    if group.members.is_empty() {
        "Empty"
    } else {
        "Stable"
    }
}

fn assignment(s: &BrokerState, a: &Assignment) -> rs::Assignment {
    let topics = a
        .iter()
        .map(|(id, partitions)| {
            let name = s.topic_by_id(id).map(|(n, _)| n.clone()).unwrap_or_default();
            rs::TopicPartitions::default()
                .with_topic_id(uuid(id))
                .with_topic_name(TopicName(str_bytes(name)))
                .with_partitions(partitions.iter().copied().collect())
        })
        .collect();
    rs::Assignment::default().with_topic_partitions(topics)
}

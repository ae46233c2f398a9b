//! DescribeGroups (key 15), v0–v6: each classic group's state, protocol and members from the
//! coordinator (see `coord::group`), or from the applied committed offsets for a group without
//! members.
//!
//! As Kafka's `ClassicGroup.describe`: member metadata and assignments and the protocol name
//! are shown only while the group is Stable; a group known only from committed offsets is
//! `Empty`. An unknown group, a KIP-848 consumer group (which only ConsumerGroupDescribe
//! describes), a KIP-1071 Streams group (StreamsGroupDescribe's) and a KIP-932 share group
//! (ShareGroupDescribe's) is `Dead` with no error up to v5; v6 (KIP-1043) says
//! GROUP_ID_NOT_FOUND with Kafka's message ("Group <id> is not a classic group.",
//! `GroupMetadataManager.classicGroup`), which is what sends admin clients from one describe
//! API to the other. A follower answers NOT_COORDINATOR per group, an empty or over-long group
//! id INVALID_GROUP_ID. Authorized operations (v3+, when asked), see `authorized`; DESCRIBE on
//! each group.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{ApiKey, DescribeGroupsResponse, GroupId, RequestKind, ResponseKind};

use super::group_kind::{self, GroupKind};
use super::util::{adopt_group, group_id_invalid, str_bytes};
use super::{authorized, HandlerResult};
use crate::coord::group::GroupState;
use crate::ctx::{Lane, SharedCtx};
use crate::security::authz::{code, op, rt, Subject};

pub const KEY: ApiKey = ApiKey::DescribeGroups;
pub const VERSIONS: (i16, i16) = (0, 6);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::DescribeGroups(body) = req.body else { anyhow::bail!("not a DescribeGroups body") };
    let groups = body
        .groups
        .into_iter()
        .map(|id| {
            // Kafka: DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED for it.
            if !ctx.authorizer.allowed(&who, rt::GROUP, &id.0, op::DESCRIBE) {
                return DescribedGroup::default()
                    .with_error_code(code::GROUP_AUTHORIZATION_FAILED)
                    .with_group_id(id)
                    .with_authorized_operations(authorized::OMITTED);
            }
            let operations = authorized::group(&ctx, &who, body.include_authorized_operations, &id.0);
            let group = if group_id_invalid(&id.0) {
                DescribedGroup::default().with_error_code(error_code::INVALID_GROUP_ID)
            } else if let Some(lane) = ctx.group_lane(&id.0).filter(|lane| lane.is_leader()) {
                describe(lane, &id, req.api_version)
            } else {
                DescribedGroup::default().with_error_code(error_code::NOT_COORDINATOR)
            };
            group.with_group_id(id).with_authorized_operations(operations)
        })
        .collect();
    Ok(Some(ResponseKind::DescribeGroups(DescribeGroupsResponse::default().with_groups(groups))))
}

fn describe(lane: Lane, id: &GroupId, v: i16) -> DescribedGroup {
    adopt_group(lane, &id.0);
    let kind = lane.applied.state(|s| match group_kind::kind(lane, s, &id.0) {
        None => None,
        Some(GroupKind::Consumer(_) | GroupKind::Streams(_) | GroupKind::Share) => Some(false),
        Some(GroupKind::Classic) => Some(true),
    });
    let view = match kind {
        Some(true) => lane.coordinators.classic.describe(&id.0),
        Some(false) => return not_classic(v, format!("Group {} is not a classic group.", &*id.0)),
        None => return not_classic(v, format!("Group {} not found.", &*id.0)),
    };
    let Some(view) = view else {
        return DescribedGroup::default().with_group_state(str_bytes("Empty"));
    };
    let stable = view.state == GroupState::Stable;
    let members = view
        .members
        .into_iter()
        .map(|m| {
            let member = DescribedGroupMember::default()
                .with_member_id(str_bytes(m.member_id))
                .with_group_instance_id(m.group_instance_id.filter(|_| v >= 4).map(str_bytes))
                .with_client_id(str_bytes(m.client_id))
                .with_client_host(str_bytes(m.client_host));
            if stable {
                member.with_member_metadata(m.metadata).with_member_assignment(m.assignment)
            } else {
                member
            }
        })
        .collect();
    DescribedGroup::default()
        .with_group_state(str_bytes(view.state.name()))
        .with_protocol_type(str_bytes(view.protocol_type))
        .with_protocol_data(str_bytes(if stable { view.protocol_name } else { String::new() }))
        .with_members(members)
}

/// A group DescribeGroups does not describe: `Dead` and no error up to v5, GROUP_ID_NOT_FOUND
/// with `message` from v6.
fn not_classic(v: i16, message: String) -> DescribedGroup {
    let dead = DescribedGroup::default().with_group_state(str_bytes("Dead"));
    if v >= 6 {
        dead.with_error_code(error_code::GROUP_ID_NOT_FOUND).with_error_message(Some(str_bytes(message)))
    } else {
        dead
    }
}

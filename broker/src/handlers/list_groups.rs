//! ListGroups (key 16), v0–v4: the groups with members or committed offsets.
//!
//! Kafka's admin client asks every broker and merges the answers, each broker listing the
//! groups it coordinates. The leader coordinates them all (see find_coordinator), so it lists
//! every group and a follower answers an empty list, which keeps the merge free of duplicates.
//! With no leader known the answer is COORDINATOR_NOT_AVAILABLE, which the admin client
//! retries, rather than an empty list that would look complete. The leader lists from its
//! applied state even while its lease is being renewed: listing is not a write.
//! Groups with members are listed with the coordinator's state (see `coord::group`); a group known
//! only from committed offsets is a `consumer` group in state `Empty`. v4 (KIP-518) filters
//! by state, case-insensitively as Kafka does. v5 (KIP-848) reports each group's type, always
//! `classic` (onelog serves no other group protocol), and filters by type alike.

use std::collections::BTreeMap;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{ApiKey, GroupId, ListGroupsResponse, RequestKind, ResponseKind};

use super::util::str_bytes;
use super::HandlerResult;
use crate::ctx::{Ctx, SharedCtx};
use crate::security::authz::{op, rt, Subject};

pub const KEY: ApiKey = ApiKey::ListGroups;
pub const VERSIONS: (i16, i16) = (0, 5);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

const STATE_EMPTY: &str = "Empty";
/// KIP-848's name for the groups of the classic protocol, the only kind onelog serves.
const GROUP_TYPE_CLASSIC: &str = "classic";

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::ListGroups(body) = req.body else { anyhow::bail!("not a ListGroups body") };
    // KafkaApis: every group with DESCRIBE on the cluster, else those the principal may describe.
    let all_groups = ctx.authorizer.cluster_allowed(&who, op::DESCRIBE);
    let describable = |id: &str| all_groups || ctx.authorizer.allowed(&who, rt::GROUP, id, op::DESCRIBE);
    let leader = ctx.leader_id();
    if leader.is_none() {
        let response = ListGroupsResponse::default().with_error_code(error_code::COORDINATOR_NOT_AVAILABLE);
        return Ok(Some(ResponseKind::ListGroups(response)));
    }
    let wanted = |state: &str| {
        body.states_filter.is_empty() || body.states_filter.iter().any(|s| s.eq_ignore_ascii_case(state))
    };
    let type_wanted = body.types_filter.is_empty()
        || body.types_filter.iter().any(|t| t.eq_ignore_ascii_case(GROUP_TYPE_CLASSIC));
    let groups = if leader == Some(ctx.node_id) && type_wanted {
        listed(&ctx)
            .into_iter()
            .filter(|(id, state, _)| wanted(state) && describable(id))
            .map(|(id, state, protocol_type)| {
                let group = ListedGroup::default()
                    .with_group_id(GroupId(str_bytes(id)))
                    .with_protocol_type(str_bytes(protocol_type));
                let group =
                    if req.api_version >= 4 { group.with_group_state(str_bytes(state)) } else { group };
                if req.api_version >= 5 {
                    group.with_group_type(str_bytes(GROUP_TYPE_CLASSIC))
                } else {
                    group
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(Some(ResponseKind::ListGroups(
        ListGroupsResponse::default().with_error_code(error_code::NONE).with_groups(groups),
    )))
}

/// (group id, state, protocol type): the coordinator's groups, then those known only from
/// committed offsets, which are `Empty` with protocol type "consumer".
pub fn listed(ctx: &Ctx) -> Vec<(String, &'static str, String)> {
    let mut groups: BTreeMap<String, (&'static str, String)> = ctx
        .groups
        .list()
        .into_iter()
        // A group whose members all left keeps listing as the consumer group it was.
        .map(|(id, state, protocol_type)| {
            let protocol_type =
                if protocol_type.is_empty() { PROTOCOL_TYPE.to_string() } else { protocol_type };
            (id, (state.name(), protocol_type))
        })
        .collect();
    ctx.applied.read(|applied| {
        for id in applied.state.groups.groups.keys() {
            groups.entry(id.clone()).or_insert_with(|| (STATE_EMPTY, PROTOCOL_TYPE.to_string()));
        }
        groups.into_iter().map(|(id, (state, protocol_type))| (id, state, protocol_type)).collect()
    })
}

const PROTOCOL_TYPE: &str = "consumer";

//! ListGroups (key 16), v0–v4: the groups known from committed offsets.
//!
//! Kafka's admin client asks every broker and merges the answers, each broker listing the
//! groups it coordinates. The leader coordinates them all (see find_coordinator), so it lists
//! every group and a follower answers an empty list, which keeps the merge free of duplicates.
//! With no leader known the answer is COORDINATOR_NOT_AVAILABLE, which the admin client
//! retries, rather than an empty list that would look complete. The leader lists from its
//! applied state even while its lease is being renewed: listing is not a write.
//! Without membership every group is a simple `consumer` group in state `Empty`; v4
//! (KIP-518) filters by state, case-insensitively as Kafka does.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{ApiKey, GroupId, ListGroupsResponse, RequestKind, ResponseKind};

use super::util::str_bytes;
use super::HandlerResult;
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::ListGroups;
pub const VERSIONS: (i16, i16) = (0, 4);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

const PROTOCOL_TYPE: &str = "consumer";
const STATE_EMPTY: &str = "Empty";

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::ListGroups(body) = req.body else { anyhow::bail!("not a ListGroups body") };
    let wanted = body.states_filter.is_empty()
        || body.states_filter.iter().any(|s| s.eq_ignore_ascii_case(STATE_EMPTY));
    let leader = ctx.leader_id();
    if leader.is_none() {
        let response = ListGroupsResponse::default().with_error_code(error_code::COORDINATOR_NOT_AVAILABLE);
        return Ok(Some(ResponseKind::ListGroups(response)));
    }
    let groups = if leader == Some(ctx.node_id) && wanted {
        let applied = ctx.sm.applied.read().expect("applied lock");
        applied
            .state
            .groups
            .groups
            .keys()
            .map(|id| {
                let group = ListedGroup::default()
                    .with_group_id(GroupId(str_bytes(id.clone())))
                    .with_protocol_type(str_bytes(PROTOCOL_TYPE));
                if req.api_version >= 4 {
                    group.with_group_state(str_bytes(STATE_EMPTY))
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

//! A share group's state in Raft groups other than its own (docs/SCALING.md §2): its members
//! live in the group of its id, each share partition in the group of its topic, so the share
//! group's coordinator changes the partitions' state where they live. AlterShareGroupOffsets,
//! DeleteShareGroupOffsets and DeleteGroups first decide in the group's own log (emptiness,
//! the group's type), then ask each other Raft group's leader (`coord::xgroup::ask`, this node
//! included) to apply the same op to its share partitions, where the group has no members to
//! refuse it (`coord::xgroup::share_state` serves the ask). The steps are not one atomic change: a step that fails is answered as the
//! client's error, and the request is safe to repeat.

use kafka_compat::error_code;
use onelog_state::xgroup::GroupId;

use crate::coord::xgroup::ask;
use crate::ctx::Ctx;
use crate::raft::transport::xgroup::{ShareStateChange, XAnswer, XMessage, XRefusal};

/// Asks the leader of Raft group `group` to make `change`; the Kafka error code and message
/// if it was not made.
pub async fn change(
    ctx: &Ctx,
    group: GroupId,
    group_id: &str,
    change: ShareStateChange,
) -> Result<Vec<bool>, (i16, Option<String>)> {
    let message = XMessage::ShareState { group, group_id: group_id.to_string(), change };
    match ask(ctx, group, message).await {
        Ok(XAnswer::ShareState(flags)) => Ok(flags),
        Ok(other) => Err((error_code::UNKNOWN_SERVER_ERROR, Some(format!("answered {other:?}")))),
        Err(XRefusal::Refused { code, message }) => Err((code, message)),
        Err(e) => Err((error_code::COORDINATOR_NOT_AVAILABLE, Some(format!("Raft group {group}: {e}")))),
    }
}

/// After share group `group_id` was deleted in its own Raft group `own`: forgets its share
/// partitions in every other group. A group that cannot be reached keeps them, logged: a share
/// group created again under the id would start those partitions where the old one stood.
pub async fn forget_elsewhere(ctx: &Ctx, own: GroupId, group_id: &str) {
    let groups = ctx.config.settings.raft_groups.groups;
    for group in (0..groups).filter(|g| *g != own) {
        if let Err((code, message)) = change(ctx, group, group_id, ShareStateChange::DeleteAll).await {
            tracing::warn!(
                group_id,
                raft_group = group,
                code,
                ?message,
                "a deleted share group's state in another Raft group could not be forgotten"
            );
        }
    }
}

//! The `ShareState` message between Raft groups' leaders (docs/SCALING.md §2): a share group's
//! coordinator asks the leader of another Raft group to change the group's share partitions
//! held there (`coord::share::remote` asks). The change is the op the coordinator's own group
//! applied, here without members to check: the coordinator decided emptiness and type.

use onelog_state::command::{ShareDeleteOffsetsOp, ShareResetOffsetsOp};
use onelog_state::consumer_group::{Refusal, TopicId};
use onelog_state::xgroup::GroupId;

use crate::ctx::Ctx;
use crate::errors::ProposeError;
use crate::raft::transport::xgroup::{ShareStateChange, XAnswer, XRefusal, XResponse};

/// Makes `change` of share group `group_id` in Raft group `group`, which this node leads.
pub async fn serve(ctx: &Ctx, group: GroupId, group_id: &str, change: ShareStateChange) -> XResponse {
    let lane = ctx.lane(group).filter(|lane| lane.is_leader()).ok_or(XRefusal::NotLeader)?;
    let group_id = group_id.to_string();
    let answer = match change {
        ShareStateChange::Reset(partitions) => lane
            .proposer
            .propose(ShareResetOffsetsOp { group_id, partitions })
            .await
            .map(|r| r.map(|()| Vec::new())),
        ShareStateChange::Delete(topics) => {
            lane.proposer.propose(ShareDeleteOffsetsOp { group_id, topics }).await
        }
        ShareStateChange::DeleteAll => {
            let topics: Vec<TopicId> = lane.applied.state(|s| {
                s.share_states.groups.get(&group_id).map(|g| g.keys().copied().collect()).unwrap_or_default()
            });
            if topics.is_empty() {
                return Ok(XAnswer::ShareState(Vec::new()));
            }
            lane.proposer.propose(ShareDeleteOffsetsOp { group_id, topics }).await
        }
    };
    match answer {
        Ok(Ok(flags)) => Ok(XAnswer::ShareState(flags)),
        Ok(Err(Refusal { code, message })) => Err(XRefusal::Refused { code, message }),
        Err(ProposeError::NotLeader) => Err(XRefusal::NotLeader),
        Err(e) => Err(XRefusal::Unavailable(e.to_string())),
    }
}

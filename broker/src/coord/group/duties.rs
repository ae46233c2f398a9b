//! The group coordinator's clock on the leader: session expiry, and forgetting every group
//! when this node stops leading.

use std::sync::Arc;
use std::time::Duration;

use super::Coordinator;
use crate::coord::checks::submit;
use crate::leader::duties::DutyCtx;
use crate::limits;

pub fn start(ctx: Arc<DutyCtx>, groups: Coordinator) {
    tokio::spawn(expire_group_sessions(ctx, groups));
}

/// Removes members whose session passed without a heartbeat (the others rebalance), and
/// forgets every group when this node stops leading, so parked JoinGroup and SyncGroup
/// requests answer NOT_COORDINATOR and the clients find the new leader.
async fn expire_group_sessions(ctx: Arc<DutyCtx>, groups: Coordinator) {
    let mut tick = tokio::time::interval(Duration::from_millis(limits::GROUP_SESSION_CHECK_INTERVAL_MS));
    loop {
        tick.tick().await;
        // Not `is_leader`: a lease being renewed must not drop every group.
        if ctx.leadership.is_raft_leader() {
            groups.observe_term(ctx.leadership.term());
            groups.expire_sessions();
            for generation in groups.take_empty_generations() {
                // If it is lost with leadership, the next leader's adopted members expire
                // after their session instead.
                submit(&ctx, generation).await;
            }
        } else {
            groups.clear();
        }
    }
}

//! The consumer groups' timers on the leader: every `GROUP_SESSION_CHECK_INTERVAL_MS`, the
//! fences due (`ConsumerCoordinator::due`) are proposed, one op each.

use std::sync::Arc;
use std::time::Duration;

use super::ConsumerCoordinator;
use crate::leader::duties::DutyCtx;
use crate::limits;

pub fn start(ctx: Arc<DutyCtx>, coordinator: ConsumerCoordinator) {
    tokio::spawn(fence_expired_members(ctx, coordinator));
}

async fn fence_expired_members(ctx: Arc<DutyCtx>, coordinator: ConsumerCoordinator) {
    let mut tick = tokio::time::interval(Duration::from_millis(limits::GROUP_SESSION_CHECK_INTERVAL_MS));
    let settings = &ctx.config.settings.consumer_group;
    loop {
        tick.tick().await;
        if !ctx.leadership.is_raft_leader() {
            continue;
        }
        let term = ctx.leadership.term();
        let due = ctx.applied.state(|s| {
            // Each group's own `consumer.session.timeout.ms`, if it has one.
            let session_of = |group: &str| settings.for_group(s.configs.groups.get(group)).session_timeout_ms;
            coordinator.due(term, &s.consumer_groups, session_of)
        });
        for fence in due {
            tracing::info!(group = %fence.group_id, member = %fence.member_id, revocation = fence.expected_epoch.is_some(),
                "fencing a consumer group member whose deadline passed");
            // Best effort: lost with leadership, the next leader's timers fence it instead.
            if let Ok(pending) = ctx.proposer.submit(fence).await {
                tokio::spawn(pending);
            }
        }
    }
}

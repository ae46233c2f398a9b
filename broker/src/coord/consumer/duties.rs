//! The consumer groups' timers on the leader: every `GROUP_SESSION_CHECK_INTERVAL_MS`, the
//! fences due (`ConsumerCoordinator::due`) are proposed, one op each, and the members' liveness
//! the log does not know yet, one op for all.

use std::sync::Arc;

use super::{ConsumerCoordinator, GroupTimes};
use crate::coord::checks::{submit, LeaderChecks};
use crate::leader::duties::DutyCtx;

pub fn start(ctx: Arc<DutyCtx>, coordinator: ConsumerCoordinator) {
    tokio::spawn(fence_expired_members(ctx, coordinator));
}

async fn fence_expired_members(ctx: Arc<DutyCtx>, coordinator: ConsumerCoordinator) {
    let mut checks = LeaderChecks::start();
    let settings = &ctx.config.settings.consumer_group;
    loop {
        let (term, now_ms) = checks.next(&ctx).await;
        // Each group's own `consumer.*` configs, if it has them (group 0 holds them).
        let configs = ctx.metadata.state(|m| m.configs.groups.clone());
        let due = ctx.applied.state(|s| {
            let times = |group: &str| {
                let g = settings.for_group(configs.get(group));
                GroupTimes {
                    session_timeout_ms: g.session_timeout_ms,
                    heartbeat_interval_ms: g.heartbeat_interval_ms,
                }
            };
            coordinator.due(term, &s.consumer_groups, times, settings.settings.migration, now_ms)
        });
        if let Some(liveness) = due.liveness {
            submit(&ctx, liveness).await;
        }
        for fence in due.fences {
            tracing::info!(group = %fence.group_id, member = %fence.member_id, revocation = fence.expected_epoch.is_some(),
                "fencing a consumer group member whose deadline passed");
            submit(&ctx, fence).await;
        }
    }
}

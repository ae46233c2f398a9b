//! The consumer groups' timers on the leader: every `GROUP_SESSION_CHECK_INTERVAL_MS`, the
//! fences due (`ConsumerCoordinator::due`) are proposed, one op each, and the members' liveness
//! the log does not know yet, one op for all.

use std::sync::Arc;
use std::time::Duration;

use super::{ConsumerCoordinator, GroupTimes};
use crate::clock::wall_clock_ms;
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
        let now_ms = wall_clock_ms();
        let due = ctx.applied.state(|s| {
            // Each group's own `consumer.*` configs, if it has them.
            let times = |group: &str| {
                let g = settings.for_group(s.configs.groups.get(group));
                GroupTimes {
                    session_timeout_ms: g.session_timeout_ms,
                    heartbeat_interval_ms: g.heartbeat_interval_ms,
                }
            };
            coordinator.due(term, &s.consumer_groups, times, settings.settings.migration, now_ms)
        });
        if let Some(liveness) = due.liveness {
            // Best effort: what is not recorded is recorded by a later tick or leader.
            if let Ok(pending) = ctx.proposer.submit(liveness).await {
                tokio::spawn(pending);
            }
        }
        for fence in due.fences {
            tracing::info!(group = %fence.group_id, member = %fence.member_id, revocation = fence.expected_epoch.is_some(),
                "fencing a consumer group member whose deadline passed");
            // Best effort: lost with leadership, the next leader's timers fence it instead.
            if let Ok(pending) = ctx.proposer.submit(fence).await {
                tokio::spawn(pending);
            }
        }
    }
}

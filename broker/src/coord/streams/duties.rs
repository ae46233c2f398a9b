//! The Streams groups' timers on the leader: every `GROUP_SESSION_CHECK_INTERVAL_MS`, the
//! fences and target assignments due (`StreamsCoordinator::due`) are proposed, one op each,
//! and the members' liveness the log does not know yet, one op for all.

use std::sync::Arc;

use onelog_state::command::StreamsAssignOp;

use super::StreamsCoordinator;
use crate::coord::checks::{submit, LeaderChecks};
use crate::leader::duties::DutyCtx;

pub fn start(ctx: Arc<DutyCtx>, coordinator: StreamsCoordinator) {
    tokio::spawn(run(ctx, coordinator));
}

async fn run(ctx: Arc<DutyCtx>, coordinator: StreamsCoordinator) {
    let mut checks = LeaderChecks::start();
    let config = &ctx.config.settings.streams_group;
    loop {
        let (term, now_ms) = checks.next(&ctx).await;
        // Each group's own configs, if it has them (group 0 holds them).
        let configs = ctx.metadata.state(|m| m.configs.groups.clone());
        let (due, settings) = ctx.applied.state(|s| {
            let settings = |group: &str| config.for_group(configs.get(group));
            let due = coordinator.due(term, &s.streams_groups, settings, now_ms);
            let with: Vec<_> = due.assignments.iter().map(|g| (g.clone(), settings(g))).collect();
            (due, with)
        });
        if let Some(liveness) = due.liveness {
            submit(&ctx, liveness).await;
        }
        for fence in due.fences {
            tracing::info!(group = %fence.group_id, member = %fence.member_id, revocation = fence.expected_epoch.is_some(),
                "fencing a Streams group member whose deadline passed");
            submit(&ctx, fence).await;
        }
        for (group_id, settings) in settings {
            submit(&ctx, StreamsAssignOp { group_id, settings, now_ms }).await;
        }
    }
}

//! The Streams groups' timers on the leader: every `GROUP_SESSION_CHECK_INTERVAL_MS`, the
//! fences and target assignments due (`StreamsCoordinator::due`) are proposed, one op each,
//! and the members' liveness the log does not know yet, one op for all.

use std::sync::Arc;
use std::time::Duration;

use onelog_state::command::{StreamsAssignOp, TypedOp};

use super::StreamsCoordinator;
use crate::clock::wall_clock_ms;
use crate::leader::duties::DutyCtx;
use crate::limits;

pub fn start(ctx: Arc<DutyCtx>, coordinator: StreamsCoordinator) {
    tokio::spawn(run(ctx, coordinator));
}

async fn run(ctx: Arc<DutyCtx>, coordinator: StreamsCoordinator) {
    let mut tick = tokio::time::interval(Duration::from_millis(limits::GROUP_SESSION_CHECK_INTERVAL_MS));
    let config = &ctx.config.settings.streams_group;
    loop {
        tick.tick().await;
        if !ctx.leadership.is_raft_leader() {
            continue;
        }
        let term = ctx.leadership.term();
        let now_ms = wall_clock_ms();
        let (due, settings) = ctx.applied.state(|s| {
            let settings = |group: &str| config.for_group(s.configs.groups.get(group));
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

/// Best effort: lost with leadership, the next leader's timers do it instead.
async fn submit<T>(ctx: &DutyCtx, op: T)
where
    T: TypedOp + Send + 'static,
    T::Output: Send + 'static,
{
    if let Ok(pending) = ctx.proposer.submit(op).await {
        tokio::spawn(pending);
    }
}

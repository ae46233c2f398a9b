//! The share groups' timers on the leader: every `GROUP_SESSION_CHECK_INTERVAL_MS`, the member
//! fences due (`ShareCoordinator::due`), one op each; the members' liveness the log does not
//! know yet, one op for all; and one `ShareExpireLocks` op for the groups holding an
//! acquisition lock that passed. A lock ends at most one check interval after its deadline.

use std::sync::Arc;

use onelog_state::command::ShareExpireOp;

use super::ShareCoordinator;
use crate::coord::checks::{submit, LeaderChecks};
use crate::leader::duties::DutyCtx;

pub fn start(ctx: Arc<DutyCtx>, coordinator: ShareCoordinator) {
    tokio::spawn(run(ctx, coordinator));
}

async fn run(ctx: Arc<DutyCtx>, coordinator: ShareCoordinator) {
    let mut checks = LeaderChecks::start();
    loop {
        let (term, now_ms) = checks.next(&ctx).await;
        // Each group's own configs, if it has them (group 0 holds them).
        let configs = ctx.metadata.state(|m| m.configs.groups.clone());
        let (due, expire) = ctx.applied.state(|s| {
            let of = |group: &str| {
                let g = ctx.config.settings.share_group.for_group(configs.get(group));
                (g.settings, g.limits)
            };
            let due = coordinator.due(term, &s.share_groups, of, now_ms);
            let passed: Vec<_> = s
                .share_states
                .deadlines()
                .into_iter()
                .filter(|(_, deadline)| *deadline <= now_ms)
                .map(|(group, _)| (group.to_string(), of(group).1))
                .collect();
            (due, passed)
        });
        if let Some(liveness) = due.liveness {
            submit(&ctx, liveness).await;
        }
        for fence in due.fences {
            tracing::info!(group = %fence.group_id, member = %fence.member_id,
                "fencing a share group member whose session passed; its records are released");
            submit(&ctx, fence).await;
        }
        if !expire.is_empty() {
            submit(&ctx, ShareExpireOp { now_ms, groups: expire }).await;
        }
    }
}

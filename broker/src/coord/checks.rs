//! The clock of the group coordinators' duties on the leader (consumer, Streams and share
//! groups): a check every `GROUP_SESSION_CHECK_INTERVAL_MS`, taken only while this node is
//! the Raft leader, and the best-effort proposal of what a check finds due.

use std::time::Duration;

use onelog_state::command::TypedOp;
use tokio::time::Interval;

use crate::clock::wall_clock_ms;
use crate::leader::duties::DutyCtx;
use crate::limits;

/// The checks of one duty.
pub struct LeaderChecks(Interval);

impl LeaderChecks {
    /// Starts the clock: the first check is at once (needs the Tokio runtime).
    pub fn start() -> Self {
        Self(tokio::time::interval(Duration::from_millis(limits::GROUP_SESSION_CHECK_INTERVAL_MS)))
    }

    /// Waits for the next check this node takes as the Raft leader (not `is_leader`: a
    /// lease being renewed skips no check); returns the term and the wall clock then.
    pub async fn next(&mut self, ctx: &DutyCtx) -> (u64, i64) {
        loop {
            self.0.tick().await;
            if ctx.leadership.is_raft_leader() {
                return (ctx.leadership.term(), wall_clock_ms());
            }
        }
    }
}

/// Proposes what a check found due and lets its answer go. Best effort: lost with
/// leadership, the next leader's checks find it due again.
pub async fn submit<T>(ctx: &DutyCtx, op: T)
where
    T: TypedOp + Send + 'static,
    T::Output: Send + 'static,
{
    if let Ok(pending) = ctx.proposer.submit(op).await {
        tokio::spawn(pending);
    }
}

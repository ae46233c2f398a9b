//! The transaction coordinator's duties on the leader: make a new leader's takeover entry at
//! once, abort transactions whose `transaction.timeout.ms` passed, and forget transactional
//! ids idle for `transactional.id.expiration.ms` (KIP-98).
//!
//! Both are decided from the applied state and proposed as log entries; the entry's stamp is
//! the clock apply uses, so every replica aborts and forgets the same transactions at the same
//! point. A transaction's start is in the log (`TxnMeta::start_ms`), so the timeout holds
//! across leader changes: a transaction a new leader carries on still ends at its timeout.

use std::sync::Arc;
use std::time::Duration;

use onelog_state::command::ExpireTransactionalIdsOp;
use onelog_state::txns::{BrokerAbort, TxnState};

use super::TxnCoordinator;
use crate::clock::wall_clock_ms;
use crate::leader::duties::DutyCtx;

pub fn start(ctx: Arc<DutyCtx>, txns: Arc<TxnCoordinator>) {
    tokio::spawn(take_over(ctx.clone()));
    tokio::spawn(abort_timed_out(ctx.clone(), txns));
    tokio::spawn(expire_transactional_ids(ctx));
}

/// A new leader's takeover entry (its limits, see `leader::proposer`) goes in at once instead
/// of with the first client request.
async fn take_over(ctx: Arc<DutyCtx>) {
    let mut metrics = ctx.leadership.metrics();
    let mut done_term = 0;
    loop {
        let term = metrics.borrow().current_term;
        if term != done_term && ctx.leadership.is_raft_leader() {
            done_term = term;
            if let Err(e) = ctx.proposer.take_over().await {
                tracing::debug!(error = %e, "takeover proposal failed");
            }
        }
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

async fn abort_timed_out(ctx: Arc<DutyCtx>, txns: Arc<TxnCoordinator>) {
    let interval_ms = ctx.config.settings.txn_abort_timed_out_interval_ms;
    let mut tick = tokio::time::interval(Duration::from_millis(interval_ms));
    loop {
        tick.tick().await;
        if !ctx.is_leader() {
            continue;
        }
        let due = ctx.applied.state(|s| s.txns.timed_out(wall_clock_ms()));
        // Transactions that added partitions but wrote nothing live only in leader memory.
        txns.expire_memory();
        if due.is_empty() {
            continue;
        }
        tracing::info!(count = due.len(), "aborting timed-out transactions");
        if let Err(e) = txns.abort(BrokerAbort::Timeout, due).await {
            tracing::warn!(error = %e, "transaction timeout proposal failed");
        }
    }
}

async fn expire_transactional_ids(ctx: Arc<DutyCtx>) {
    let interval_ms = ctx.config.settings.txn_remove_expired_interval_ms;
    let mut tick = tokio::time::interval(Duration::from_millis(interval_ms));
    loop {
        tick.tick().await;
        if !ctx.is_leader() {
            continue;
        }
        let expiration_ms = ctx.config.settings.transactional_id_expiration_ms;
        let now = wall_clock_ms();
        let due = ctx.applied.state(|state| {
            state
                .txns
                .by_id
                .values()
                .filter(|m| m.state != TxnState::Ongoing && now - m.last_update_ms >= expiration_ms)
                .count()
        });
        if due == 0 {
            continue;
        }
        tracing::info!(count = due, "expiring idle transactional ids");
        if let Err(e) = ctx.proposer.propose(ExpireTransactionalIdsOp {}).await {
            tracing::warn!(error = %e, "transactional id expiry proposal failed");
        }
    }
}

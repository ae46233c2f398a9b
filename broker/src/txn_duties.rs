//! The leader's transaction duties: abort transactions whose `transaction.timeout.ms` passed,
//! and forget transactional ids idle for `transactional.id.expiration.ms` (KIP-98).
//!
//! Both are decided from the applied state and proposed as log entries carrying the leader's
//! clock, so every replica aborts and forgets the same transactions at the same point. The
//! abort of transactions open at a leader change is the proposer's (DESIGN §4).

use std::time::Duration;

use crate::ctx::SharedCtx;
use crate::handlers::txn_util::{now_ms, stamp};
use crate::state::command::{AbortTxnsOp, ExpireProducersOp, Op};
use crate::state::txns::{BrokerAbort, ProducerIdEpoch, TxnState};

pub fn start(ctx: SharedCtx) {
    tokio::spawn(take_over(ctx.clone()));
    tokio::spawn(abort_timed_out(ctx.clone()));
    tokio::spawn(expire_transactional_ids(ctx));
}

/// A new leader aborts the transactions open at the takeover before its first proposal (see
/// `proposer`); this makes that happen at once instead of at the first client request, so
/// read_committed consumers are not held at the old transactions' last stable offset.
async fn take_over(ctx: SharedCtx) {
    let mut metrics = ctx.raft.metrics();
    let mut done_term = 0;
    loop {
        let term = metrics.borrow().current_term;
        if term != done_term && ctx.leader_id() == Some(ctx.node_id) {
            done_term = term;
            let op = Op::AbortTxns(AbortTxnsOp {
                reason: BrokerAbort::Takeover,
                transactions: Vec::new(),
                stamp: stamp(&ctx),
            });
            if let Err(e) = ctx.proposer.propose_op(op).await {
                tracing::debug!(error = %e, "takeover proposal failed");
            }
        }
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

async fn abort_timed_out(ctx: SharedCtx) {
    let interval_ms =
        ctx.config().i64("transaction.abort.timed.out.transaction.cleanup.interval.ms").max(10) as u64;
    let mut tick = tokio::time::interval(Duration::from_millis(interval_ms));
    loop {
        tick.tick().await;
        if !ctx.is_leader() {
            continue;
        }
        let now = now_ms();
        let due = timed_out(&ctx, now);
        // Transactions that added partitions but wrote nothing live only in leader memory.
        ctx.txns.expire(ctx.term(), now, |id| {
            let applied = ctx.sm.applied.read().expect("applied lock");
            applied.state.txns.by_id.get(id).map(|m| i64::from(m.timeout_ms))
        });
        if due.is_empty() {
            continue;
        }
        tracing::info!(count = due.len(), "aborting timed-out transactions");
        let op = Op::AbortTxns(AbortTxnsOp {
            reason: BrokerAbort::Timeout,
            transactions: due,
            stamp: stamp(&ctx),
        });
        if let Err(e) = ctx.proposer.propose_op(op).await {
            tracing::warn!(error = %e, "transaction timeout proposal failed");
        }
    }
}

fn timed_out(ctx: &SharedCtx, now: i64) -> Vec<(String, ProducerIdEpoch)> {
    let applied = ctx.sm.applied.read().expect("applied lock");
    applied
        .state
        .txns
        .by_id
        .iter()
        .filter(|(_, m)| m.state == TxnState::Ongoing && now - m.start_ms > i64::from(m.timeout_ms))
        .map(|(id, m)| {
            (id.clone(), ProducerIdEpoch { producer_id: m.producer_id, producer_epoch: m.producer_epoch })
        })
        .collect()
}

async fn expire_transactional_ids(ctx: SharedCtx) {
    let interval_ms =
        ctx.config().i64("transaction.remove.expired.transaction.cleanup.interval.ms").max(100) as u64;
    let mut tick = tokio::time::interval(Duration::from_millis(interval_ms));
    loop {
        tick.tick().await;
        if !ctx.is_leader() {
            continue;
        }
        let expiration_ms = ctx.config().i64("transactional.id.expiration.ms");
        let now = now_ms();
        let due = {
            let applied = ctx.sm.applied.read().expect("applied lock");
            applied
                .state
                .txns
                .by_id
                .values()
                .filter(|m| m.state != TxnState::Ongoing && now - m.last_update_ms >= expiration_ms)
                .count()
        };
        if due == 0 {
            continue;
        }
        tracing::info!(count = due, "expiring idle transactional ids");
        let op = Op::ExpireTransactionalIds(ExpireProducersOp { now_ms: now, expiration_ms });
        if let Err(e) = ctx.proposer.propose_op(op).await {
            tracing::warn!(error = %e, "transactional id expiry proposal failed");
        }
    }
}

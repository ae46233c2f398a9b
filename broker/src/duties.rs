//! Background duties: naming a fresh cluster, byte-driven checkpoints, and retention.
//!
//! Retention is decided by the leader from its applied state and proposed as `TrimLog` ops,
//! so every replica deletes the same segments at the same point in the log (DESIGN §2).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::ctx::SharedCtx;
use crate::limits;
use crate::proposer::Proposal;
use crate::state::command::{ExpireProducersOp, Op, TrimLog};

/// Set before a graceful shutdown stops the Raft node, so that stop is not taken for a fault.
pub static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);

pub fn start(ctx: SharedCtx) {
    tokio::spawn(watch_raft(ctx.clone()));
    tokio::spawn(watch_pauses(ctx.clone()));
    tokio::spawn(name_cluster(ctx.clone()));
    tokio::spawn(checkpoint_by_bytes(ctx.clone()));
    tokio::spawn(retention(ctx.clone()));
    tokio::spawn(expire_producers(ctx.clone()));
    tokio::spawn(expire_group_sessions(ctx.clone()));
    crate::txn_duties::start(ctx);
}

/// The group coordinator's clock: removes members whose session passed without a heartbeat
/// (the others rebalance), and forgets every group when this node stops leading, so parked
/// JoinGroup and SyncGroup requests answer NOT_COORDINATOR and the clients find the new leader.
async fn expire_group_sessions(ctx: SharedCtx) {
    let mut tick = tokio::time::interval(Duration::from_millis(limits::GROUP_SESSION_CHECK_INTERVAL_MS));
    loop {
        tick.tick().await;
        // Not `is_leader`: a lease being renewed must not drop every group.
        if ctx.leader_id() == Some(ctx.node_id) {
            ctx.groups.observe_term(ctx.raft.metrics().borrow().current_term);
            ctx.groups.expire_sessions();
            for generation in ctx.groups.take_empty_generations() {
                // Best effort: if it is lost with leadership, the next leader's adopted
                // members expire after their session instead.
                let submitted = ctx.proposer.submit(Proposal::Op(Op::CompleteGeneration(generation))).await;
                if let Ok(pending) = submitted {
                    tokio::spawn(pending);
                }
            }
        } else {
            ctx.groups.clear();
        }
    }
}

/// Follows openraft's metrics: refreshes the leader lease, and stops the process when the
/// Raft node has stopped on a fatal error (a failed fsync, DESIGN §3) — a node that cannot
/// write must not keep answering.
async fn watch_raft(ctx: SharedCtx) {
    let mut metrics = ctx.raft.metrics();
    let mut was_member = false;
    loop {
        {
            let m = metrics.borrow_and_update();
            if let Err(fatal) = &m.running_state {
                if SHUTTING_DOWN.load(Ordering::SeqCst) {
                    return;
                }
                tracing::error!(error = %fatal, "Raft node stopped on a fatal error; exiting");
                std::process::exit(70);
            }
            if m.current_leader == Some(ctx.node_id) {
                ctx.lease.observe(m.millis_since_quorum_ack);
            }
            // Removed from the cluster (a membership that named this node no longer does): it
            // will hear from no leader again and could only mislead clients, so it stops, as a
            // decommissioned Kafka broker would. A joining node is not yet named (it may even
            // install a snapshot with an older membership first), hence "was a member".
            let named = m.membership_config.membership().get_node(&ctx.node_id).is_some();
            was_member |= named;
            if was_member && !named {
                tracing::warn!(node_id = ctx.node_id, "removed from the cluster membership; shutting down");
                SHUTTING_DOWN.store(true, Ordering::SeqCst);
                // Let responses in flight (e.g. the admin request that removed this node) go out.
                tokio::spawn(async {
                    tokio::time::sleep(Duration::from_millis(limits::REMOVED_NODE_EXIT_DELAY_MS)).await;
                    std::process::exit(0);
                });
                return;
            }
        }
        if metrics.changed().await.is_err() {
            if SHUTTING_DOWN.load(Ordering::SeqCst) {
                return;
            }
            tracing::error!("Raft node stopped; exiting");
            std::process::exit(70);
        }
    }
}

/// Detects that the process did not run for a while (SIGSTOP, a stalled VM, a starved
/// runtime) and makes the leader lease suspect until a quorum round confirms leadership
/// (see `ctx::LeaderLease`).
async fn watch_pauses(ctx: SharedCtx) {
    let period = Duration::from_millis(limits::PAUSE_CHECK_INTERVAL_MS);
    let mut last = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(period).await;
        let now = tokio::time::Instant::now();
        if now - last > period + Duration::from_millis(limits::PAUSE_GAP_MS) {
            tracing::warn!(gap_ms = (now - last).as_millis() as u64, "the process did not run for a while");
            ctx.lease.suspect();
        }
        last = now;
        ctx.lease.tick();
        if ctx.lease.is_suspect() {
            // ReadIndex: a heartbeat round to a quorum. A deposed leader fails it and steps down.
            let leader = ctx.raft.metrics().borrow().current_leader == Some(ctx.node_id);
            let confirmed = !leader
                || tokio::time::timeout(Duration::from_secs(1), ctx.raft.ensure_linearizable())
                    .await
                    .is_ok_and(|r| r.is_ok());
            if confirmed {
                ctx.lease.confirm();
            }
        }
    }
}

async fn name_cluster(ctx: SharedCtx) {
    let mut metrics = ctx.raft.metrics();
    loop {
        let unnamed = ctx.sm.applied.read().expect("applied lock").state.cluster_id.is_none();
        if !unnamed {
            return;
        }
        if ctx.is_leader() {
            let cluster_id = uuid::Uuid::new_v4().simple().to_string();
            if ctx.proposer.propose_op(Op::InitCluster { cluster_id }).await.is_ok() {
                continue;
            }
        }
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

/// openraft triggers checkpoints by entry count; large entries need a byte trigger too, or
/// the Raft log would grow without bound between checkpoints.
async fn checkpoint_by_bytes(ctx: SharedCtx) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        if ctx.sm.bytes_since_checkpoint.load(Ordering::Relaxed) >= limits::CHECKPOINT_INTERVAL_BYTES {
            ctx.sm.bytes_since_checkpoint.store(0, Ordering::Relaxed);
            if let Err(e) = ctx.raft.trigger().snapshot().await {
                tracing::warn!(error = %e, "could not trigger a checkpoint");
            }
        }
    }
}

async fn retention(ctx: SharedCtx) {
    let interval_ms = ctx.config().i64("log.retention.check.interval.ms").max(100) as u64;
    let mut tick = tokio::time::interval(Duration::from_millis(interval_ms));
    loop {
        tick.tick().await;
        if !ctx.is_leader() {
            continue;
        }
        let trims = retention_trims(&ctx);
        if !trims.is_empty() {
            tracing::info!(count = trims.len(), "retention: trimming partitions");
            if let Err(e) = ctx.proposer.propose_op(Op::TrimLog(trims)).await {
                tracing::warn!(error = %e, "retention proposal failed");
            }
        }
    }
}

fn topic_setting(
    ctx: &SharedCtx,
    configs: &std::collections::BTreeMap<String, String>,
    key: &str,
    broker_key: &str,
) -> i64 {
    configs.get(key).and_then(|v| v.parse().ok()).unwrap_or_else(|| ctx.config().i64(broker_key))
}

/// New log start offsets for partitions whose oldest sealed segments are past retention.
fn retention_trims(ctx: &SharedCtx) -> Vec<TrimLog> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let applied = ctx.sm.applied.read().expect("applied lock");
    let partitions = ctx.sm.partitions.read().expect("partitions lock");
    let mut trims = Vec::new();
    for (name, topic) in &applied.state.topics {
        let retention_ms = topic_setting(ctx, &topic.configs, "retention.ms", "log.retention.ms");
        let retention_bytes = topic_setting(ctx, &topic.configs, "retention.bytes", "log.retention.bytes");
        for (p, ps) in topic.partitions.iter().enumerate() {
            let Some(log) = partitions.get(&topic.topic_id, p as i32) else { continue };
            let log = log.lock().expect("partition lock");
            let mut remaining = log.total_bytes() as i64;
            let mut new_start = ps.log_start_offset;
            for (next_base, bytes, max_ts) in log.sealed_segments() {
                let too_old = retention_ms >= 0 && max_ts < now - retention_ms;
                let too_big = retention_bytes >= 0 && remaining > retention_bytes;
                if !(too_old || too_big) {
                    break;
                }
                remaining -= bytes as i64;
                new_start = next_base;
            }
            if new_start > ps.log_start_offset {
                trims.push(TrimLog { topic: name.clone(), partition: p as i32, log_start_offset: new_start });
            }
        }
    }
    trims
}

/// Kafka's `producer.id.expiration.ms` (KIP-98): the leader proposes forgetting producers idle
/// that long, with its clock and the setting in the op, so every replica forgets the same
/// producers at the same point in the log. Looks every `producer.id.expiration.check.interval.ms`.
async fn expire_producers(ctx: SharedCtx) {
    let interval_ms = ctx.config().i64("producer.id.expiration.check.interval.ms").max(100) as u64;
    let mut tick = tokio::time::interval(Duration::from_millis(interval_ms));
    loop {
        tick.tick().await;
        if !ctx.is_leader() {
            continue;
        }
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let expiration_ms = ctx.config().i64("producer.id.expiration.ms");
        let due =
            ctx.sm.applied.read().expect("applied lock").state.producers.expirable(now_ms, expiration_ms);
        if due == 0 {
            continue;
        }
        tracing::info!(count = due, "expiring idle producer ids");
        let op = Op::ExpireProducers(ExpireProducersOp { now_ms, expiration_ms });
        if let Err(e) = ctx.proposer.propose_op(op).await {
            tracing::warn!(error = %e, "producer id expiry proposal failed");
        }
    }
}

//! The leader's background duties: following the Raft node (lease, fatal stops, removal),
//! watching for pauses, naming a fresh cluster, byte-driven checkpoints, retention and
//! producer expiry. The coordinators' duties (group sessions, transaction timeouts) are theirs
//! (`coord::group::duties`, `coord::txn::duties`).
//!
//! Retention is decided by the leader from its applied state and proposed as `TrimLog` ops,
//! so every replica deletes the same segments at the same point in the log (DESIGN §2). The
//! duties may read the clock to decide what is due; what goes into the log carries the
//! proposer's stamp. They, node start-up and the admin API are the only holders of the Raft
//! handle.

use std::time::Duration;

use std::sync::Arc;

use onelog_state::command::{ExpireProducersOp, InitClusterOp, TrimLog, TrimLogOp};
use onelog_state::features::UpdateFeaturesOp;

use super::leadership::Leadership;
use super::proposer::Proposer;
use crate::clock::wall_clock_ms;
use crate::config::BrokerConfig;
use crate::fatal;
use crate::incident::Incident;
use crate::limits;
use crate::raft::applied::AppliedView;
use crate::raft::transport::features;
use crate::raft::transport::peers::Peers;
use crate::raft::transport::removal;
use crate::raft::Raft;

/// What a duty reads and proposes with; the coordinators' duties take it too.
pub struct DutyCtx {
    pub node_id: u64,
    pub leadership: Arc<Leadership>,
    pub applied: AppliedView,
    /// Group 0's applied state, where the cluster's metadata lives (topics, configs, ACLs):
    /// `applied` itself for group 0's duties.
    pub metadata: AppliedView,
    pub proposer: Proposer,
    pub config: Arc<BrokerConfig>,
    /// Woken when the leader tells this node it was removed (`raft::transport::removal`).
    pub removal: Arc<removal::RemovalNotice>,
    /// The node's Raft connections and identity, for asking members about their builds.
    pub peers: Arc<Peers>,
}

impl DutyCtx {
    /// Whether this node may act as leader now (see `Leadership::is_leader`).
    pub fn is_leader(&self) -> bool {
        self.leadership.is_leader()
    }
}

type SharedCtx = Arc<DutyCtx>;

pub fn start(ctx: SharedCtx, raft: Raft) {
    tokio::spawn(watch_raft(ctx.clone()));
    tokio::spawn(watch_pauses(ctx.clone(), raft.clone()));
    tokio::spawn(name_cluster(ctx.clone()));
    tokio::spawn(checkpoint_by_bytes(ctx.clone(), raft));
    tokio::spawn(retention(ctx.clone()));
    tokio::spawn(watch_member_builds(ctx.clone()));
    tokio::spawn(expire_producers(ctx));
}

/// The duties of a Raft group other than 0 (`leader::groups`), which has no members to judge,
/// no cluster to name and no removal to act on: its lease, pauses, byte-driven checkpoints,
/// retention and producer expiry. Its Raft stopping is `raft::groups`'s to act on.
pub fn start_for_group(ctx: SharedCtx, raft: Raft) {
    tokio::spawn(follow_lease(ctx.clone()));
    tokio::spawn(watch_pauses(ctx.clone(), raft.clone()));
    tokio::spawn(checkpoint_by_bytes(ctx.clone(), raft));
    tokio::spawn(retention(ctx.clone()));
    tokio::spawn(expire_producers(ctx));
}

/// Refreshes the leader lease from openraft's metrics, until the Raft node stops.
async fn follow_lease(ctx: SharedCtx) {
    let mut metrics = ctx.leadership.metrics();
    loop {
        refresh_lease(&ctx.leadership, &metrics.borrow_and_update(), ctx.node_id);
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

/// The lease's view of one metrics reading: whether this node leads, and its last quorum
/// acknowledgement.
fn refresh_lease(leadership: &Leadership, m: &crate::raft::Metrics, node_id: u64) {
    let leading = m.current_leader == Some(node_id) && m.state == openraft::ServerState::Leader;
    leadership.lease().set_leading(leading);
    if m.current_leader == Some(node_id) {
        leadership.lease().observe(m.millis_since_quorum_ack);
    }
}

/// Follows openraft's metrics: refreshes the leader lease, and stops the process when the
/// Raft node has stopped on a fatal error (a failed fsync, DESIGN §3) — a node that cannot
/// write must not keep answering.
async fn watch_raft(ctx: SharedCtx) {
    let leadership = &ctx.leadership;
    let mut metrics = leadership.metrics();
    let mut was_member = false;
    loop {
        {
            let m = metrics.borrow_and_update();
            if let Err(error) = &m.running_state {
                if leadership.is_shutting_down() {
                    return;
                }
                fatal::stop("Raft node stopped on a fatal error", error);
            }
            refresh_lease(leadership, &m, ctx.node_id);
            // Removed from the cluster (a membership that named this node no longer does): it
            // will hear from no leader again and could only mislead clients, so it stops, as a
            // decommissioned Kafka broker would. A joining node is not yet named (it may even
            // install a snapshot with an older membership first), hence "was a member".
            let named = m.membership_config.membership().get_node(&ctx.node_id).is_some();
            was_member |= named;
            if was_member && !named {
                return shut_down_removed(leadership, "removed from the cluster membership; shutting down");
            }
        }
        tokio::select! {
            changed = metrics.changed() => if changed.is_err() {
                if leadership.is_shutting_down() {
                    return;
                }
                fatal::stop("Raft node stopped", &"its metrics channel closed");
            },
            // The leader no longer replicates to a node it removed; it tells it instead.
            () = ctx.removal.noticed() => {
                return shut_down_removed(leadership, "the leader removed this node; shutting down");
            }
        }
    }
}

/// A removed node stops, as a decommissioned Kafka broker would: it will hear from no
/// leader again and could only mislead clients (and stand for election forever).
fn shut_down_removed(leadership: &Leadership, why: &'static str) {
    tracing::warn!(why);
    leadership.begin_shutdown();
    // Let responses in flight (e.g. the admin request that removed this node) go out.
    tokio::spawn(async {
        tokio::time::sleep(Duration::from_millis(limits::REMOVED_NODE_EXIT_DELAY_MS)).await;
        std::process::exit(0);
    });
}

/// Detects that the process did not run for a while (SIGSTOP, a stalled VM, a starved
/// runtime) and makes the leader lease suspect until a quorum round confirms leadership
/// (see `leader::lease::LeaderLease`).
async fn watch_pauses(ctx: SharedCtx, raft: Raft) {
    let lease = ctx.leadership.lease();
    let period = Duration::from_millis(limits::PAUSE_CHECK_INTERVAL_MS);
    let mut last = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(period).await;
        let now = tokio::time::Instant::now();
        if now - last > period + Duration::from_millis(limits::PAUSE_GAP_MS) {
            tracing::warn!(gap_ms = (now - last).as_millis() as u64, "the process did not run for a while");
            lease.suspect();
        }
        last = now;
        lease.tick();
        if lease.is_suspect() {
            // ReadIndex: a heartbeat round to a quorum. A deposed leader fails it and steps down.
            let leader = raft.metrics().borrow().current_leader == Some(ctx.node_id);
            let confirmed = !leader
                || tokio::time::timeout(Duration::from_secs(1), raft.ensure_linearizable())
                    .await
                    .is_ok_and(|r| r.is_ok());
            if confirmed {
                lease.confirm();
            }
        }
    }
}

async fn name_cluster(ctx: SharedCtx) {
    let mut metrics = ctx.leadership.metrics();
    loop {
        let unnamed = ctx.applied.state(|s| s.cluster_id.is_none());
        if !unnamed {
            return;
        }
        if ctx.is_leader() {
            let cluster_id = uuid::Uuid::new_v4().simple().to_string();
            if ctx.proposer.propose(InitClusterOp { cluster_id }).await.is_ok() {
                finalize_latest_levels(&ctx).await;
                continue;
            }
        }
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

/// A cluster this leader just named starts at the newest feature levels of its build (a
/// cluster rolled from an older release keeps its levels until an operator raises them with
/// UpdateFeatures). If the leader fails before this commits, the cluster stays at 0.1.0's
/// levels, which every build serves; `kafka-features.sh upgrade` raises them.
async fn finalize_latest_levels(ctx: &SharedCtx) {
    let updates = crate::upgrade::latest_levels();
    match ctx.proposer.propose(UpdateFeaturesOp { updates }).await {
        Ok(Ok(())) => {}
        Ok(Err(refusal)) => {
            tracing::warn!(message = %refusal.message, "a new cluster's feature levels refused")
        }
        Err(e) => tracing::warn!(error = %e, "a new cluster's feature levels did not commit"),
    }
}

/// Once the cluster recorded feature levels, a member whose build cannot serve them cannot read
/// the log either (it only logs that a frame did not decode): the leader asks every member
/// which levels its build supports, every `MEMBER_BUILDS_CHECK_MS`, and names a member that
/// cannot serve the finalized ones, at most once a minute.
async fn watch_member_builds(ctx: SharedCtx) {
    let too_old = Incident::new();
    let mut tick = tokio::time::interval(Duration::from_millis(limits::MEMBER_BUILDS_CHECK_MS));
    let ttl = Duration::from_millis(limits::FEATURES_QUERY_TIMEOUT_MS);
    loop {
        tick.tick().await;
        let (recorded, finalized, members) = ctx.applied.read(|a| {
            let members: Vec<(u64, String)> =
                a.membership.membership().nodes().map(|(id, addr)| (*id, addr.raft.clone())).collect();
            (a.state.features.is_recorded(), a.state.features.finalized(), members)
        });
        if !ctx.is_leader() || !recorded {
            continue;
        }
        for (id, addr) in members.into_iter().filter(|(id, _)| *id != ctx.node_id) {
            let problem = match features::ask(ctx.peers.identity(), id, &addr, ttl).await {
                Err(e) => Some(format!("it did not say which feature levels it supports ({e})")),
                Ok(supported) => finalized.iter().find_map(|(name, level)| {
                    let (min, max) = supported.range(name);
                    let release = &supported.release;
                    (!(min..=max).contains(level))
                        .then(|| format!("its build (onelog {release}) supports {name} {min}-{max} only"))
                }),
            };
            if let Some(problem) = problem {
                too_old.record(|tally| {
                    tracing::error!(node = id, ?finalized, suppressed = tally.suppressed,
                        "node {id} cannot serve the cluster's finalized feature levels: {problem}. Unless it is \
                         merely down, it runs a build too old for this cluster and cannot catch up; start a \
                         build that supports them on it (docs/OPERATIONS.md, Upgrades)")
                });
            }
        }
    }
}

/// openraft triggers checkpoints by entry count; large entries need a byte trigger too, or
/// the Raft log would grow without bound between checkpoints.
async fn checkpoint_by_bytes(ctx: SharedCtx, raft: Raft) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        if ctx.applied.take_bytes_since_checkpoint_if(limits::CHECKPOINT_INTERVAL_BYTES) {
            if let Err(e) = raft.trigger().snapshot().await {
                tracing::warn!(error = %e, "could not trigger a checkpoint");
            }
        }
    }
}

async fn retention(ctx: SharedCtx) {
    let interval_ms = ctx.config.settings.log_retention_check_interval_ms;
    let mut tick = tokio::time::interval(Duration::from_millis(interval_ms));
    loop {
        tick.tick().await;
        if !ctx.is_leader() {
            continue;
        }
        let trims = retention_trims(&ctx);
        if !trims.is_empty() {
            tracing::info!(count = trims.len(), "retention: trimming partitions");
            if let Err(e) = ctx.proposer.propose(TrimLogOp { trims }).await {
                tracing::warn!(error = %e, "retention proposal failed");
            }
        }
    }
}

/// New log start offsets for partitions whose oldest sealed segments are past retention.
fn retention_trims(ctx: &SharedCtx) -> Vec<TrimLog> {
    let now = wall_clock_ms();
    let settings = &ctx.config.settings;
    ctx.applied.with_partitions(|applied, partitions| {
        let mut trims = Vec::new();
        for (name, topic) in &applied.state.topics {
            // Dynamic: read every round, so an alteration counts from the next one.
            let config = &ctx.config;
            let retention_ms =
                config.topic_int(&applied.state, name, "retention.ms", settings.log_retention_ms);
            let retention_bytes =
                config.topic_int(&applied.state, name, "retention.bytes", settings.log_retention_bytes);
            for (p, ps) in topic.partitions.iter().enumerate() {
                let Some(log) = partitions.get(&topic.topic_id, p as i32) else { continue };
                let log = log.lock();
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
                    trims.push(TrimLog {
                        topic: name.clone(),
                        partition: p as i32,
                        log_start_offset: new_start,
                    });
                }
            }
        }
        trims
    })
}

/// Kafka's `producer.id.expiration.ms` (KIP-98): the leader proposes forgetting producers idle
/// that long; apply reads the entry's stamp and the replicated setting, so every replica
/// forgets the same producers at the same point in the log. Looks every `producer.id.expiration.check.interval.ms`.
async fn expire_producers(ctx: SharedCtx) {
    let interval_ms = ctx.config.settings.producer_id_expiration_check_interval_ms;
    let mut tick = tokio::time::interval(Duration::from_millis(interval_ms));
    loop {
        tick.tick().await;
        if !ctx.is_leader() {
            continue;
        }
        let expiration_ms = ctx.config.settings.producer_id_expiration_ms;
        let due = ctx.applied.state(|s| s.producers.expirable(wall_clock_ms(), expiration_ms));
        if due == 0 {
            continue;
        }
        tracing::info!(count = due, "expiring idle producer ids");
        if let Err(e) = ctx.proposer.propose(ExpireProducersOp {}).await {
            tracing::warn!(error = %e, "producer id expiry proposal failed");
        }
    }
}

//! Stopping one Raft group when the node stops (SIGTERM): hand its leadership over, write a
//! checkpoint of everything applied, stop its Raft. Every group of a node stops this way, at
//! the same time.

use std::time::Duration;

use super::transport::auth::Identity;
use super::transport::handover;
use super::{Metrics, Raft};
use crate::limits;

/// Hands group `group`'s leadership to its most caught-up voter (if this node leads it), writes
/// a checkpoint and stops its Raft. Kafka requests are refused by then (`Leadership`).
pub async fn stop_group(raft: Raft, identity: Identity, group: u32) {
    // The entries in flight replicate, then the most caught-up follower takes over.
    handover::hand_over(&raft, &identity, Duration::from_secs(2), group).await;
    checkpoint_before_exit(&raft, group).await;
    raft.shutdown().await.ok();
}

/// A checkpoint of everything applied, so the next start replays nothing it has already
/// applied (a restart after kill -9 replays everything since the last periodic checkpoint).
/// Waits at most `SHUTDOWN_CHECKPOINT_MS_MAX`; a node that cannot write one still stops.
async fn checkpoint_before_exit(raft: &Raft, group: u32) {
    let started = std::time::Instant::now();
    apply_what_the_log_holds(raft).await;
    let mut metrics = raft.metrics();
    let applied = metrics.borrow().last_applied.map(|l| l.index);
    if applied.is_none() || metrics.borrow().snapshot.map(|l| l.index) >= applied {
        tracing::info!(group, index = ?applied, "the checkpoint at shutdown is current");
        return;
    }
    if raft.trigger().snapshot().await.is_err() {
        return;
    }
    let wait = Duration::from_millis(limits::SHUTDOWN_CHECKPOINT_MS_MAX);
    let written = tokio::time::timeout(wait, async {
        loop {
            if metrics.borrow().snapshot.map(|l| l.index) >= applied {
                return true;
            }
            if metrics.changed().await.is_err() {
                return false;
            }
        }
    })
    .await;
    match written {
        Ok(true) => tracing::info!(
            group,
            index = ?applied,
            ms = started.elapsed().as_millis() as u64,
            "checkpoint written at shutdown"
        ),
        _ => {
            tracing::warn!(group, index = ?applied, "stopping without a checkpoint; the next start replays the log since the last one")
        }
    }
}

/// Waits (at most `SHUTDOWN_APPLY_WAIT_MS`) until everything the log holds is applied. A
/// follower learns that its last entries committed only with the leader's next AppendEntries
/// (held back up to `RAFT_COMMIT_NOTIFY_DELAY_US` when the leader has nothing else to send):
/// a checkpoint written before that would leave them to replay at the next start. The log's
/// end is read again at each change: entries still arriving (a follower that was behind, the
/// next leader's first entry) are waited for too.
/// Regression: `harness/tests/graceful_shutdown.rs` ("replayed 1 entries after SIGTERM").
async fn apply_what_the_log_holds(raft: &Raft) {
    let mut metrics = raft.metrics();
    let wait = Duration::from_millis(limits::SHUTDOWN_APPLY_WAIT_MS);
    let behind = |m: &Metrics| m.last_applied.map(|l| l.index) < m.last_log_index;
    let _ = tokio::time::timeout(wait, async {
        while behind(&metrics.borrow()) {
            if metrics.changed().await.is_err() {
                return;
            }
        }
    })
    .await;
}

//! The leader's notice to a node it removed from the membership.
//!
//! A removed node learns of its removal only if it sees the membership that drops it, and
//! once that membership is committed the leader no longer replicates to it: it often never
//! sees it, keeps believing it is a voter and stands for election forever (issue 14: "after
//! POST /members/remove the removed nodes stayed up as permanent candidates"). So after the
//! removal commits, the leader sends the node `Removed` over the Raft transport until it is
//! answered (for at most `REMOVAL_NOTICE_MS_MAX`). The node believes a notice only when it
//! names a membership newer than its own: a stale or misdirected notice changes nothing. It
//! then stops as `leader::duties::watch_raft` stops a node that saw its removal itself.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use super::auth::Identity;
use super::client::Peer;
use super::codec::{self, Kind};
use crate::limits;
use crate::raft::Raft;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Removed {
    /// The leader that committed the removal.
    pub from: u64,
    /// The node removed.
    pub target: u64,
    /// Log index of the committed membership that no longer names `target`.
    pub membership_index: u64,
}

/// One node's side of the notice: woken once a notice was believed; `watch_raft` waits on it.
/// Owned by the node (its Raft service and its duties share it), so that in a process running
/// several nodes a notice stops only the node it names.
#[derive(Debug, Default)]
pub struct RemovalNotice(Notify);

impl RemovalNotice {
    /// Resolves once this node was told, believably, that it was removed.
    pub async fn noticed(&self) {
        self.0.notified().await;
    }
}

/// Removed node's side: believes the notice only if it names a membership newer than the one
/// this node has, and this node; then wakes `notice`.
pub fn on_removed(raft: &Raft, notice: &RemovalNotice, req: Removed) -> Result<(), String> {
    let (id, own_index) = {
        let metrics = raft.metrics();
        let m = metrics.borrow();
        (m.id, m.membership_config.log_id().map_or(0, |l| l.index))
    };
    if req.target != id {
        return Err(format!("removal notice for node {}, this is node {id}", req.target));
    }
    if req.membership_index <= own_index {
        return Err(format!(
            "stale removal notice from node {}: membership at {} is not newer than ours at {own_index}",
            req.from, req.membership_index
        ));
    }
    tracing::warn!(
        from = req.from,
        membership_index = req.membership_index,
        "told by the leader that this node was removed"
    );
    notice.0.notify_one();
    Ok(())
}

/// Leader's side, after the removal of `target` committed at `membership_index`: tells it,
/// retrying until it answers or `REMOVAL_NOTICE_MS_MAX` has passed (it may be down or cut off;
/// a node that stays unreachable that long has to be stopped by its operator).
pub async fn notify_removed(identity: Identity, target: u64, addr: String, membership_index: u64) {
    let from = identity.node_id;
    let addr = crate::fault::raft_dial(target).unwrap_or(addr);
    let notice = Removed { from, target, membership_index };
    let deadline = tokio::time::Instant::now() + Duration::from_millis(limits::REMOVAL_NOTICE_MS_MAX);
    let retry = Duration::from_millis(limits::REMOVAL_NOTICE_RETRY_MS);
    let peer = Peer::new(identity, target, addr);
    loop {
        let request_id = peer.next_request_id();
        let Ok(frame) = codec::encode(Kind::Removed, request_id, &notice, limits::RAFT_FRAME_BYTES_MAX)
        else {
            return;
        };
        match peer.call(request_id, frame, retry).await {
            Ok(response) => {
                match response.decode_body::<Result<(), String>>() {
                    Ok(Ok(())) => tracing::info!(target, "removed node told of its removal"),
                    Ok(Err(refused)) => tracing::warn!(target, refused, "removed node refused the notice"),
                    Err(e) => tracing::warn!(target, error = %e, "bad answer to a removal notice"),
                }
                return;
            }
            Err(e) if tokio::time::Instant::now() + retry > deadline => {
                tracing::warn!(target, error = %e, "removed node not reachable; it must be stopped by hand");
                return;
            }
            Err(_) => tokio::time::sleep(retry).await,
        }
    }
}

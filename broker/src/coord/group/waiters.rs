//! The shell's parked requests: the oneshot sender of every JoinGroup and follower SyncGroup
//! that waits for a rebalance, keyed by (group id, member id).
//!
//! The state machine only knows that a member waits (`awaiting_join`, `awaiting_sync`); these
//! are the senders its `Reply`s are delivered on. One request of each kind waits per member: a
//! newer one replaces the older, whose dropped sender the handler answers NOT_COORDINATOR, as
//! happens to all of them when the coordinator forgets its groups.

use std::collections::BTreeMap;

use tokio::sync::oneshot;

use super::effects::Reply;
use super::messages::{JoinResult, SyncResult};

type Key = (String, String);

#[derive(Default)]
pub(super) struct Waiters {
    join: BTreeMap<Key, oneshot::Sender<JoinResult>>,
    sync: BTreeMap<Key, oneshot::Sender<SyncResult>>,
}

impl Waiters {
    pub(super) fn park_join(&mut self, group_id: &str, member_id: &str, tx: oneshot::Sender<JoinResult>) {
        self.join.insert((group_id.to_string(), member_id.to_string()), tx);
    }

    pub(super) fn park_sync(&mut self, group_id: &str, member_id: &str, tx: oneshot::Sender<SyncResult>) {
        self.sync.insert((group_id.to_string(), member_id.to_string()), tx);
    }

    /// Answers the parked requests, in the order the state machine settled them. A request
    /// whose handler went away (its receiver dropped) is ignored, as before.
    pub(super) fn deliver(&mut self, replies: Vec<Reply>) {
        for reply in replies {
            match reply {
                Reply::Join { group_id, member_id, result } => {
                    if let Some(tx) = self.join.remove(&(group_id, member_id)) {
                        let _ = tx.send(result);
                    }
                }
                Reply::Sync { group_id, member_id, result } => {
                    if let Some(tx) = self.sync.remove(&(group_id, member_id)) {
                        let _ = tx.send(result);
                    }
                }
            }
        }
    }

    /// Drops every sender: each parked request answers NOT_COORDINATOR.
    pub(super) fn clear(&mut self) {
        self.join.clear();
        self.sync.clear();
    }
}

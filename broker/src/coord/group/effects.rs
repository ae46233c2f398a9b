//! What a transition of the pure group state machine asks its shell to do.
//!
//! The state machine neither holds oneshot senders nor spawns timers: it records that a member
//! has a JoinGroup or SyncGroup parked (`Member::awaiting_join`, `awaiting_sync`) and, when a
//! transition settles such a request, it returns a [`Reply`] for it; when a rebalance must be
//! bounded in time, it returns a [`Timer`]. The shell (`mod.rs`) delivers the replies to the
//! senders it keeps per member, in order and under its lock (as the sends always happened),
//! and arms the timers once the lock is released.

use std::time::Duration;

use super::messages::{JoinResult, SyncResult};

/// The answer to a request a member has parked in the shell.
#[derive(Debug, Clone)]
pub(super) enum Reply {
    Join { group_id: String, member_id: String, result: JoinResult },
    Sync { group_id: String, member_id: String, result: SyncResult },
}

/// "Call `Groups::rebalance_timer_fired(group_id, seq, ..)` once `after` has passed." The
/// sequence number tells a stale timer from the group's current one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Timer {
    pub group_id: String,
    pub seq: u64,
    pub after: Duration,
}

/// Everything one transition asks for, in the order it happened.
#[derive(Debug, Default)]
pub(super) struct Effects {
    pub replies: Vec<Reply>,
    pub timers: Vec<Timer>,
}

/// The effects of one group's transition: names the group once so that the transitions,
/// which work on a `Group` that does not know its own id, speak only of members.
pub(super) struct Out<'a> {
    group_id: &'a str,
    effects: &'a mut Effects,
}

impl<'a> Out<'a> {
    pub(super) fn new(group_id: &'a str, effects: &'a mut Effects) -> Self {
        Out { group_id, effects }
    }

    pub(super) fn join(&mut self, member_id: &str, result: JoinResult) {
        let (group_id, member_id) = (self.group_id.to_string(), member_id.to_string());
        self.effects.replies.push(Reply::Join { group_id, member_id, result });
    }

    pub(super) fn sync(&mut self, member_id: &str, result: SyncResult) {
        let (group_id, member_id) = (self.group_id.to_string(), member_id.to_string());
        self.effects.replies.push(Reply::Sync { group_id, member_id, result });
    }

    pub(super) fn timer(&mut self, seq: u64, after: Duration) {
        self.effects.timers.push(Timer { group_id: self.group_id.to_string(), seq, after });
    }
}

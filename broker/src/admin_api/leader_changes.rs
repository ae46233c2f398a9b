//! The leader changes this node has seen, for the status page: a watcher on openraft's metrics
//! records each new (term, leader) with the wall-clock time, keeping the last
//! `LEADER_CHANGES_KEPT`. Process memory only: a restart starts the list afresh.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::clock::wall_clock_ms;
use crate::limits;
use crate::raft::Raft;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderChange {
    pub at_ms: i64,
    pub term: u64,
    /// `None`: the node knew no leader in this term (an election under way).
    pub leader: Option<u64>,
}

#[derive(Debug, Default)]
pub struct LeaderChanges {
    seen: Mutex<VecDeque<LeaderChange>>,
}

impl LeaderChanges {
    /// Most recent first.
    pub fn recent(&self) -> Vec<LeaderChange> {
        self.lock().iter().rev().copied().collect()
    }

    fn record(&self, change: LeaderChange) {
        let mut seen = self.lock();
        if seen.back().is_some_and(|last| (last.term, last.leader) == (change.term, change.leader)) {
            return;
        }
        if seen.len() == limits::LEADER_CHANGES_KEPT {
            seen.pop_front();
        }
        seen.push_back(change);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<LeaderChange>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Records every change of term or leader until the Raft node stops.
pub fn watch(raft: Raft) -> Arc<LeaderChanges> {
    let changes = Arc::new(LeaderChanges::default());
    let recorder = changes.clone();
    tokio::spawn(async move {
        let mut metrics = raft.metrics();
        drop(raft);
        loop {
            let (term, leader) = {
                let m = metrics.borrow_and_update();
                (m.current_term, m.current_leader)
            };
            recorder.record(LeaderChange { at_ms: wall_clock_ms(), term, leader });
            if metrics.changed().await.is_err() {
                return;
            }
        }
    });
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_changes_once_each_most_recent_first() {
        let changes = LeaderChanges::default();
        for term in 0..(limits::LEADER_CHANGES_KEPT as u64 + 5) {
            let change = LeaderChange { at_ms: term as i64, term, leader: Some(term % 3) };
            changes.record(change);
            changes.record(change); // metrics change for other reasons: not a leader change
        }
        let recent = changes.recent();
        assert_eq!(recent.len(), limits::LEADER_CHANGES_KEPT);
        assert_eq!(recent[0].term, limits::LEADER_CHANGES_KEPT as u64 + 4);
        assert!(recent.windows(2).all(|w| w[0].term == w[1].term + 1));
    }
}

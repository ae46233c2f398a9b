//! What every request handler can reach: the Raft node, the applied state, the proposer, and
//! this node's identity. Cloned cheaply (`Arc`) into each request's task.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::config::BrokerConfig;
use crate::proposer::Proposer;
use crate::raft::sm_store::SmShared;
use crate::raft::Raft;

pub struct Ctx {
    pub node_id: u64,
    pub raft: Raft,
    pub sm: Arc<SmShared>,
    pub proposer: Proposer,
    pub advertised_host: String,
    pub advertised_port: i32,
    pub lease: LeaderLease,
    /// Consumer-group membership, served while this node leads (see `groups`).
    pub groups: crate::groups::Coordinator,
    /// What open transactions added in this leader term (see `txn_memory`).
    pub txns: crate::txn_memory::TxnMemory,
}

/// When this node last heard from a quorum as leader. A leader that was paused (SIGSTOP, a
/// long GC-like stall) may not know it was deposed; it serves reads only while a quorum
/// acknowledged it within the lease, shorter than the election timeout, so it can never serve
/// a read older than what a newer leader has acknowledged.
///
/// openraft's metrics carry no timestamp, so a value published just before a pause and read
/// just after it would look fresh. A pause is visible as a scheduling gap, though: after one,
/// the lease is `suspect` and reads are refused until a quorum round (ReadIndex) confirms
/// this node still leads.
pub struct LeaderLease {
    start: Instant,
    /// Milliseconds since `start` of the last quorum acknowledgement; u64::MAX: never.
    acked_at_ms: AtomicU64,
    suspect: AtomicBool,
    /// Milliseconds since `start` of the pause watcher's last wake-up: if it is late, this
    /// process may just have been resumed and the watcher has not yet noticed.
    tick_ms: AtomicU64,
}

impl Default for LeaderLease {
    fn default() -> Self {
        LeaderLease {
            start: Instant::now(),
            acked_at_ms: AtomicU64::new(u64::MAX),
            suspect: AtomicBool::new(false),
            tick_ms: AtomicU64::new(0),
        }
    }
}

impl LeaderLease {
    /// Records openraft's `millis_since_quorum_ack` as seen now.
    pub fn observe(&self, millis_since_quorum_ack: Option<u64>) {
        let now = self.start.elapsed().as_millis() as u64;
        let at = millis_since_quorum_ack.map_or(u64::MAX, |ago| now.saturating_sub(ago));
        self.acked_at_ms.store(at, Ordering::Relaxed);
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// The pause watcher's heartbeat.
    pub fn tick(&self) {
        self.tick_ms.store(self.now_ms(), Ordering::SeqCst);
    }

    /// Called after the process did not run for a while (see `duties::watch_pauses`).
    pub fn suspect(&self) {
        self.suspect.store(true, Ordering::SeqCst);
    }

    pub fn is_suspect(&self) -> bool {
        self.suspect.load(Ordering::SeqCst)
    }

    /// Called once a quorum round confirmed leadership after the gap.
    pub fn confirm(&self) {
        self.suspect.store(false, Ordering::SeqCst);
    }

    pub fn is_valid(&self) -> bool {
        let watcher_late = self.now_ms().saturating_sub(self.tick_ms.load(Ordering::SeqCst))
            > crate::limits::PAUSE_CHECK_INTERVAL_MS + crate::limits::PAUSE_GAP_MS;
        if self.is_suspect() || watcher_late {
            return false;
        }
        let at = self.acked_at_ms.load(Ordering::Relaxed);
        at != u64::MAX
            && (self.start.elapsed().as_millis() as u64).saturating_sub(at) < crate::limits::LEADER_LEASE_MS
    }
}

/// A broker as Metadata and DescribeCluster list it.
#[derive(Debug, Clone)]
pub struct BrokerInfo {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
}

impl Ctx {
    pub fn config(&self) -> &BrokerConfig {
        &self.sm.config
    }

    /// The current Raft leader, which is the Kafka leader of every partition and the
    /// controller.
    pub fn leader_id(&self) -> Option<u64> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        match m.current_leader {
            // A leader that removed itself from the voters steps down to learner but hears of
            // no newer leader, so openraft keeps naming it; it must not tell clients it leads.
            Some(id) if id == self.node_id && m.state != openraft::ServerState::Leader => None,
            other => other,
        }
    }

    /// Whether this node may act as the Kafka leader now: it is the Raft leader, has applied
    /// an entry of its own term and, in a multi-voter cluster, holds a fresh lease (see
    /// [`LeaderLease`]).
    pub fn is_leader(&self) -> bool {
        // A leader handing over on shutdown stops taking requests first.
        if self.leader_id() != Some(self.node_id) || crate::duties::SHUTTING_DOWN.load(Ordering::Relaxed) {
            return false;
        }
        self.applied_own_term() && (self.voter_ids().len() <= 1 || self.lease.is_valid())
    }

    /// Raft §8: a new leader knows which entries of earlier terms are committed only once an
    /// entry of its own term (openraft's blank entry) is committed. Until it has also applied
    /// that entry its state may lag what the previous leader already served — a committed
    /// offset or high watermark read there could go backwards — so it serves nothing.
    fn applied_own_term(&self) -> bool {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        m.last_applied.is_some_and(|applied| applied.leader_id.term == m.current_term)
    }

    /// The current Raft term.
    pub fn term(&self) -> u64 {
        self.raft.metrics().borrow().current_term
    }

    /// The Raft term: every partition's leader epoch (DESIGN §6).
    pub fn leader_epoch(&self) -> i32 {
        self.raft.metrics().borrow().current_term as i32
    }

    /// Every voter and learner, with the Kafka address recorded in the membership.
    pub fn brokers(&self) -> Vec<BrokerInfo> {
        let applied = self.sm.applied.read().expect("applied lock");
        let mut brokers: Vec<BrokerInfo> = applied
            .membership
            .membership()
            .nodes()
            .filter(|(id, _)| **id != self.node_id)
            .filter_map(|(id, addr)| {
                let (host, port) = addr.kafka.rsplit_once(':')?;
                Some(BrokerInfo { node_id: *id as i32, host: host.to_string(), port: port.parse().ok()? })
            })
            .collect();
        // This node always reports its current address, even if restarted with a new one.
        let (host, port) = (self.advertised_host.clone(), self.advertised_port);
        brokers.push(BrokerInfo { node_id: self.node_id as i32, host, port });
        brokers.sort_by_key(|b| b.node_id);
        brokers
    }

    /// Voter ids: the replicas of every partition.
    pub fn voter_ids(&self) -> Vec<i32> {
        let applied = self.sm.applied.read().expect("applied lock");
        let mut ids: Vec<i32> = applied.membership.membership().voter_ids().map(|id| id as i32).collect();
        if ids.is_empty() {
            ids.push(self.node_id as i32);
        }
        ids
    }

    /// Voters whose replication is current: on the leader, those whose matched log index is
    /// within `ISR_LAG_ENTRIES_MAX` of its last index (itself always); a follower cannot
    /// tell, and reports every voter.
    pub fn in_sync_voter_ids(&self) -> Vec<i32> {
        let voters = self.voter_ids();
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        let (Some(replication), true) = (&m.replication, self.is_leader()) else { return voters };
        let last = m.last_log_index.unwrap_or(0);
        voters
            .into_iter()
            .filter(|id| {
                *id as u64 == self.node_id
                    || replication
                        .get(&(*id as u64))
                        .and_then(|matched| matched.map(|l| l.index))
                        .is_some_and(|index| index + crate::limits::ISR_LAG_ENTRIES_MAX >= last)
            })
            .collect()
    }

    pub fn cluster_id(&self) -> String {
        let applied = self.sm.applied.read().expect("applied lock");
        applied.state.cluster_id.clone().unwrap_or_else(|| "onelog".to_string())
    }
}

pub type SharedCtx = Arc<Ctx>;

//! The leadership view: who leads the one Raft group, whether this node may act as the Kafka
//! leader (and controller, and coordinator) now, its term, the voters, and the brokers
//! Metadata lists. It reads openraft's metrics and owns the read lease and the shutting-down
//! flag, so no other module needs the Raft handle to answer "am I the leader?".

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use openraft::RaftMetrics;
use tokio::sync::watch;

use super::lease::LeaderLease;
use crate::config::listeners::{parse_peer_kafka, Endpoint};
use crate::limits;
use crate::raft::applied::AppliedView;
use crate::raft::transport::peers::Peers;
use crate::raft::transport::transfer::LeaderTransfer;
use crate::raft::{NodeAddr, Raft};

/// A broker as Metadata and DescribeCluster list it.
#[derive(Debug, Clone)]
pub struct BrokerInfo {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
}

pub struct Leadership {
    node_id: u64,
    raft: Raft,
    applied: AppliedView,
    lease: LeaderLease,
    /// Set before a graceful shutdown (SIGTERM, removal) stops the Raft node: requests are
    /// refused from then on, and that stop is not taken for a fault.
    shutting_down: AtomicBool,
    /// This node's leadership transfer: writes pause while one is under way.
    transfer: Arc<LeaderTransfer>,
    /// This node's advertised listeners now (`advertised.listeners`).
    advertised: Vec<Endpoint>,
    /// The listener whose addresses [`Leadership::brokers`] gives: the one nodes reach each
    /// other's Kafka port on (`net::forward`).
    inter_broker: String,
    /// The node's Raft connections: check-quorum asks them which peers answered lately.
    peers: Arc<Peers>,
}

impl Leadership {
    /// `inter_broker`: the listener name [`Leadership::brokers`] answers for; `transfer`: the
    /// node's leadership-transfer state, which its Raft network and admin API share.
    pub fn new(
        node_id: u64,
        raft: Raft,
        applied: AppliedView,
        transfer: Arc<LeaderTransfer>,
        advertised: Vec<Endpoint>,
        inter_broker: &str,
        peers: Arc<Peers>,
    ) -> Self {
        Leadership {
            node_id,
            raft,
            applied,
            lease: LeaderLease::default(),
            shutting_down: AtomicBool::new(false),
            transfer,
            advertised,
            inter_broker: inter_broker.to_string(),
            peers,
        }
    }

    /// openraft's metrics, to wait for a change (a new term, leader or applied index).
    pub fn metrics(&self) -> watch::Receiver<RaftMetrics<u64, NodeAddr>> {
        self.raft.metrics()
    }

    pub fn lease(&self) -> &LeaderLease {
        &self.lease
    }

    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// The current Raft leader, which is the Kafka leader of every partition and the
    /// controller.
    pub fn leader_id(&self) -> Option<u64> {
        let (leader, is_raft_leader_state) = {
            let metrics = self.raft.metrics();
            let m = metrics.borrow();
            (m.current_leader, m.state == openraft::ServerState::Leader)
        };
        match leader {
            // A leader that removed itself from the voters steps down to learner but hears of
            // no newer leader, so openraft keeps naming it; it must not tell clients it leads.
            Some(id) if id == self.node_id && !is_raft_leader_state => None,
            Some(id) if id == self.node_id && !self.quorum_heard() => None,
            other => other,
        }
    }

    /// Check-quorum (Raft thesis §6.2): whether a quorum answered this leader within
    /// `CHECK_QUORUM_MS`. openraft 0.9 keeps an isolated leader a leader for as long as it
    /// hears of no newer term, and offers no way to step down short of a membership change;
    /// a leader past this bound therefore stops naming itself leader, controller and
    /// coordinator (and so stops taking writes), and clients look for the leader the majority
    /// elected. Regression (issue 14): an isolated old leader kept naming itself in Metadata,
    /// and a producer that could still reach it stalled for the whole 21.7 s partition.
    /// Unlike the read lease, this ignores the pause detector: a leader descheduled for
    /// ~100 ms with no election must keep taking writes.
    ///
    /// A quorum that answers late is slow, not lost (issue 31): besides openraft's clock
    /// (which counts an answer from its request's send time) and the election, a peer counts
    /// when any response of its arrived within the bound (`client::Heard`).
    fn quorum_heard(&self) -> bool {
        // The lease first: it is two atomics, `voter_ids` a lock and an allocation, and this
        // runs on every request that asks who leads.
        if self.lease.quorum_acked_within_ms(limits::CHECK_QUORUM_MS) {
            return true;
        }
        let voters = self.voter_ids();
        let window = Duration::from_millis(limits::CHECK_QUORUM_MS);
        let answered = voters
            .iter()
            .map(|id| *id as u64)
            .filter(|id| *id == self.node_id || self.peers.answered_within(*id, window))
            .count();
        voters.len() <= 1 || 2 * answered > voters.len()
    }

    /// Whether this node knows it is cut off from the quorum: a leader past check-quorum, or a
    /// candidate (it heard from no leader for an election timeout). Its Metadata then names
    /// no leader, and a client that is connected to it alone keeps asking it (librdkafka
    /// refreshes metadata and looks up coordinators on a connected broker): the listener
    /// closes a client connection after answering its Metadata or FindCoordinator meanwhile, so clients reconnect to other brokers and find the
    /// leader the majority elected. Regression (issue 14): a producer that could reach the
    /// isolated old leader stalled for the whole partition.
    pub fn is_cut_off(&self) -> bool {
        let (state, leader) = {
            let metrics = self.raft.metrics();
            let m = metrics.borrow();
            (m.state, m.current_leader)
        };
        match state {
            openraft::ServerState::Candidate => true,
            openraft::ServerState::Leader => leader == Some(self.node_id) && !self.quorum_heard(),
            _ => false,
        }
    }

    /// Whether openraft names this node leader (it may not yet serve: see [`Self::is_leader`]).
    pub fn is_raft_leader(&self) -> bool {
        self.leader_id() == Some(self.node_id)
    }

    /// Whether this node may serve what reads its state as the Kafka leader now (Fetch,
    /// ListOffsets, OffsetFetch, group membership, transactional writes answered before they
    /// commit): it may propose (see [`Self::may_propose`]) and, in a multi-voter cluster,
    /// holds a fresh lease (see [`LeaderLease`]), so no newer leader can have served a newer
    /// state.
    pub fn is_leader(&self) -> bool {
        self.may_propose() && (self.voter_ids().len() <= 1 || self.lease.is_valid())
    }

    /// [`Self::is_leader`] for a read, confirmed by a quorum round when the lease has lapsed
    /// without an election (a leader descheduled for a moment on a busy machine): one ReadIndex
    /// (`ensure_linearizable`, bounded by `READ_CONFIRM_TIMEOUT_MS`), after which what this node
    /// reads is at least as new as anything a leader acknowledged. A deposed leader fails the
    /// round. Without it, reads were refused NOT_LEADER_OR_FOLLOWER under load although no
    /// election happened (issue 14).
    pub async fn serves_reads(&self) -> bool {
        if self.is_leader() {
            return true;
        }
        if !self.may_propose() {
            return false;
        }
        let round = self.raft.ensure_linearizable();
        let confirmed = tokio::time::timeout(Duration::from_millis(limits::READ_CONFIRM_TIMEOUT_MS), round)
            .await
            .is_ok_and(|r| r.is_ok());
        confirmed && self.may_propose()
    }

    /// Whether this node may take a write whose answer comes from its committed entry
    /// (Produce outside a transaction, OffsetCommit, the controller's and admin writes): it is
    /// the Raft leader, not shutting down, and has applied an entry of its own term. The read
    /// lease is not needed: Raft orders the writes, and a deposed leader's entry never commits,
    /// so its caller hears an error, never a false success. Requiring the lease refused writes
    /// with NOT_LEADER_OR_FOLLOWER whenever the leader was descheduled for ~100 ms on a busy
    /// machine, with no election, and clients that retried stored records out of order
    /// (issue 14).
    pub fn may_propose(&self) -> bool {
        // A leader handing over on shutdown, or transferring leadership, stops taking
        // requests first.
        self.is_raft_leader()
            && !self.is_shutting_down()
            && !self.transfer.writes_paused()
            && self.applied_own_term()
    }

    /// See [`crate::raft::leads_with_own_term_applied`]: before it, a committed offset or high
    /// watermark read here could go backwards, so this node serves nothing.
    fn applied_own_term(&self) -> bool {
        crate::raft::leads_with_own_term_applied(&self.raft.metrics().borrow())
    }

    /// The leader a NOT_LEADER_OR_FOLLOWER answer names, and its epoch: the term it leads in
    /// (at least the applied term), or (-1, -1) when no leader is known. Not `leader_epoch`:
    /// a node that just restarted knows the new leader (the committed vote) before it applied
    /// the new term's first entry, and a Java share consumer moves to a hinted leader only at a
    /// newer epoch than the one it holds (KIP-951), so the applied term kept it asking here.
    pub fn leader_hint(&self) -> (i32, i32) {
        match self.leader_id() {
            Some(id) => (id as i32, (self.term() as i32).max(self.leader_epoch())),
            None => (-1, -1),
        }
    }

    /// The current Raft term.
    pub fn term(&self) -> u64 {
        self.raft.metrics().borrow().current_term
    }

    /// Every partition's leader epoch (DESIGN §6): the term of the last entry this node
    /// applied. Only an elected leader's entries carry a term, so the epoch rises once a new
    /// leader's first entry is committed, as Kafka's rises with each leader election, and a
    /// leader serves only once that entry is applied (`leads_with_own_term_applied`), where
    /// this equals its term. Regression: it was the node's own current term, which a
    /// candidate raises with every vote it calls; a node cut off from the quorum handed its
    /// clients epochs no leader had, and a Java client keeps the highest epoch it has seen and
    /// ignores metadata of a lower one (KIP-320), so it waited for a leader that could not
    /// exist until a new election passed that term.
    pub fn leader_epoch(&self) -> i32 {
        let applied = self.raft.metrics().borrow().last_applied;
        applied.map_or(0, |log_id| log_id.leader_id.term) as i32
    }

    /// Every voter and learner, with its Kafka address on the inter-broker listener.
    pub fn brokers(&self) -> Vec<BrokerInfo> {
        self.brokers_on(Some(&self.inter_broker))
    }

    /// Every voter and learner with an address on `listener` (the listener a request came
    /// in on; `None`: the inter-broker one), from the addresses recorded in the membership.
    /// A broker without that listener is left out, as Kafka does.
    pub fn brokers_on(&self, listener: Option<&str>) -> Vec<BrokerInfo> {
        let listener = listener.unwrap_or(&self.inter_broker);
        let on_listener = |endpoints: &[Endpoint]| {
            let found = endpoints.iter().find(|e| e.name.eq_ignore_ascii_case(listener))?;
            Some((found.host.clone(), i32::from(found.port)))
        };
        let mut brokers: Vec<BrokerInfo> = self.applied.read(|applied| {
            applied
                .membership
                .membership()
                .nodes()
                .filter(|(id, _)| **id != self.node_id)
                .filter_map(|(id, addr)| {
                    let (host, port) = on_listener(&parse_peer_kafka(&addr.kafka))?;
                    Some(BrokerInfo { node_id: *id as i32, host, port })
                })
                .collect()
        });
        // This node always reports its current addresses, even if restarted with new ones.
        if let Some((host, port)) = on_listener(&self.advertised) {
            brokers.push(BrokerInfo { node_id: self.node_id as i32, host, port });
        }
        brokers.sort_by_key(|b| b.node_id);
        brokers
    }

    /// Voter ids: the replicas of every partition.
    pub fn voter_ids(&self) -> Vec<i32> {
        let mut ids: Vec<i32> =
            self.applied.read(|a| a.membership.membership().voter_ids().map(|id| id as i32).collect());
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
        let leader = self.is_leader();
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        let (Some(replication), true) = (&m.replication, leader) else { return voters };
        let last = m.last_log_index.unwrap_or(0);
        voters
            .into_iter()
            .filter(|id| {
                *id as u64 == self.node_id
                    || replication
                        .get(&(*id as u64))
                        .and_then(|matched| matched.map(|l| l.index))
                        .is_some_and(|index| index + limits::ISR_LAG_ENTRIES_MAX >= last)
            })
            .collect()
    }

    pub fn cluster_id(&self) -> String {
        self.applied.state(|state| state.cluster_id.clone().unwrap_or_else(|| "onelog".to_string()))
    }
}

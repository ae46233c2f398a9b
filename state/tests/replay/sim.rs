//! The seeded generator: its clients, the leader's clock, terms and limits, and `generate`,
//! which fills one entry's proposals from a mix of requests and duties.
//!
//! The requests themselves are in `producers` and `duties`; what comes back is read in
//! `answers`. Everything random comes from the one `StdRng`, so a seed replays exactly.

use std::collections::BTreeMap;

use bytes::Bytes;
use onelog_state::command::{
    ExpireProducersOp, ExpireTransactionalIdsOp, InitClusterOp, LeaderStamp, Op, ReplicatedLimits,
};
use onelog_state::entry::{EntryOptions, Proposal};
use onelog_state::BrokerState;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::batches::encode_batch;
use crate::clients::{IdemClient, Queue, Sent, TxnClient};
use crate::stats::Stats;
use crate::{IDEMPOTENT_CLIENTS_MAX, REPLICAS, TOPICS, TRANSACTIONAL_IDS};

pub(crate) struct Sim {
    pub(crate) seed: u64,
    pub(crate) rng: StdRng,
    pub(crate) now_ms: i64,
    pub(crate) term: i32,
    pub(crate) leader: usize,
    pub(crate) limits: ReplicatedLimits,
    pub(crate) options: EntryOptions,
    pub(crate) topic_serial: u64,
    tag: u64,
    /// The clock moved far since the last entry: the leader's periodic duties are due.
    jumped: bool,
    pub(crate) idem: Vec<IdemClient>,
    pub(crate) txn: Vec<TxnClient>,
    pub(crate) stats: Stats,
    /// Every leader answers writes of an open transaction once stamped (`Fault::AckTxnAtStamping`).
    pub(crate) leader_bug: bool,
    /// Entries are in flight: their answers still name clients by index, so none is retired.
    pub(crate) answers_pending: bool,
}

impl Sim {
    pub(crate) fn new(seed: u64) -> Sim {
        let mut rng = StdRng::seed_from_u64(seed);
        let txn = (0..TRANSACTIONAL_IDS)
            .map(|i| TxnClient {
                tid: format!("tx{i}"),
                v2: rng.gen_bool(0.5),
                timeout_ms: [2_000, 10_000, 30_000][i % 3],
                id: None,
                zombie: None,
                fenced_at: 0,
                next_seq: BTreeMap::new(),
                in_txn: false,
                lost_ack: false,
                needs_reinit: false,
                must_abort: false,
                last_end: None,
            })
            .collect();
        Sim {
            seed,
            rng,
            now_ms: 1_700_000_000_000,
            term: 0,
            leader: 0,
            limits: ReplicatedLimits::default(),
            options: EntryOptions::default(),
            topic_serial: 0,
            tag: 0,
            jumped: false,
            idem: Vec::new(),
            txn,
            stats: Stats::default(),
            leader_bug: false,
            answers_pending: false,
        }
    }

    pub(crate) fn stamp(&self) -> LeaderStamp {
        LeaderStamp { now_ms: self.now_ms, term: self.term }
    }

    /// A new leader: another replica perhaps, its own limits and entry options.
    pub(crate) fn new_term(&mut self) {
        self.term += self.rng.gen_range(1..=2);
        self.leader = self.rng.gen_range(0..REPLICAS);
        if self.term <= 2 || self.rng.gen_bool(0.6) {
            let previous = self.limits;
            while self.limits == previous {
                self.limits = limits_preset(&mut self.rng);
            }
        }
        self.options = EntryOptions { log_append_time_default: self.rng.gen_bool(0.25), node_id: 1 };
        self.stats.terms += 1;
    }

    /// The leader's clock: mostly a few ms per entry, sometimes long enough for transaction
    /// timeouts, rarely long enough for producer and transactional-id expiry.
    pub(crate) fn advance_clock(&mut self) {
        let longest = self.limits.producer_id_expiration_ms.max(self.limits.transactional_id_expiration_ms);
        let elapsed = match self.rng.gen_range(0..1000) {
            // Long enough, about half the time, for idle ids to expire.
            0..=8 => self.rng.gen_range(longest / 2..longest * 3 / 2),
            9..=28 => self.rng.gen_range(20_000..120_000),
            29..=88 => self.rng.gen_range(1_000..5_000),
            _ => self.rng.gen_range(0..30),
        };
        self.now_ms += elapsed;
        self.jumped = elapsed >= 20_000;
    }

    pub(crate) fn generate(&mut self, state: &BrokerState, step: u64) -> (Vec<Proposal>, Vec<Sent>) {
        let mut q = Queue::default();
        if self.idem.len() > IDEMPOTENT_CLIENTS_MAX && !self.answers_pending {
            self.idem.remove(0);
        }
        if state.cluster_id.is_none() {
            q.duty(Op::InitCluster(InitClusterOp { cluster_id: format!("replay-{}", self.seed) }));
        }
        if state.topics.len() < 3 {
            self.create_topics(&mut q);
        }
        // Requests queued while the previous entry was in flight: a few, or many under load.
        let actions = match self.rng.gen_range(0..10) {
            0..=2 => self.rng.gen_range(1..=3),
            3..=7 => self.rng.gen_range(4..=9),
            _ => self.rng.gen_range(10..=20),
        };
        // After a long pause the leader's periodic duties (timeouts, expiry) come due together,
        // somewhere among the queued requests.
        let duties_at = if self.jumped { Some(self.rng.gen_range(0..=actions)) } else { None };
        for action in 0..=actions {
            if duties_at == Some(action) {
                self.abort_timed_out(state, &mut q);
                if self.rng.gen_bool(0.6) {
                    q.duty(Op::ExpireProducers(ExpireProducersOp {}));
                }
                if self.rng.gen_bool(0.6) {
                    q.duty(Op::ExpireTransactionalIds(ExpireTransactionalIdsOp {}));
                }
            }
            if action == actions {
                break;
            }
            match self.rng.gen_range(0..1000) {
                0..=119 => self.plain_produce(state, &mut q),
                120..=349 => self.idempotent_produce(state, &mut q),
                350..=379 => self.init_idempotent(&mut q),
                380..=779 => self.txn_action(state, &mut q),
                780..=799 => self.zombie_action(state, &mut q, step),
                800..=929 => self.group_action(state, &mut q),
                930..=949 => self.trim(state, &mut q),
                950..=969 => self.abort_timed_out(state, &mut q),
                970..=976 => q.duty(Op::ExpireProducers(ExpireProducersOp {})),
                977..=983 => q.duty(Op::ExpireTransactionalIds(ExpireTransactionalIdsOp {})),
                984..=988 => self.admin_abort(state, &mut q),
                989..=993 => self.create_topics(&mut q),
                994..=996 => self.create_partitions(state, &mut q),
                _ => self.delete_topic(state, &mut q),
            }
        }
        (q.proposals, q.sent)
    }

    fn next_tag(&mut self) -> u64 {
        self.tag += 1;
        self.tag
    }

    /// A partition of an existing topic; rarely one past the end or of a missing topic.
    pub(crate) fn pick_partition(&mut self, state: &BrokerState) -> Option<(String, i32)> {
        if state.topics.is_empty() {
            return None;
        }
        if self.rng.gen_bool(0.005) {
            return Some((TOPICS[self.rng.gen_range(0..TOPICS.len())].to_string(), 0));
        }
        let (name, topic) = state.topics.iter().nth(self.rng.gen_range(0..state.topics.len()))?;
        let count = topic.partitions.len() as i32;
        let partition = if self.rng.gen_bool(0.01) { count } else { self.rng.gen_range(0..count) };
        Some((name.clone(), partition))
    }

    pub(crate) fn pick_partitions(&mut self, state: &BrokerState, max: usize) -> Vec<(String, i32)> {
        let want = self.rng.gen_range(1..=max);
        let mut picked: Vec<(String, i32)> = Vec::new();
        for _ in 0..want {
            if let Some(p) = self.pick_partition(state) {
                if !picked.contains(&p) {
                    picked.push(p);
                }
            }
        }
        picked
    }

    pub(crate) fn batch(
        &mut self,
        records: i32,
        producer: Option<(i64, i16, i32)>,
        transactional: bool,
    ) -> Bytes {
        let tag = self.next_tag();
        let timestamp = self.now_ms - self.rng.gen_range(0..2_000);
        encode_batch(records, producer, transactional, timestamp, tag)
    }
}

fn limits_preset(rng: &mut StdRng) -> ReplicatedLimits {
    match rng.gen_range(0..4) {
        0 => ReplicatedLimits {
            producer_ids_live_max: 16,
            producer_id_eviction_idle_ms_min: 60_000,
            transactional_ids_max: 10,
            offset_metadata_bytes_max: 24,
            txn_timeout_ms_max: 60_000,
            producer_id_expiration_ms: 600_000,
            transactional_id_expiration_ms: 1_200_000,
        },
        1 => ReplicatedLimits {
            producer_ids_live_max: 40,
            producer_id_eviction_idle_ms_min: 300_000,
            transactional_ids_max: 6,
            offset_metadata_bytes_max: 64,
            txn_timeout_ms_max: 30_000,
            producer_id_expiration_ms: 300_000,
            transactional_id_expiration_ms: 900_000,
        },
        2 => ReplicatedLimits {
            producer_ids_live_max: 12,
            producer_id_eviction_idle_ms_min: 30_000,
            transactional_ids_max: 8,
            offset_metadata_bytes_max: 16,
            txn_timeout_ms_max: 20_000,
            producer_id_expiration_ms: 900_000,
            transactional_id_expiration_ms: 600_000,
        },
        _ => ReplicatedLimits {
            offset_metadata_bytes_max: 32,
            txn_timeout_ms_max: 45_000,
            producer_id_expiration_ms: 1_800_000,
            transactional_id_expiration_ms: 2_400_000,
            ..Default::default()
        },
    }
}

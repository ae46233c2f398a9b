//! The simulated transactional producers: each has a transactional id placed in one group,
//! speaks transactions v1 or v2, and writes each transaction to one to three partitions spread
//! over the groups. A write or EndTxn that gets no answer in time, or an error, makes it bump
//! its epoch with InitProducerId naming itself (KIP-360), which aborts the transaction; a
//! fenced one starts over as a new instance. Now and then a client crashes and its successor
//! fences it: its writes still in the network are the zombies the fence must refuse.

use std::collections::{BTreeMap, BTreeSet};

use onelog_state::command::OpResult;
use onelog_state::txns::{ProducerIdEpoch, TxnError};
use onelog_state::xgroup::GroupId;
use rand::rngs::StdRng;
use rand::Rng;

use crate::net::{Msg, Write, WriteId};
use crate::world::{topics_of, PARTITIONS};

/// Steps a client waits for an answer before giving up on it.
const ANSWER_TIMEOUT: i64 = 60;
/// The clients' `transaction.timeout.ms`, in steps (the leader clock is the step).
pub(crate) const TXN_TIMEOUT: i32 = 400;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Init {
        expected: Option<ProducerIdEpoch>,
    },
    Idle,
    /// Transactions v1: AddPartitionsToTxn sent, the writes wait for its answer.
    Adding,
    Writing,
    Ending {
        commit: bool,
    },
}

/// The client's open transaction.
#[derive(Debug, Default)]
pub(crate) struct Txn {
    pub writes: BTreeSet<WriteId>,
    pub acked: BTreeSet<WriteId>,
    /// Writes not sent yet (a v1 client's, until its partitions are added).
    pub unsent: Vec<(GroupId, Write)>,
}

pub(crate) struct Client {
    pub index: usize,
    pub transactional_id: String,
    pub coordinator: GroupId,
    pub v2: bool,
    pub producer: Option<ProducerIdEpoch>,
    pub phase: Phase,
    /// Moves at every request, so that a late answer to an older one is ignored.
    pub attempt: u64,
    pub sent_at: Option<i64>,
    pub seqs: BTreeMap<(String, i32), i32>,
    pub txn: Option<Txn>,
    pub txns_begun: u64,
    /// A crashed client's successor starts at this step: long enough, sometimes, for the
    /// coordinator's timeout to abort the open transaction first.
    pub down_until: i64,
    /// The group its consumer group (`sendOffsetsToTransaction`) is placed in: its own
    /// coordinator's for a third of the clients, another for the rest.
    pub offsets_group: GroupId,
}

/// What a client's step sends, and where.
pub(crate) type Outbox = Vec<(GroupId, Msg)>;

impl Client {
    pub fn new(index: usize, groups: u32, v2: bool) -> Client {
        Client {
            index,
            transactional_id: format!("tx-{index}"),
            coordinator: index as u32 % groups,
            v2,
            producer: None,
            phase: Phase::Init { expected: None },
            attempt: 0,
            sent_at: None,
            seqs: BTreeMap::new(),
            txn: None,
            txns_begun: 0,
            down_until: 0,
            offsets_group: (index + index / 3) as u32 % groups,
        }
    }

    /// One step: sends what its phase needs, or gives up on an answer that did not come.
    /// `next_write` numbers writes; `quiescing` stops it from beginning transactions.
    pub fn step(
        &mut self,
        rng: &mut StdRng,
        now: i64,
        groups: u32,
        next_write: &mut WriteId,
        quiescing: bool,
    ) -> Outbox {
        if now < self.down_until {
            return Vec::new();
        }
        let timed_out = self.sent_at.is_some_and(|at| now - at > ANSWER_TIMEOUT);
        match self.phase {
            Phase::Init { expected } if self.sent_at.is_none() || timed_out => self.send_init(now, expected),
            Phase::Idle if !quiescing && rng.gen_bool(0.3) => self.begin(rng, now, groups, next_write),
            Phase::Adding | Phase::Writing if timed_out => self.give_up(now),
            // A v1 client whose partitions are added sends its writes, or now and then aborts
            // while they still linger (librdkafka purges them): an added-only transaction.
            Phase::Writing if self.has_unsent() => {
                if rng.gen_bool(0.04) {
                    self.purge_unsent();
                    return self.send_end(now, false);
                }
                self.send_writes()
            }
            Phase::Writing if self.all_acked() => {
                let commit = rng.gen_bool(0.85);
                self.send_end(now, commit)
            }
            Phase::Ending { commit } if timed_out => self.send_end(now, commit),
            _ => Vec::new(),
        }
    }

    fn has_unsent(&self) -> bool {
        self.txn.as_ref().is_some_and(|t| !t.unsent.is_empty())
    }

    /// The writes not sent yet leave the transaction, and their sequence numbers are used
    /// again by the next ones (the broker never saw them).
    fn purge_unsent(&mut self) {
        let txn = self.txn.as_mut().expect("a transaction to purge");
        for (_, write) in std::mem::take(&mut txn.unsent) {
            txn.writes.remove(&write.id);
            if write.offsets.is_none() {
                self.seqs.insert((write.topic.clone(), write.partition), write.first_seq);
            }
        }
    }

    fn all_acked(&self) -> bool {
        self.txn.as_ref().is_some_and(|t| t.acked.len() == t.writes.len())
    }

    fn send_init(&mut self, now: i64, expected: Option<ProducerIdEpoch>) -> Outbox {
        self.attempt += 1;
        self.sent_at = Some(now);
        self.phase = Phase::Init { expected };
        let msg = Msg::InitProducerId {
            client: self.index,
            attempt: self.attempt,
            expected,
            timeout_ms: TXN_TIMEOUT,
        };
        vec![(self.coordinator, msg)]
    }

    fn send_end(&mut self, now: i64, commit: bool) -> Outbox {
        let producer = self.producer.expect("writing with a producer id");
        self.attempt += 1;
        self.sent_at = Some(now);
        self.phase = Phase::Ending { commit };
        let msg = Msg::EndTxn { client: self.index, attempt: self.attempt, producer, commit, v2: self.v2 };
        vec![(self.coordinator, msg)]
    }

    /// No answer, or an error: abort by bumping the epoch (KIP-360); the transaction is over.
    pub fn give_up(&mut self, now: i64) -> Outbox {
        self.txn = None;
        self.send_init(now, self.producer)
    }

    /// Begins a transaction: one to three distinct partitions, over every group. A v2 client
    /// writes at once; a v1 client adds the partitions first.
    fn begin(&mut self, rng: &mut StdRng, now: i64, groups: u32, next_write: &mut WriteId) -> Outbox {
        let producer = self.producer.expect("idle with a producer id");
        self.attempt += 1;
        self.sent_at = Some(now);
        self.txns_begun += 1;
        let mut targets = BTreeSet::new();
        for _ in 0..rng.gen_range(1..=3) {
            let group = rng.gen_range(0..groups);
            let topic = topics_of(group)[rng.gen_range(0..2)].clone();
            targets.insert((group, topic, rng.gen_range(0..PARTITIONS)));
        }
        let mut txn = Txn::default();
        for (group, topic, partition) in targets {
            *next_write += 1;
            let seq = self.seqs.entry((topic.clone(), partition)).or_insert(0);
            let records = rng.gen_range(1..=3);
            let write = Write {
                id: *next_write,
                client: self.index,
                attempt: self.attempt,
                producer,
                topic,
                partition,
                first_seq: *seq,
                records,
                v2: self.v2,
                offsets: None,
            };
            *seq += records;
            txn.writes.insert(write.id);
            txn.unsent.push((group, write));
        }
        if rng.gen_bool(0.35) {
            *next_write += 1;
            let write = Write {
                id: *next_write,
                client: self.index,
                attempt: self.attempt,
                producer,
                topic: topics_of(self.offsets_group)[0].clone(),
                partition: 0,
                first_seq: 0,
                records: 0,
                v2: self.v2,
                offsets: Some(self.consumer_group()),
            };
            txn.writes.insert(write.id);
            txn.unsent.push((self.offsets_group, write));
        }
        let records = txn.unsent.iter().filter(|(_, w)| w.offsets.is_none());
        let partitions = records.map(|(_, w)| (w.topic.clone(), w.partition)).collect();
        self.txn = Some(txn);
        if self.v2 {
            return self.send_writes();
        }
        self.phase = Phase::Adding;
        let msg = Msg::AddPartitionsToTxn { client: self.index, attempt: self.attempt, producer, partitions };
        vec![(self.coordinator, msg)]
    }

    /// Its consumer group: one per client, so that its committed offsets only grow.
    pub fn consumer_group(&self) -> String {
        format!("cg-{}", self.index)
    }

    fn send_writes(&mut self) -> Outbox {
        self.phase = Phase::Writing;
        let txn = self.txn.as_mut().expect("a transaction to write");
        std::mem::take(&mut txn.unsent)
            .into_iter()
            .map(|(group, write)| (group, Msg::Produce(write)))
            .collect()
    }

    /// The answer to AddPartitionsToTxn: the writes go, or the transaction is given up.
    pub fn partitions_added(&mut self, attempt: u64, now: i64, added: bool) -> Outbox {
        if attempt != self.attempt || self.phase != Phase::Adding {
            return Vec::new();
        }
        if added {
            // Sent at the client's next step, unless it aborts first.
            self.phase = Phase::Writing;
            Vec::new()
        } else {
            self.give_up(now)
        }
    }

    /// A crash: everything forgotten; the next instance, up at `up_at`, fences this one.
    pub fn crash(&mut self, up_at: i64) {
        self.down_until = up_at;
        self.txn = None;
        self.producer = None;
        self.seqs.clear();
        self.phase = Phase::Init { expected: None };
        self.sent_at = None;
    }

    /// The answer to InitProducerId or EndTxn. Returns the transaction an EndTxn ended, with
    /// its decision, for the checks.
    pub fn answered(&mut self, attempt: u64, result: &OpResult) -> Option<(Txn, bool)> {
        if attempt != self.attempt {
            return None;
        }
        self.sent_at = None;
        let OpResult::Txn(result) = result else { panic!("a transaction op answers Txn: {result:?}") };
        match (self.phase, result) {
            (Phase::Init { .. }, Ok(id)) => {
                self.new_producer(*id);
                None
            }
            (Phase::Init { expected: Some(_) }, Err(_)) => {
                self.phase = Phase::Init { expected: None };
                None
            }
            (Phase::Init { expected: None }, Err(_)) => None,
            (Phase::Ending { commit }, Ok(id)) => {
                let txn = self.txn.take().expect("ending a transaction");
                self.new_producer(*id);
                Some((txn, commit))
            }
            // Retriable: send the same decision again.
            (Phase::Ending { commit }, Err(TxnError::CommitBeforeWrites | TxnError::PreviousUndecided)) => {
                self.phase = Phase::Ending { commit };
                None
            }
            (Phase::Ending { .. }, Err(error)) => {
                self.txn = None;
                let expected = if matches!(error, TxnError::Fenced) { None } else { self.producer };
                self.phase = Phase::Init { expected };
                None
            }
            (phase, _) => panic!("client {} answered in {phase:?}", self.index),
        }
    }

    fn new_producer(&mut self, id: ProducerIdEpoch) {
        // Sequences start over with each epoch; a transactions-v1 client keeps its epoch.
        if self.producer != Some(id) {
            self.seqs.clear();
        }
        self.producer = Some(id);
        self.phase = Phase::Idle;
    }

    /// A write of the open transaction was acknowledged.
    pub fn acked(&mut self, write: &Write) {
        if let Some(txn) = self.txn.as_mut().filter(|t| t.writes.contains(&write.id)) {
            txn.acked.insert(write.id);
        }
    }

    /// A write failed: the transaction is aborted by a bump, or restarted when fenced.
    pub fn write_failed(&mut self, write: &Write, now: i64, fenced: bool) -> Outbox {
        let current = self.txn.as_ref().is_some_and(|t| t.writes.contains(&write.id));
        if !current || self.phase != Phase::Writing {
            return Vec::new();
        }
        self.txn = None;
        if fenced {
            self.send_init(now, None)
        } else {
            self.give_up(now)
        }
    }
}

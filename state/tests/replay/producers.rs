//! What producers send: plain, idempotent (retries, in-entry duplicates, sequence gaps,
//! epoch bumps) and transactional requests (InitProducerId, writes, TxnOffsetCommit, EndTxn
//! v1 and v2), and the late requests of an instance fenced by a second InitProducerId.

use bytes::BytesMut;
use onelog_state::command::{EndTxnOp, InitProducerIdOp, InitTxnProducerOp, Op, TxnOffsetCommitOp};
use onelog_state::entry::Proposal;
use onelog_state::txns::ProducerIdEpoch;
use onelog_state::BrokerState;
use rand::Rng;

use crate::batches::unstamped;
use crate::clients::{PartKind, Queue, Sent, SentPart, Who};
use crate::sim::Sim;
use crate::GROUPS;

impl Sim {
    pub(crate) fn plain_produce(&mut self, state: &BrokerState, q: &mut Queue) {
        let mut parts = Vec::new();
        let mut appends = Vec::new();
        for (topic, partition) in self.pick_partitions(state, 3) {
            let mut bytes = BytesMut::new();
            let mut records = 0;
            for _ in 0..self.rng.gen_range(1..=2) {
                let n = self.rng.gen_range(1..=5);
                records += n;
                bytes.extend_from_slice(&self.batch(n, None, false));
            }
            let bytes = bytes.freeze();
            appends.push(unstamped(&topic, partition, &bytes));
            parts.push(SentPart { topic, partition, producer: None, records, bytes, kind: PartKind::Fresh });
        }
        if !appends.is_empty() {
            q.push(Proposal::Produce(appends), Sent::Produce { who: Who::Plain, parts });
        }
    }

    pub(crate) fn init_idempotent(&mut self, q: &mut Queue) {
        q.push(Proposal::Op(Op::InitProducerId(InitProducerIdOp {})), Sent::InitIdem);
    }

    pub(crate) fn idempotent_produce(&mut self, state: &BrokerState, q: &mut Queue) {
        if self.idem.is_empty() {
            return self.init_idempotent(q);
        }
        let c = self.rng.gen_range(0..self.idem.len());
        if self.rng.gen_bool(0.01) {
            // A client that lost track of its sequences (KIP-360): a new epoch from 0.
            self.idem[c].bump_epoch();
        }
        if self.rng.gen_bool(0.12) && !self.idem[c].history.is_empty() {
            // A retry of a batch sent before: the same bytes again.
            let client = &self.idem[c];
            let keys: Vec<&(String, i32)> = client.history.keys().collect();
            let key = keys[self.rng.gen_range(0..keys.len())].clone();
            let sent = &client.history[&key];
            let batch = sent[self.rng.gen_range(0..sent.len())].clone();
            let part = SentPart {
                topic: key.0.clone(),
                partition: key.1,
                producer: Some((client.producer_id, batch.epoch, batch.first_seq)),
                records: batch.records,
                bytes: batch.bytes.clone(),
                kind: PartKind::Retry,
            };
            let append = unstamped(&key.0, key.1, &batch.bytes);
            q.push(
                Proposal::Produce(vec![append]),
                Sent::Produce { who: Who::Idempotent(c), parts: vec![part] },
            );
            return;
        }
        let (pid, epoch) = (self.idem[c].producer_id, self.idem[c].epoch);
        let mut parts = Vec::new();
        let mut appends = Vec::new();
        for (topic, partition) in self.pick_partitions(state, 3) {
            let key = (c, topic.clone(), partition);
            let next = match q.idem_next.get(&key) {
                Some(next) => *next,
                None => self.idem[c].next_seq.get(&(topic.clone(), partition)).copied().unwrap_or(0),
            };
            let records = self.rng.gen_range(1..=4);
            let gap = self.rng.gen_bool(0.03);
            let first_seq = if gap { next + self.rng.gen_range(1..=3) } else { next };
            if !gap {
                q.idem_next.insert(key, first_seq + records);
            }
            let bytes = self.batch(records, Some((pid, epoch, first_seq)), false);
            appends.push(unstamped(&topic, partition, &bytes));
            let kind = if gap { PartKind::Gap } else { PartKind::Fresh };
            parts.push(SentPart {
                topic,
                partition,
                producer: Some((pid, epoch, first_seq)),
                records,
                bytes,
                kind,
            });
        }
        if appends.is_empty() {
            return;
        }
        let retry = self.rng.gen_bool(0.05).then(|| parts.clone());
        let index = q.push(Proposal::Produce(appends), Sent::Produce { who: Who::Idempotent(c), parts });
        if let Some(parts) = retry {
            // A retry queued behind its original, before either is answered.
            let appends = parts.iter().map(|p| unstamped(&p.topic, p.partition, &p.bytes)).collect();
            let parts = parts
                .into_iter()
                .enumerate()
                .map(|(k, p)| SentPart { kind: PartKind::RetryInEntry(index, k), ..p })
                .collect();
            q.push(Proposal::Produce(appends), Sent::Produce { who: Who::Idempotent(c), parts });
        }
    }

    pub(crate) fn txn_action(&mut self, state: &BrokerState, q: &mut Queue) {
        let c = self.rng.gen_range(0..self.txn.len());
        // The last two clients are mostly idle: their ids expire, and they come back to find it.
        if c + 2 >= self.txn.len() && self.rng.gen_bool(0.9) {
            return;
        }
        if !q.busy_txn.insert(c) {
            return;
        }
        let client = &self.txn[c];
        let tid = client.tid.clone();
        let Some(id) = client.id else {
            if self.rng.gen_bool(0.3) {
                self.txn[c].v2 = self.rng.gen_bool(0.5);
            }
            return self.init_txn(q, c, None);
        };
        if client.needs_reinit {
            return self.init_txn(q, c, Some(id));
        }
        if client.must_abort {
            return self.end_txn(q, c, id, false);
        }
        let in_txn = client.in_txn;
        match self.rng.gen_range(0..100) {
            0..=51 => {
                self.txn_produce(state, q, c, id);
                if in_txn && self.rng.gen_bool(0.05) {
                    // EndTxn queued behind the transaction's last write (kafka-clients 4.x).
                    let commit = self.rng.gen_bool(0.7);
                    self.end_txn(q, c, id, commit);
                }
            }
            52..=61 => self.txn_offset_commit(state, q, c, id, &tid),
            62..=88 => {
                if in_txn || self.rng.gen_bool(0.15) {
                    let commit = self.rng.gen_bool(0.7);
                    self.end_txn(q, c, id, commit);
                } else {
                    self.txn_produce(state, q, c, id);
                }
            }
            89..=91 => {
                // A retry of the last EndTxn, as after a lost answer: between transactions.
                if let Some(end) = self.txn[c].last_end.clone().filter(|_| !in_txn) {
                    let (commit, v2) = (end.txn_commit, end.bump_epoch);
                    q.push(
                        Proposal::Op(Op::EndTxn(end)),
                        Sent::EndTxn { client: c, zombie: false, retry: true, commit, v2 },
                    );
                }
            }
            92..=95 => {
                // A second instance with the same transactional id: fences this one.
                if self.rng.gen_bool(0.3) {
                    self.txn[c].v2 = !self.txn[c].v2;
                }
                self.init_txn(q, c, None);
            }
            96..=98 => self.init_txn(q, c, Some(id)),
            _ => {
                let timeout_ms = if self.rng.gen_bool(0.5) { 0 } else { self.limits.txn_timeout_ms_max + 1 };
                let op = InitTxnProducerOp { transactional_id: tid, timeout_ms, expected: Some(id) };
                q.push(Proposal::Op(Op::InitTxnProducer(op)), Sent::InitTxn { client: c, fencing: false });
            }
        }
    }

    fn init_txn(&mut self, q: &mut Queue, c: usize, expected: Option<ProducerIdEpoch>) {
        let client = &self.txn[c];
        let op = InitTxnProducerOp {
            transactional_id: client.tid.clone(),
            timeout_ms: client.timeout_ms,
            expected,
        };
        let fencing = expected.is_none() && client.id.is_some();
        q.push(Proposal::Op(Op::InitTxnProducer(op)), Sent::InitTxn { client: c, fencing });
    }

    fn end_txn(&mut self, q: &mut Queue, c: usize, id: ProducerIdEpoch, commit: bool) {
        let client = &mut self.txn[c];
        let op = EndTxnOp {
            transactional_id: client.tid.clone(),
            producer: id,
            txn_commit: commit,
            bump_epoch: client.v2,
        };
        client.last_end = Some(op.clone());
        let v2 = client.v2;
        q.push(
            Proposal::Op(Op::EndTxn(op)),
            Sent::EndTxn { client: c, zombie: false, retry: false, commit, v2 },
        );
    }

    /// A transactional write, admitted as the produce handler admits it: against the applied
    /// state, before the entry is built.
    fn txn_produce(&mut self, state: &BrokerState, q: &mut Queue, c: usize, id: ProducerIdEpoch) {
        if let Err(error) = state.txns.check_write(id) {
            self.txn[c].on_error(&error, &mut self.stats);
            return;
        }
        let mut parts = Vec::new();
        let mut appends = Vec::new();
        for (topic, partition) in self.pick_partitions(state, 3) {
            let key = (c, topic.clone(), partition);
            let seq = match q.txn_next.get(&key) {
                Some(next) => *next,
                None => self.txn[c].next_seq.get(&(topic.clone(), partition)).copied().unwrap_or(0),
            };
            let records = self.rng.gen_range(1..=4);
            q.txn_next.insert(key, seq + records);
            let producer = Some((id.producer_id, id.producer_epoch, seq));
            let bytes = self.batch(records, producer, true);
            appends.push(unstamped(&topic, partition, &bytes));
            parts.push(SentPart { topic, partition, producer, records, bytes, kind: PartKind::Fresh });
        }
        if !appends.is_empty() {
            q.push(Proposal::ProduceTransactional(appends), Sent::Produce { who: Who::Txn(c), parts });
        }
    }

    fn txn_offset_commit(
        &mut self,
        state: &BrokerState,
        q: &mut Queue,
        c: usize,
        id: ProducerIdEpoch,
        tid: &str,
    ) {
        let group = GROUPS[self.rng.gen_range(0..GROUPS.len())];
        let (generation_id, member_id) = self.member_of(state, group);
        let commits = self.commits(state);
        let op = TxnOffsetCommitOp {
            transactional_id: tid.to_string(),
            producer: id,
            group_id: group.into(),
            generation_id,
            member_id,
            commits,
        };
        q.push(Proposal::Op(Op::TxnOffsetCommit(op)), Sent::TxnOffsets { client: c });
    }

    /// The instance a fencing InitProducerId left behind sends late requests: its EndTxn
    /// reaches the log, its writes are refused by the produce handler, except one admitted
    /// just before the fencing entry applied.
    pub(crate) fn zombie_action(&mut self, state: &BrokerState, q: &mut Queue, step: u64) {
        let zombies: Vec<usize> = (0..self.txn.len()).filter(|&c| self.txn[c].zombie.is_some()).collect();
        if zombies.is_empty() {
            return;
        }
        let c = zombies[self.rng.gen_range(0..zombies.len())];
        if !q.busy_zombie.insert(c) {
            return;
        }
        let client = &self.txn[c];
        let zombie = client.zombie.expect("picked");
        let raced = client.fenced_at + 1 == step;
        if self.rng.gen_bool(0.5) && !raced {
            let commit = self.rng.gen_bool(0.5);
            let v2 = client.v2;
            let op = EndTxnOp {
                transactional_id: client.tid.clone(),
                producer: zombie,
                txn_commit: commit,
                bump_epoch: v2,
            };
            q.push(
                Proposal::Op(Op::EndTxn(op)),
                Sent::EndTxn { client: c, zombie: true, retry: false, commit, v2 },
            );
            return;
        }
        if !raced && state.txns.check_write(zombie).is_err() {
            self.stats.fenced += 1; // Refused by the handler.
            return;
        }
        let Some((topic, partition)) = self.pick_partition(state) else { return };
        let records = self.rng.gen_range(1..=3);
        let seq = self.rng.gen_range(0..20);
        let producer = Some((zombie.producer_id, zombie.producer_epoch, seq));
        let bytes = self.batch(records, producer, true);
        let append = unstamped(&topic, partition, &bytes);
        let part = SentPart { topic, partition, producer, records, bytes, kind: PartKind::Fresh };
        q.push(
            Proposal::ProduceTransactional(vec![append]),
            Sent::Produce { who: Who::Zombie(c), parts: vec![part] },
        );
    }
}

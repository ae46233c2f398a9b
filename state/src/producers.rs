//! Idempotent producer state (KIP-98): which producer ids are live, and per (producer id,
//! partition) the current epoch and the last batches' sequence numbers and offsets.
//!
//! It is part of `BrokerState`, so it is replicated by the log, checkpointed with the state and
//! survives restart and failover with no extra machinery. One pure function, [`check`], decides
//! whether a batch is appended, is a duplicate, or is refused. The proposer runs it against the
//! applied state plus the entry it is building ([`Pending`]), and apply runs it again against
//! the state the op meets; both record accepted batches the same way, so they agree unless the
//! state changed in between, in which case apply refuses the op.
//!
//! The rules are those of Kafka's `ProducerAppendInfo` today (KIP-98, with the KIP-360 era
//! changes):
//! - a lower epoch than the partition's → INVALID_PRODUCER_EPOCH;
//! - a higher epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
//! - the same epoch: a batch whose sequence range equals one of the last five is a duplicate
//!   and gets its original offsets back; otherwise it must follow the last sequence (wrapping
//!   after i32::MAX), else OUT_OF_ORDER_SEQUENCE_NUMBER;
//! - no state for the producer on the partition (first write, or expired): any sequence is
//!   accepted ("accept writes with any sequence number"); brokers before 2.5 answered
//!   UNKNOWN_PRODUCER_ID, which current clients treat as lost state and recover from.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use kafka_compat::batch::BatchHeader;
use kafka_compat::error_code;
use serde::{Deserialize, Serialize};

use super::command::ReplicatedLimits;
use crate::limits;

/// What allocating a producer id depends on: the entry's clock and the replicated limits.
#[derive(Debug, Clone, Copy)]
pub struct Allocation {
    pub now_ms: i64,
    pub producer_ids_live_max: u64,
    pub eviction_idle_ms_min: i64,
}

impl Allocation {
    pub fn of(limits: &ReplicatedLimits, now_ms: i64) -> Self {
        Allocation {
            now_ms,
            producer_ids_live_max: limits.producer_ids_live_max,
            eviction_idle_ms_min: limits.producer_id_eviction_idle_ms_min,
        }
    }
}

/// Every live producer id and its state on each partition it wrote.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Producers {
    /// The id the next InitProducerId hands out. Ids are never reused (KIP-98).
    pub next_producer_id: i64,
    pub live: BTreeMap<i64, LiveProducer>,
    /// (last_active_ms, producer id) of every live producer: least recently used first, for
    /// expiry and eviction. Kept in step with `live` by `touch` and `remove`.
    pub idle_order: BTreeSet<(i64, i64)>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct LiveProducer {
    /// Leader clock of the last op that allocated the id or appended for it.
    pub last_active_ms: i64,
    /// topic → partition → state.
    pub topics: BTreeMap<String, BTreeMap<i32, ProducerPartition>>,
}

/// One producer's state on one partition (Kafka's `ProducerStateEntry`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProducerPartition {
    pub epoch: i16,
    /// The last `PRODUCER_BATCHES_KEPT` batches of `epoch`, oldest first; never empty.
    pub batches: VecDeque<BatchMeta>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: i64,
    pub last_offset: i64,
    /// Leader clock of the op that appended it: a duplicate's LogAppendTime.
    pub append_time_ms: i64,
}

/// The producer fields of one batch header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSeq {
    pub producer_id: i64,
    pub epoch: i16,
    pub first_seq: i32,
    pub last_seq: i32,
}

impl BatchSeq {
    /// None for batches without a producer id (-1): they skip idempotence entirely.
    pub fn of(header: &BatchHeader) -> Option<BatchSeq> {
        (header.producer_id >= 0).then(|| BatchSeq {
            producer_id: header.producer_id,
            epoch: header.producer_epoch,
            first_seq: header.base_sequence,
            last_seq: increment_sequence(header.base_sequence, header.last_offset_delta),
        })
    }
}

/// Kafka's `DefaultRecordBatch.incrementSequence`: sequences wrap to 0 after i32::MAX.
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    i64::from(next_seq) == i64::from(last_seq) + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

/// What to do with one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Append,
    /// Already appended: answer with these offsets, append nothing.
    Duplicate(BatchMeta),
    Reject {
        error_code: i16,
        message: String,
    },
}

/// The one decision, used by the proposer when stamping and by apply (module header).
pub fn check(current: Option<&ProducerPartition>, batch: &BatchSeq) -> Verdict {
    let Some(current) = current.filter(|c| !c.batches.is_empty()) else {
        return Verdict::Append; // No state for this producer here: any sequence (Kafka ≥ 2.5).
    };
    let pid = batch.producer_id;
    if batch.epoch < current.epoch {
        let message =
            format!("producer {pid} epoch {} is older than the current epoch {}", batch.epoch, current.epoch);
        return Verdict::Reject { error_code: error_code::INVALID_PRODUCER_EPOCH, message };
    }
    if batch.epoch > current.epoch {
        if batch.first_seq == 0 {
            return Verdict::Append;
        }
        let message = format!(
            "producer {pid} new epoch {} must start at sequence 0, not {}",
            batch.epoch, batch.first_seq
        );
        return Verdict::Reject { error_code: error_code::OUT_OF_ORDER_SEQUENCE_NUMBER, message };
    }
    if let Some(meta) =
        current.batches.iter().find(|m| m.first_seq == batch.first_seq && m.last_seq == batch.last_seq)
    {
        return Verdict::Duplicate(*meta);
    }
    let last_seq = current.batches.back().expect("not empty").last_seq;
    if in_sequence(last_seq, batch.first_seq) {
        return Verdict::Append;
    }
    let message = format!("producer {pid} sent sequence {} after {last_seq}", batch.first_seq);
    Verdict::Reject { error_code: error_code::OUT_OF_ORDER_SEQUENCE_NUMBER, message }
}

impl ProducerPartition {
    /// Records an appended batch; a new epoch forgets the old epoch's batches (Kafka does too).
    pub fn record(&mut self, batch: &BatchSeq, meta: BatchMeta) {
        assert!(
            self.batches.is_empty() || batch.epoch >= self.epoch,
            "producer {} epoch must never decrease: {} after {}",
            batch.producer_id,
            batch.epoch,
            self.epoch
        );
        if batch.epoch != self.epoch {
            self.batches.clear();
            self.epoch = batch.epoch;
        }
        self.batches.push_back(meta);
        while self.batches.len() > limits::PRODUCER_BATCHES_KEPT {
            self.batches.pop_front();
        }
    }
}

impl Producers {
    pub fn partition(&self, producer_id: i64, topic: &str, partition: i32) -> Option<&ProducerPartition> {
        self.live.get(&producer_id)?.topics.get(topic)?.get(&partition)
    }

    /// Marks `producer_id` active at `now_ms`, registering it if it is not live.
    fn touch(&mut self, producer_id: i64, now_ms: i64) -> &mut LiveProducer {
        let producer = self.live.entry(producer_id).or_default();
        self.idle_order.remove(&(producer.last_active_ms, producer_id));
        producer.last_active_ms = now_ms;
        self.idle_order.insert((now_ms, producer_id));
        producer
    }

    /// Checked after every change, in release builds too (STYLE: assert invariants).
    fn assert_invariants(&self) {
        assert_eq!(
            self.idle_order.len(),
            self.live.len(),
            "every live producer id is in idle_order exactly once"
        );
    }

    fn remove(&mut self, producer_id: i64) {
        if let Some(producer) = self.live.remove(&producer_id) {
            self.idle_order.remove(&(producer.last_active_ms, producer_id));
        }
    }

    /// Applies InitProducerId for an idempotent producer: a fresh id, epoch 0. When the live
    /// limit is reached the least recently used producer is evicted if it has been idle long
    /// enough that no retry of its batches can still arrive; otherwise the request is refused
    /// (retriably) rather than weaken the guarantee of an active producer.
    pub fn allocate(&mut self, op: &Allocation) -> Result<i64, String> {
        while self.live.len() as u64 >= op.producer_ids_live_max {
            match self.idle_order.first() {
                Some(&(last_active_ms, pid)) if op.now_ms - last_active_ms >= op.eviction_idle_ms_min => {
                    self.remove(pid);
                }
                _ => {
                    return Err(format!(
                        "{} live producer ids, none idle for {} ms",
                        self.live.len(),
                        op.eviction_idle_ms_min
                    ))
                }
            }
        }
        let producer_id = self.next_producer_id;
        assert!(producer_id < i64::MAX, "producer ids exhausted");
        self.next_producer_id += 1;
        self.touch(producer_id, op.now_ms);
        self.assert_invariants();
        Ok(producer_id)
    }

    /// Producers idle for at least `expiration_ms` at `now_ms` (Kafka's
    /// `producer.id.expiration.ms`).
    pub fn expirable(&self, now_ms: i64, expiration_ms: i64) -> usize {
        self.idle_order.iter().take_while(|(last, _)| now_ms - last >= expiration_ms).count()
    }

    /// Forgets every producer idle for at least `expiration_ms`; returns how many.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let mut expired = 0;
        while let Some(&(last, pid)) = self.idle_order.first() {
            if now_ms - last < expiration_ms {
                break;
            }
            self.remove(pid);
            expired += 1;
        }
        self.assert_invariants();
        expired
    }

    /// A deleted topic's producer state must not answer for a new topic of the same name.
    pub fn forget_topic(&mut self, topic: &str) {
        for producer in self.live.values_mut() {
            producer.topics.remove(topic);
        }
    }

    /// Writes the state `pending` built into the registry; `now_ms` is the op's leader clock.
    pub fn record_pending(&mut self, pending: Pending, now_ms: i64) {
        for ((pid, topic, partition), state) in pending.partitions {
            self.touch(pid, now_ms).topics.entry(topic).or_default().insert(partition, state);
        }
        self.assert_invariants();
    }
}

/// Producer state as it will be once some not yet applied appends are: one op's while apply
/// checks it, or one whole entry's while the proposer builds it (an original and its retry can
/// be queued into the same entry; the retry must be seen as a duplicate).
#[derive(Debug, Default)]
pub struct Pending {
    partitions: BTreeMap<(i64, String, i32), ProducerPartition>,
    /// Producer ids recorded here that are not live yet.
    new_ids: BTreeSet<i64>,
}

impl Pending {
    fn current<'a>(
        &'a self,
        producers: &'a Producers,
        topic: &str,
        partition: i32,
        pid: i64,
    ) -> Option<&'a ProducerPartition> {
        match self.partitions.get(&(pid, topic.to_string(), partition)) {
            Some(state) => Some(state),
            None => producers.partition(pid, topic, partition),
        }
    }

    pub fn check(&self, producers: &Producers, topic: &str, partition: i32, batch: &BatchSeq) -> Verdict {
        check(self.current(producers, topic, partition, batch.producer_id), batch)
    }

    /// Records a batch `check` accepted, as appended at `meta`'s offsets.
    pub fn record(
        &mut self,
        producers: &Producers,
        topic: &str,
        partition: i32,
        batch: &BatchSeq,
        meta: BatchMeta,
    ) {
        if !producers.live.contains_key(&batch.producer_id) {
            self.new_ids.insert(batch.producer_id);
        }
        let key = (batch.producer_id, topic.to_string(), partition);
        let state = match self.partitions.entry(key) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => e.insert(
                producers.partition(batch.producer_id, topic, partition).cloned().unwrap_or_default(),
            ),
        };
        state.record(batch, meta);
    }

    /// How many producer ids these appends add to the live set.
    pub fn new_producer_ids(&self) -> usize {
        self.new_ids.len()
    }

    /// Whether appending for `producer_id` would add it to the live set.
    pub fn is_new(&self, producers: &Producers, producer_id: i64) -> bool {
        !producers.live.contains_key(&producer_id) && !self.new_ids.contains(&producer_id)
    }
}

#[cfg(test)]
#[path = "producers_tests.rs"]
mod tests;

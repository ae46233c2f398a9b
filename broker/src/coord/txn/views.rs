//! What the transaction tooling APIs show (`kafka-transactions.sh`: ListTransactions,
//! DescribeTransactions, DescribeProducers), computed from the applied state and the leader's
//! memory of the current term, and which transaction its `abort` (WriteTxnMarkers) names.
//! Pure functions over borrowed state, so the handlers stay thin and the rules are unit-tested
//! here.
//!
//! Kafka's coordinator moves a transaction to Ongoing at its first AddPartitionsToTxn; onelog
//! keeps what was added before the first write in leader memory (`coord::txn::memory`, DESIGN §1),
//! so a transaction is shown Ongoing, with the added partitions and the time of the first add,
//! as soon as either the applied state or that memory says it is open. Offsets added with
//! AddOffsetsToTxn are not shown: Kafka would list a `__consumer_offsets` partition, a topic
//! onelog does not have.

use std::collections::{BTreeSet, HashMap};

use super::memory::Added;
use onelog_state::txns::{ProducerIdEpoch, Transactions, TxnMeta, TxnState};
use onelog_state::BrokerState;

/// One transactional id as DescribeTransactions and ListTransactions show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnView {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub state: TxnState,
    pub timeout_ms: i32,
    /// When the open transaction began (its first add or write), or -1.
    pub start_ms: i64,
    pub partitions: BTreeSet<(String, i32)>,
}

impl TxnView {
    /// `added`: the leader memory's entry for this id, if any; it counts only if it belongs
    /// to the current producer id and epoch (an older one is a fenced or ended transaction).
    pub fn of(transactional_id: &str, meta: &TxnMeta, added: Option<&Added>) -> TxnView {
        let current = ProducerIdEpoch { producer_id: meta.producer_id, producer_epoch: meta.producer_epoch };
        let added = added.filter(|a| a.producer == current);
        let mut partitions: BTreeSet<(String, i32)> = meta.partitions.keys().cloned().collect();
        let (state, start_ms) = match added {
            Some(a) => {
                partitions.extend(a.partitions.iter().cloned());
                let start = if meta.state == TxnState::Ongoing {
                    meta.start_ms.min(a.started_ms)
                } else {
                    a.started_ms
                };
                (TxnState::Ongoing, start)
            }
            None => (meta.state, meta.start_ms),
        };
        TxnView {
            transactional_id: transactional_id.to_string(),
            producer_id: meta.producer_id,
            producer_epoch: meta.producer_epoch,
            state,
            timeout_ms: meta.timeout_ms,
            start_ms,
            partitions,
        }
    }
}

/// Every transactional id, in id order.
pub fn all(txns: &Transactions, added: &HashMap<String, Added>) -> Vec<TxnView> {
    txns.by_id.iter().map(|(id, meta)| TxnView::of(id, meta, added.get(id))).collect()
}

/// Every state name Kafka's coordinator knows (`TransactionState`). A filter naming one that
/// onelog never has (its transactions go from Ongoing to complete in one entry) matches
/// nothing but is not unknown.
const KAFKA_STATE_NAMES: [&str; 8] = [
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
];

/// ListTransactions' filters; each empty (or negative) filter lets everything through.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub states: Vec<String>,
    pub producer_ids: Vec<i64>,
    /// v1 (KIP-664): only transactions running longer than this, in ms; negative: no filter.
    pub duration_ms: i64,
    /// The leader clock the duration is measured against.
    pub now_ms: i64,
}

impl ListFilter {
    /// The state filters Kafka does not know, answered in `unknown_state_filters`; like Kafka,
    /// matched exactly (case matters).
    pub fn unknown_states(&self) -> Vec<String> {
        self.states.iter().filter(|s| !KAFKA_STATE_NAMES.contains(&s.as_str())).cloned().collect()
    }

    pub fn accepts(&self, view: &TxnView) -> bool {
        let state_ok = self.states.is_empty() || self.states.iter().any(|s| s == view.state.kafka_name());
        let producer_ok = self.producer_ids.is_empty() || self.producer_ids.contains(&view.producer_id);
        // Kafka compares against the start of the last transaction even after it completed;
        // onelog keeps no start for a transaction that is not running, and a transaction that
        // is not running is not "running longer than" anything.
        let duration_ok =
            self.duration_ms < 0 || (view.start_ms >= 0 && self.now_ms - view.start_ms > self.duration_ms);
        state_ok && producer_ok && duration_ok
    }
}

/// One producer active on a partition, as DescribeProducers shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Sequence of the last record appended, or -1.
    pub last_sequence: i32,
    /// Leader clock of the last append (onelog keeps the append time, not the batch's max
    /// record timestamp Kafka shows; they agree for LogAppendTime topics), or -1.
    pub last_timestamp_ms: i64,
    /// First offset of its open transaction on this partition, or -1.
    pub txn_start_offset: i64,
}

/// The producers with state on `topic`/`partition`; None if the partition does not exist.
///
/// A producer whose idempotence state expired while its transaction stayed open would be
/// invisible in Kafka's view; here it is listed with sequence and timestamp -1, which is what
/// `kafka-transactions.sh find-hanging` needs to see it.
pub fn active_producers(state: &BrokerState, topic: &str, partition: i32) -> Option<Vec<ActiveProducer>> {
    let open = &state.partition(topic, partition)?.open_txns;
    let mut producers: Vec<ActiveProducer> = state
        .producers
        .live
        .iter()
        .filter_map(|(pid, live)| {
            let last = live.topics.get(topic)?.get(&partition)?;
            let batch = last.batches.back()?;
            Some(ActiveProducer {
                producer_id: *pid,
                producer_epoch: last.epoch,
                last_sequence: batch.last_seq,
                last_timestamp_ms: batch.append_time_ms,
                txn_start_offset: open.get(pid).copied().unwrap_or(-1),
            })
        })
        .collect();
    for (pid, first_offset) in open {
        if producers.iter().any(|p| p.producer_id == *pid) {
            continue;
        }
        let epoch = state.txns.by_producer(*pid).map_or(-1, |(_, meta)| meta.producer_epoch);
        producers.push(ActiveProducer {
            producer_id: *pid,
            producer_epoch: epoch,
            last_sequence: -1,
            last_timestamp_ms: -1,
            txn_start_offset: *first_offset,
        });
    }
    producers.sort_by_key(|p| p.producer_id);
    Some(producers)
}

/// What an abort marker of `kafka-transactions.sh abort` (WriteTxnMarkers) names on one
/// partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AbortTarget {
    /// The producer's transaction open on the partition: its transactional id, and its producer
    /// id and epoch as the `AbortTxns` op checks them when it applies.
    Open(String, ProducerIdEpoch),
    /// The producer has no transaction open on the partition: nothing to abort. Kafka would
    /// write a marker that changes nothing there.
    NothingOpen,
    /// The marker's epoch is older than the producer's: the transaction it was read from has
    /// ended (Kafka's partition leader refuses such a marker with INVALID_PRODUCER_EPOCH).
    StaleEpoch {
        current: i16,
    },
    UnknownPartition,
    /// The partition holds an open instance of a producer another Raft group coordinates
    /// (issue 32): that group decides its transaction, so the abort is asked of it.
    Remote {
        coordinator: u32,
    },
}

/// Which transaction an abort marker for `marker` on `topic`/`partition` aborts.
///
/// A transaction cannot be torn here, so the marker aborts the producer's whole open
/// transaction, on every partition it wrote, provided it is open on the named partition. As
/// Kafka's partition leader does, a marker epoch at or above the producer's is accepted.
pub fn abort_target(
    state: &BrokerState,
    marker: ProducerIdEpoch,
    topic: &str,
    partition: i32,
) -> AbortTarget {
    let Some(p) = state.partition(topic, partition) else { return AbortTarget::UnknownPartition };
    let remote = state.xgroup.remote.get(&marker.producer_id);
    if let Some(open) = remote.and_then(|r| r.open.as_ref()) {
        if marker.producer_epoch < open.instance.epoch {
            return AbortTarget::StaleEpoch { current: open.instance.epoch };
        }
        if open.partitions.contains_key(&(topic.to_string(), partition)) {
            return AbortTarget::Remote { coordinator: remote.map_or(0, |r| r.coordinator) };
        }
    }
    let Some((transactional_id, meta)) = state.txns.by_producer(marker.producer_id) else {
        // An idempotent producer, or one whose transactional id expired: no transaction.
        return AbortTarget::NothingOpen;
    };
    if marker.producer_epoch < meta.producer_epoch {
        return AbortTarget::StaleEpoch { current: meta.producer_epoch };
    }
    if meta.state != TxnState::Ongoing || !p.open_txns.contains_key(&marker.producer_id) {
        return AbortTarget::NothingOpen;
    }
    let current = ProducerIdEpoch { producer_id: meta.producer_id, producer_epoch: meta.producer_epoch };
    AbortTarget::Open(transactional_id.clone(), current)
}

#[cfg(test)]
#[path = "views_tests.rs"]
mod tests;

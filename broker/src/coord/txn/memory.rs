//! Leader memory of what open transactions have added (DESIGN §1): AddPartitionsToTxn and
//! AddOffsetsToTxn are checked against the applied state and recorded here, not in the log.
//!
//! It is safe to lose: it belongs to one leader term. A new leader starts empty and aborts
//! every transaction the log shows open (DESIGN §4), so nothing recorded by an earlier term
//! is ever needed. Produce consults it for KIP-890 part 1: a transactional batch for a
//! partition the transaction has not added is refused, so a late batch of an ended
//! transaction cannot open a hanging one.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use onelog_state::txns::ProducerIdEpoch;

/// What one open transaction added in this term.
#[derive(Debug, Clone)]
pub struct Added {
    pub producer: ProducerIdEpoch,
    pub partitions: BTreeSet<(String, i32)>,
    pub groups: BTreeSet<String>,
    /// Leader clock of the first add (the transaction's start if it has written nothing).
    pub started_ms: i64,
}

#[derive(Default)]
pub struct TxnMemory {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    term: u64,
    open: HashMap<String, Added>,
}

impl TxnMemory {
    fn with<R>(&self, term: u64, f: impl FnOnce(&mut HashMap<String, Added>) -> R) -> R {
        let mut inner = self.inner.lock().expect("txn memory lock");
        if inner.term != term {
            inner.term = term;
            inner.open.clear();
        }
        f(&mut inner.open)
    }

    fn entry<'a>(
        open: &'a mut HashMap<String, Added>,
        transactional_id: &str,
        producer: ProducerIdEpoch,
        now_ms: i64,
    ) -> &'a mut Added {
        let fresh =
            || Added { producer, partitions: BTreeSet::new(), groups: BTreeSet::new(), started_ms: now_ms };
        let added = open.entry(transactional_id.to_string()).or_insert_with(fresh);
        if added.producer != producer {
            *added = fresh();
        }
        added
    }

    pub fn add_partitions(
        &self,
        term: u64,
        transactional_id: &str,
        producer: ProducerIdEpoch,
        partitions: impl IntoIterator<Item = (String, i32)>,
        now_ms: i64,
    ) {
        self.with(term, |open| {
            Self::entry(open, transactional_id, producer, now_ms).partitions.extend(partitions)
        });
    }

    pub fn add_group(
        &self,
        term: u64,
        transactional_id: &str,
        producer: ProducerIdEpoch,
        group: &str,
        now_ms: i64,
    ) {
        self.with(term, |open| {
            Self::entry(open, transactional_id, producer, now_ms).groups.insert(group.to_string());
        });
    }

    /// KIP-890 part 1: whether the transaction of `producer` added this partition.
    pub fn has_partition(
        &self,
        term: u64,
        transactional_id: &str,
        producer: ProducerIdEpoch,
        topic: &str,
        partition: i32,
    ) -> bool {
        self.with(term, |open| {
            open.get(transactional_id).is_some_and(|a| {
                a.producer == producer && a.partitions.contains(&(topic.to_string(), partition))
            })
        })
    }

    /// What every open transaction added in this term (DescribeTransactions, ListTransactions).
    pub fn added(&self, term: u64) -> HashMap<String, Added> {
        self.with(term, |open| open.clone())
    }

    /// The transaction ended (or was fenced): forget what it added.
    pub fn clear(&self, term: u64, transactional_id: &str) {
        self.with(term, |open| open.remove(transactional_id));
    }

    /// Forgets transactions that added but never wrote for longer than their timeout; the
    /// applied state's open transactions are aborted through the log instead.
    pub fn expire(&self, term: u64, now_ms: i64, timeout_ms: impl Fn(&str) -> Option<i64>) {
        self.with(term, |open| {
            open.retain(|id, a| timeout_ms(id).is_some_and(|t| now_ms - a.started_ms < t));
        });
    }
}

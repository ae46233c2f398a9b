//! Leader memory of what open transactions have added (DESIGN §1): AddPartitionsToTxn and
//! AddOffsetsToTxn are checked against the applied state and recorded here, not in the log.
//!
//! It belongs to one leader term, and losing it never loses a transaction: the markers an
//! EndTxn writes come from what the log shows the transaction wrote, not from here. Produce
//! consults it for KIP-890 part 1: a transactional batch for a partition the transaction has
//! not added is refused, so a late batch of an ended transaction cannot open one nobody ends.
//!
//! A new leader starts empty while the transactions open under its predecessor go on (issue
//! 17); their producers do not add again what they added before. So the refusal holds only
//! for a transaction this term has seen begin: one whose previous transaction ended here, or
//! whose producer was initialised here ([`TxnMemory::clear`] marks the id). Until then a
//! batch at the current epoch is taken as added under an earlier term (see
//! `TxnCoordinator::admit_write`).

use std::collections::{BTreeSet, HashMap, HashSet};
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
    /// Transactional ids whose transactions this term has seen end (or whose producer was
    /// initialised in it): `open` holds everything their current transaction added.
    complete: HashSet<String>,
    /// The transaction of each id that ended with nothing written (`end_added_only`): its
    /// producer and decision, so that a retry of that EndTxn gets the same answer. Gone at
    /// the id's next add.
    ended_added_only: HashMap<String, (ProducerIdEpoch, bool)>,
}

impl TxnMemory {
    fn with_inner<R>(&self, term: u64, f: impl FnOnce(&mut Inner) -> R) -> R {
        let mut inner = self.inner.lock().expect("txn memory lock");
        if inner.term != term {
            inner.term = term;
            inner.open.clear();
            inner.complete.clear();
            inner.ended_added_only.clear();
        }
        f(&mut inner)
    }

    /// `f` over what open transactions added; the id's earlier added-only end is no longer
    /// the one a retry names once its next transaction adds.
    fn with<R>(&self, term: u64, f: impl FnOnce(&mut HashMap<String, Added>) -> R) -> R {
        self.with_inner(term, |inner| {
            let result = f(&mut inner.open);
            inner.ended_added_only.retain(|id, _| !inner.open.contains_key(id));
            result
        })
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

    /// KIP-890 part 1: whether a transactional batch of `producer` for this partition is
    /// admitted. It is if the transaction added the partition in this term; otherwise only
    /// while this term has not seen the transaction begin (it may have been added under an
    /// earlier leader), and then the partition is recorded as added.
    pub fn admit_partition(
        &self,
        term: u64,
        transactional_id: &str,
        producer: ProducerIdEpoch,
        topic: &str,
        partition: i32,
        now_ms: i64,
    ) -> bool {
        let key = (topic.to_string(), partition);
        self.with_inner(term, |inner| {
            let added = inner.open.get(transactional_id);
            if added.is_some_and(|a| a.producer == producer && a.partitions.contains(&key)) {
                return true;
            }
            if inner.complete.contains(transactional_id) {
                return false;
            }
            Self::entry(&mut inner.open, transactional_id, producer, now_ms).partitions.insert(key);
            true
        })
    }

    /// What every open transaction added in this term (DescribeTransactions, ListTransactions).
    pub fn added(&self, term: u64) -> HashMap<String, Added> {
        self.with(term, |open| open.clone())
    }

    /// The transaction ended (or was fenced): forget what it added. From now on this term
    /// sees every add of the id's next transaction, so Produce holds it to them.
    pub fn clear(&self, term: u64, transactional_id: &str) {
        self.with_inner(term, |inner| {
            inner.open.remove(transactional_id);
            inner.ended_added_only.remove(transactional_id);
            inner.complete.insert(transactional_id.to_string());
        });
    }

    /// Transactions v1: ends `producer`'s transaction if it added partitions or groups in this
    /// term and wrote nothing (the caller saw the log's transaction already ended), or if this
    /// is a retry of such an end with the same decision. True when it did; the transaction is
    /// then forgotten as by `clear`.
    pub fn end_added_only(
        &self,
        term: u64,
        transactional_id: &str,
        producer: ProducerIdEpoch,
        commit: bool,
    ) -> bool {
        self.with_inner(term, |inner| {
            let added = inner
                .open
                .get(transactional_id)
                .is_some_and(|a| a.producer == producer && !(a.partitions.is_empty() && a.groups.is_empty()));
            let retry = inner.ended_added_only.get(transactional_id) == Some(&(producer, commit));
            if !(added || retry) {
                return false;
            }
            inner.open.remove(transactional_id);
            inner.complete.insert(transactional_id.to_string());
            inner.ended_added_only.insert(transactional_id.to_string(), (producer, commit));
            true
        })
    }

    /// Forgets transactions that added but never wrote for longer than their timeout; the
    /// applied state's open transactions are aborted through the log instead.
    pub fn expire(&self, term: u64, now_ms: i64, timeout_ms: impl Fn(&str) -> Option<i64>) {
        self.with(term, |open| {
            open.retain(|id, a| timeout_ms(id).is_some_and(|t| now_ms - a.started_ms < t));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TERM: u64 = 7;
    const ID: ProducerIdEpoch = ProducerIdEpoch { producer_id: 1, producer_epoch: 0 };

    /// Issue 17: a new leader admits the writes of a transaction begun under its predecessor
    /// (whose adds it never saw), and holds a transaction it saw begin to what it added.
    #[test]
    fn a_partition_added_under_an_earlier_term_is_admitted_until_this_term_sees_the_transaction_begin() {
        let memory = TxnMemory::default();
        assert!(memory.admit_partition(TERM, "tx", ID, "t", 0, 0), "added under the previous leader, maybe");
        assert!(memory.added(TERM)["tx"].partitions.contains(&("t".to_string(), 0)), "recorded as added");
        memory.clear(TERM, "tx");
        assert!(!memory.admit_partition(TERM, "tx", ID, "t", 0, 0), "a late batch after the end seen here");
        memory.add_partitions(TERM, "tx", ID, [("t".to_string(), 1)], 0);
        assert!(memory.admit_partition(TERM, "tx", ID, "t", 1, 0), "added in this term");
        assert!(!memory.admit_partition(TERM, "tx", ID, "t", 0, 0), "not added to this transaction");
        assert!(memory.admit_partition(TERM + 1, "tx", ID, "t", 0, 0), "the next term starts over");
    }

    /// A v1 transaction that added and wrote nothing ends in memory; a retry of that end gets
    /// the same answer, the other decision does not, and the next add starts afresh.
    #[test]
    fn an_added_only_transaction_ends_in_memory_and_its_retry_is_recognised() {
        let memory = TxnMemory::default();
        assert!(!memory.end_added_only(TERM, "tx", ID, false), "nothing added: the log decides");
        memory.add_partitions(TERM, "tx", ID, [("t".to_string(), 0)], 0);
        assert!(!memory.end_added_only(TERM, "tx", ProducerIdEpoch { producer_epoch: 1, ..ID }, false));
        assert!(memory.end_added_only(TERM, "tx", ID, false));
        assert!(memory.added(TERM).is_empty(), "forgotten");
        assert!(!memory.admit_partition(TERM, "tx", ID, "t", 0, 0), "its late batch is refused");
        assert!(memory.end_added_only(TERM, "tx", ID, false), "a retry");
        assert!(!memory.end_added_only(TERM, "tx", ID, true), "not the other decision");
        memory.add_partitions(TERM, "tx", ID, [("t".to_string(), 1)], 0);
        memory.admit_partition(TERM, "tx", ID, "t", 1, 0);
        assert!(memory.end_added_only(TERM, "tx", ID, true), "the next added-only transaction");
        assert!(!memory.end_added_only(TERM + 1, "tx", ID, true), "a new term remembers nothing");
    }
}

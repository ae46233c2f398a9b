//! Leader memory of what open transactions have added (DESIGN §1): AddPartitionsToTxn and
//! AddOffsetsToTxn are checked against the applied state and recorded here, not in the log.
//!
//! The rule itself, KIP-890 part 1 with a new leader's allowance for transactions begun under
//! its predecessor (issue 17), is `onelog_state::txn_adds`, which the cross-group simulation
//! runs too. This is its one term's copy behind a lock: a new term starts empty.

use std::collections::HashMap;
use std::sync::Mutex;

pub use onelog_state::txn_adds::Added;
use onelog_state::txn_adds::TxnAdds;
use onelog_state::txns::ProducerIdEpoch;

#[derive(Default)]
pub struct TxnMemory {
    inner: Mutex<(u64, TxnAdds)>,
}

impl TxnMemory {
    /// `f` over this term's adds; a new term forgets the previous one's.
    fn with<R>(&self, term: u64, f: impl FnOnce(&mut TxnAdds) -> R) -> R {
        let mut inner = self.inner.lock().expect("txn memory lock");
        if inner.0 != term {
            *inner = (term, TxnAdds::default());
        }
        f(&mut inner.1)
    }

    pub fn add_partitions(
        &self,
        term: u64,
        transactional_id: &str,
        producer: ProducerIdEpoch,
        partitions: impl IntoIterator<Item = (String, i32)>,
        now_ms: i64,
    ) {
        self.with(term, |adds| adds.add_partitions(transactional_id, producer, partitions, now_ms));
    }

    pub fn add_group(
        &self,
        term: u64,
        transactional_id: &str,
        producer: ProducerIdEpoch,
        group: &str,
        now_ms: i64,
    ) {
        self.with(term, |adds| adds.add_group(transactional_id, producer, group, now_ms));
    }

    /// KIP-890 part 1 (`TxnAdds::admit_partition`).
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
        self.with(term, |adds| adds.admit_partition(transactional_id, producer, key, now_ms))
    }

    /// What every open transaction added in this term (DescribeTransactions, ListTransactions).
    pub fn added(&self, term: u64) -> HashMap<String, Added> {
        self.with(term, |adds| adds.added().clone())
    }

    /// The transaction ended (or was fenced): forget what it added (`TxnAdds::clear`).
    pub fn clear(&self, term: u64, transactional_id: &str) {
        self.with(term, |adds| adds.clear(transactional_id));
    }

    /// Transactions v1: an added-only transaction ends here (`TxnAdds::end_added_only`).
    pub fn end_added_only(
        &self,
        term: u64,
        transactional_id: &str,
        producer: ProducerIdEpoch,
        commit: bool,
    ) -> bool {
        self.with(term, |adds| adds.end_added_only(transactional_id, producer, commit))
    }

    /// Forgets transactions that added but never wrote for longer than their timeout.
    pub fn expire(&self, term: u64, now_ms: i64, timeout_ms: impl Fn(&str) -> Option<i64>) {
        self.with(term, |adds| adds.expire(now_ms, timeout_ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TERM: u64 = 7;
    const ID: ProducerIdEpoch = ProducerIdEpoch { producer_id: 1, producer_epoch: 0 };

    /// The rule's own tests are `onelog_state::txn_adds`'; here, that a term keeps what it
    /// was told and the next term starts over.
    #[test]
    fn a_new_term_starts_over() {
        let memory = TxnMemory::default();
        memory.add_partitions(TERM, "tx", ID, [("t".to_string(), 0)], 0);
        memory.clear(TERM, "tx");
        assert!(!memory.admit_partition(TERM, "tx", ID, "t", 0, 0), "a late batch after the end seen here");
        assert!(memory.admit_partition(TERM + 1, "tx", ID, "t", 0, 0), "the next term starts over");
        assert!(memory.added(TERM + 1)["tx"].partitions.contains(&("t".to_string(), 0)));
        memory.add_partitions(TERM + 1, "tx", ID, [("t".to_string(), 1)], 0);
        memory.clear(TERM + 1, "tx");
        assert!(!memory.end_added_only(TERM + 1, "tx", ID, true), "nothing added since the end");
        assert!(memory.added(TERM + 2).is_empty(), "a new term remembers nothing");
    }
}

//! What open transactions added in one leader term (AddPartitionsToTxn, AddOffsetsToTxn, a
//! transactions-v2 write's implicit add), and the KIP-890 part 1 rule that holds a
//! transaction's writes to it: the leader's memory, not the log (DESIGN §1).
//!
//! Pure and per term: the broker's transaction coordinator keeps one behind a lock and starts
//! a new one at each term (`broker::coord::txn::memory`); the cross-group simulation keeps one
//! per simulated leader (`state/tests/xgroup`), so both run this one rule.
//!
//! Losing it never loses a transaction: the markers an EndTxn writes come from what the log
//! shows the transaction wrote. A new leader starts empty while the transactions open under
//! its predecessor go on (issue 17), and their producers do not add again what they added
//! before; so the refusal holds only for a transaction this term has seen begin, one whose
//! previous transaction ended here or whose producer was initialised here ([`TxnAdds::clear`]
//! marks the id). Until then a batch at the current epoch counts as added under an earlier
//! term.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::txns::ProducerIdEpoch;

/// What one open transaction added in this term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Added {
    pub producer: ProducerIdEpoch,
    pub partitions: BTreeSet<(String, i32)>,
    pub groups: BTreeSet<String>,
    /// Leader clock of the first add (the transaction's start if it has written nothing).
    pub started_ms: i64,
}

/// One term's adds, by transactional id.
#[derive(Debug, Clone, Default)]
pub struct TxnAdds {
    open: HashMap<String, Added>,
    /// Transactional ids whose transactions this term has seen end (or whose producer was
    /// initialised in it): `open` holds everything their current transaction added.
    complete: HashSet<String>,
    /// The transaction of each id that ended with nothing written (`end_added_only`): its
    /// producer and decision, so that a retry of that EndTxn gets the same answer. Gone at
    /// the id's next add.
    ended_added_only: HashMap<String, (ProducerIdEpoch, bool)>,
}

impl TxnAdds {
    /// The id's open entry, started afresh for another producer or epoch; its earlier
    /// added-only end is no longer the one a retry names.
    fn entry(&mut self, transactional_id: &str, producer: ProducerIdEpoch, now_ms: i64) -> &mut Added {
        self.ended_added_only.remove(transactional_id);
        let fresh =
            || Added { producer, partitions: BTreeSet::new(), groups: BTreeSet::new(), started_ms: now_ms };
        let added = self.open.entry(transactional_id.to_string()).or_insert_with(fresh);
        if added.producer != producer {
            *added = fresh();
        }
        added
    }

    pub fn add_partitions(
        &mut self,
        transactional_id: &str,
        producer: ProducerIdEpoch,
        partitions: impl IntoIterator<Item = (String, i32)>,
        now_ms: i64,
    ) {
        self.entry(transactional_id, producer, now_ms).partitions.extend(partitions);
    }

    pub fn add_group(&mut self, transactional_id: &str, producer: ProducerIdEpoch, group: &str, now_ms: i64) {
        self.entry(transactional_id, producer, now_ms).groups.insert(group.to_string());
    }

    /// KIP-890 part 1: whether a transactional batch of `producer` for `partition` is
    /// admitted. It is if the transaction added the partition in this term; otherwise only
    /// while this term has not seen the transaction begin (it may have been added under an
    /// earlier leader), and then the partition is recorded as added.
    pub fn admit_partition(
        &mut self,
        transactional_id: &str,
        producer: ProducerIdEpoch,
        partition: (String, i32),
        now_ms: i64,
    ) -> bool {
        let added = self.open.get(transactional_id);
        if added.is_some_and(|a| a.producer == producer && a.partitions.contains(&partition)) {
            return true;
        }
        if self.complete.contains(transactional_id) {
            return false;
        }
        self.entry(transactional_id, producer, now_ms).partitions.insert(partition);
        true
    }

    /// What every open transaction added in this term.
    pub fn added(&self) -> &HashMap<String, Added> {
        &self.open
    }

    /// The transaction ended (or was fenced): forget what it added. From now on this term
    /// sees every add of the id's next transaction, so Produce holds it to them.
    pub fn clear(&mut self, transactional_id: &str) {
        self.open.remove(transactional_id);
        self.ended_added_only.remove(transactional_id);
        self.complete.insert(transactional_id.to_string());
    }

    /// Transactions v1: ends `producer`'s transaction if it added partitions or groups in this
    /// term and wrote nothing (the caller saw the log's transaction already ended), or if this
    /// is a retry of such an end with the same decision. True when it did; the transaction is
    /// then forgotten as by `clear`.
    pub fn end_added_only(
        &mut self,
        transactional_id: &str,
        producer: ProducerIdEpoch,
        commit: bool,
    ) -> bool {
        let added = self.open.get(transactional_id);
        let added = added
            .is_some_and(|a| a.producer == producer && !(a.partitions.is_empty() && a.groups.is_empty()));
        let retry = self.ended_added_only.get(transactional_id) == Some(&(producer, commit));
        if !(added || retry) {
            return false;
        }
        self.open.remove(transactional_id);
        self.complete.insert(transactional_id.to_string());
        self.ended_added_only.insert(transactional_id.to_string(), (producer, commit));
        true
    }

    /// Forgets transactions that added but never wrote for longer than their timeout; the
    /// applied state's open transactions are aborted through the log instead.
    pub fn expire(&mut self, now_ms: i64, timeout_ms: impl Fn(&str) -> Option<i64>) {
        self.open.retain(|id, a| timeout_ms(id).is_some_and(|t| now_ms - a.started_ms < t));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: ProducerIdEpoch = ProducerIdEpoch { producer_id: 1, producer_epoch: 0 };

    fn p(topic: &str, partition: i32) -> (String, i32) {
        (topic.to_string(), partition)
    }

    /// Issue 17: a new leader admits the writes of a transaction begun under its predecessor
    /// (whose adds it never saw), and holds a transaction it saw begin to what it added.
    #[test]
    fn a_partition_added_under_an_earlier_term_is_admitted_until_this_term_sees_the_transaction_begin() {
        let mut adds = TxnAdds::default();
        assert!(adds.admit_partition("tx", ID, p("t", 0), 0), "added under the previous leader, maybe");
        assert!(adds.added()["tx"].partitions.contains(&p("t", 0)), "recorded as added");
        adds.clear("tx");
        assert!(!adds.admit_partition("tx", ID, p("t", 0), 0), "a late batch after the end seen here");
        adds.add_partitions("tx", ID, [p("t", 1)], 0);
        assert!(adds.admit_partition("tx", ID, p("t", 1), 0), "added in this term");
        assert!(!adds.admit_partition("tx", ID, p("t", 0), 0), "not added to this transaction");
    }

    /// A v1 transaction that added and wrote nothing ends in memory; a retry of that end gets
    /// the same answer, the other decision does not, and the next add starts afresh.
    #[test]
    fn an_added_only_transaction_ends_in_memory_and_its_retry_is_recognised() {
        let mut adds = TxnAdds::default();
        assert!(!adds.end_added_only("tx", ID, false), "nothing added: the log decides");
        adds.add_partitions("tx", ID, [p("t", 0)], 0);
        assert!(!adds.end_added_only("tx", ProducerIdEpoch { producer_epoch: 1, ..ID }, false));
        assert!(adds.end_added_only("tx", ID, false));
        assert!(adds.added().is_empty(), "forgotten");
        assert!(!adds.admit_partition("tx", ID, p("t", 0), 0), "its late batch is refused");
        assert!(adds.end_added_only("tx", ID, false), "a retry");
        assert!(!adds.end_added_only("tx", ID, true), "not the other decision");
        adds.add_partitions("tx", ID, [p("t", 1)], 0);
        adds.admit_partition("tx", ID, p("t", 1), 0);
        assert!(adds.end_added_only("tx", ID, true), "the next added-only transaction");
    }
}

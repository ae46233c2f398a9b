//! Transactions applied through the pure state machine: markers, last stable offset, the
//! aborted index, pending offsets, fencing and the broker's aborts.

use bytes::Bytes;
use kafka_compat::control::marker_is_commit;
use kafka_compat::error_code;

use super::*;
use crate::command::{
    AbortTxnsOp, EndTxnOp, InitTxnProducerOp, LeaderStamp, OffsetCommitEntry, Op, OpResult, PartitionAppend,
    ProduceOp, Refusal, TxnOffsetCommitOp,
};
use crate::testing::{batch, create_topic, txn_batch};
use crate::{apply_op, Effect};
use crate::{AbortedTxn, BrokerState};

struct Machine {
    state: BrokerState,
    effects: Vec<Effect>,
}

impl Machine {
    fn new() -> Self {
        let mut m = Machine { state: BrokerState::default(), effects: Vec::new() };
        m.state.limits.txn_timeout_ms_max = 900_000;
        m.state.limits.producer_ids_live_max = 100;
        m.state.limits.producer_id_eviction_idle_ms_min = 1000;
        m.state.limits.transactional_ids_max = 3;
        m.apply(create_topic("out", 2, 1));
        m
    }

    /// Applies `op` in an entry of term 2 stamped at 20.
    fn apply(&mut self, op: Op) -> OpResult {
        self.apply_at(LeaderStamp { now_ms: 20, term: 2 }, op)
    }

    fn apply_at(&mut self, stamp: LeaderStamp, op: Op) -> OpResult {
        apply_op(&mut self.state, &stamp, &op, &mut self.effects)
    }

    fn init(&mut self, tid: &str, expected: Option<ProducerIdEpoch>) -> Result<ProducerIdEpoch, TxnError> {
        let op = InitTxnProducerOp { transactional_id: tid.into(), timeout_ms: 60_000, expected };
        match self.apply_at(LeaderStamp { now_ms: 10, term: 2 }, Op::InitTxnProducer(op)) {
            OpResult::Txn(r) => r,
            other => panic!("{other:?}"),
        }
    }

    fn leo(&self, partition: i32) -> i64 {
        self.state.partition("out", partition).unwrap().log_end_offset
    }

    fn lso(&self, partition: i32) -> i64 {
        self.state.partition("out", partition).unwrap().last_stable_offset()
    }

    /// A transactional batch of `records` at the partition's end; returns its base offset.
    fn write(&mut self, id: ProducerIdEpoch, partition: i32, records: i64, seq: i32) -> OpResult {
        let base = self.leo(partition);
        let op = Op::Produce(ProduceOp {
            partitions: vec![PartitionAppend {
                topic: "out".into(),
                partition,
                batches: vec![txn_batch(base, records, id.producer_id, id.producer_epoch, seq)],
            }],
        });
        self.apply(op)
    }

    fn plain_write(&mut self, partition: i32, records: i64) {
        let base = self.leo(partition);
        let parts =
            vec![PartitionAppend { topic: "out".into(), partition, batches: vec![batch(base, records)] }];
        self.apply(Op::Produce(ProduceOp { partitions: parts }));
    }

    fn end(&mut self, tid: &str, id: ProducerIdEpoch, txn_commit: bool) -> Result<ProducerIdEpoch, TxnError> {
        self.end_with(tid, id, txn_commit, false)
    }

    fn end_with(
        &mut self,
        tid: &str,
        id: ProducerIdEpoch,
        txn_commit: bool,
        bump_epoch: bool,
    ) -> Result<ProducerIdEpoch, TxnError> {
        let stamp = LeaderStamp { now_ms: 30, term: 2 };
        let op = EndTxnOp { transactional_id: tid.into(), producer: id, txn_commit, bump_epoch };
        match self.apply_at(stamp, Op::EndTxn(op)) {
            OpResult::Txn(r) => r,
            other => panic!("{other:?}"),
        }
    }

    fn markers(&self) -> Vec<(i32, bool)> {
        self.effects
            .iter()
            .filter_map(|e| match e {
                Effect::Append { partition, batch, .. } => {
                    marker_is_commit_if_control(batch).map(|c| (*partition, c))
                }
                _ => None,
            })
            .collect()
    }
}

fn marker_is_commit_if_control(batch: &Bytes) -> Option<bool> {
    let header = kafka_compat::batch::parse_header(batch).ok()?;
    header.is_control().then(|| marker_is_commit(batch).expect("well-formed marker"))
}

#[test]
fn commit_writes_markers_and_releases_the_last_stable_offset() {
    let mut m = Machine::new();
    let id = m.init("tx", None).unwrap();
    assert_eq!(id.producer_epoch, 0);
    m.plain_write(0, 2);
    assert!(matches!(m.write(id, 0, 3, 0), OpResult::Produced(Ok(_))));
    m.write(id, 1, 1, 0);
    assert_eq!((m.lso(0), m.leo(0)), (2, 5), "LSO stops at the open transaction's first offset");
    m.plain_write(0, 1);
    assert_eq!(m.lso(0), 2, "later non-transactional data stays behind the LSO");
    m.end("tx", id, true).unwrap();
    assert_eq!(m.markers(), vec![(0, true), (1, true)]);
    assert_eq!((m.lso(0), m.leo(0)), (7, 7), "marker at 6, everything stable");
    assert!(m.state.partition("out", 0).unwrap().aborted_txns.is_empty());
    assert_eq!(m.state.txns.by_id["tx"].state, TxnState::CompleteCommit);
}

#[test]
fn abort_records_the_aborted_range() {
    let mut m = Machine::new();
    let id = m.init("tx", None).unwrap();
    m.write(id, 0, 3, 0);
    m.end("tx", id, false).unwrap();
    let p = m.state.partition("out", 0).unwrap();
    assert_eq!(
        p.aborted_txns,
        vec![AbortedTxn { producer_id: id.producer_id, first_offset: 0, last_offset: 3 }]
    );
    assert_eq!(p.aborted_in(0, 4).count(), 1);
    assert_eq!(p.aborted_in(4, 4).count(), 0, "a fetch after the marker is not told");
    assert_eq!(m.markers(), vec![(0, false)]);
}

#[test]
fn retried_end_succeeds_and_the_other_decision_is_refused() {
    let mut m = Machine::new();
    let id = m.init("tx", None).unwrap();
    m.write(id, 0, 1, 0);
    m.end("tx", id, true).unwrap();
    assert_eq!(m.end("tx", id, true), Ok(id), "a retried commit is a success");
    assert!(matches!(m.end("tx", id, false), Err(TxnError::InvalidState(_))));
    assert_eq!(m.markers().len(), 1, "the retry writes no second marker");
}

#[test]
fn a_new_instance_fences_the_old_and_aborts_its_transaction() {
    let mut m = Machine::new();
    let old = m.init("tx", None).unwrap();
    m.write(old, 0, 2, 0);
    let new = m.init("tx", None).unwrap();
    assert_eq!((new.producer_id, new.producer_epoch), (old.producer_id, 1));
    assert_eq!(m.markers(), vec![(0, false)], "the zombie's open transaction is aborted");
    assert_eq!(m.lso(0), m.leo(0));
    assert_eq!(m.end("tx", old, true), Err(TxnError::Fenced));
    let OpResult::Produced(Err(Refusal { error_code, .. })) = m.write(old, 0, 1, 2) else {
        panic!("zombie write accepted")
    };
    assert_eq!(error_code, error_code::INVALID_PRODUCER_EPOCH);
    assert_eq!(m.init("tx", Some(old)), Err(TxnError::Fenced), "KIP-360 with a stale epoch");
}

#[test]
fn takeover_abort_lets_the_client_abort_and_continue() {
    let mut m = Machine::new();
    let id = m.init("tx", None).unwrap();
    m.write(id, 0, 2, 0);
    let stamp = LeaderStamp { now_ms: 40, term: 3 };
    let abort = AbortTxnsOp { reason: BrokerAbort::Takeover, transactions: vec![("tx".into(), id)] };
    m.apply_at(stamp, Op::AbortTxns(abort));
    assert_eq!(m.markers(), vec![(0, false)]);
    assert_eq!(m.end("tx", id, true), Err(TxnError::AbortedByBroker(BrokerAbort::Takeover)));
    let current = m.end("tx", id, false).expect("aborting what the broker aborted succeeds");
    assert_eq!(current.producer_epoch, id.producer_epoch + 1);
    // KIP-360: the client bumps with its old epoch and gets the current one.
    assert_eq!(m.init("tx", Some(id)), Ok(current));
    assert!(matches!(m.write(current, 0, 1, 0), OpResult::Produced(Ok(_))));
}

#[test]
fn pending_offsets_commit_with_the_transaction_only() {
    let mut m = Machine::new();
    let id = m.init("tx", None).unwrap();
    let commit = |offset| TxnOffsetCommitOp {
        transactional_id: "tx".into(),
        producer: id,
        group_id: "g".into(),
        generation_id: -1,
        member_id: String::new(),
        commits: vec![OffsetCommitEntry {
            topic: "out".into(),
            partition: 1,
            offset,
            leader_epoch: -1,
            metadata: None,
        }],
    };
    let stamp = LeaderStamp { now_ms: 15, term: 2 };
    let OpResult::TxnOffsets(Ok(results)) = m.apply_at(stamp, Op::TxnOffsetCommit(commit(10))) else {
        panic!()
    };
    assert_eq!(results[0].0, error_code::NONE);
    assert_eq!(m.state.txns.pending_offsets_of("g"), [("out".to_string(), 1)].into());
    assert!(m.state.txns.pending_offsets_of("other").is_empty());
    assert!(m.state.groups.committed("g", "out", 1).is_none(), "invisible before the commit");
    m.end("tx", id, false).unwrap();
    assert!(m.state.groups.committed("g", "out", 1).is_none(), "dropped by the abort");
    m.apply_at(stamp, Op::TxnOffsetCommit(commit(20)));
    m.end("tx", id, true).unwrap();
    assert_eq!(m.state.groups.committed("g", "out", 1).unwrap().offset, 20);
    assert!(m.state.txns.pending_offsets_of("g").is_empty());
}

#[test]
fn expiry_keeps_open_transactions() {
    let mut m = Machine::new();
    let a = m.init("a", None).unwrap();
    m.init("b", None).unwrap();
    m.write(a, 0, 1, 0);
    let released = m.state.txns.expire(1_000_000, 1000);
    assert_eq!(m.state.txns.by_id.keys().collect::<Vec<_>>(), vec!["a"]);
    assert_eq!(released.len(), 1);
    m.state.txns.assert_invariants();
}

#[test]
fn transactions_v2_bump_the_epoch_per_end_and_accept_a_retry() {
    let mut m = Machine::new();
    let id = m.init("tx", None).unwrap();
    m.write(id, 0, 1, 0);
    let next = m.end_with("tx", id, true, true).unwrap();
    assert_eq!(next.producer_epoch, id.producer_epoch + 1, "KIP-890 part 2: EndTxn v5 bumps");
    assert_eq!(m.end_with("tx", id, true, true), Ok(next), "the retried EndTxn gets the same answer");
    assert_eq!(m.end_with("tx", id, false, true), Err(TxnError::Fenced), "the other decision is a zombie's");
    assert!(
        matches!(m.write(next, 0, 1, 0), OpResult::Produced(Ok(_))),
        "the next transaction uses the new epoch"
    );
    assert_eq!(m.lso(0), 2, "the marker at 1 ended the first; the second is open at 2");
}

#[test]
fn an_exhausted_epoch_moves_to_a_new_producer_id() {
    let mut m = Machine::new();
    let id = m.init("tx", None).unwrap();
    m.state.txns.by_id.get_mut("tx").unwrap().producer_epoch = i16::MAX - 1;
    let id = ProducerIdEpoch { producer_epoch: i16::MAX - 1, ..id };
    m.write(id, 0, 1, 0);
    let next = m.end_with("tx", id, true, true).unwrap();
    assert_ne!(next.producer_id, id.producer_id);
    assert_eq!(next.producer_epoch, 0);
    m.state.txns.assert_invariants();
}

#[test]
fn new_transactional_ids_beyond_the_limit_are_refused_retriably() {
    let mut m = Machine::new();
    for tid in ["a", "b", "c"] {
        m.init(tid, None).unwrap();
    }
    assert!(matches!(m.init("d", None), Err(TxnError::ProducerIdsExhausted(_))));
    assert!(m.init("a", None).is_ok(), "a known id still bumps its epoch at the limit");
}

/// EndTxn of transactions v2 at the current epoch when nothing is open: a commit is refused
/// with a retriable error (the client's writes have not arrived; success would report a
/// transaction committed without its records), an abort bumps the epoch and its retry succeeds.
#[test]
fn v2_end_with_nothing_written_refuses_commit_and_bumps_on_abort() {
    let mut m = Machine::new();
    let id = m.init("tx", None).unwrap();
    assert_eq!(m.end_with("tx", id, true, true), Err(TxnError::CommitBeforeWrites));
    assert_eq!(m.state.txns.by_id["tx"].producer_epoch, id.producer_epoch, "a refused commit bumps nothing");

    let next = m.end_with("tx", id, false, true).unwrap();
    assert_eq!(next.producer_epoch, id.producer_epoch + 1);
    assert!(m.markers().is_empty(), "nothing written, no markers");
    assert_eq!(m.state.txns.by_id["tx"].state, TxnState::CompleteAbort);
    assert_eq!(m.end_with("tx", id, false, true).unwrap(), next, "the retry of the abort succeeds");

    // After a committed transaction, committing again at the new epoch is refused too.
    m.write(next, 0, 1, 0);
    let after = m.end_with("tx", next, true, true).unwrap();
    assert_eq!(m.end_with("tx", after, true, true), Err(TxnError::CommitBeforeWrites));
    // Once the writes arrive the same commit goes through.
    m.write(after, 0, 1, 0);
    assert_eq!(m.end_with("tx", after, true, true).unwrap().producer_epoch, after.producer_epoch + 1);
    assert!(
        matches!(m.end_with("tx", next, true, true), Err(TxnError::Fenced)),
        "two epochs back is a zombie"
    );
}

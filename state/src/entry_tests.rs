//! Tests of stamping idempotent produce requests (KIP-98) into one entry, without Raft: the
//! entry is built by `stamp_entry`, applied with the pure `apply_op`, and the waiting replies
//! are answered from the results, as `propose_batch` does.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_compat::batch::validate_record_set;
use tokio::sync::oneshot;

use super::*;
use crate::state::apply::apply_op;
use crate::state::apply::tests::producer_batch;
use crate::state::command::NewTopic;

type Answer = oneshot::Receiver<Result<OpResult, ProposeError>>;

fn config() -> BrokerConfig {
    BrokerConfig::from_overrides(&[]).expect("config")
}

fn state_with_topic(partitions: i32) -> BrokerState {
    let mut state = BrokerState::default();
    let create = Op::CreateTopics(vec![NewTopic {
        name: "t".into(),
        topic_id: [1; 16],
        partitions,
        replication_factor: 1,
        configs: BTreeMap::new(),
    }]);
    apply_op(&mut state, &create, &mut Vec::new());
    state
}

/// One produce request: (partition, batch) pairs of topic "t".
fn request(parts: &[(i32, Bytes)]) -> Proposal {
    Proposal::Produce(
        parts
            .iter()
            .map(|(p, bytes)| UnstampedAppend {
                topic: "t".into(),
                partition: *p,
                batches: validate_record_set(bytes, usize::MAX).expect("valid batch"),
            })
            .collect(),
    )
}

/// Stamps `proposals` as one entry, applies it to `state`, answers the waiting replies.
/// Returns each proposal's answer and the entry's op count.
fn run_entry(state: &mut BrokerState, proposals: Vec<Proposal>) -> (Vec<OpResult>, usize) {
    let (queued, answers): (Vec<(Proposal, Reply)>, Vec<Answer>) = proposals
        .into_iter()
        .map(|p| {
            let (tx, rx) = oneshot::channel();
            ((p, tx), rx)
        })
        .unzip();
    let (ops, waiting) = stamp_entry(state, &config(), 3, 1_000, queued);
    let results: Vec<OpResult> = ops.iter().map(|op| apply_op(state, op, &mut Vec::new())).collect();
    for (reply, waiting) in waiting {
        let _ = reply.send(Ok(waiting.answer(&results)));
    }
    let answers = answers.into_iter().map(|mut rx| rx.try_recv().expect("answered").expect("ok")).collect();
    (answers, ops.len())
}

/// A transactional id `tid` registered through the log; its producer id and epoch.
fn init_txn(state: &mut BrokerState, tid: &str) -> crate::state::txns::ProducerIdEpoch {
    let init = Op::InitTxnProducer(crate::state::command::InitTxnProducerOp {
        transactional_id: tid.into(),
        timeout_ms: 60_000,
        timeout_ms_max: 900_000,
        expected: None,
        now_ms: 1,
        term: 3,
        producer_ids_live_max: 100,
        eviction_idle_ms_min: 1_000,
        transactional_ids_max: 100,
    });
    match run_entry(state, vec![Proposal::Op(init)]).0.as_slice() {
        [OpResult::Txn(Ok(id))] => *id,
        other => panic!("{other:?}"),
    }
}

/// One transactional produce request of one batch (`records` 1) on partition 0 of "t".
fn txn_write(id: crate::state::txns::ProducerIdEpoch, seq: i32) -> Proposal {
    let bytes = crate::test_batches::txn_batch(0, 1, id.producer_id, id.producer_epoch, seq);
    let batches = validate_record_set(&bytes, usize::MAX).expect("valid batch");
    Proposal::ProduceTransactional(vec![UnstampedAppend { topic: "t".into(), partition: 0, batches }])
}

/// (error code, base offset) per partition of a produce answer.
fn outcome(answer: &OpResult) -> Vec<(i16, i64)> {
    match answer {
        OpResult::Produced(parts) => parts.iter().map(|p| (p.error_code, p.base_offset)).collect(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_duplicate_gets_its_original_offset_and_appends_nothing() {
    let mut state = state_with_topic(1);
    run_entry(&mut state, vec![request(&[(0, producer_batch(0, 4, 1, 0, 0))])]);
    let (answers, ops) = run_entry(&mut state, vec![request(&[(0, producer_batch(0, 1, 9, 0, 0))])]);
    assert_eq!((outcome(&answers[0]), ops), (vec![(0, 4)], 1), "an unrelated producer appends at 4");
    // The retry of the first batch is answered from the applied state, without an op.
    let (answers, ops) = run_entry(&mut state, vec![request(&[(0, producer_batch(0, 4, 1, 0, 0))])]);
    assert_eq!((outcome(&answers[0]), ops), (vec![(0, 0)], 0));
    assert_eq!(state.partition("t", 0).unwrap().log_end_offset, 5);
}

#[test]
fn failing_partitions_are_answered_alone_and_the_rest_is_one_op() {
    let mut state = state_with_topic(3);
    run_entry(&mut state, vec![request(&[(1, producer_batch(0, 2, 1, 1, 0))])]);
    let (answers, ops) = run_entry(
        &mut state,
        vec![request(&[
            (0, producer_batch(0, 1, 1, 1, 0)), // new partition for the producer: appended
            (1, producer_batch(0, 1, 1, 1, 7)), // gap
            (2, producer_batch(0, 1, 2, 0, 0)), // appended
        ])],
    );
    assert_eq!(outcome(&answers[0]), vec![(0, 0), (45, -1), (0, 0)]);
    assert_eq!(ops, 1);
    let (answers, _) = run_entry(&mut state, vec![request(&[(1, producer_batch(0, 1, 1, 0, 2))])]);
    assert_eq!(outcome(&answers[0]), vec![(47, -1)], "epoch 0 after epoch 1 is fenced");
    let (answers, _) = run_entry(&mut state, vec![request(&[(1, producer_batch(0, 1, 1, 2, 0))])]);
    assert_eq!(outcome(&answers[0]), vec![(0, 2)], "a new epoch starts at sequence 0");
    let (answers, _) = run_entry(&mut state, vec![request(&[(9, producer_batch(0, 1, 1, 2, 1))])]);
    assert_eq!(outcome(&answers[0]), vec![(3, -1)]);
}

#[test]
fn an_entry_holding_an_original_and_its_retry_appends_once() {
    let mut state = state_with_topic(1);
    let original = || request(&[(0, producer_batch(0, 3, 5, 0, 0))]);
    let next = request(&[(0, producer_batch(0, 2, 5, 0, 3))]);
    let (answers, ops) = run_entry(&mut state, vec![original(), original(), next, original()]);
    assert_eq!(ops, 2, "the original and the next batch; both retries are answered, not proposed");
    let outcomes: Vec<Vec<(i16, i64)>> = answers.iter().map(outcome).collect();
    assert_eq!(outcomes, vec![vec![(0, 0)], vec![(0, 0)], vec![(0, 3)], vec![(0, 0)]]);
    assert_eq!(state.partition("t", 0).unwrap().log_end_offset, 5);
}

#[test]
fn a_retry_in_the_same_entry_fails_with_its_original() {
    let state = state_with_topic(1);
    let (tx1, mut rx1) = oneshot::channel();
    let (tx2, mut rx2) = oneshot::channel();
    let original = || request(&[(0, producer_batch(0, 3, 5, 0, 0))]);
    let (_, waiting) = stamp_entry(&state, &config(), 3, 1_000, vec![(original(), tx1), (original(), tx2)]);
    assert!(rx2.try_recv().is_err(), "the retry must not be answered before its original commits");
    for (reply, waiting) in waiting {
        let _ = reply.send(waiting.failed(&ProposeError::NotLeader));
    }
    for rx in [&mut rx1, &mut rx2] {
        assert_eq!(outcome(&rx.try_recv().unwrap().unwrap()), vec![(6, -1)]);
    }
}

#[test]
fn stamping_and_apply_agree_over_many_entries_with_retries() {
    // A producer with five requests in flight whose responses get lost: every request is sent
    // again in the next entry. Apply must never refuse what stamping accepted.
    let mut state = state_with_topic(2);
    let mut next_seq = [0i32; 2];
    let mut previous: Vec<(i32, i32)> = Vec::new();
    for round in 0..20 {
        let mut sent = Vec::new();
        for i in 0..5 {
            let p = (round + i) % 2;
            sent.push((p, next_seq[p as usize]));
            next_seq[p as usize] += 2;
        }
        let retries = previous.iter().map(|&(p, s)| request(&[(p, producer_batch(0, 2, 4, 0, s))]));
        let fresh = sent.iter().map(|&(p, s)| request(&[(p, producer_batch(0, 2, 4, 0, s))]));
        let (answers, _) = run_entry(&mut state, retries.chain(fresh).collect());
        for answer in &answers {
            assert!(outcome(answer).iter().all(|(code, _)| *code == 0), "round {round}: {answer:?}");
        }
        previous = sent;
    }
    let appended: i64 = (0..2).map(|p| state.partition("t", p).unwrap().log_end_offset).sum();
    assert_eq!(appended, 20 * 5 * 2, "each batch once");
}

#[test]
fn a_new_producer_id_beyond_the_live_limit_is_refused_retriably() {
    let mut state = state_with_topic(1);
    for pid in 0..limits::PRODUCER_IDS_LIVE_MAX as i64 {
        state.producers.live.insert(pid, Default::default());
        state.producers.idle_order.insert((0, pid));
    }
    let known = limits::PRODUCER_IDS_LIVE_MAX as i64 - 1;
    let (answers, _) = run_entry(
        &mut state,
        vec![
            request(&[(0, producer_batch(0, 1, known, 0, 0))]),
            request(&[(0, producer_batch(0, 1, -1, -1, 0))]),
        ],
    );
    assert_eq!(outcome(&answers[0]), vec![(0, 0)], "a live producer keeps producing");
    assert_eq!(outcome(&answers[1]), vec![(0, 1)], "batches without a producer id are unaffected");
    let unknown = limits::PRODUCER_IDS_LIVE_MAX as i64 + 5;
    let (answers, ops) = run_entry(&mut state, vec![request(&[(0, producer_batch(0, 1, unknown, 0, 0))])]);
    assert_eq!((outcome(&answers[0]), ops), (vec![(error_code::NOT_ENOUGH_REPLICAS, -1)], 0));
}

/// Regression: an EndTxn queued between two produce proposals wrote its marker at the offset
/// the later produce had been stamped with, so apply refused that produce — after a
/// transactional produce had already been answered with the offset (the client's next batch
/// then met OUT_OF_ORDER_SEQUENCE_NUMBER). Marker-writing ops now go last in their entry.
#[test]
fn an_end_txn_between_produces_does_not_shift_their_offsets() {
    use crate::state::command::{EndTxnOp, LeaderStamp};

    let mut state = state_with_topic(1);
    let (a, b) = (init_txn(&mut state, "a"), init_txn(&mut state, "b"));
    run_entry(&mut state, vec![txn_write(a, 0)]);
    let end_a = Proposal::Op(Op::EndTxn(EndTxnOp {
        transactional_id: "a".into(),
        producer: a,
        commit: true,
        bump_epoch: false,
        stamp: LeaderStamp { now_ms: 2, term: 3 },
        producer_ids_live_max: 100,
        eviction_idle_ms_min: 1_000,
    }));
    let (answers, _) = run_entry(&mut state, vec![end_a, txn_write(b, 0)]);
    assert!(matches!(answers[0], OpResult::Txn(Ok(_))), "{:?}", answers[0]);
    assert_eq!(outcome(&answers[1]), vec![(0, 1)], "b's batch answered at 1, before a's marker");
    let partition = state.partition("t", 0).unwrap();
    assert_eq!(partition.log_end_offset, 3, "a's data at 0, b's at 1, a's marker at 2");
    assert_eq!(partition.open_txns.get(&b.producer_id), Some(&1), "b's transaction applied where answered");
}

/// The first write of a transaction waits for its entry to commit; later writes of the open
/// transaction are answered once stamped. (Answering the first early would let a lost first
/// write pass as an empty transaction whose EndTxn(commit) succeeds, see `txn_is_open`.)
#[test]
fn only_writes_to_an_already_open_transaction_are_answered_before_commit() {
    let mut state = state_with_topic(1);
    let id = init_txn(&mut state, "t");
    let write = |seq| txn_write(id, seq);
    for (seq, early) in [(0, false), (1, true)] {
        let (tx, mut rx) = oneshot::channel();
        let (ops, waiting) = stamp_entry(&state, &config(), 3, 1_000, vec![(write(seq), tx)]);
        assert_eq!(rx.try_recv().is_ok(), early, "write {seq}: answered before commit?");
        let results: Vec<OpResult> = ops.iter().map(|op| apply_op(&mut state, op, &mut Vec::new())).collect();
        for (reply, waiting) in waiting {
            let _ = reply.send(Ok(waiting.answer(&results)));
        }
    }
    assert_eq!(state.partition("t", 0).unwrap().log_end_offset, 2);
}

/// Regression: a transactional produce decided entirely at stamping (here a late retry of a
/// batch of a transaction already committed) was left waiting on an entry that held no op for
/// it; with no ops at all the proposer's assertion panicked and every later proposal hung
/// (seen as a 120 s produce timeout at 100 producers).
#[test]
fn a_transactional_produce_decided_at_stamping_is_answered_at_once() {
    use crate::state::command::{EndTxnOp, LeaderStamp};

    let mut state = state_with_topic(1);
    let id = init_txn(&mut state, "t");
    let write = || txn_write(id, 0);
    run_entry(&mut state, vec![write()]);
    let end = Op::EndTxn(EndTxnOp {
        transactional_id: "t".into(),
        producer: id,
        commit: true,
        bump_epoch: false,
        stamp: LeaderStamp { now_ms: 2, term: 3 },
        producer_ids_live_max: 100,
        eviction_idle_ms_min: 1_000,
    });
    run_entry(&mut state, vec![Proposal::Op(end)]);
    let (tx, mut rx) = oneshot::channel();
    let (ops, waiting) = stamp_entry(&state, &config(), 3, 1_000, vec![(write(), tx)]);
    assert!(ops.is_empty() && waiting.is_empty(), "nothing to propose, nobody waiting");
    assert_eq!(outcome(&rx.try_recv().unwrap().unwrap()), vec![(0, 0)], "the duplicate's original offset");
}

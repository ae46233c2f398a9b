//! Tests of stamping idempotent produce requests (KIP-98) into one entry, without Raft: the
//! entry is built by `build_entry`, applied with the pure `apply_command`, and the waiting
//! proposals are answered from the results, as the broker's proposer does.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_compat::batch::validate_record_set;
use kafka_compat::error_code;

use super::*;
use crate::command::{CreateTopicsOp, InitTxnProducerOp, NewTopic};
use crate::limits;
use crate::testing::producer_batch;
use crate::txns::ProducerIdEpoch;

/// Every entry of these tests: the leader of term 3 at 1000.
pub(super) fn stamp() -> LeaderStamp {
    LeaderStamp { now_ms: 1_000, term: 3 }
}

fn build(state: &BrokerState, proposals: Vec<Proposal>) -> Entry {
    build_entry(state, stamp(), &EntryOptions::default(), proposals)
}

pub(super) fn apply(state: &mut BrokerState, command: &Command) -> Vec<OpResult> {
    crate::apply_command(state, command, |_, _| Ok::<(), ()>(())).expect("no storage here").results
}

pub(super) fn state_with_topic(partitions: i32) -> BrokerState {
    let mut state = BrokerState::default();
    let create = Op::CreateTopics(CreateTopicsOp {
        topics: vec![NewTopic {
            name: "t".into(),
            topic_id: [1; 16],
            partitions,
            replication_factor: 1,
            configs: BTreeMap::new(),
        }],
    });
    apply(&mut state, &Command { stamp: stamp(), ops: vec![create] });
    state
}

/// One produce request: (partition, batch) pairs of topic "t".
pub(super) fn request(parts: &[(i32, Bytes)]) -> Proposal {
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

/// Builds `proposals` into one entry, applies it to `state`, answers the waiting proposals.
/// Returns each proposal's answer and the entry's op count.
fn run_entry(state: &mut BrokerState, proposals: Vec<Proposal>) -> (Vec<Answer>, usize) {
    let built = build(state, proposals);
    let results = apply(state, &built.command);
    let answers = built
        .decisions
        .into_iter()
        .map(|d| match d {
            Decision::Answered(answer) => answer,
            Decision::Waiting(waiting) => waiting.answer(&results),
        })
        .collect();
    (answers, built.command.ops.len())
}

/// A transactional id `tid` registered through the log; its producer id and epoch.
pub(super) fn init_txn(state: &mut BrokerState, tid: &str) -> ProducerIdEpoch {
    let init = Op::InitTxnProducer(InitTxnProducerOp {
        transactional_id: tid.into(),
        timeout_ms: 60_000,
        expected: None,
    });
    match run_entry(state, vec![Proposal::Op(init)]).0.as_slice() {
        [Answer::Op(OpResult::Txn(Ok(id)))] => *id,
        other => panic!("{other:?}"),
    }
}

/// One transactional produce request of one batch (`records` 1) on partition 0 of "t".
pub(super) fn txn_write(id: ProducerIdEpoch, seq: i32) -> Proposal {
    let bytes = crate::testing::txn_batch(0, 1, id.producer_id, id.producer_epoch, seq);
    let batches = validate_record_set(&bytes, usize::MAX).expect("valid batch");
    Proposal::ProduceTransactional(vec![UnstampedAppend { topic: "t".into(), partition: 0, batches }])
}

/// (error code, base offset) per partition of a produce answer.
pub(super) fn outcome(answer: &Answer) -> Vec<(i16, i64)> {
    match answer {
        Answer::Produced(parts) => parts.iter().map(|p| (p.error_code, p.base_offset)).collect(),
        other => panic!("{other:?}"),
    }
}

/// Whether the proposal was answered at stamping, before its entry commits.
fn answered_now(decision: &Decision) -> bool {
    matches!(decision, Decision::Answered(_))
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
    let original = || request(&[(0, producer_batch(0, 3, 5, 0, 0))]);
    let built = build(&state, vec![original(), original()]);
    assert!(!answered_now(&built.decisions[1]), "the retry must not be answered before its original commits");
    for decision in built.decisions {
        let Decision::Waiting(waiting) = decision else { panic!("answered before the entry") };
        let failed = waiting.failed(error_code::NOT_LEADER_OR_FOLLOWER, "not the leader").expect("a produce");
        assert_eq!(outcome(&failed), vec![(6, -1)]);
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
    use crate::command::EndTxnOp;

    let mut state = state_with_topic(1);
    let (a, b) = (init_txn(&mut state, "a"), init_txn(&mut state, "b"));
    run_entry(&mut state, vec![txn_write(a, 0)]);
    let end_a = Proposal::Op(Op::EndTxn(EndTxnOp {
        transactional_id: "a".into(),
        producer: a,
        txn_commit: true,
        bump_epoch: false,
    }));
    let (answers, _) = run_entry(&mut state, vec![end_a, txn_write(b, 0)]);
    assert!(matches!(answers[0], Answer::Op(OpResult::Txn(Ok(_)))), "{:?}", answers[0]);
    assert_eq!(outcome(&answers[1]), vec![(0, 1)], "b's batch answered at 1, before a's marker");
    let partition = state.partition("t", 0).unwrap();
    assert_eq!(partition.log_end_offset, 3, "a's data at 0, b's at 1, a's marker at 2");
    assert_eq!(partition.open_txns.get(&b.producer_id), Some(&1), "b's transaction applied where answered");
}

/// Issue 17: every transactional write waits for its entry, the first of its transaction and
/// the later ones alike, so a leader change loses none that its client was told about. The
/// entry says it holds writes of an open transaction; only the checker's test bug (the
/// broker's fault-injection build) answers those once stamped, with `Waiting::as_stamped`,
/// what onelog did before, when a new leader aborted every open transaction.
#[test]
fn every_transactional_write_waits_for_its_entry() {
    let mut state = state_with_topic(1);
    let id = init_txn(&mut state, "t");
    for (seq, open) in [(0, false), (1, true)] {
        let write = txn_write(id, seq);
        let Proposal::ProduceTransactional(appends) = &write else { unreachable!() };
        assert_eq!(writes_open_txn(&state, appends), open, "write {seq}: of an open transaction?");
        let mut built = build(&state, vec![write]);
        assert!(!answered_now(&built.decisions[0]), "write {seq}: answered at once");
        assert_eq!(built.open_txn_writes, open, "write {seq}: the entry holds an open transaction's write?");
        let Some(Decision::Waiting(waiting)) = built.decisions.pop() else { unreachable!() };
        let stamped = waiting.as_stamped(&state, &built.command).expect("a produce answers as stamped");
        assert_eq!(outcome(&stamped), vec![(0, i64::from(seq))]);
        apply(&mut state, &built.command);
    }
    assert_eq!(state.partition("t", 0).unwrap().log_end_offset, 2);
}

/// Regression: a transactional produce decided entirely at stamping (here a late retry of a
/// batch of a transaction already committed) was left waiting on an entry that held no op for
/// it; with no ops at all the proposer's assertion panicked and every later proposal hung
/// (seen as a 120 s produce timeout at 100 producers).
#[test]
fn a_transactional_produce_decided_at_stamping_is_answered_at_once() {
    use crate::command::EndTxnOp;

    let mut state = state_with_topic(1);
    let id = init_txn(&mut state, "t");
    let write = || txn_write(id, 0);
    run_entry(&mut state, vec![write()]);
    let end = Op::EndTxn(EndTxnOp {
        transactional_id: "t".into(),
        producer: id,
        txn_commit: true,
        bump_epoch: false,
    });
    run_entry(&mut state, vec![Proposal::Op(end)]);
    let built = build(&state, vec![write()]);
    assert!(
        built.command.ops.is_empty() && built.decisions.iter().all(answered_now),
        "nothing to propose, nobody waiting"
    );
    let Decision::Answered(answer) = &built.decisions[0] else { unreachable!() };
    assert_eq!(outcome(answer), vec![(0, 0)], "the duplicate's original offset");
}

/// Regression (found by the replay test): a DeleteTopics queued before a transactional write
/// deleted the write's topic earlier in the same entry, so apply refused the produce op that
/// had already been answered at stamping; the client then committed without those records.
/// Ops that change what a produce op is checked against now go after every produce op. (Only
/// the test bugs answer at stamping since issue 17; the order still keeps stamped offsets true.)
#[test]
fn a_topic_deletion_in_the_same_entry_does_not_lose_a_write_answered_at_stamping() {
    use crate::command::DeleteTopicsOp;

    let mut state = state_with_topic(1);
    let id = init_txn(&mut state, "a");
    run_entry(&mut state, vec![txn_write(id, 0)]);
    let delete = Proposal::Op(Op::DeleteTopics(DeleteTopicsOp { names: vec!["t".into()] }));
    let mut built = build(&state, vec![delete, txn_write(id, 1)]);
    // What the test bug answers once stamped.
    let Some(Decision::Waiting(waiting)) = built.decisions.pop() else { unreachable!() };
    let answer = waiting.as_stamped(&state, &built.command).expect("a produce answers as stamped");
    assert_eq!(outcome(&answer), vec![(0, 1)]);
    let results = apply(&mut state, &built.command);
    assert!(
        results.iter().all(|r| !matches!(r, OpResult::Produced(Err(_)))),
        "apply refused a produce op answered at stamping: {results:?}"
    );
}

/// Regression (found by the replay test): a transactional write admitted before an entry that
/// fenced its epoch was stamped anyway; apply refused its whole op, and with it the other
/// partitions of the op and later ops on them that had been answered at stamping. The builder
/// now refuses that partition alone, as apply would.
#[test]
fn a_fenced_transactional_write_is_refused_at_stamping_alone() {
    let mut state = state_with_topic(1);
    let old = init_txn(&mut state, "a");
    let other = init_txn(&mut state, "b");
    run_entry(&mut state, vec![txn_write(other, 0)]);
    let fenced = init_txn(&mut state, "a");
    assert!(fenced.producer_epoch > old.producer_epoch);
    let (answers, ops) = run_entry(&mut state, vec![txn_write(old, 0), txn_write(other, 1)]);
    assert_eq!(outcome(&answers[0]), vec![(error_code::INVALID_PRODUCER_EPOCH, -1)]);
    assert_eq!(outcome(&answers[1]), vec![(0, 1)], "the other transaction's write is unaffected");
    assert_eq!(ops, 1, "only the current instance's write is in the entry");
}

fn appends_of(proposal: Proposal) -> Vec<UnstampedAppend> {
    match proposal {
        Proposal::Produce(appends) | Proposal::ProduceTransactional(appends) => appends,
        Proposal::Op(_) | Proposal::ProduceRemote(_) => unreachable!("a local produce"),
    }
}

/// Issue 13, reproduction 1: the proposer bounds entries by `Proposal::size_bytes`, so it must
/// never be less than what the stamped op encodes to in the entry.
#[test]
fn a_produce_proposals_size_bounds_its_encoded_op() {
    let state = state_with_topic(4);
    let parts: Vec<(i32, Bytes)> = (0..4).map(|p| (p, crate::testing::batch(0, 3 + i64::from(p)))).collect();
    let proposal = request(&parts);
    let bound = proposal.size_bytes();
    let built = build(&state, vec![proposal]);
    assert_eq!(built.command.ops.len(), 1);
    let encoded = bincode::serialized_size(&built.command.ops[0]).expect("encodes") as usize;
    assert!(bound >= encoded, "size_bytes {bound} below the encoded op's {encoded}");
}

/// Issue 13, reproduction 1: a request too large for one entry is split, in order, into
/// groups that each fit, and one that fits stays one group (atomic).
#[test]
fn a_produce_request_is_split_into_groups_that_fit_one_entry() {
    let parts: Vec<(i32, Bytes)> = (0..7).map(|p| (p, crate::testing::batch(0, 5))).collect();
    let appends = appends_of(request(&parts));
    let whole = produce_entry_bytes(&appends);
    let one_append = appends[0].entry_bytes();
    assert_eq!(split_for_entries(appends_of(request(&parts)), whole).len(), 1, "fits: one group");
    let max = 3 * one_append + 12;
    let groups = split_for_entries(appends, max);
    assert_eq!(groups.iter().map(Vec::len).collect::<Vec<_>>(), vec![3, 3, 1]);
    for group in &groups {
        assert!(produce_entry_bytes(group) <= max);
    }
    let order: Vec<i32> = groups.iter().flatten().map(|a| a.partition).collect();
    assert_eq!(order, (0..7).collect::<Vec<_>>());
}

//! Tests of the pure state machine: all-or-nothing produce, stamp checking, determinism, and
//! the re-check of idempotent producer state (KIP-98) on apply.

use bytes::Bytes;
use kafka_compat::batch::{stamp_batch, BatchStamp};
use kafka_compat::error_code;

use super::*;
use crate::command::Refusal;
use crate::command::{
    CreatePartitionsOp, DeleteTopicsOp, Op, OpResult, PartitionAppend, ProduceOp, TrimLog, TrimLogOp,
};
pub(crate) use crate::testing::producer_batch;
use crate::testing::{at, batch, Step};

fn create(name: &str, partitions: i32, id: u8) -> Step {
    crate::testing::create_topic(name, partitions, id).into()
}

fn produce(parts: Vec<(&str, i32, Vec<Bytes>)>) -> Step {
    produce_at(5, parts)
}

fn produce_at(append_time_ms: i64, parts: Vec<(&str, i32, Vec<Bytes>)>) -> Step {
    let op = Op::Produce(ProduceOp {
        partitions: parts
            .into_iter()
            .map(|(t, p, batches)| PartitionAppend { topic: t.into(), partition: p, batches })
            .collect(),
    });
    at(append_time_ms, op)
}

fn trim(trims: Vec<TrimLog>) -> Step {
    Op::TrimLog(TrimLogOp { trims }).into()
}

fn delete_topics(names: Vec<String>) -> Step {
    Op::DeleteTopics(DeleteTopicsOp { names }).into()
}

fn apply_all(steps: &[Step]) -> (BrokerState, Vec<OpResult>, usize) {
    let mut state = BrokerState::default();
    let mut effects = Vec::new();
    let results = steps.iter().map(|step| step.apply(&mut state, &mut effects)).collect();
    (state, results, effects.len())
}

#[test]
fn multi_topic_produce_applies_all_or_nothing() {
    let good = produce(vec![("orders", 0, vec![batch(0, 3)]), ("inventory", 0, vec![batch(0, 2)])]);
    let (state, results, _) = apply_all(&[create("orders", 1, 1), create("inventory", 1, 2), good]);
    let OpResult::Produced(Ok(parts)) = &results[2] else { panic!("{:?}", results[2]) };
    assert_eq!(parts.iter().map(|p| (p.error_code, p.base_offset)).collect::<Vec<_>>(), vec![(0, 0), (0, 0)]);
    assert_eq!(state.partition("orders", 0).unwrap().log_end_offset, 3);
    assert_eq!(state.partition("inventory", 0).unwrap().log_end_offset, 2);

    // Second partition mis-stamped: nothing of the op may apply.
    let bad = produce(vec![("orders", 0, vec![batch(0, 3)]), ("inventory", 0, vec![batch(7, 1)])]);
    let (state, results, effects) = apply_all(&[create("orders", 1, 1), create("inventory", 1, 2), bad]);
    assert!(
        matches!(
            &results[2],
            OpResult::Produced(Err(Refusal { error_code: error_code::NOT_LEADER_OR_FOLLOWER, .. }))
        ),
        "{:?}",
        results[2]
    );
    assert_eq!(state.partition("orders", 0).unwrap().log_end_offset, 0);
    assert_eq!(effects, 2, "only the two CreatePartitionLog effects");
}

#[test]
fn unknown_partition_refuses_the_whole_op() {
    let op = produce(vec![("orders", 0, vec![batch(0, 1)]), ("orders", 5, vec![batch(0, 1)])]);
    let (state, results, _) = apply_all(&[create("orders", 1, 1), op]);
    assert!(matches!(
        &results[1],
        OpResult::Produced(Err(Refusal { error_code: error_code::UNKNOWN_TOPIC_OR_PARTITION, .. }))
    ));
    assert_eq!(state.partition("orders", 0).unwrap().log_end_offset, 0);
}

#[test]
fn replicas_replaying_one_log_reach_identical_state() {
    let log = vec![
        create("a", 2, 1),
        produce(vec![("a", 0, vec![batch(0, 4), batch(4, 1)])]),
        produce(vec![("a", 1, vec![batch(0, 2)]), ("a", 0, vec![batch(5, 1)])]),
        Op::CreatePartitions(CreatePartitionsOp {
            topics: vec![crate::command::NewPartitions {
                topic: "a".into(),
                count: 3,
                assignments: Vec::new(),
            }],
        })
        .into(),
        trim(vec![TrimLog { topic: "a".into(), partition: 0, log_start_offset: 2 }]),
        delete_topics(vec!["missing".into()]),
    ];
    let digests: Vec<Vec<u8>> = (0..3).map(|_| bincode::serialize(&apply_all(&log).0).unwrap()).collect();
    assert_eq!(digests[0], digests[1]);
    assert_eq!(digests[1], digests[2]);
    let (state, _, _) = apply_all(&log);
    let p0 = state.partition("a", 0).unwrap();
    assert_eq!((p0.log_start_offset, p0.log_end_offset, p0.max_timestamp_offset), (2, 6, 3));
    assert_eq!(state.topics["a"].partitions.len(), 3);
}

#[test]
fn topic_admin_errors_are_deterministic_codes() {
    let (_, results, _) =
        apply_all(&[create("a", 1, 1), create("a", 1, 2), delete_topics(vec!["zz".into()])]);
    assert!(matches!(&results[1], OpResult::Items(v) if v[0].0 == 36));
    assert!(matches!(&results[2], OpResult::Items(v) if v[0].0 == 3));
}

#[test]
fn trim_never_moves_backwards_or_past_the_end() {
    let log = vec![
        create("a", 1, 1),
        produce(vec![("a", 0, vec![batch(0, 4)])]),
        trim(vec![TrimLog { topic: "a".into(), partition: 0, log_start_offset: 99 }]),
        trim(vec![TrimLog { topic: "a".into(), partition: 0, log_start_offset: 1 }]),
    ];
    let (state, _, _) = apply_all(&log);
    assert_eq!(state.partition("a", 0).unwrap().log_start_offset, 4);
}

#[test]
fn leader_epoch_cache_answers_offset_for_leader_epoch() {
    let restamp = |b: Bytes, epoch: i32| {
        let h = kafka_compat::batch::parse_header(&b).unwrap();
        stamp_batch(
            &b,
            BatchStamp {
                base_offset: h.base_offset,
                partition_leader_epoch: epoch,
                log_append_time_ms: None,
            },
        )
    };
    let log = vec![
        create("a", 1, 1),
        produce(vec![("a", 0, vec![restamp(batch(0, 5), 1)])]),
        produce(vec![("a", 0, vec![restamp(batch(5, 2), 3)])]),
    ];
    let (state, _, _) = apply_all(&log);
    let p = state.partition("a", 0).unwrap();
    assert_eq!(p.leader_epochs, vec![(1, 0), (3, 5)]);
    assert_eq!(p.end_offset_for_epoch(1), (1, 5));
    assert_eq!(p.end_offset_for_epoch(2), (1, 5));
    assert_eq!(p.end_offset_for_epoch(3), (3, 7));
    assert_eq!(p.end_offset_for_epoch(0), (0, 0));
    assert_eq!(p.end_offset_for_epoch(4), (-1, -1));
}

// --- Idempotent producers (KIP-98): apply re-checks what the leader stamped. ---

fn init(now_ms: i64) -> Step {
    at(now_ms, Op::InitProducerId(crate::command::InitProducerIdOp {}))
}

fn refused_code(result: &OpResult) -> Option<i16> {
    match result {
        OpResult::Produced(Err(Refusal { error_code, .. })) => Some(*error_code),
        _ => None,
    }
}

#[test]
fn producer_ids_come_from_a_replicated_counter() {
    let (state, results, _) = apply_all(&[init(1), init(2), init(3)]);
    let ids: Vec<i64> = results
        .iter()
        .map(|r| match r {
            OpResult::ProducerId(Ok(crate::txns::ProducerIdEpoch { producer_id, producer_epoch: 0 })) => {
                *producer_id
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ids, vec![0, 1, 2]);
    assert_eq!(state.producers.next_producer_id, 3);
    assert_eq!(state.producers.live.len(), 3);
}

#[test]
fn apply_records_accepted_batches_and_refuses_what_the_leader_should_have_left_out() {
    let base = vec![create("a", 1, 1), produce(vec![("a", 0, vec![producer_batch(0, 3, 7, 0, 0)])])];
    let cases: Vec<(&str, Bytes, i16)> = vec![
        // A duplicate reaching apply means the leader's view was stale: retriable refusal.
        ("duplicate", producer_batch(3, 3, 7, 0, 0), 6),
        ("gap", producer_batch(3, 1, 7, 0, 5), 45),
        ("new epoch not from 0", producer_batch(3, 1, 7, 1, 3), 45),
    ];
    for (name, bad, code) in cases {
        let mut log = base.clone();
        log.push(produce(vec![("a", 0, vec![bad])]));
        let (state, results, effects) = apply_all(&log);
        assert_eq!(refused_code(&results[2]), Some(code), "{name}: {:?}", results[2]);
        assert_eq!(state.partition("a", 0).unwrap().log_end_offset, 3, "{name}: nothing appended");
        assert_eq!(effects, 2, "{name}: one CreatePartitionLog and the first append only");
    }
    let (state, results, _) = apply_all(&base);
    assert!(matches!(results[1], OpResult::Produced(_)));
    let p = state.producers.partition(7, "a", 0).unwrap();
    assert_eq!((p.epoch, p.batches.len(), p.batches[0].last_seq, p.batches[0].last_offset), (0, 1, 2, 2));
}

#[test]
fn stale_epoch_is_fenced_and_new_epoch_starts_at_zero() {
    let log = vec![
        create("a", 1, 1),
        produce(vec![("a", 0, vec![producer_batch(0, 2, 7, 0, 0)])]),
        produce(vec![("a", 0, vec![producer_batch(2, 1, 7, 1, 0)])]),
        produce(vec![("a", 0, vec![producer_batch(3, 1, 7, 0, 2)])]),
    ];
    let (state, results, _) = apply_all(&log);
    assert!(matches!(results[2], OpResult::Produced(_)), "{:?}", results[2]);
    assert_eq!(refused_code(&results[3]), Some(47));
    let p = state.producers.partition(7, "a", 0).unwrap();
    assert_eq!((p.epoch, p.batches.len()), (1, 1), "a new epoch forgets the old epoch's batches");
}

#[test]
fn one_failing_partition_refuses_the_whole_op() {
    let log = vec![
        create("a", 2, 1),
        produce(vec![("a", 0, vec![producer_batch(0, 1, 7, 0, 0)])]),
        produce(vec![
            ("a", 1, vec![producer_batch(0, 1, 7, 0, 0)]),
            ("a", 0, vec![producer_batch(1, 1, 7, 0, 9)]),
        ]),
    ];
    let (state, results, _) = apply_all(&log);
    assert_eq!(refused_code(&results[2]), Some(45));
    assert_eq!(state.partition("a", 1).unwrap().log_end_offset, 0);
    assert!(state.producers.partition(7, "a", 1).is_none(), "no producer state from a refused op");
}

#[test]
fn expiry_forgets_only_producers_idle_long_enough() {
    let expire = |now_ms| {
        at(now_ms, Op::ExpireProducers(crate::command::ExpireProducersOp {}))
            .with_limits(|l| l.producer_id_expiration_ms = 1_000)
    };
    let log = vec![
        create("a", 1, 1),
        init(100), // pid 0, idle from 100
        init(200), // pid 1, then active at 900
        produce_at(900, vec![("a", 0, vec![producer_batch(0, 1, 1, 0, 0)])]),
        expire(1_100),
    ];
    let (state, _, _) = apply_all(&log);
    assert_eq!(state.producers.live.keys().copied().collect::<Vec<_>>(), vec![1]);
    assert_eq!(state.producers.idle_order.iter().copied().collect::<Vec<_>>(), vec![(900, 1)]);
    // After expiry the producer is unknown on the partition: any sequence is accepted.
    let mut later = log.clone();
    later.push(expire(1_900));
    later.push(produce_at(2_000, vec![("a", 0, vec![producer_batch(1, 1, 1, 0, 40)])]));
    let (state, results, _) = apply_all(&later);
    assert!(matches!(results[6], OpResult::Produced(_)), "{:?}", results[6]);
    assert_eq!(state.producers.partition(1, "a", 0).unwrap().batches[0].first_seq, 40);
}

#[test]
fn a_deleted_topic_takes_its_producer_state_along() {
    let log = vec![
        create("a", 1, 1),
        produce(vec![("a", 0, vec![producer_batch(0, 1, 7, 0, 0)])]),
        delete_topics(vec!["a".into()]),
        create("a", 1, 2),
        // The same sequence again is new data for the new topic, not a duplicate.
        produce(vec![("a", 0, vec![producer_batch(0, 1, 7, 0, 0)])]),
    ];
    let (state, results, _) = apply_all(&log);
    assert!(matches!(results[4], OpResult::Produced(_)), "{:?}", results[4]);
    assert_eq!(state.partition("a", 0).unwrap().log_end_offset, 1);
}

#[test]
fn replicas_replaying_a_log_with_producers_reach_identical_state() {
    let log = vec![
        create("a", 2, 1),
        init(10),
        init(20),
        produce_at(
            30,
            vec![
                ("a", 0, vec![producer_batch(0, 3, 0, 0, 0)]),
                ("a", 1, vec![producer_batch(0, 1, 1, 0, 0)]),
            ],
        ),
        produce_at(40, vec![("a", 0, vec![producer_batch(3, 2, 0, 0, 3)])]),
        produce_at(50, vec![("a", 0, vec![producer_batch(5, 2, 0, 0, 99)])]), // gap: refused
        produce_at(60, vec![("a", 1, vec![producer_batch(1, 1, 1, 1, 0)])]),  // epoch bump
        init(70),
        // Producer 0 was last active at 40: expired; 1 (at 60) and 2 (at 70) stay.
        at(75, Op::ExpireProducers(crate::command::ExpireProducersOp {}))
            .with_limits(|l| l.producer_id_expiration_ms = 30),
    ];
    let digests: Vec<Vec<u8>> = (0..3).map(|_| bincode::serialize(&apply_all(&log).0).unwrap()).collect();
    assert_eq!(digests[0], digests[1]);
    assert_eq!(digests[1], digests[2]);
    let (state, _, _) = apply_all(&log);
    assert_eq!(state.producers.live.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(state.producers.next_producer_id, 3);
    assert_eq!(state.partition("a", 0).unwrap().log_end_offset, 5, "the gap appended nothing");
    assert_eq!(state.producers.partition(1, "a", 1).unwrap().epoch, 1);
    // The state, producers included, survives the checkpoint encoding.
    let bytes = bincode::serialize(&state).unwrap();
    assert_eq!(bincode::deserialize::<BrokerState>(&bytes).unwrap(), state);
}

/// Regression: CreatePartitions ignored an explicit replica assignment. Apply records each new
/// partition's replicas (Metadata reports them) and refuses, with INVALID_REPLICA_ASSIGNMENT
/// and no partition added, assignments Kafka refuses (here: two replicas for a topic of one).
#[test]
fn create_partitions_records_explicit_replica_assignments() {
    let grow = |count: i32, assignments: Vec<Vec<i32>>| -> Step {
        let topics = vec![crate::command::NewPartitions { topic: "a".into(), count, assignments }];
        Op::CreatePartitions(CreatePartitionsOp { topics }).into()
    };
    let log = vec![create("a", 1, 1), grow(3, vec![vec![2], vec![3]]), grow(4, vec![vec![1, 2]])];
    let (state, results, _) = apply_all(&log);
    let replicas: Vec<Vec<i32>> = state.topics["a"].partitions.iter().map(|p| p.replicas.clone()).collect();
    assert_eq!(replicas, vec![vec![], vec![2], vec![3]]);
    let OpResult::Items(refused) = &results[2] else { panic!("items: {:?}", results[2]) };
    assert_eq!(refused[0].0, error_code::INVALID_REPLICA_ASSIGNMENT, "{refused:?}");
}

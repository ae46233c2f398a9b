//! Tests of the pure state machine: all-or-nothing produce, stamp checking, determinism.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use kafka_compat::batch::{stamp_batch, BatchStamp};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

use super::*;
use crate::state::command::{NewTopic, Op, OpResult, PartitionAppend, ProduceOp, TrimLog};

fn batch(base_offset: i64, records: i64) -> Bytes {
    let recs: Vec<Record> = (0..records)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: i as i32,
            timestamp: 1000 + i,
            key: None,
            value: Some(Bytes::from_static(b"v")),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let opts = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, &recs, &opts).expect("encode");
    stamp_batch(&buf, BatchStamp { base_offset, partition_leader_epoch: 1, log_append_time_ms: None })
}

fn create(name: &str, partitions: i32, id: u8) -> Op {
    Op::CreateTopics(vec![NewTopic {
        name: name.into(),
        topic_id: [id; 16],
        partitions,
        replication_factor: 1,
        configs: BTreeMap::new(),
    }])
}

fn produce(parts: Vec<(&str, i32, Vec<Bytes>)>) -> Op {
    Op::Produce(ProduceOp {
        append_time_ms: 5,
        partitions: parts
            .into_iter()
            .map(|(t, p, batches)| PartitionAppend { topic: t.into(), partition: p, batches })
            .collect(),
    })
}

fn apply_all(ops: &[Op]) -> (BrokerState, Vec<OpResult>, usize) {
    let mut state = BrokerState::default();
    let mut effects = Vec::new();
    let results = ops.iter().map(|op| apply_op(&mut state, op, &mut effects)).collect();
    (state, results, effects.len())
}

#[test]
fn multi_topic_produce_applies_all_or_nothing() {
    let good = produce(vec![("orders", 0, vec![batch(0, 3)]), ("inventory", 0, vec![batch(0, 2)])]);
    let (state, results, _) = apply_all(&[create("orders", 1, 1), create("inventory", 1, 2), good]);
    assert!(matches!(&results[2], OpResult::Produced { base_offsets, .. } if base_offsets == &vec![0, 0]));
    assert_eq!(state.partition("orders", 0).unwrap().log_end_offset, 3);
    assert_eq!(state.partition("inventory", 0).unwrap().log_end_offset, 2);

    // Second partition mis-stamped: nothing of the op may apply.
    let bad = produce(vec![("orders", 0, vec![batch(0, 3)]), ("inventory", 0, vec![batch(7, 1)])]);
    let (state, results, effects) = apply_all(&[create("orders", 1, 1), create("inventory", 1, 2), bad]);
    assert!(matches!(&results[2], OpResult::Refused { error_code: 6, .. }), "{:?}", results[2]);
    assert_eq!(state.partition("orders", 0).unwrap().log_end_offset, 0);
    assert_eq!(effects, 2, "only the two CreatePartitionLog effects");
}

#[test]
fn unknown_partition_refuses_the_whole_op() {
    let op = produce(vec![("orders", 0, vec![batch(0, 1)]), ("orders", 5, vec![batch(0, 1)])]);
    let (state, results, _) = apply_all(&[create("orders", 1, 1), op]);
    assert!(matches!(&results[1], OpResult::Refused { error_code: 3, .. }));
    assert_eq!(state.partition("orders", 0).unwrap().log_end_offset, 0);
}

#[test]
fn replicas_replaying_one_log_reach_identical_state() {
    let log = vec![
        create("a", 2, 1),
        produce(vec![("a", 0, vec![batch(0, 4), batch(4, 1)])]),
        produce(vec![("a", 1, vec![batch(0, 2)]), ("a", 0, vec![batch(5, 1)])]),
        Op::CreatePartitions(vec![crate::state::command::NewPartitions { topic: "a".into(), count: 3 }]),
        Op::TrimLog(vec![TrimLog { topic: "a".into(), partition: 0, log_start_offset: 2 }]),
        Op::DeleteTopics(vec!["missing".into()]),
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
        apply_all(&[create("a", 1, 1), create("a", 1, 2), Op::DeleteTopics(vec!["zz".into()])]);
    assert!(matches!(&results[1], OpResult::PerItem(v) if v[0].0 == 36));
    assert!(matches!(&results[2], OpResult::PerItem(v) if v[0].0 == 3));
}

#[test]
fn trim_never_moves_backwards_or_past_the_end() {
    let log = vec![
        create("a", 1, 1),
        produce(vec![("a", 0, vec![batch(0, 4)])]),
        Op::TrimLog(vec![TrimLog { topic: "a".into(), partition: 0, log_start_offset: 99 }]),
        Op::TrimLog(vec![TrimLog { topic: "a".into(), partition: 0, log_start_offset: 1 }]),
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

//! The tooling views: leader memory merged into the applied transaction state, the
//! ListTransactions filters, and the producers DescribeProducers lists.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::*;
use onelog_state::producers::{BatchMeta, LiveProducer, ProducerPartition};
use onelog_state::{PartitionState, Topic};

fn meta(state: TxnState, epoch: i16) -> TxnMeta {
    TxnMeta {
        producer_id: 7,
        producer_epoch: epoch,
        last_producer_epoch: -1,
        timeout_ms: 60_000,
        state,
        last_bump: None,
        partitions: BTreeMap::new(),
        pending_offsets: BTreeMap::new(),
        start_ms: -1,
        last_update_ms: 0,
    }
}

fn ongoing(start_ms: i64, partitions: &[(&str, i32, i64)]) -> TxnMeta {
    let mut m = meta(TxnState::Ongoing, 0);
    m.start_ms = start_ms;
    m.partitions = partitions.iter().map(|(t, p, o)| ((t.to_string(), *p), *o)).collect();
    m
}

fn added(epoch: i16, started_ms: i64, partitions: &[(&str, i32)]) -> Added {
    Added {
        producer: ProducerIdEpoch { producer_id: 7, producer_epoch: epoch },
        partitions: partitions.iter().map(|(t, p)| (t.to_string(), *p)).collect(),
        groups: BTreeSet::new(),
        started_ms,
    }
}

fn tps(partitions: &[(&str, i32)]) -> BTreeSet<(String, i32)> {
    partitions.iter().map(|(t, p)| (t.to_string(), *p)).collect()
}

#[test]
fn an_open_transaction_shows_its_written_partitions_and_start() {
    let view = TxnView::of("tx", &ongoing(500, &[("a", 0, 10), ("a", 1, 3)]), None);
    assert_eq!(view.state, TxnState::Ongoing);
    assert_eq!(view.start_ms, 500);
    assert_eq!(view.partitions, tps(&[("a", 0), ("a", 1)]));
    assert_eq!((view.producer_id, view.producer_epoch, view.timeout_ms), (7, 0, 60_000));
}

#[test]
fn partitions_added_before_any_write_make_the_transaction_ongoing() {
    let memory = added(0, 400, &[("a", 2)]);
    let view = TxnView::of("tx", &meta(TxnState::CompleteCommit, 0), Some(&memory));
    assert_eq!(view.state, TxnState::Ongoing);
    assert_eq!(view.start_ms, 400);
    assert_eq!(view.partitions, tps(&[("a", 2)]));

    // Added and written: both sets, and the transaction began at the earlier of the two.
    let view = TxnView::of("tx", &ongoing(500, &[("a", 0, 10)]), Some(&memory));
    assert_eq!(view.start_ms, 400);
    assert_eq!(view.partitions, tps(&[("a", 0), ("a", 2)]));
}

#[test]
fn memory_of_another_epoch_is_not_the_current_transaction() {
    let view = TxnView::of("tx", &meta(TxnState::CompleteAbort, 1), Some(&added(0, 400, &[("a", 2)])));
    assert_eq!(view.state, TxnState::CompleteAbort);
    assert_eq!(view.start_ms, -1);
    assert!(view.partitions.is_empty());
}

fn filter(states: &[&str], producer_ids: &[i64], duration_ms: i64) -> ListFilter {
    ListFilter {
        states: states.iter().map(|s| s.to_string()).collect(),
        producer_ids: producer_ids.to_vec(),
        duration_ms,
        now_ms: 1_000,
    }
}

#[test]
fn list_filters_by_state_producer_and_duration() {
    let open = TxnView::of("open", &ongoing(400, &[("a", 0, 1)]), None);
    let done = TxnView::of("done", &meta(TxnState::CompleteCommit, 0), None);
    let accepts = |f: &ListFilter| (f.accepts(&open), f.accepts(&done));

    assert_eq!(accepts(&filter(&[], &[], -1)), (true, true));
    assert_eq!(accepts(&filter(&["Ongoing"], &[], -1)), (true, false));
    assert_eq!(accepts(&filter(&["CompleteCommit", "Empty"], &[], -1)), (false, true));
    // Kafka's names are exact: "ongoing" is an unknown state and matches nothing.
    assert_eq!(accepts(&filter(&["ongoing"], &[], -1)), (false, false));
    assert_eq!(accepts(&filter(&[], &[8], -1)), (false, false));
    assert_eq!(accepts(&filter(&[], &[8, 7], -1)), (true, true));
    // Running 600 ms: longer than 599, not longer than 600; a completed one runs no longer.
    assert_eq!(accepts(&filter(&[], &[], 599)), (true, false));
    assert_eq!(accepts(&filter(&[], &[], 600)), (false, false));
}

#[test]
fn unknown_state_filters_are_those_kafka_does_not_name() {
    let f = filter(&["Ongoing", "PrepareCommit", "Bogus", "ongoing"], &[], -1);
    assert_eq!(f.unknown_states(), vec!["Bogus".to_string(), "ongoing".to_string()]);
}

fn broker_state() -> BrokerState {
    let mut state = BrokerState::default();
    let topic = Topic {
        topic_id: [1; 16],
        replication_factor: 1,
        configs: BTreeMap::new(),
        partitions: vec![PartitionState::new(), PartitionState::new()],
    };
    state.topics.insert("a".into(), topic);
    for (pid, epoch, last_seq, at_ms) in [(7, 2, 4, 900), (9, 0, 11, 950)] {
        let batch =
            BatchMeta { first_seq: 0, last_seq, base_offset: 0, last_offset: 4, append_time_ms: at_ms };
        let on_partition = ProducerPartition { epoch, batches: VecDeque::from([batch]) };
        let mut live = LiveProducer { last_active_ms: at_ms, topics: BTreeMap::new() };
        live.topics.entry("a".into()).or_default().insert(0, on_partition);
        state.producers.live.insert(pid, live);
    }
    state
}

#[test]
fn active_producers_show_sequence_time_and_open_transaction_start() {
    let mut state = broker_state();
    state.topics.get_mut("a").unwrap().partitions[0].open_txns.insert(7, 3);
    let producers = active_producers(&state, "a", 0).expect("partition exists");
    assert_eq!(
        producers,
        vec![
            ActiveProducer {
                producer_id: 7,
                producer_epoch: 2,
                last_sequence: 4,
                last_timestamp_ms: 900,
                txn_start_offset: 3
            },
            ActiveProducer {
                producer_id: 9,
                producer_epoch: 0,
                last_sequence: 11,
                last_timestamp_ms: 950,
                txn_start_offset: -1
            },
        ]
    );
    assert_eq!(active_producers(&state, "a", 1), Some(Vec::new()));
    assert_eq!(active_producers(&state, "a", 2), None);
    assert_eq!(active_producers(&state, "b", 0), None);
}

#[test]
fn an_open_transaction_without_producer_state_is_still_listed() {
    let mut state = broker_state();
    state.topics.get_mut("a").unwrap().partitions[1].open_txns.insert(5, 12);
    let producers = active_producers(&state, "a", 1).expect("partition exists");
    assert_eq!(
        producers,
        vec![ActiveProducer {
            producer_id: 5,
            producer_epoch: -1,
            last_sequence: -1,
            last_timestamp_ms: -1,
            txn_start_offset: 12
        }]
    );
}

/// `broker_state` with transactional id "tx" of producer 7 at epoch 2, its transaction open on
/// partition 0 of "a" from offset 3.
fn open_on_partition_0() -> BrokerState {
    let mut state = broker_state();
    let mut m = ongoing(500, &[("a", 0, 3)]);
    m.producer_epoch = 2;
    state.txns.by_id.insert("tx".into(), m);
    state.txns.by_producer_id.insert(7, "tx".into());
    state.topics.get_mut("a").unwrap().partitions[0].open_txns.insert(7, 3);
    state
}

fn marker(producer_id: i64, producer_epoch: i16) -> ProducerIdEpoch {
    ProducerIdEpoch { producer_id, producer_epoch }
}

#[test]
fn an_abort_marker_names_the_transaction_open_on_its_partition() {
    let state = open_on_partition_0();
    let open = AbortTarget::Open("tx".into(), marker(7, 2));
    assert_eq!(abort_target(&state, marker(7, 2), "a", 0), open);
    // Kafka's partition leader accepts a marker epoch at or above the producer's.
    assert_eq!(abort_target(&state, marker(7, 3), "a", 0), open);
    assert_eq!(abort_target(&state, marker(7, 1), "a", 0), AbortTarget::StaleEpoch { current: 2 });
}

#[test]
fn an_abort_marker_with_nothing_open_there_aborts_nothing() {
    let state = open_on_partition_0();
    // The transaction is open, but not on partition 1.
    assert_eq!(abort_target(&state, marker(7, 2), "a", 1), AbortTarget::NothingOpen);
    // An idempotent producer, and a producer id never seen.
    assert_eq!(abort_target(&state, marker(9, 0), "a", 0), AbortTarget::NothingOpen);
    assert_eq!(abort_target(&state, marker(42, 0), "a", 0), AbortTarget::NothingOpen);
    assert_eq!(abort_target(&state, marker(7, 2), "a", 2), AbortTarget::UnknownPartition);
    assert_eq!(abort_target(&state, marker(7, 2), "b", 0), AbortTarget::UnknownPartition);
}

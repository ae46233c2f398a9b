//! Tests of config alterations: Kafka's incremental semantics (KIP-339), validation by
//! resource type, and apply of `AlterConfigs` / `DeleteRecords` ops.

use super::*;
use crate::apply::apply_op;
use crate::command::{AlterConfigsOp, DeleteRecordsOp, LeaderStamp, Op, OpResult, TrimLog};
use crate::testing::{batch, create_topic, Step};
use crate::BrokerState;

fn change(resource: ConfigResource, alterations: &[(&str, AlterKind, Option<&str>)]) -> ResourceAlteration {
    let alterations = alterations
        .iter()
        .map(|(n, k, v)| ConfigAlteration { name: n.to_string(), kind: *k, value: v.map(str::to_string) })
        .collect();
    ResourceAlteration { resource, replace: false, alterations }
}

fn topic(name: &str) -> ConfigResource {
    ConfigResource::Topic(name.into())
}

fn apply(state: &mut BrokerState, op: Op) -> (OpResult, usize) {
    let mut effects = Vec::new();
    let result = apply_op(state, &LeaderStamp::default(), &op, &mut effects);
    (result, effects.len())
}

fn items(result: OpResult) -> Vec<i16> {
    let OpResult::Items(items) = result else { panic!("{result:?}") };
    items.into_iter().map(|(code, _)| code).collect()
}

#[test]
fn append_and_subtract_follow_kafka_list_semantics() {
    let empty = Overrides::new();
    // An unset list starts from its default ("delete"), and APPEND skips present values.
    let next = altered(
        &empty,
        &change(topic("t"), &[("cleanup.policy", AlterKind::Append, Some("compact,delete"))]),
    );
    assert_eq!(next.unwrap()["cleanup.policy"], "delete,compact");
    let current: Overrides = [("cleanup.policy".to_string(), "delete,compact".to_string())].into();
    let next =
        altered(&current, &change(topic("t"), &[("cleanup.policy", AlterKind::Subtract, Some("delete"))]));
    assert_eq!(next.unwrap()["cleanup.policy"], "compact");
    // APPEND to a non-list config is INVALID_CONFIG (Kafka's controller).
    let refused = altered(&empty, &change(topic("t"), &[("retention.ms", AlterKind::Append, Some("5"))]));
    assert_eq!(refused.unwrap_err().0, error_code::INVALID_CONFIG);
}

#[test]
fn set_and_delete_validate_names_and_values() {
    let empty = Overrides::new();
    let set =
        altered(&empty, &change(topic("t"), &[("retention.ms", AlterKind::Set, Some("1000"))])).unwrap();
    assert_eq!(set["retention.ms"], "1000");
    let deleted = altered(&set, &change(topic("t"), &[("retention.ms", AlterKind::Delete, None)])).unwrap();
    assert!(deleted.is_empty());
    for (name, value, code) in [
        ("no.such.config", "1", error_code::INVALID_CONFIG),
        ("retention.ms", "soon", error_code::INVALID_CONFIG),
        ("retention.ms", "", error_code::INVALID_CONFIG),
    ] {
        let refused = altered(&empty, &change(topic("t"), &[(name, AlterKind::Set, Some(value))]));
        assert_eq!(refused.unwrap_err().0, code, "{name}={value}");
    }
    // Brokers: a bad value is INVALID_REQUEST; an unknown name is stored, as Kafka does.
    let bad = altered(
        &empty,
        &change(ConfigResource::BrokerDefault, &[("message.max.bytes", AlterKind::Set, Some("x"))]),
    );
    assert_eq!(bad.unwrap_err().0, error_code::INVALID_REQUEST);
    let custom =
        altered(&empty, &change(ConfigResource::Broker(1), &[("plugin.knob", AlterKind::Set, Some("x"))]));
    assert_eq!(custom.unwrap()["plugin.knob"], "x");
    // Groups: Kafka's names and value types here; the broker's bounds are the leader's
    // (`group_config::leader_problem`). Client metrics: Kafka's names and ranges.
    let group = ConfigResource::Group("g".into());
    assert!(altered(
        &empty,
        &change(group.clone(), &[("consumer.session.timeout.ms", AlterKind::Set, Some("50000"))])
    )
    .is_ok());
    let low = altered(
        &empty,
        &change(group.clone(), &[("consumer.session.timeout.ms", AlterKind::Set, Some("0"))]),
    );
    let (code, message) = low.unwrap_err();
    assert_eq!(code, error_code::INVALID_CONFIG);
    assert_eq!(
        message,
        "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1"
    );
    let unknown = altered(&empty, &change(group, &[("consumer.colour", AlterKind::Set, Some("red"))]));
    assert_eq!(
        unknown.unwrap_err(),
        (error_code::INVALID_CONFIG, "Unknown group config name: consumer.colour".into())
    );
    let metrics = ConfigResource::ClientMetrics("m".into());
    let unknown = altered(&empty, &change(metrics, &[("colour", AlterKind::Set, Some("red"))]));
    assert_eq!(unknown.unwrap_err().0, error_code::INVALID_CONFIG);
}

#[test]
fn apply_alters_each_resource_alone_and_counts_changes() {
    let mut state = BrokerState::default();
    Step::from(create_topic("t", 1, 1)).apply(&mut state, &mut Vec::new());
    let op = AlterConfigsOp {
        resources: vec![
            change(topic("t"), &[("max.message.bytes", AlterKind::Set, Some("2000"))]),
            change(topic("missing"), &[("retention.ms", AlterKind::Set, Some("1"))]),
            change(ConfigResource::BrokerDefault, &[("log.retention.ms", AlterKind::Set, Some("5000"))]),
            change(ConfigResource::Broker(2), &[("message.max.bytes", AlterKind::Set, Some("bad"))]),
        ],
    };
    let (result, _) = apply(&mut state, Op::AlterConfigs(op));
    let expected = vec![
        error_code::NONE,
        error_code::UNKNOWN_TOPIC_OR_PARTITION,
        error_code::NONE,
        error_code::INVALID_REQUEST,
    ];
    assert_eq!(items(result), expected);
    assert_eq!(state.topics["t"].configs["max.message.bytes"], "2000");
    assert_eq!(
        state.configs.broker_value(2, "log.retention.ms"),
        Some(("5000", SOURCE_DYNAMIC_DEFAULT_BROKER))
    );
    assert!(state.configs.brokers.is_empty(), "a refused broker resource leaves nothing behind");
    assert_eq!(state.configs.changes, 2);

    // AlterConfigs replaces the whole set.
    let mut replace = change(topic("t"), &[("retention.ms", AlterKind::Set, Some("10"))]);
    replace.replace = true;
    apply(&mut state, Op::AlterConfigs(AlterConfigsOp { resources: vec![replace] }));
    assert_eq!(state.topics["t"].configs, [("retention.ms".to_string(), "10".to_string())].into());
}

/// Topic "t" with one partition holding one batch of ten records (offsets 0..10).
fn topic_with_ten_records() -> BrokerState {
    let mut state = BrokerState::default();
    Step::from(create_topic("t", 1, 1)).apply(&mut state, &mut Vec::new());
    let append =
        crate::command::PartitionAppend { topic: "t".into(), partition: 0, batches: vec![batch(0, 10)] };
    apply(&mut state, Op::Produce(crate::command::ProduceOp { partitions: vec![append] }));
    state
}

#[test]
fn delete_records_moves_the_log_start_up_to_the_high_watermark() {
    let mut state = topic_with_ten_records();
    let delete = |partitions: Vec<(&str, i32, i64)>| {
        let partitions = partitions
            .into_iter()
            .map(|(t, p, o)| TrimLog { topic: t.into(), partition: p, log_start_offset: o })
            .collect();
        Op::DeleteRecords(DeleteRecordsOp { partitions })
    };
    // Mid-batch: the log start is exactly the offset asked for, as in Kafka.
    let (result, effects) =
        apply(&mut state, delete(vec![("t", 0, 4), ("t", 1, 0), ("u", 0, 0), ("t", 0, 11)]));
    let OpResult::LowWatermarks(marks) = result else { panic!("{result:?}") };
    let expected = vec![
        (error_code::NONE, 4),
        (error_code::UNKNOWN_TOPIC_OR_PARTITION, -1),
        (error_code::UNKNOWN_TOPIC_OR_PARTITION, -1),
        (error_code::OFFSET_OUT_OF_RANGE, -1),
    ];
    assert_eq!(marks, expected);
    assert_eq!((state.topics["t"].partitions[0].log_start_offset, effects), (4, 1));
    // Lower than the current start: unchanged; -1: the high watermark.
    let (result, _) = apply(&mut state, delete(vec![("t", 0, 2), ("t", 0, -1)]));
    let OpResult::LowWatermarks(marks) = result else { panic!("{result:?}") };
    assert_eq!(marks, vec![(error_code::NONE, 4), (error_code::NONE, 10)]);
    assert_eq!(state.topics["t"].partitions[0].log_start_offset, 10);
}

#[test]
fn delete_records_stops_at_an_open_transaction() {
    let mut state = topic_with_ten_records();
    // A transaction open from offset 6 bounds the LSO there (as a first transactional write does).
    state.topics.get_mut("t").unwrap().partitions[0].open_txns.insert(99, 6);
    let partitions = vec![TrimLog { topic: "t".into(), partition: 0, log_start_offset: 8 }];
    let (result, _) = apply(&mut state, Op::DeleteRecords(DeleteRecordsOp { partitions }));
    let OpResult::LowWatermarks(marks) = result else { panic!("{result:?}") };
    assert_eq!(marks, vec![(error_code::NONE, 6)], "the answer is the low watermark reached");
    state.topics["t"].partitions[0].assert_invariants("t", 0);
}

/// Issue 32: a topic's Raft group is decided at creation; AlterConfigs can neither set nor
/// delete it, and a replacing AlterConfigs (legacy, every config at once) keeps it.
#[test]
fn a_topics_placement_cannot_be_altered_and_survives_a_replace() {
    use crate::xgroup::placement::{TOPIC_GROUP_CONFIG as RAFT_GROUP, TOPIC_KEY_CONFIG as PLACEMENT_KEY};
    let placed: Overrides = [(RAFT_GROUP.to_string(), "2".to_string())].into();
    for (name, kind, value) in [
        (RAFT_GROUP, AlterKind::Set, Some("1")),
        (RAFT_GROUP, AlterKind::Delete, None),
        (PLACEMENT_KEY, AlterKind::Set, Some("k")),
    ] {
        let (code, message) = altered(&placed, &change(topic("t"), &[(name, kind, value)])).unwrap_err();
        assert_eq!(code, error_code::INVALID_CONFIG);
        assert!(message.contains("between Raft groups"), "{message}");
    }
    let mut replace = change(topic("t"), &[("retention.ms", AlterKind::Set, Some("1000"))]);
    replace.replace = true;
    let next = altered(&placed, &replace).unwrap();
    assert_eq!(next.get(RAFT_GROUP).map(String::as_str), Some("2"));
    assert_eq!(next.get("retention.ms").map(String::as_str), Some("1000"));
}

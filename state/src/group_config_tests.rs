//! Tests of group configs: the leader's checks against the broker's bounds (Kafka 4.4's
//! messages), the layering and capping of a consumer or Streams group's overrides, and the
//! 0.1.0 gate.

use super::*;

fn overrides(pairs: &[(&str, &str)]) -> Overrides {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn problem(pairs: &[(&str, &str)]) -> Option<String> {
    check(pairs, &GroupSettings::default(), &ConsumerGroupBounds::default())
}

/// The leader's check with these consumer-group settings and bounds, and Kafka's defaults
/// for the Streams ones.
fn check(
    pairs: &[(&str, &str)],
    consumer: &GroupSettings,
    consumer_bounds: &ConsumerGroupBounds,
) -> Option<String> {
    let (streams, streams_bounds) = (StreamsSettings::default(), StreamsGroupBounds::default());
    let (share, share_bounds) = (ShareSettings::default(), ShareGroupBounds::default());
    let broker = BrokerGroupConfigs {
        consumer,
        consumer_bounds,
        streams: &streams,
        streams_bounds: &streams_bounds,
        share: &share,
        share_bounds: &share_bounds,
    };
    leader_problem(&overrides(pairs), broker)
}

/// The leader's check with these Streams-group settings and bounds.
fn streams_problem(
    pairs: &[(&str, &str)],
    streams: &StreamsSettings,
    bounds: &StreamsGroupBounds,
) -> Option<String> {
    let (consumer, consumer_bounds) = (GroupSettings::default(), ConsumerGroupBounds::default());
    let (share, share_bounds) = (ShareSettings::default(), ShareGroupBounds::default());
    let broker = BrokerGroupConfigs {
        consumer: &consumer,
        consumer_bounds: &consumer_bounds,
        streams,
        streams_bounds: bounds,
        share: &share,
        share_bounds: &share_bounds,
    };
    leader_problem(&overrides(pairs), broker)
}

#[test]
fn bounds_come_from_the_broker_with_kafkas_message() {
    assert_eq!(problem(&[(CONSUMER_SESSION_TIMEOUT_MS, "50000")]), None);
    assert_eq!(
        problem(&[(CONSUMER_SESSION_TIMEOUT_MS, "10000")]).as_deref(),
        Some("consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.")
    );
    assert_eq!(
        problem(&[(CONSUMER_HEARTBEAT_INTERVAL_MS, "20000")]).as_deref(),
        Some("consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive.")
    );
    assert_eq!(
        problem(&[(CONSUMER_ASSIGNMENT_INTERVAL_MS, "20000")]).as_deref(),
        Some("consumer.assignment.interval.ms must be in the range 0 to 15000 inclusive.")
    );
    // A broker with wider bounds accepts what the defaults refuse.
    let wide = ConsumerGroupBounds {
        session_timeout_ms: Bounds { min: 6_000, max: 120_000 },
        ..ConsumerGroupBounds::default()
    };
    assert_eq!(check(&[(CONSUMER_SESSION_TIMEOUT_MS, "10000")], &GroupSettings::default(), &wide), None);
}

#[test]
fn session_must_exceed_heartbeat_with_broker_defaults_filling_in() {
    let message = Some("consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms");
    let wide = ConsumerGroupBounds {
        session_timeout_ms: Bounds { min: 1_000, max: 60_000 },
        heartbeat_interval_ms: Bounds { min: 1_000, max: 60_000 },
        ..ConsumerGroupBounds::default()
    };
    let check = |pairs: &[(&str, &str)], broker: &GroupSettings| check(pairs, broker, &wide);
    let broker = GroupSettings::default(); // 45000 / 5000
    assert_eq!(check(&[(CONSUMER_HEARTBEAT_INTERVAL_MS, "45000")], &broker).as_deref(), message);
    assert_eq!(check(&[(CONSUMER_SESSION_TIMEOUT_MS, "5000")], &broker).as_deref(), message);
    assert_eq!(check(&[(CONSUMER_SESSION_TIMEOUT_MS, "6000")], &broker), None);
    // The broker's current defaults, not Kafka's: a broker heartbeating every 8 s.
    let slow = GroupSettings { heartbeat_interval_ms: 8_000, ..GroupSettings::default() };
    assert_eq!(check(&[(CONSUMER_SESSION_TIMEOUT_MS, "8000")], &slow).as_deref(), message);
    // Neither key set: nothing to compare, whatever else is set.
    assert_eq!(check(&[(CONSUMER_ASSIGNMENT_INTERVAL_MS, "0")], &slow), None);
}

#[test]
fn share_and_dlq_keys_are_checked_against_kafkas_defaults() {
    assert_eq!(
        problem(&[("share.session.timeout.ms", "10000")]).as_deref(),
        Some("share.session.timeout.ms must be in the range 45000 to 60000 inclusive.")
    );
    assert_eq!(
        problem(&[("share.isolation.level", "dirty")]).as_deref(),
        Some("Invalid value dirty for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted")
    );
    assert_eq!(problem(&[("share.auto.offset.reset", "by_duration:PT1H")]), None);
    assert!(problem(&[("share.auto.offset.reset", "never")]).is_some());
    assert!(problem(&[("errors.deadletterqueue.topic.name", "__dlq")]).is_some());
}

#[test]
fn streams_bounds_come_from_the_broker_with_kafkas_message() {
    let refused = |key: &str, value: &str| problem(&[(key, value)]).unwrap_or_default();
    assert_eq!(problem(&[(STREAMS_SESSION_TIMEOUT_MS, "50000"), (STREAMS_NUM_STANDBY_REPLICAS, "2")]), None);
    assert_eq!(
        refused(STREAMS_SESSION_TIMEOUT_MS, "10000"),
        "streams.session.timeout.ms must be in the range 45000 to 60000 inclusive."
    );
    assert_eq!(
        refused(STREAMS_HEARTBEAT_INTERVAL_MS, "20000"),
        "streams.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."
    );
    assert_eq!(
        refused(STREAMS_ASSIGNMENT_INTERVAL_MS, "20000"),
        "streams.assignment.interval.ms must be in the range 0 to 15000 inclusive."
    );
    assert_eq!(
        refused(STREAMS_NUM_STANDBY_REPLICAS, "3"),
        "streams.num.standby.replicas must be less than or equal to 2"
    );
    assert_eq!(
        refused(STREAMS_TASK_OFFSET_INTERVAL_MS, "1000"),
        "streams.task.offset.interval.ms must be greater than or equal to 15000"
    );
    assert_eq!(
        refused(STREAMS_NUM_WARMUP_REPLICAS, "21"),
        "streams.num.warmup.replicas must be less than or equal to 20"
    );
    // Unbounded in Kafka: only their type is checked (by apply).
    assert_eq!(
        problem(&[(STREAMS_INITIAL_REBALANCE_DELAY_MS, "600000"), (STREAMS_ACCEPTABLE_RECOVERY_LAG, "0")]),
        None
    );
    // A broker with other bounds decides by them.
    let other = StreamsGroupBounds {
        session_timeout_ms: Bounds { min: 6_000, max: 120_000 },
        max_standby_replicas: 1,
        min_task_offset_interval_ms: 1_000,
        ..StreamsGroupBounds::default()
    };
    let broker = StreamsSettings::default();
    assert_eq!(streams_problem(&[(STREAMS_SESSION_TIMEOUT_MS, "10000")], &broker, &other), None);
    assert_eq!(streams_problem(&[(STREAMS_TASK_OFFSET_INTERVAL_MS, "1000")], &broker, &other), None);
    assert_eq!(
        streams_problem(&[(STREAMS_NUM_STANDBY_REPLICAS, "2")], &broker, &other).as_deref(),
        Some("streams.num.standby.replicas must be less than or equal to 1")
    );
}

#[test]
fn streams_session_must_exceed_heartbeat_with_the_brokers_streams_defaults() {
    let message = Some("streams.session.timeout.ms must be greater than streams.heartbeat.interval.ms");
    let wide = StreamsGroupBounds {
        session_timeout_ms: Bounds { min: 1_000, max: 60_000 },
        heartbeat_interval_ms: Bounds { min: 1_000, max: 60_000 },
        ..StreamsGroupBounds::default()
    };
    let broker = StreamsSettings::default(); // 45000 / 5000
    let check = |pairs: &[(&str, &str)], broker: &StreamsSettings| streams_problem(pairs, broker, &wide);
    assert_eq!(check(&[(STREAMS_HEARTBEAT_INTERVAL_MS, "45000")], &broker).as_deref(), message);
    assert_eq!(check(&[(STREAMS_SESSION_TIMEOUT_MS, "5000")], &broker).as_deref(), message);
    assert_eq!(check(&[(STREAMS_SESSION_TIMEOUT_MS, "6000")], &broker), None);
    // The broker's `group.streams.*` values, not the consumer group's nor Kafka's defaults.
    let slow = StreamsSettings { heartbeat_interval_ms: 8_000, ..StreamsSettings::default() };
    assert_eq!(check(&[(STREAMS_SESSION_TIMEOUT_MS, "8000")], &slow).as_deref(), message);
    assert_eq!(check(&[(CONSUMER_SESSION_TIMEOUT_MS, "45000")], &slow), None);
    // Neither key set: nothing to compare.
    assert_eq!(check(&[(STREAMS_NUM_STANDBY_REPLICAS, "1")], &slow), None);
}

#[test]
fn streams_overrides_layer_over_the_broker_and_are_capped_to_its_bounds() {
    let broker = StreamsSettings::default();
    let bounds = StreamsGroupBounds::default();
    assert_eq!(streams_settings(&broker, &bounds, None), broker);
    let set = overrides(&[
        (STREAMS_SESSION_TIMEOUT_MS, "50000"),
        (STREAMS_HEARTBEAT_INTERVAL_MS, "7000"),
        (STREAMS_NUM_STANDBY_REPLICAS, "1"),
        (STREAMS_INITIAL_REBALANCE_DELAY_MS, "0"),
        (STREAMS_ASSIGNMENT_INTERVAL_MS, "0"),
        (STREAMS_TASK_OFFSET_INTERVAL_MS, "30000"),
        (STREAMS_NUM_WARMUP_REPLICAS, "5"),
        (STREAMS_ACCEPTABLE_RECOVERY_LAG, "123"),
        (CONSUMER_SESSION_TIMEOUT_MS, "60000"),
    ]);
    let expected = StreamsSettings {
        max_size: broker.max_size,
        session_timeout_ms: 50_000,
        heartbeat_interval_ms: 7_000,
        num_standby_replicas: 1,
        initial_rebalance_delay_ms: 0,
        assignment_interval_ms: 0,
        task_offset_interval_ms: 30_000,
        acceptable_recovery_lag: 123,
        num_warmup_replicas: 5,
    };
    assert_eq!(streams_settings(&broker, &bounds, Some(&set)), expected);
    // Stored under other bounds, used under the defaults: capped, not refused.
    let stale = overrides(&[
        (STREAMS_SESSION_TIMEOUT_MS, "10000"),
        (STREAMS_HEARTBEAT_INTERVAL_MS, "30000"),
        (STREAMS_NUM_STANDBY_REPLICAS, "5"),
        (STREAMS_TASK_OFFSET_INTERVAL_MS, "1000"),
        (STREAMS_NUM_WARMUP_REPLICAS, "50"),
    ]);
    let capped = streams_settings(&broker, &bounds, Some(&stale));
    assert_eq!((capped.session_timeout_ms, capped.heartbeat_interval_ms), (45_000, 15_000));
    assert_eq!(
        (capped.num_standby_replicas, capped.task_offset_interval_ms, capped.num_warmup_replicas),
        (2, 15_000, 20)
    );
}

#[test]
fn apply_checks_types_only() {
    let def = |name| group_config_def(name).unwrap();
    assert_eq!(value_problem(def(CONSUMER_SESSION_TIMEOUT_MS), "10"), None, "bounds are the leader's");
    assert_eq!(
        value_problem(def(CONSUMER_SESSION_TIMEOUT_MS), "soon").as_deref(),
        Some("Invalid value soon for configuration consumer.session.timeout.ms: Not a number of type INT")
    );
    assert_eq!(
        value_problem(def(CONSUMER_ASSIGNMENT_INTERVAL_MS), "-1").as_deref(),
        Some("Invalid value -1 for configuration consumer.assignment.interval.ms: Value must be at least 0")
    );
    assert!(value_problem(def("consumer.assignor.offload.enable"), "yes").is_some());
    // 0.1.0 stored any string here; its log must apply alike.
    assert_eq!(value_problem(def("share.isolation.level"), "dirty"), None);
}

#[test]
fn overrides_layer_over_the_broker_and_are_capped_to_its_bounds() {
    let broker = GroupSettings::default();
    let bounds = ConsumerGroupBounds::default();
    assert_eq!(consumer_settings(&broker, &bounds, None), broker);
    let set = overrides(&[
        (CONSUMER_SESSION_TIMEOUT_MS, "50000"),
        (CONSUMER_HEARTBEAT_INTERVAL_MS, "7000"),
        (CONSUMER_ASSIGNMENT_INTERVAL_MS, "0"),
        ("share.session.timeout.ms", "60000"),
    ]);
    let group = consumer_settings(&broker, &bounds, Some(&set));
    assert_eq!(
        (group.session_timeout_ms, group.heartbeat_interval_ms, group.assignment_interval_ms),
        (50_000, 7_000, 0)
    );
    assert_eq!(group.assignors, broker.assignors);
    // Stored under wider bounds, used under the defaults: capped, not refused.
    let stale =
        overrides(&[(CONSUMER_SESSION_TIMEOUT_MS, "10000"), (CONSUMER_HEARTBEAT_INTERVAL_MS, "30000")]);
    let capped = consumer_settings(&broker, &bounds, Some(&stale));
    assert_eq!((capped.session_timeout_ms, capped.heartbeat_interval_ms), (45_000, 15_000));
}

#[test]
fn below_onelog_version_3_only_what_0_1_0_applies_goes_in() {
    let alteration = |name: &str, kind: AlterKind, value: Option<&str>| ConfigAlteration {
        name: name.to_string(),
        kind,
        value: value.map(str::to_string),
    };
    assert_eq!(
        refused_by_0_1_0(&alteration(CONSUMER_SESSION_TIMEOUT_MS, AlterKind::Set, Some("50000"))),
        None
    );
    assert!(
        refused_by_0_1_0(&alteration(CONSUMER_SESSION_TIMEOUT_MS, AlterKind::Set, Some("10000"))).is_some()
    );
    assert!(
        refused_by_0_1_0(&alteration(CONSUMER_ASSIGNMENT_INTERVAL_MS, AlterKind::Set, Some("0"))).is_some()
    );
    assert!(refused_by_0_1_0(&alteration(CONSUMER_ASSIGNMENT_INTERVAL_MS, AlterKind::Delete, None)).is_some());
    assert_eq!(refused_by_0_1_0(&alteration(CONSUMER_SESSION_TIMEOUT_MS, AlterKind::Delete, None)), None);
}

/// The leader's check with these share-group settings and bounds.
fn share_problem(pairs: &[(&str, &str)], share: &ShareSettings, bounds: &ShareGroupBounds) -> Option<String> {
    let (consumer, consumer_bounds) = (GroupSettings::default(), ConsumerGroupBounds::default());
    let (streams, streams_bounds) = (StreamsSettings::default(), StreamsGroupBounds::default());
    let broker = BrokerGroupConfigs {
        consumer: &consumer,
        consumer_bounds: &consumer_bounds,
        streams: &streams,
        streams_bounds: &streams_bounds,
        share,
        share_bounds: bounds,
    };
    leader_problem(&overrides(pairs), broker)
}

#[test]
fn share_bounds_come_from_the_brokers_group_share_configs() {
    let (share, defaults) = (ShareSettings::default(), ShareGroupBounds::default());
    let short_lock = [(SHARE_RECORD_LOCK_DURATION_MS, "2000")];
    assert_eq!(
        share_problem(&short_lock, &share, &defaults).as_deref(),
        Some("share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive.")
    );
    let wide = ShareGroupBounds {
        record_lock_duration_ms: Bounds { min: 1_000, max: 60_000 },
        delivery_count_limit: Bounds { min: 2, max: 25 },
        ..defaults
    };
    assert_eq!(share_problem(&short_lock, &share, &wide), None);
    assert_eq!(share_problem(&[(SHARE_DELIVERY_COUNT_LIMIT, "20")], &share, &wide), None);
    assert!(share_problem(&[(SHARE_DELIVERY_COUNT_LIMIT, "20")], &share, &defaults).is_some());
    // The session > heartbeat rule takes the broker's session timeout for an unset one.
    let wide_heartbeat =
        ShareGroupBounds { heartbeat_interval_ms: Bounds { min: 5_000, max: 60_000 }, ..defaults };
    let short_session = ShareSettings { session_timeout_ms: 20_000, ..share };
    assert_eq!(
        share_problem(&[(SHARE_HEARTBEAT_INTERVAL_MS, "30000")], &short_session, &wide_heartbeat).as_deref(),
        Some("share.session.timeout.ms must be greater than share.heartbeat.interval.ms")
    );
    assert_eq!(share_problem(&[(SHARE_HEARTBEAT_INTERVAL_MS, "30000")], &share, &wide_heartbeat), None);
}

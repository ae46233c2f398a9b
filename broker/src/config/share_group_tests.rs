//! Tests of the share-group settings: Kafka's defaults and start-up checks for
//! `group.share.*`, a group's `share.*` overrides capped to the broker's bounds, and the
//! `by_duration` reset's parsing.

use super::*;
use anyhow::Context;
use onelog_state::group_config::Bounds;

fn overrides(pairs: &[(&str, &str)]) -> Overrides {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The broker's config from Kafka's defaults with these changed, and these assignors.
fn config_with(changed: &[(&str, i64)], assignors: &str) -> anyhow::Result<ShareGroupConfig> {
    let defaults = [
        ("group.share.session.timeout.ms", 45_000),
        ("group.share.min.session.timeout.ms", 45_000),
        ("group.share.max.session.timeout.ms", 60_000),
        ("group.share.heartbeat.interval.ms", 5_000),
        ("group.share.min.heartbeat.interval.ms", 5_000),
        ("group.share.max.heartbeat.interval.ms", 15_000),
        ("group.share.max.size", 200),
        ("group.share.assignment.interval.ms", 1_000),
        ("group.share.min.assignment.interval.ms", 0),
        ("group.share.max.assignment.interval.ms", 15_000),
        ("group.share.record.lock.duration.ms", 30_000),
        ("group.share.min.record.lock.duration.ms", 15_000),
        ("group.share.max.record.lock.duration.ms", 60_000),
        ("group.share.delivery.count.limit", 5),
        ("group.share.min.delivery.count.limit", 2),
        ("group.share.max.delivery.count.limit", 10),
        ("group.share.partition.max.record.locks", 2_000),
        ("group.share.min.partition.max.record.locks", 100),
        ("group.share.max.partition.max.record.locks", 4_000),
        ("group.share.max.share.sessions", 2_000),
    ];
    let int = |key: &str| {
        let value = changed.iter().chain(&defaults).find(|(k, _)| *k == key).map(|(_, v)| *v);
        value.with_context(|| format!("unknown {key}"))
    };
    parse(int, assignors)
}

fn config(changed: &[(&str, i64)]) -> anyhow::Result<ShareGroupConfig> {
    config_with(changed, "simple")
}

#[test]
fn kafkas_defaults_parse_to_the_settings_defaults() {
    let c = config(&[]).unwrap();
    assert_eq!(c, ShareGroupConfig::default());
    let s = c.for_group(None);
    assert_eq!((s.settings.session_timeout_ms, s.settings.heartbeat_interval_ms), (45_000, 5_000));
    assert_eq!((s.limits.delivery_count_limit, s.limits.max_in_flight_records), (5, 2_000));
    assert_eq!((s.lock_ms, s.auto_offset_reset, s.read_committed), (30_000, AutoOffsetReset::Latest, false));
    assert!(s.limits.renew_enabled);
}

#[test]
fn a_value_outside_its_bounds_is_refused_at_start() {
    let error = |o: &[(&str, i64)]| config(o).unwrap_err().to_string();
    let e = error(&[("group.share.session.timeout.ms", 10_000)]);
    assert!(e.contains("must be within group.share.min.session.timeout.ms=45000"), "{e}");
    let e = error(&[("group.share.record.lock.duration.ms", 5_000)]);
    assert!(e.contains("must be within group.share.min.record.lock.duration.ms=15000"), "{e}");
    let e = error(&[("group.share.delivery.count.limit", 12)]);
    assert!(e.contains("group.share.max.delivery.count.limit=10"), "{e}");
    let e = error(&[("group.share.partition.max.record.locks", 5_000)]);
    assert!(e.contains("group.share.max.partition.max.record.locks=4000"), "{e}");
    let e = error(&[
        ("group.share.max.heartbeat.interval.ms", 60_000),
        ("group.share.heartbeat.interval.ms", 45_000),
    ]);
    assert!(e.contains("must be less than group.share.session.timeout.ms=45000"), "{e}");
    let e = error(&[("group.share.max.share.sessions", 100)]);
    assert!(e.contains("must be at least group.share.max.size=200"), "{e}");
}

#[test]
fn the_one_assignor_is_simple() {
    assert!(config_with(&[], "org.apache.kafka.coordinator.group.assignor.SimpleAssignor").is_ok());
    let e = config_with(&[], "simple,simple").unwrap_err().to_string();
    assert!(e.contains("must contain exactly one assignor, but found 2"), "{e}");
    let e = config_with(&[], "uniform").unwrap_err().to_string();
    assert!(e.contains("uniform is not an assignor onelog has"), "{e}");
}

#[test]
fn the_brokers_settings_are_the_groups_defaults() {
    let c = config(&[
        ("group.share.record.lock.duration.ms", 2_000),
        ("group.share.min.record.lock.duration.ms", 1_000),
        ("group.share.delivery.count.limit", 3),
        ("group.share.max.size", 10),
        ("group.share.max.share.sessions", 10),
    ])
    .unwrap();
    let s = c.for_group(None);
    assert_eq!((s.lock_ms, s.limits.delivery_count_limit, s.settings.max_size), (2_000, 3, 10));
    assert_eq!(c.max_share_sessions, 10);
    assert_eq!(c.bounds.record_lock_duration_ms, Bounds { min: 1_000, max: 60_000 });
}

#[test]
fn a_groups_configs_apply_capped_to_the_brokers_bounds() {
    let o = overrides(&[
        ("share.record.lock.duration.ms", "15000"),
        ("share.delivery.count.limit", "50"),
        ("share.auto.offset.reset", "earliest"),
        ("share.isolation.level", "read_committed"),
    ]);
    let s = ShareGroupConfig::default().for_group(Some(&o));
    assert_eq!((s.lock_ms, s.limits.delivery_count_limit), (15_000, 10));
    assert_eq!((s.auto_offset_reset, s.read_committed), (AutoOffsetReset::Earliest, true));
    // Wider broker bounds let a shorter lock through.
    let wide = config(&[("group.share.min.record.lock.duration.ms", 1_000)]).unwrap();
    let o = overrides(&[("share.record.lock.duration.ms", "2000")]);
    assert_eq!(wide.for_group(Some(&o)).lock_ms, 2_000);
    assert_eq!(ShareGroupConfig::default().for_group(Some(&o)).lock_ms, 15_000);
}

#[test]
fn by_duration_parses_javas_duration_format() {
    assert_eq!(reset("by_duration:PT1H"), AutoOffsetReset::ByDuration(3_600_000));
    assert_eq!(reset("by_duration:P1DT0.5S"), AutoOffsetReset::ByDuration(86_400_500));
    assert_eq!(reset("by_duration:PT2M3S"), AutoOffsetReset::ByDuration(123_000));
    assert_eq!(reset("by_duration:1H"), AutoOffsetReset::Latest);
}

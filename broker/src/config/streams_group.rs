//! The KIP-1071 Streams-group settings (`group.streams.*`), refused at start-up where Kafka's
//! `GroupCoordinatorConfig.verifyStreamsGroupConfigs` refuses them: a default outside its
//! bounds (a range for the session timeout, heartbeat interval and assignment interval, a most
//! for the standby and warmup replicas, a least for the task offset interval), a heartbeat
//! interval not below the session timeout. The bounds stay with the settings: they also bound
//! each group's own `streams.*` overrides (group configs), checked when one is altered and
//! capped when one is used ([`StreamsGroupConfig::for_group`]).

use super::consumer_group::int_value;
use anyhow::bail;
use onelog_state::configs::Overrides;
use onelog_state::group_config::{streams_settings, Bounds, StreamsGroupBounds};
use onelog_state::streams_group::StreamsSettings;

/// The broker's Streams-group settings and the bounds on a group's overrides of them.
#[derive(Debug, Clone, Default)]
pub struct StreamsGroupConfig {
    pub settings: StreamsSettings,
    pub bounds: StreamsGroupBounds,
}

impl StreamsGroupConfig {
    /// The settings a group's heartbeats run with, given its stored overrides
    /// (`BrokerState::configs.groups`): read on every heartbeat, so a change applies at the
    /// group's next one.
    pub fn for_group(&self, overrides: Option<&Overrides>) -> StreamsSettings {
        streams_settings(&self.settings, &self.bounds, overrides)
    }
}

/// `int` reads one integer config by name (they are typed and ranged by `defs`). Checked in
/// Kafka's order, so the first problem named is the one Kafka names.
pub fn parse(int: impl Fn(&str) -> anyhow::Result<i64>) -> anyhow::Result<StreamsGroupConfig> {
    let (heartbeat, heartbeat_bounds) = bounded(&int, "heartbeat.interval.ms")?;
    let (session, session_bounds) = bounded(&int, "session.timeout.ms")?;
    if heartbeat >= session {
        bail!(
            "group.streams.heartbeat.interval.ms={heartbeat} must be less than \
             group.streams.session.timeout.ms={session}"
        );
    }
    let (assignment, assignment_bounds) = bounded(&int, "assignment.interval.ms")?;
    let (standby, max_standby) = at_most(&int, "num.standby.replicas", "max.standby.replicas")?;
    let (task_offset, min_task_offset) = at_least(&int, "task.offset.interval.ms")?;
    let (warmup, max_warmup) = at_most(&int, "num.warmup.replicas", "max.warmup.replicas")?;
    let settings = StreamsSettings {
        max_size: int("group.streams.max.size")?.clamp(1, i64::from(i32::MAX)) as i32,
        session_timeout_ms: int_value(session, "group.streams.session.timeout.ms")?,
        heartbeat_interval_ms: int_value(heartbeat, "group.streams.heartbeat.interval.ms")?,
        num_standby_replicas: int_value(standby, "group.streams.num.standby.replicas")?,
        initial_rebalance_delay_ms: int_value(
            int("group.streams.initial.rebalance.delay.ms")?,
            "group.streams.initial.rebalance.delay.ms",
        )?,
        assignment_interval_ms: int_value(assignment, "group.streams.assignment.interval.ms")?,
        task_offset_interval_ms: int_value(task_offset, "group.streams.task.offset.interval.ms")?,
        acceptable_recovery_lag: int("group.streams.acceptable.recovery.lag")?,
        num_warmup_replicas: int_value(warmup, "group.streams.num.warmup.replicas")?,
    };
    let bounds = StreamsGroupBounds {
        session_timeout_ms: session_bounds,
        heartbeat_interval_ms: heartbeat_bounds,
        assignment_interval_ms: assignment_bounds,
        max_standby_replicas: max_standby,
        min_task_offset_interval_ms: min_task_offset,
        max_warmup_replicas: max_warmup,
    };
    Ok(StreamsGroupConfig { settings, bounds })
}

fn bounded(int: &impl Fn(&str) -> anyhow::Result<i64>, suffix: &str) -> anyhow::Result<(i64, Bounds)> {
    super::consumer_group::bounded_in(int, "group.streams", suffix)
}

/// `group.streams.<suffix>`'s value, which must not exceed `group.streams.<max_suffix>`, and
/// that most (Kafka bounds the replica counts from above only).
fn at_most(
    int: &impl Fn(&str) -> anyhow::Result<i64>,
    suffix: &str,
    max_suffix: &str,
) -> anyhow::Result<(i64, i64)> {
    let (key, max_key) = (format!("group.streams.{suffix}"), format!("group.streams.{max_suffix}"));
    let (value, max) = (int(&key)?, int(&max_key)?);
    if value > max {
        bail!("{key}={value} must not be greater than {max_key}={max}");
    }
    Ok((value, max))
}

/// `group.streams.<suffix>`'s value, which must be at least `group.streams.min.<suffix>`, and
/// that least (Kafka bounds the task offset interval from below only).
fn at_least(int: &impl Fn(&str) -> anyhow::Result<i64>, suffix: &str) -> anyhow::Result<(i64, i64)> {
    let (key, min_key) = (format!("group.streams.{suffix}"), format!("group.streams.min.{suffix}"));
    let (value, min) = (int(&key)?, int(&min_key)?);
    if value < min {
        bail!("{key}={value} must not be less than {min_key}={min}");
    }
    Ok((value, min))
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    fn settings(overrides: &[(&str, i64)]) -> anyhow::Result<StreamsSettings> {
        config(overrides).map(|c| c.settings)
    }

    fn config(overrides: &[(&str, i64)]) -> anyhow::Result<StreamsGroupConfig> {
        let defaults = [
            ("group.streams.session.timeout.ms", 45_000),
            ("group.streams.min.session.timeout.ms", 45_000),
            ("group.streams.max.session.timeout.ms", 60_000),
            ("group.streams.heartbeat.interval.ms", 5_000),
            ("group.streams.min.heartbeat.interval.ms", 5_000),
            ("group.streams.max.heartbeat.interval.ms", 15_000),
            ("group.streams.max.size", i64::from(i32::MAX)),
            ("group.streams.num.standby.replicas", 0),
            ("group.streams.max.standby.replicas", 2),
            ("group.streams.initial.rebalance.delay.ms", 3_000),
            ("group.streams.assignment.interval.ms", 1_000),
            ("group.streams.min.assignment.interval.ms", 0),
            ("group.streams.max.assignment.interval.ms", 15_000),
            ("group.streams.task.offset.interval.ms", 60_000),
            ("group.streams.min.task.offset.interval.ms", 15_000),
            ("group.streams.num.warmup.replicas", 2),
            ("group.streams.max.warmup.replicas", 20),
            ("group.streams.acceptable.recovery.lag", 10_000),
        ];
        let int = |key: &str| {
            let value = overrides.iter().chain(&defaults).find(|(k, _)| *k == key).map(|(_, v)| *v);
            value.context("unknown")
        };
        parse(int)
    }

    #[test]
    fn kafkas_defaults_parse_to_the_settings_defaults() {
        let c = config(&[]).unwrap();
        assert_eq!(c.settings, StreamsSettings::default());
        assert_eq!(c.bounds, StreamsGroupBounds::default());
    }

    #[test]
    fn a_value_outside_its_bounds_is_refused_at_start() {
        let error = |o: &[(&str, i64)]| settings(o).unwrap_err().to_string();
        let e = error(&[("group.streams.session.timeout.ms", 10_000)]);
        assert!(e.contains("must be within group.streams.min.session.timeout.ms=45000"), "{e}");
        let e = error(&[("group.streams.heartbeat.interval.ms", 20_000)]);
        assert!(e.contains("must be within group.streams.min.heartbeat.interval.ms=5000"), "{e}");
        let e = error(&[("group.streams.assignment.interval.ms", 20_000)]);
        assert!(e.contains("must be within group.streams.min.assignment.interval.ms=0"), "{e}");
        let e = error(&[("group.streams.num.standby.replicas", 3)]);
        assert!(e.contains("group.streams.num.standby.replicas=3 must not be greater than"), "{e}");
        let e = error(&[("group.streams.num.warmup.replicas", 21)]);
        assert!(e.contains("group.streams.max.warmup.replicas=20"), "{e}");
        let e = error(&[("group.streams.task.offset.interval.ms", 1_000)]);
        assert!(e.contains("must not be less than group.streams.min.task.offset.interval.ms=15000"), "{e}");
        let e = error(&[("group.streams.min.session.timeout.ms", 70_000)]);
        assert!(e.contains("must not be greater than group.streams.max.session.timeout.ms"), "{e}");
    }

    #[test]
    fn the_heartbeat_must_be_below_the_session_timeout() {
        let wide = [
            ("group.streams.max.heartbeat.interval.ms", 60_000),
            ("group.streams.heartbeat.interval.ms", 45_000),
        ];
        let e = settings(&wide).unwrap_err().to_string();
        assert!(e.contains("must be less than group.streams.session.timeout.ms=45000"), "{e}");
    }

    #[test]
    fn wider_bounds_let_other_values_in_and_are_kept_for_group_overrides() {
        let c = config(&[
            ("group.streams.session.timeout.ms", 10_000),
            ("group.streams.min.session.timeout.ms", 6_000),
            ("group.streams.num.standby.replicas", 3),
            ("group.streams.max.standby.replicas", 5),
            ("group.streams.acceptable.recovery.lag", 0),
        ])
        .unwrap();
        assert_eq!((c.settings.session_timeout_ms, c.settings.num_standby_replicas), (10_000, 3));
        assert_eq!(c.settings.acceptable_recovery_lag, 0);
        assert_eq!(c.bounds.session_timeout_ms, Bounds { min: 6_000, max: 60_000 });
        assert_eq!(c.bounds.max_standby_replicas, 5);
        // The group's override is capped to the broker's bounds when used.
        let overrides = Overrides::from([("streams.num.standby.replicas".to_string(), "9".to_string())]);
        assert_eq!(c.for_group(Some(&overrides)).num_standby_replicas, 5);
        assert_eq!(c.for_group(None), c.settings);
    }
}

//! The KIP-848 consumer-group settings (`group.consumer.*`), refused at start-up where Kafka's
//! `GroupCoordinatorConfig` refuses them: a default outside its bounds, a heartbeat interval
//! not below the session timeout, an assignor onelog does not have. The bounds stay with the
//! settings: they also bound each group's own `consumer.*` overrides (group configs), checked
//! when one is altered and capped when one is used ([`ConsumerGroupConfig::for_group`]).

use anyhow::{bail, Context};
use onelog_state::configs::Overrides;
use onelog_state::consumer_group::{Assignor, GroupSettings, Migration, MigrationPolicy};
use onelog_state::group_config::{consumer_settings, Bounds, ConsumerGroupBounds};

/// The broker's consumer-group settings and the bounds on a group's overrides of them.
#[derive(Debug, Clone, Default)]
pub struct ConsumerGroupConfig {
    pub settings: GroupSettings,
    pub bounds: ConsumerGroupBounds,
}

impl ConsumerGroupConfig {
    /// The settings a group's heartbeats run with, given its stored overrides
    /// (`BrokerState::configs.groups`): read on every heartbeat, so a change applies at the
    /// group's next one.
    pub fn for_group(&self, overrides: Option<&Overrides>) -> GroupSettings {
        consumer_settings(&self.settings, &self.bounds, overrides)
    }
}

/// `int` reads one integer config by name (they are typed and ranged by `defs`).
pub fn parse(
    int: impl Fn(&str) -> anyhow::Result<i64>,
    assignors: &str,
    migration_policy: &str,
) -> anyhow::Result<ConsumerGroupConfig> {
    let (session, session_bounds) = bounded(&int, "session.timeout.ms")?;
    let (heartbeat, heartbeat_bounds) = bounded(&int, "heartbeat.interval.ms")?;
    let (assignment, assignment_bounds) = bounded(&int, "assignment.interval.ms")?;
    if heartbeat >= session {
        bail!(
            "group.consumer.heartbeat.interval.ms={heartbeat} must be less than \
             group.consumer.session.timeout.ms={session}"
        );
    }
    let settings = GroupSettings {
        assignors: parse_assignors(assignors)?,
        max_size: int("group.consumer.max.size")?.clamp(1, i64::from(i32::MAX)) as i32,
        session_timeout_ms: int_value(session, "group.consumer.session.timeout.ms")?,
        heartbeat_interval_ms: int_value(heartbeat, "group.consumer.heartbeat.interval.ms")?,
        assignment_interval_ms: assignment,
        migration: Migration {
            policy: MigrationPolicy::parse(migration_policy),
            classic_max_size: int("group.max.size")?.clamp(1, i64::from(i32::MAX)) as i32,
        },
    };
    let bounds = ConsumerGroupBounds {
        session_timeout_ms: session_bounds,
        heartbeat_interval_ms: heartbeat_bounds,
        assignment_interval_ms: assignment_bounds,
    };
    Ok(ConsumerGroupConfig { settings, bounds })
}

/// `<prefix>.<suffix>`'s value, which must lie within `<prefix>.min.<suffix>` and
/// `<prefix>.max.<suffix>`, and those bounds (`group.consumer`, `group.streams`).
pub(super) fn bounded_in(
    int: &impl Fn(&str) -> anyhow::Result<i64>,
    prefix: &str,
    suffix: &str,
) -> anyhow::Result<(i64, Bounds)> {
    let key = format!("{prefix}.{suffix}");
    let (min_key, max_key) = (format!("{prefix}.min.{suffix}"), format!("{prefix}.max.{suffix}"));
    let (value, min, max) = (int(&key)?, int(&min_key)?, int(&max_key)?);
    if min > max {
        bail!("{min_key}={min} must not be greater than {max_key}={max}");
    }
    if !(min..=max).contains(&value) {
        bail!("{key}={value} must be within {min_key}={min} and {max_key}={max}");
    }
    Ok((value, Bounds { min, max }))
}

fn bounded(int: &impl Fn(&str) -> anyhow::Result<i64>, suffix: &str) -> anyhow::Result<(i64, Bounds)> {
    bounded_in(int, "group.consumer", suffix)
}

pub(super) fn int_value(value: i64, key: &str) -> anyhow::Result<i32> {
    i32::try_from(value).with_context(|| format!("{key}={value} is not an int"))
}

/// `group.consumer.assignors`: names (Kafka also takes class names; onelog has its two).
fn parse_assignors(list: &str) -> anyhow::Result<Vec<Assignor>> {
    let mut assignors = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let assignor = match name {
            "org.apache.kafka.coordinator.group.assignor.UniformAssignor" => Some(Assignor::Uniform),
            "org.apache.kafka.coordinator.group.assignor.RangeAssignor" => Some(Assignor::Range),
            name => Assignor::from_name(name),
        };
        let assignor = assignor.with_context(|| {
            format!("group.consumer.assignors: {name} is not an assignor onelog has (uniform, range)")
        })?;
        if !assignors.contains(&assignor) {
            assignors.push(assignor);
        }
    }
    if assignors.is_empty() {
        bail!("group.consumer.assignors must name at least one assignor (uniform, range)");
    }
    Ok(assignors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(overrides: &[(&str, i64)]) -> anyhow::Result<GroupSettings> {
        config(overrides).map(|c| c.settings)
    }

    fn config(overrides: &[(&str, i64)]) -> anyhow::Result<ConsumerGroupConfig> {
        let defaults = [
            ("group.consumer.session.timeout.ms", 45_000),
            ("group.consumer.min.session.timeout.ms", 45_000),
            ("group.consumer.max.session.timeout.ms", 60_000),
            ("group.consumer.heartbeat.interval.ms", 5_000),
            ("group.consumer.min.heartbeat.interval.ms", 5_000),
            ("group.consumer.max.heartbeat.interval.ms", 15_000),
            ("group.consumer.max.size", i64::from(i32::MAX)),
            ("group.consumer.assignment.interval.ms", 1_000),
            ("group.consumer.min.assignment.interval.ms", 0),
            ("group.consumer.max.assignment.interval.ms", 15_000),
            ("group.max.size", i64::from(i32::MAX)),
        ];
        let int = |key: &str| {
            let value = overrides.iter().chain(&defaults).find(|(k, _)| *k == key).map(|(_, v)| *v);
            value.context("unknown")
        };
        parse(int, "uniform,range", "bidirectional")
    }

    #[test]
    fn kafkas_defaults_parse() {
        let s = settings(&[]).unwrap();
        assert_eq!((s.session_timeout_ms, s.heartbeat_interval_ms), (45_000, 5_000));
        assert_eq!(s.assignors, vec![Assignor::Uniform, Assignor::Range]);
    }

    #[test]
    fn a_session_timeout_outside_its_bounds_is_refused_at_start() {
        let error = settings(&[("group.consumer.session.timeout.ms", 10_000)]).unwrap_err().to_string();
        assert!(error.contains("must be within group.consumer.min.session.timeout.ms=45000"), "{error}");
        let ok = settings(&[
            ("group.consumer.session.timeout.ms", 10_000),
            ("group.consumer.min.session.timeout.ms", 6_000),
        ]);
        assert_eq!(ok.unwrap().session_timeout_ms, 10_000);
    }

    #[test]
    fn the_bounds_are_kept_for_group_overrides() {
        let c = config(&[("group.consumer.min.session.timeout.ms", 6_000)]).unwrap();
        assert_eq!(c.bounds.session_timeout_ms, Bounds { min: 6_000, max: 60_000 });
        assert_eq!(c.bounds.assignment_interval_ms, Bounds { min: 0, max: 15_000 });
        let error = config(&[("group.consumer.assignment.interval.ms", 20_000)]).unwrap_err().to_string();
        assert!(error.contains("must be within group.consumer.min.assignment.interval.ms=0"), "{error}");
    }

    #[test]
    fn unknown_assignors_are_refused() {
        assert!(parse_assignors("uniform,sticky").unwrap_err().to_string().contains("sticky"));
        assert_eq!(parse_assignors("range").unwrap(), vec![Assignor::Range]);
    }
}

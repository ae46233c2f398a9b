//! The KIP-848 consumer-group settings (`group.consumer.*`), refused at start-up where Kafka's
//! `GroupCoordinatorConfig` refuses them: a default outside its bounds, a heartbeat interval
//! not below the session timeout, an assignor onelog does not have.

use anyhow::{bail, Context};
use onelog_state::consumer_group::{Assignor, GroupSettings};

/// `int` reads one integer config by name (they are typed and ranged by `defs`).
pub fn parse(int: impl Fn(&str) -> anyhow::Result<i64>, assignors: &str) -> anyhow::Result<GroupSettings> {
    let session = bounded(&int, "group.consumer.session.timeout.ms", "session")?;
    let heartbeat = bounded(&int, "group.consumer.heartbeat.interval.ms", "heartbeat")?;
    if heartbeat >= session {
        bail!(
            "group.consumer.heartbeat.interval.ms={heartbeat} must be less than \
             group.consumer.session.timeout.ms={session}"
        );
    }
    Ok(GroupSettings {
        assignors: parse_assignors(assignors)?,
        max_size: int("group.consumer.max.size")?.clamp(1, i64::from(i32::MAX)) as i32,
        session_timeout_ms: session,
        heartbeat_interval_ms: heartbeat,
        assignment_interval_ms: int("group.consumer.assignment.interval.ms")?,
    })
}

/// `key`'s value, which must lie within `group.consumer.min.<what>…` and `…max…`.
fn bounded(int: &impl Fn(&str) -> anyhow::Result<i64>, key: &str, what: &str) -> anyhow::Result<i32> {
    let suffix = if what == "session" { "session.timeout.ms" } else { "heartbeat.interval.ms" };
    let (min_key, max_key) = (format!("group.consumer.min.{suffix}"), format!("group.consumer.max.{suffix}"));
    let (value, min, max) = (int(key)?, int(&min_key)?, int(&max_key)?);
    if min > max {
        bail!("{min_key}={min} must not be greater than {max_key}={max}");
    }
    if !(min..=max).contains(&value) {
        bail!("{key}={value} must be within {min_key}={min} and {max_key}={max}");
    }
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
        let defaults = [
            ("group.consumer.session.timeout.ms", 45_000),
            ("group.consumer.min.session.timeout.ms", 45_000),
            ("group.consumer.max.session.timeout.ms", 60_000),
            ("group.consumer.heartbeat.interval.ms", 5_000),
            ("group.consumer.min.heartbeat.interval.ms", 5_000),
            ("group.consumer.max.heartbeat.interval.ms", 15_000),
            ("group.consumer.max.size", i64::from(i32::MAX)),
            ("group.consumer.assignment.interval.ms", 1_000),
        ];
        let int = |key: &str| {
            let value = overrides.iter().chain(&defaults).find(|(k, _)| *k == key).map(|(_, v)| *v);
            value.context("unknown")
        };
        parse(int, "uniform,range")
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
    fn unknown_assignors_are_refused() {
        assert!(parse_assignors("uniform,sticky").unwrap_err().to_string().contains("sticky"));
        assert_eq!(parse_assignors("range").unwrap(), vec![Assignor::Range]);
    }
}

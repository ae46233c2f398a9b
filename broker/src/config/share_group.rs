//! What a KIP-932 share group runs with: the broker's `group.share.*` settings, refused at
//! start-up where Kafka 4.4 refuses them (`GroupCoordinatorConfig` for membership: a default
//! outside its bounds, a heartbeat not below the session timeout, not exactly one assignor;
//! `ShareGroupConfig` for records: a default outside its bounds, fewer share sessions than
//! members of one group), overlaid by the group's own `share.*` configs (`kafka-configs
//! --entity-type groups`), capped to the broker's bounds when used. Read on every share
//! request, so an altered config applies to the group's next heartbeat, fetch or
//! acknowledgement.

use super::consumer_group::{bounded_in, int_value};
use anyhow::bail;
use onelog_state::configs::Overrides;
use onelog_state::group_config::{self as gc, ShareGroupBounds};
use onelog_state::share_group::ShareSettings;
use onelog_state::share_partition::Limits;

/// The broker's share-group settings and the bounds on a group's overrides of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGroupConfig {
    /// Membership: group size, session timeout, heartbeat and assignment intervals.
    pub settings: ShareSettings,
    /// `group.share.record.lock.duration.ms`.
    pub lock_ms: i64,
    /// `group.share.delivery.count.limit`.
    pub delivery_count_limit: i64,
    /// `group.share.partition.max.record.locks`.
    pub max_record_locks: i64,
    /// `group.share.max.share.sessions`: share sessions this broker keeps.
    pub max_share_sessions: usize,
    pub bounds: ShareGroupBounds,
}

impl Default for ShareGroupConfig {
    /// Kafka 4.4's defaults.
    fn default() -> Self {
        ShareGroupConfig {
            settings: ShareSettings::default(),
            lock_ms: 30_000,
            delivery_count_limit: 5,
            max_record_locks: 2_000,
            max_share_sessions: 2_000,
            bounds: ShareGroupBounds::default(),
        }
    }
}

/// `share.auto.offset.reset` (KIP-932, KIP-1106): where a group's first read of a partition
/// starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoOffsetReset {
    Latest,
    Earliest,
    /// The first offset whose timestamp is at least this long ago (ms).
    ByDuration(i64),
}

/// One group's effective share settings.
#[derive(Debug, Clone)]
pub struct ShareGroupSettings {
    pub settings: ShareSettings,
    pub limits: Limits,
    /// `share.record.lock.duration.ms`.
    pub lock_ms: i64,
    pub auto_offset_reset: AutoOffsetReset,
    /// `share.isolation.level=read_committed`.
    pub read_committed: bool,
}

impl ShareGroupConfig {
    /// The settings a group runs with, given its stored overrides
    /// (`BrokerState::configs.groups`), each capped to the broker's bounds as Kafka 4.4's
    /// `GroupConfig.evaluate` clamps it. `max_size` is the broker's alone.
    pub fn for_group(&self, overrides: Option<&Overrides>) -> ShareGroupSettings {
        let b = &self.bounds;
        let int = |key: &str, default: i64, bounds: gc::Bounds| {
            let set = overrides.and_then(|o| o.get(key)).and_then(|v| v.trim().parse::<i64>().ok());
            set.map_or(default, |v| bounds.cap(v))
        };
        let text = |key: &str| overrides.and_then(|o| o.get(key)).map(|v| v.trim().to_ascii_lowercase());
        let narrow = |v: i64| i32::try_from(v).unwrap_or(i32::MAX);
        let s = &self.settings;
        ShareGroupSettings {
            settings: ShareSettings {
                max_size: s.max_size,
                session_timeout_ms: narrow(int(
                    gc::SHARE_SESSION_TIMEOUT_MS,
                    s.session_timeout_ms.into(),
                    b.session_timeout_ms,
                )),
                heartbeat_interval_ms: narrow(int(
                    gc::SHARE_HEARTBEAT_INTERVAL_MS,
                    s.heartbeat_interval_ms.into(),
                    b.heartbeat_interval_ms,
                )),
                assignment_interval_ms: int(
                    gc::SHARE_ASSIGNMENT_INTERVAL_MS,
                    s.assignment_interval_ms,
                    b.assignment_interval_ms,
                ),
            },
            limits: Limits {
                delivery_count_limit: i16::try_from(int(
                    gc::SHARE_DELIVERY_COUNT_LIMIT,
                    self.delivery_count_limit,
                    b.delivery_count_limit,
                ))
                .unwrap_or(i16::MAX),
                max_in_flight_records: narrow(int(
                    gc::SHARE_PARTITION_MAX_RECORD_LOCKS,
                    self.max_record_locks,
                    b.partition_max_record_locks,
                )),
                renew_enabled: text("share.renew.acknowledge.enable").is_none_or(|v| v != "false"),
            },
            lock_ms: int(gc::SHARE_RECORD_LOCK_DURATION_MS, self.lock_ms, b.record_lock_duration_ms),
            auto_offset_reset: text("share.auto.offset.reset").map_or(AutoOffsetReset::Latest, |v| reset(&v)),
            read_committed: text("share.isolation.level").is_some_and(|v| v == "read_committed"),
        }
    }
}

/// `int` reads one integer config by name (they are typed and ranged by `defs`). Checked in
/// Kafka's order, so the first problem named is the one Kafka names.
pub fn parse(int: impl Fn(&str) -> anyhow::Result<i64>, assignors: &str) -> anyhow::Result<ShareGroupConfig> {
    let (heartbeat, heartbeat_bounds) = bounded(&int, "heartbeat.interval.ms")?;
    let (session, session_bounds) = bounded(&int, "session.timeout.ms")?;
    if heartbeat >= session {
        bail!(
            "group.share.heartbeat.interval.ms={heartbeat} must be less than \
             group.share.session.timeout.ms={session}"
        );
    }
    check_assignors(assignors)?;
    let (assignment, assignment_bounds) = bounded(&int, "assignment.interval.ms")?;
    let (delivery, delivery_bounds) = bounded(&int, "delivery.count.limit")?;
    let (locks, locks_bounds) = bounded(&int, "partition.max.record.locks")?;
    let (lock_ms, lock_bounds) = bounded(&int, "record.lock.duration.ms")?;
    let (max_size, sessions) = (int("group.share.max.size")?, int("group.share.max.share.sessions")?);
    if sessions < max_size {
        bail!("group.share.max.share.sessions={sessions} must be at least group.share.max.size={max_size}");
    }
    Ok(ShareGroupConfig {
        settings: ShareSettings {
            max_size: int_value(max_size, "group.share.max.size")?,
            session_timeout_ms: int_value(session, "group.share.session.timeout.ms")?,
            heartbeat_interval_ms: int_value(heartbeat, "group.share.heartbeat.interval.ms")?,
            assignment_interval_ms: assignment,
        },
        lock_ms,
        delivery_count_limit: delivery,
        max_record_locks: locks,
        max_share_sessions: usize::try_from(sessions).unwrap_or(usize::MAX),
        bounds: ShareGroupBounds {
            session_timeout_ms: session_bounds,
            heartbeat_interval_ms: heartbeat_bounds,
            assignment_interval_ms: assignment_bounds,
            record_lock_duration_ms: lock_bounds,
            delivery_count_limit: delivery_bounds,
            partition_max_record_locks: locks_bounds,
        },
    })
}

fn bounded(int: &impl Fn(&str) -> anyhow::Result<i64>, suffix: &str) -> anyhow::Result<(i64, gc::Bounds)> {
    bounded_in(int, "group.share", suffix)
}

/// `group.share.assignors`: exactly one, and onelog has Kafka's one built-in share assignor.
fn check_assignors(list: &str) -> anyhow::Result<()> {
    let names: Vec<&str> = list.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
    if names.len() != 1 {
        bail!("group.share.assignors must contain exactly one assignor, but found {}", names.len());
    }
    match names[0] {
        "simple" | "org.apache.kafka.coordinator.group.assignor.SimpleAssignor" => Ok(()),
        name => bail!("group.share.assignors: {name} is not an assignor onelog has (simple)"),
    }
}

fn reset(value: &str) -> AutoOffsetReset {
    match value {
        "earliest" => AutoOffsetReset::Earliest,
        v => v
            .strip_prefix("by_duration:")
            .and_then(iso_duration_ms)
            .map_or(AutoOffsetReset::Latest, AutoOffsetReset::ByDuration),
    }
}

/// Java's `Duration.parse` subset Kafka documents for `by_duration`: `PnDTnHnMn.nS`
/// (upper or lower case, each part optional, seconds with a fraction). None if malformed.
fn iso_duration_ms(text: &str) -> Option<i64> {
    let upper = text.to_ascii_uppercase();
    let rest = upper.strip_prefix('P')?;
    let (days, time) = match rest.split_once('T') {
        Some((d, t)) => (d, t),
        None => (rest, ""),
    };
    let mut ms = 0i64;
    if !days.is_empty() {
        ms += days.strip_suffix('D')?.parse::<i64>().ok()?.checked_mul(86_400_000)?;
    }
    let mut number = String::new();
    for c in time.chars() {
        let unit = match c {
            'H' => 3_600_000.0,
            'M' => 60_000.0,
            'S' => 1_000.0,
            _ => {
                number.push(c);
                continue;
            }
        };
        let value: f64 = number.parse().ok()?;
        ms = ms.checked_add((value * unit) as i64)?;
        number.clear();
    }
    (number.is_empty() && ms >= 0).then_some(ms)
}

#[cfg(test)]
#[path = "share_group_tests.rs"]
mod tests;

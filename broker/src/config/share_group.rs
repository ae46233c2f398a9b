//! What a KIP-932 share group runs with: Kafka 4.4's broker defaults for share groups
//! (`group.share.*`; onelog keeps Kafka's defaults and bounds, as `group_config` says),
//! overlaid by the group's own `share.*` configs (`kafka-configs --entity-type groups`),
//! capped to those bounds when used. Read on every share request, so an altered config
//! applies to the group's next heartbeat, fetch or acknowledgement.

use onelog_state::configs::Overrides;
use onelog_state::share_group::ShareSettings;
use onelog_state::share_partition::Limits;

/// Kafka's `group.share.max.share.sessions`: share sessions a broker keeps.
pub const MAX_SHARE_SESSIONS: usize = 2_000;

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

/// (key, Kafka's default, min, max): Kafka 4.4's `group.share.*` defaults and bounds.
const SESSION_TIMEOUT: (&str, i64, i64, i64) = ("share.session.timeout.ms", 45_000, 45_000, 60_000);
const HEARTBEAT_INTERVAL: (&str, i64, i64, i64) = ("share.heartbeat.interval.ms", 5_000, 5_000, 15_000);
const ASSIGNMENT_INTERVAL: (&str, i64, i64, i64) = ("share.assignment.interval.ms", 1_000, 0, 15_000);
const LOCK_DURATION: (&str, i64, i64, i64) = ("share.record.lock.duration.ms", 30_000, 15_000, 60_000);
const DELIVERY_COUNT_LIMIT: (&str, i64, i64, i64) = ("share.delivery.count.limit", 5, 2, 10);
const MAX_RECORD_LOCKS: (&str, i64, i64, i64) = ("share.partition.max.record.locks", 2_000, 100, 4_000);
/// Kafka's `group.share.max.size`.
const MAX_SIZE: i32 = 200;

pub fn for_group(overrides: Option<&Overrides>) -> ShareGroupSettings {
    let int = |(key, default, min, max): (&str, i64, i64, i64)| {
        let set = overrides.and_then(|o| o.get(key)).and_then(|v| v.trim().parse::<i64>().ok());
        set.unwrap_or(default).clamp(min, max)
    };
    let text = |key: &str| overrides.and_then(|o| o.get(key)).map(|v| v.trim().to_ascii_lowercase());
    let narrow = |v: i64| i32::try_from(v).unwrap_or(i32::MAX);
    ShareGroupSettings {
        settings: ShareSettings {
            max_size: MAX_SIZE,
            session_timeout_ms: narrow(int(SESSION_TIMEOUT)),
            heartbeat_interval_ms: narrow(int(HEARTBEAT_INTERVAL)),
            assignment_interval_ms: int(ASSIGNMENT_INTERVAL),
        },
        limits: Limits {
            delivery_count_limit: i16::try_from(int(DELIVERY_COUNT_LIMIT)).unwrap_or(i16::MAX),
            max_in_flight_records: narrow(int(MAX_RECORD_LOCKS)),
            renew_enabled: text("share.renew.acknowledge.enable").is_none_or(|v| v != "false"),
        },
        lock_ms: int(LOCK_DURATION),
        auto_offset_reset: text("share.auto.offset.reset").map_or(AutoOffsetReset::Latest, |v| reset(&v)),
        read_committed: text("share.isolation.level").is_some_and(|v| v == "read_committed"),
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
mod tests {
    use super::*;

    fn overrides(pairs: &[(&str, &str)]) -> Overrides {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn kafkas_defaults_without_overrides() {
        let s = for_group(None);
        assert_eq!((s.settings.session_timeout_ms, s.settings.heartbeat_interval_ms), (45_000, 5_000));
        assert_eq!((s.limits.delivery_count_limit, s.limits.max_in_flight_records), (5, 2_000));
        assert_eq!(
            (s.lock_ms, s.auto_offset_reset, s.read_committed),
            (30_000, AutoOffsetReset::Latest, false)
        );
        assert!(s.limits.renew_enabled);
    }

    #[test]
    fn a_groups_configs_apply_capped_to_kafkas_bounds() {
        let o = overrides(&[
            ("share.record.lock.duration.ms", "15000"),
            ("share.delivery.count.limit", "50"),
            ("share.auto.offset.reset", "earliest"),
            ("share.isolation.level", "read_committed"),
        ]);
        let s = for_group(Some(&o));
        assert_eq!((s.lock_ms, s.limits.delivery_count_limit), (15_000, 10));
        assert_eq!((s.auto_offset_reset, s.read_committed), (AutoOffsetReset::Earliest, true));
    }

    #[test]
    fn by_duration_parses_javas_duration_format() {
        assert_eq!(reset("by_duration:PT1H"), AutoOffsetReset::ByDuration(3_600_000));
        assert_eq!(reset("by_duration:P1DT0.5S"), AutoOffsetReset::ByDuration(86_400_500));
        assert_eq!(reset("by_duration:PT2M3S"), AutoOffsetReset::ByDuration(123_000));
        assert_eq!(reset("by_duration:1H"), AutoOffsetReset::Latest);
    }
}

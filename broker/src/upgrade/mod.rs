//! Upgrades: what this build supports, and the refusal of data written by a newer one.
//!
//! Two facts make a rolling upgrade safe (docs/OPERATIONS.md, Upgrades):
//! - Every persistent structure and transport message says which format it is in, and a build
//!   refuses a format above the ones it reads by name ([`TooNew`]) instead of misreading it.
//! - A build writes a newer format, and a leader proposes a newer op kind, only once the
//!   cluster *finalized* the feature level that allows it (`onelog_state::features`), which
//!   UpdateFeatures does only after every member said it supports that level
//!   (`raft::transport::features`). Until then a node of the previous release can still be
//!   started on any data directory of the cluster.
//!
//! [`SUPPORTED`] is this build's side of that agreement: ApiVersions advertises it, a peer asks
//! for it before finalizing a level, and the CHANGELOG says what each level brought.

use std::fmt;
use std::ops::RangeInclusive;

use onelog_state::features::{
    FeatureUpdate, UpgradeType, GROUP_PLACEMENT, GROUP_VERSION, ONELOG_VERSION, SHARE_VERSION,
    STREAMS_VERSION, TRANSACTION_VERSION,
};

/// onelog's release, as `onelog --version` and the status page show it.
pub const RELEASE: &str = env!("CARGO_PKG_VERSION");

/// The feature levels this build can serve: (name, min, max). A feature this build cannot
/// serve at all is absent (Kafka's brokers list only features with a level above 0).
pub const SUPPORTED: &[(&str, i16, i16)] = &[
    (ONELOG_VERSION, 1, 9),
    (TRANSACTION_VERSION, 0, 2),
    (GROUP_VERSION, 0, 1),
    (STREAMS_VERSION, 0, 1),
    (SHARE_VERSION, 0, 1),
    (GROUP_PLACEMENT, 0, 1),
];

/// The supported range of `name`; `0..=0` for a feature this build does not know.
pub fn supported(name: &str) -> RangeInclusive<i16> {
    SUPPORTED.iter().find(|(n, _, _)| *n == name).map_or(0..=0, |(_, min, max)| *min..=*max)
}

/// The levels a new cluster starts at, as Kafka formats a new cluster at the latest
/// production `metadata.version`: the highest this build supports, for every feature.
pub fn latest_levels() -> Vec<FeatureUpdate> {
    SUPPORTED
        .iter()
        .map(|(name, _, max)| FeatureUpdate {
            name: name.to_string(),
            level: *max,
            upgrade_type: UpgradeType::Upgrade,
        })
        .collect()
}

/// A persistent structure whose format version is outside the ones this build reads: written
/// by a newer build (or damaged). The node stops rather than guess.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooNew {
    /// What was read: "checkpoint", "snapshot archive", …
    pub what: &'static str,
    pub found: u32,
    pub read: RangeInclusive<u32>,
}

impl fmt::Display for TooNew {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} format version {} is not one this build reads ({}–{}; onelog {RELEASE}): written by a \
             newer onelog? Start that build or a newer one on this data directory",
            self.what,
            self.found,
            self.read.start(),
            self.read.end()
        )
    }
}

#[cfg(test)]
mod golden_share_tests;
#[cfg(test)]
mod golden_streams_tests;
#[cfg(test)]
mod golden_tests;
#[cfg(test)]
mod golden_xgroup_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use onelog_state::features::{Features, LEGACY_LEVELS};

    #[test]
    fn this_build_serves_every_level_0_1_0_finalized() {
        // A cluster rolled from 0.1.0 keeps its levels until an operator changes them.
        for (name, level) in LEGACY_LEVELS {
            assert!(supported(name).contains(level), "{name} {level}");
        }
        assert!(Features::default().finalized().iter().all(|(n, l)| supported(n).contains(l)));
    }

    #[test]
    fn a_new_cluster_s_levels_pass_the_transition_rules() {
        assert_eq!(Features::default().check(&latest_levels()), Ok(()));
    }
}

//! Finalized feature levels (KIP-584, KIP-778): what the whole cluster has agreed to use.
//!
//! A feature is a name and a level. Each build supports a range of levels per feature (the
//! broker's `upgrade::SUPPORTED`); the cluster's *finalized* level is in the log, raised or
//! lowered only by an `UpdateFeatures` op that the leader proposes after every member said it
//! supports the new level. Two kinds:
//! - `onelog.version`, onelog's `metadata.version`: which formats and op kinds the log and the
//!   data directories may hold. A leader proposes an op only when this level allows it, so a
//!   node of an older build is never handed an entry it cannot read.
//! - Kafka's client-facing features (`transaction.version`, `group.version`, …), shown in
//!   ApiVersions, so a client never uses a protocol a node of the cluster cannot serve.
//!
//! A log that never applied an `UpdateFeatures` (one written by onelog 0.1.0, or by a later
//! build before anyone finalized a level) holds 0.1.0's levels, [`LEGACY_LEVELS`]; its
//! checkpoint keeps 0.1.0's format, so that build can still read it during a rolling upgrade.
//!
//! Validation here is the pure part, re-run in apply, so two updates validated against the same
//! levels cannot both apply: Kafka's `FeatureControlManager.updateFeature` rules (upgrade type,
//! dependencies) with its messages. What the members support is the leader's check, before it
//! proposes.

use std::collections::BTreeMap;

use kafka_compat::error_code::INVALID_UPDATE_VERSION;
use serde::{Deserialize, Serialize};

use crate::command::Refusal;

/// onelog's format and op-kind level. 1: onelog 0.1.0. 2: feature levels recorded in the
/// log and checkpoints (checkpoint format 8). 3: KIP-848 consumer groups in the log
/// (checkpoint format 9). 4: KIP-1071 Streams groups in the log (checkpoint format 10).
/// 5: KIP-932 share groups in the log (checkpoint format 11). 6: partition segments may
/// leave their batches in the Raft log (journaled segments; checkpoint format 12). 7: the
/// cross-group transaction entries (`Op::CrossGroup`) and their state in checkpoints
/// (format 13), what a cluster of more than one Raft group needs. 8: a group of several
/// identifies itself in its log (`XOp::Identify`) and allocates producer ids from its own
/// range, so transactional ids are coordinated in the group they are placed in. 9: a
/// participant group forgets the fence of a remote producer id its coordinator no longer
/// knows (`XOp::Forget`), and passes an operator's abort marker on to the coordinator.
pub const ONELOG_VERSION: &str = "onelog.version";
/// KIP-890's transactions v2 (Produce v12, TxnOffsetCommit v5, EndTxn v5 epoch bumps).
pub const TRANSACTION_VERSION: &str = "transaction.version";
/// KIP-848's consumer group protocol.
pub const GROUP_VERSION: &str = "group.version";
/// KIP-932's share groups.
pub const SHARE_VERSION: &str = "share.version";
/// KIP-1071's Streams groups.
pub const STREAMS_VERSION: &str = "streams.version";
/// Level 1: in a cluster of several Raft groups, a consumer, Streams or share group lives in
/// the Raft group its id is placed in (`group:` rules, else its hash; docs/SCALING.md §2),
/// where at 0 every group lives in group 0. Chosen when a cluster is created, with its first
/// recorded levels, and never changed after: a running cluster holds its groups' state in
/// group 0, and a group request decided before the change could still land there after it.
pub const GROUP_PLACEMENT: &str = "onelog.group.placement";

/// The level of `onelog.version` from which the log records feature levels at all: every
/// other feature depends on it (a level set below it would not survive a checkpoint that
/// 0.1.0 can still read).
pub const ONELOG_VERSION_RECORDED: i16 = 2;
/// The level of `onelog.version` whose ops and checkpoint carry KIP-848 consumer groups:
/// `group.version` 1 depends on it.
pub const ONELOG_VERSION_CONSUMER_GROUPS: i16 = 3;
/// The level of `onelog.version` whose ops and checkpoint carry KIP-1071 Streams groups:
/// `streams.version` 1 depends on it.
pub const ONELOG_VERSION_STREAMS_GROUPS: i16 = 4;
/// The level of `onelog.version` whose ops and checkpoint carry KIP-932 share groups (their
/// members and every share partition's record states): `share.version` 1 depends on it.
pub const ONELOG_VERSION_SHARE_GROUPS: i16 = 5;
/// The level of `onelog.version` from which a node's partition segments may leave their
/// batches in the Raft log, indexed by a journal (issue 31): a data directory holding them
/// cannot be opened by a build of level 5 or below, so its checkpoints say so (format 12).
pub const ONELOG_VERSION_JOURNALED_SEGMENTS: i16 = 6;
/// The level of `onelog.version` whose ops and checkpoint carry transactions across Raft
/// groups (issue 32, docs/SCALING.md): a cluster runs more than one group only from it.
pub const ONELOG_VERSION_RAFT_GROUPS: i16 = 7;
/// The level of `onelog.version` from which each Raft group of a cluster of several knows its
/// number (`XOp::Identify`) and coordinates the transactional ids placed in it with producer
/// ids from its own range (issue 32). Below it every transaction is coordinated in group 0.
pub const ONELOG_VERSION_GROUP_COORDINATORS: i16 = 8;
/// The level of `onelog.version` from which a participant group's leader sends the
/// coordinator group's leader the `Gone` and `AdminAbort` messages (issue 32): it forgets a
/// producer id of another group once that group no longer knows it (`XOp::Forget`; below it a
/// participant keeps each remote producer's fence for good), and passes on an operator's abort
/// marker for another group's transaction (below it such a marker changes nothing).
pub const ONELOG_VERSION_PARTICIPANT_MESSAGES: i16 = 9;

/// What a client feature's level needs of `onelog.version` (Kafka's `metadata.version`
/// dependencies, `FeatureVersion.dependencies`): (feature, from level, onelog.version).
const DEPENDENCIES: &[(&str, i16, i16)] = &[
    (GROUP_VERSION, 1, ONELOG_VERSION_CONSUMER_GROUPS),
    (STREAMS_VERSION, 1, ONELOG_VERSION_STREAMS_GROUPS),
    (SHARE_VERSION, 1, ONELOG_VERSION_SHARE_GROUPS),
    (GROUP_PLACEMENT, 1, ONELOG_VERSION_GROUP_COORDINATORS),
];

/// The finalized levels of a log without any `UpdateFeatures`: what onelog 0.1.0 answered in
/// ApiVersions, as constants.
pub const LEGACY_LEVELS: &[(&str, i16)] = &[(ONELOG_VERSION, 1), (TRANSACTION_VERSION, 2)];
/// The finalized-features epoch 0.1.0 answered (≥ 0 tells clients features are present).
const LEGACY_EPOCH: i64 = 1;

/// Kafka's `FeatureUpdate.UpgradeType` codes (UpdateFeatures v1+; v0's `allow_downgrade`
/// means `SAFE_DOWNGRADE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum UpgradeType {
    Upgrade,
    SafeDowngrade,
    UnsafeDowngrade,
}

impl UpgradeType {
    /// `None` for a code Kafka does not define (its `UNKNOWN`).
    pub fn from_code(code: i8) -> Option<UpgradeType> {
        match code {
            1 => Some(UpgradeType::Upgrade),
            2 => Some(UpgradeType::SafeDowngrade),
            3 => Some(UpgradeType::UnsafeDowngrade),
            _ => None,
        }
    }
}

/// One feature's requested level (0 removes a client feature, as in Kafka).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureUpdate {
    pub name: String,
    pub level: i16,
    pub upgrade_type: UpgradeType,
}

/// UpdateFeatures (KIP-584): levels the leader checked every member supports. Applies
/// all-or-nothing, as Kafka's controller writes its records atomically.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UpdateFeaturesOp {
    pub updates: Vec<FeatureUpdate>,
}

/// The finalized levels. Not part of `BrokerState`'s serialized shape (0.1.0's checkpoint
/// format has no room for it): the checkpoint writes it after the state once recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Features {
    recorded: Option<Recorded>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Recorded {
    /// Features at a level above 0 (Kafka omits level 0 from ApiVersions).
    levels: BTreeMap<String, i16>,
    /// Raised by one per applied update: Kafka's `FinalizedFeaturesEpoch`, which clients use
    /// to tell a newer answer from an older one.
    epoch: i64,
}

impl Features {
    /// Whether any `UpdateFeatures` applied: then the checkpoint needs format 8.
    pub fn is_recorded(&self) -> bool {
        self.recorded.is_some()
    }

    /// The finalized level of `name`; 0 when not finalized.
    pub fn level(&self, name: &str) -> i16 {
        match &self.recorded {
            Some(recorded) => recorded.levels.get(name).copied().unwrap_or(0),
            None => LEGACY_LEVELS.iter().find(|(n, _)| *n == name).map_or(0, |(_, level)| *level),
        }
    }

    /// Every finalized feature above level 0, by name.
    pub fn finalized(&self) -> Vec<(String, i16)> {
        match &self.recorded {
            Some(recorded) => recorded.levels.iter().map(|(n, l)| (n.clone(), *l)).collect(),
            None => LEGACY_LEVELS.iter().map(|(n, l)| (n.to_string(), *l)).collect(),
        }
    }

    pub fn epoch(&self) -> i64 {
        self.recorded.as_ref().map_or(LEGACY_EPOCH, |r| r.epoch)
    }

    /// Kafka's checks of `updates` against these levels, in request order; the first failure
    /// refuses them all, with Kafka's INVALID_UPDATE_VERSION and message.
    pub fn check(&self, updates: &[FeatureUpdate]) -> Result<(), Refusal> {
        let mut proposed: BTreeMap<String, i16> = self.finalized().into_iter().collect();
        for update in updates {
            proposed.insert(update.name.clone(), update.level);
        }
        updates.iter().try_for_each(|update| self.check_one(update, &proposed))
    }

    fn check_one(&self, update: &FeatureUpdate, proposed: &BTreeMap<String, i16>) -> Result<(), Refusal> {
        let refused = |why: String| {
            Err(Refusal {
                error_code: INVALID_UPDATE_VERSION,
                message: format!(
                    "Invalid update version {} for feature {}. {why}",
                    update.level, update.name
                ),
            })
        };
        if update.level < 0 {
            return refused("A feature version cannot be less than 0.".into());
        }
        let current = self.level(&update.name);
        if update.level < current && update.upgrade_type == UpgradeType::Upgrade {
            return refused(
                "Can't downgrade the version of this feature without setting the upgrade type to either \
                 safe or unsafe downgrade."
                    .into(),
            );
        }
        if update.level > current && update.upgrade_type != UpgradeType::Upgrade {
            return refused("Can't downgrade to a newer version.".into());
        }
        if update.name == ONELOG_VERSION && update.level < current {
            // Like metadata.version: a lower level would have to rewrite what is on disk.
            return refused(
                "Refusing to perform the requested downgrade because it might delete metadata information."
                    .into(),
            );
        }
        if update.name == GROUP_PLACEMENT && update.level != current && self.is_recorded() {
            return refused(format!(
                "{GROUP_PLACEMENT} is chosen when a cluster is created: a running cluster keeps its \
                 consumer, Streams and share groups where they are (docs/SCALING.md §2)."
            ));
        }
        let onelog_version = proposed.get(ONELOG_VERSION).copied().unwrap_or(0);
        let needs = DEPENDENCIES
            .iter()
            .filter(|(name, from, _)| *name == update.name && update.level >= *from)
            .map(|(_, _, needs)| *needs)
            .fold(ONELOG_VERSION_RECORDED, i16::max);
        if update.name != ONELOG_VERSION && onelog_version < needs {
            return refused(format!(
                "{} could not be set to {} because it depends on {ONELOG_VERSION} level {needs}",
                update.name, update.level
            ));
        }
        Ok(())
    }

    /// Applies `op` after re-checking it against these levels (another update may have
    /// applied since the leader checked).
    pub fn apply(&mut self, op: &UpdateFeaturesOp) -> Result<(), Refusal> {
        self.check(&op.updates)?;
        let epoch = self.epoch() + 1;
        let mut levels: BTreeMap<String, i16> = self.finalized().into_iter().collect();
        for update in &op.updates {
            if update.level == 0 {
                levels.remove(&update.name);
            } else {
                levels.insert(update.name.clone(), update.level);
            }
        }
        self.recorded = Some(Recorded { levels, epoch });
        Ok(())
    }
}

#[cfg(test)]
#[path = "features_tests.rs"]
mod tests;

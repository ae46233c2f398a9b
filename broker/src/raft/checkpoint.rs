//! Checkpoints: the broker state plus the Raft log id it covers, written atomically.
//!
//! Format: `[magic "OLCP"][format version u32][bincode body][crc32c u32]`. A checkpoint is
//! written only after every partition file has been flushed, so on start the broker can load
//! it, truncate partitions to its offsets and re-apply the Raft log after it (DESIGN §3). It
//! is also the snapshot openraft sees: the log is purged only below it.

use std::io;
use std::ops::RangeInclusive;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{LogId, StoredMembership};
use crate::upgrade::TooNew;
use onelog_state::features::{
    ONELOG_VERSION, ONELOG_VERSION_CONSUMER_GROUPS, ONELOG_VERSION_JOURNALED_SEGMENTS,
    ONELOG_VERSION_RAFT_GROUPS, ONELOG_VERSION_SHARE_GROUPS, ONELOG_VERSION_STREAMS_GROUPS,
};
use onelog_state::BrokerState;

const MAGIC: &[u8; 4] = b"OLCP";
// 2: BrokerState gained producer state (idempotent producers).
// 3: BrokerState gained committed offsets of consumer groups.
// 4: consumer groups gained their last completed generation and members.
// 5: transactions: transactional ids, open transactions per partition, the aborted index.
// 6: partitions gained the replicas of an explicit CreatePartitions assignment.
// 7: client quotas, dynamic configs (both came without a bump), ACL bindings and SCRAM
//    credentials. What onelog 0.1.0 writes and reads.
// 8: the finalized feature levels follow the checkpoint (`onelog.version` 2). Written only
//    once the log recorded a level, so that 0.1.0 reads every checkpoint of a log that has
//    none: a rolling upgrade can still roll back until an operator finalizes the level.
// 9: KIP-848 consumer groups follow the features (`onelog.version` 3). Written only once
//    that level is finalized, so that 0.2.0's first build (format 8) reads every checkpoint
//    until then.
// 10: KIP-1071 Streams groups follow the consumer groups (`onelog.version` 4), written only
//    once that level is finalized, so that the build before (format 9) reads every
//    checkpoint until then.
// 11: KIP-932 share groups (members, then every share partition's record states) follow the
//    Streams groups (`onelog.version` 5), written only once that level is finalized.
// 12: the body of 11; the partition files it covers may be journaled segments, whose batches
//    lie in the Raft log (`onelog.version` 6). Only the number changes: a build that reads 11
//    at most must refuse such a data directory rather than open its partitions without them.
// 13: the group's cross-group transaction state (`BrokerState::xgroup`: instances it
//    coordinates, undelivered decisions, other groups' open instances here) follows the
//    share states (`onelog.version` 7), written only once that level is finalized.
const FORMAT_VERSION_LEGACY: u32 = 7;
const FORMAT_VERSION_FEATURES: u32 = 8;
const FORMAT_VERSION_CONSUMER_GROUPS: u32 = 9;
const FORMAT_VERSION_STREAMS_GROUPS: u32 = 10;
const FORMAT_VERSION_SHARE_GROUPS: u32 = 11;
const FORMAT_VERSION_JOURNALED_SEGMENTS: u32 = 12;
const FORMAT_VERSION: u32 = 13;
/// The formats this build reads; anything else is refused by name (`upgrade::TooNew`).
pub const FORMAT_VERSIONS_READ: RangeInclusive<u32> = FORMAT_VERSION_LEGACY..=FORMAT_VERSION;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Checkpoint {
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
    pub state: BrokerState,
}

/// The oldest format that holds `state`: formats follow the finalized `onelog.version`, so
/// that the previous release reads every checkpoint until an operator raises the level.
fn format_version(state: &BrokerState) -> u32 {
    let features = &state.features;
    if features.level(ONELOG_VERSION) >= ONELOG_VERSION_RAFT_GROUPS {
        FORMAT_VERSION
    } else if features.level(ONELOG_VERSION) >= ONELOG_VERSION_JOURNALED_SEGMENTS {
        FORMAT_VERSION_JOURNALED_SEGMENTS
    } else if features.level(ONELOG_VERSION) >= ONELOG_VERSION_SHARE_GROUPS {
        FORMAT_VERSION_SHARE_GROUPS
    } else if features.level(ONELOG_VERSION) >= ONELOG_VERSION_STREAMS_GROUPS {
        FORMAT_VERSION_STREAMS_GROUPS
    } else if features.level(ONELOG_VERSION) >= ONELOG_VERSION_CONSUMER_GROUPS {
        FORMAT_VERSION_CONSUMER_GROUPS
    } else if features.is_recorded() {
        FORMAT_VERSION_FEATURES
    } else {
        FORMAT_VERSION_LEGACY
    }
}

pub fn encode(checkpoint: &Checkpoint) -> Vec<u8> {
    let version = format_version(&checkpoint.state);
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&version.to_be_bytes());
    bincode::serialize_into(&mut out, checkpoint).expect("serializing to a Vec cannot fail");
    if version >= FORMAT_VERSION_FEATURES {
        bincode::serialize_into(&mut out, &checkpoint.state.features)
            .expect("serializing to a Vec cannot fail");
    }
    if version >= FORMAT_VERSION_CONSUMER_GROUPS {
        bincode::serialize_into(&mut out, &checkpoint.state.consumer_groups)
            .expect("serializing to a Vec cannot fail");
    }
    if version >= FORMAT_VERSION_STREAMS_GROUPS {
        bincode::serialize_into(&mut out, &checkpoint.state.streams_groups)
            .expect("serializing to a Vec cannot fail");
    }
    if version >= FORMAT_VERSION_SHARE_GROUPS {
        bincode::serialize_into(&mut out, &checkpoint.state.share_groups)
            .expect("serializing to a Vec cannot fail");
        bincode::serialize_into(&mut out, &checkpoint.state.share_states)
            .expect("serializing to a Vec cannot fail");
    }
    if version >= FORMAT_VERSION {
        bincode::serialize_into(&mut out, &checkpoint.state.xgroup)
            .expect("serializing to a Vec cannot fail");
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

pub fn decode(bytes: &[u8]) -> io::Result<Checkpoint> {
    let invalid = |why: &str| io::Error::new(io::ErrorKind::InvalidData, format!("checkpoint: {why}"));
    if bytes.len() < 12 || &bytes[..4] != MAGIC {
        return Err(invalid("bad magic or too short"));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    let version = u32::from_be_bytes(body[4..8].try_into().expect("4 bytes"));
    if !FORMAT_VERSIONS_READ.contains(&version) {
        // Before the CRC: a newer format may have moved it too, and its version is the news.
        let too_new = TooNew { what: "checkpoint", found: version, read: FORMAT_VERSIONS_READ };
        return Err(io::Error::new(io::ErrorKind::InvalidData, too_new.to_string()));
    }
    if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().expect("4 bytes")) {
        return Err(invalid("CRC mismatch"));
    }
    let mut input = &body[8..];
    let mut checkpoint: Checkpoint =
        bincode::deserialize_from(&mut input).map_err(|e| invalid(&e.to_string()))?;
    if version >= FORMAT_VERSION_FEATURES {
        checkpoint.state.features =
            bincode::deserialize_from(&mut input).map_err(|e| invalid(&e.to_string()))?;
    }
    if version >= FORMAT_VERSION_CONSUMER_GROUPS {
        checkpoint.state.consumer_groups =
            bincode::deserialize_from(&mut input).map_err(|e| invalid(&e.to_string()))?;
    }
    if version >= FORMAT_VERSION_STREAMS_GROUPS {
        checkpoint.state.streams_groups =
            bincode::deserialize_from(&mut input).map_err(|e| invalid(&e.to_string()))?;
    }
    if version >= FORMAT_VERSION_SHARE_GROUPS {
        checkpoint.state.share_groups =
            bincode::deserialize_from(&mut input).map_err(|e| invalid(&e.to_string()))?;
        checkpoint.state.share_states =
            bincode::deserialize_from(&mut input).map_err(|e| invalid(&e.to_string()))?;
    }
    if version >= FORMAT_VERSION {
        checkpoint.state.xgroup =
            bincode::deserialize_from(&mut input).map_err(|e| invalid(&e.to_string()))?;
    }
    if !input.is_empty() {
        return Err(invalid(&format!("{} bytes after the body", input.len())));
    }
    Ok(checkpoint)
}

/// Reads only the header of the checkpoint at `path`: an error naming the file when its format
/// is one this build does not read. A missing, short or damaged file is left to [`load`].
pub fn check_format(path: &Path) -> io::Result<()> {
    let mut head = [0u8; 8];
    let read = std::fs::File::open(path).and_then(|mut file| io::Read::read_exact(&mut file, &mut head));
    let version = u32::from_be_bytes(head[4..8].try_into().expect("4 bytes"));
    if read.is_err() || &head[..4] != MAGIC || FORMAT_VERSIONS_READ.contains(&version) {
        return Ok(());
    }
    let too_new = TooNew { what: "checkpoint", found: version, read: FORMAT_VERSIONS_READ };
    Err(io::Error::new(io::ErrorKind::InvalidData, format!("{}: {too_new}", path.display())))
}

/// Loads the checkpoint at `path`, if there is one; an error names the file.
pub fn load(path: &Path) -> io::Result<Option<(Checkpoint, Vec<u8>)>> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let checkpoint =
                decode(&bytes).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            Ok(Some((checkpoint, bytes)))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onelog_state::features::{FeatureUpdate, UpdateFeaturesOp, UpgradeType, ONELOG_VERSION};

    fn recorded() -> Checkpoint {
        let mut checkpoint = Checkpoint::default();
        checkpoint.state.cluster_id = Some("c".into());
        let updates =
            vec![FeatureUpdate { name: ONELOG_VERSION.into(), level: 2, upgrade_type: UpgradeType::Upgrade }];
        checkpoint.state.features.apply(&UpdateFeaturesOp { updates }).unwrap();
        checkpoint
    }

    /// Finalizes `onelog.version` `level` in `checkpoint`'s state.
    fn raise_to(checkpoint: &mut Checkpoint, level: i16) {
        let updates =
            vec![FeatureUpdate { name: ONELOG_VERSION.into(), level, upgrade_type: UpgradeType::Upgrade }];
        checkpoint.state.features.apply(&UpdateFeaturesOp { updates }).unwrap();
    }

    fn version(bytes: &[u8]) -> u32 {
        u32::from_be_bytes(bytes[4..8].try_into().unwrap())
    }

    #[test]
    fn without_recorded_levels_the_format_is_0_1_0_s() {
        let checkpoint = Checkpoint {
            state: BrokerState { cluster_id: Some("c".into()), ..Default::default() },
            ..Default::default()
        };
        let bytes = encode(&checkpoint);
        assert_eq!(version(&bytes), 7);
        // 0.1.0's layout: magic, version, the bincode of the checkpoint, the CRC; nothing else.
        assert_eq!(bytes.len(), 8 + bincode::serialized_size(&checkpoint).unwrap() as usize + 4);
        assert_eq!(decode(&bytes).unwrap().state, checkpoint.state);
    }

    #[test]
    fn recorded_levels_are_format_8_and_come_back() {
        let checkpoint = recorded();
        let bytes = encode(&checkpoint);
        assert_eq!(version(&bytes), 8);
        let back = decode(&bytes).unwrap();
        assert_eq!(back.state.features, checkpoint.state.features);
        assert_eq!(back.state.features.level(ONELOG_VERSION), 2);
    }

    #[test]
    fn consumer_groups_are_format_9_from_onelog_version_3_and_come_back() {
        use onelog_state::consumer_group::GroupSettings;
        let mut checkpoint = recorded();
        let updates =
            vec![FeatureUpdate { name: ONELOG_VERSION.into(), level: 3, upgrade_type: UpgradeType::Upgrade }];
        checkpoint.state.features.apply(&UpdateFeaturesOp { updates }).unwrap();
        let join = onelog_state::testing::consumer_join("g", "m");
        let state = &mut checkpoint.state;
        state.consumer_groups.heartbeat(&state.topics, &join, &GroupSettings::default(), 1).unwrap();
        let bytes = encode(&checkpoint);
        assert_eq!(version(&bytes), 9);
        let back = decode(&bytes).unwrap();
        assert_eq!(back.state.consumer_groups, checkpoint.state.consumer_groups);
        assert!(back.state.consumer_groups.groups["g"].members.contains_key("m"));
    }

    #[test]
    fn streams_groups_are_format_10_from_onelog_version_4_and_come_back() {
        use onelog_state::streams_group::{Heartbeat, StreamsSettings, Subtopology, Tasks, Topology};
        let mut checkpoint = recorded();
        let updates =
            vec![FeatureUpdate { name: ONELOG_VERSION.into(), level: 4, upgrade_type: UpgradeType::Upgrade }];
        checkpoint.state.features.apply(&UpdateFeaturesOp { updates }).unwrap();
        let subtopology = Subtopology { source_topics: vec!["in".into()], ..Subtopology::default() };
        let join = Heartbeat {
            group_id: "app".into(),
            member_id: "m".into(),
            rebalance_timeout_ms: 30_000,
            topology: Some(Topology { epoch: 0, subtopologies: [("0".to_string(), subtopology)].into() }),
            active_tasks: Some(Tasks::new()),
            standby_tasks: Some(Tasks::new()),
            warmup_tasks: Some(Tasks::new()),
            ..Heartbeat::default()
        };
        let state = &mut checkpoint.state;
        state.streams_groups.heartbeat(&state.topics, &join, &StreamsSettings::default(), 1).unwrap();
        let bytes = encode(&checkpoint);
        assert_eq!(version(&bytes), 10);
        let back = decode(&bytes).unwrap();
        assert_eq!(back.state.streams_groups, checkpoint.state.streams_groups);
        assert!(back.state.streams_groups.groups["app"].members.contains_key("m"));
    }

    /// Level 6 changes nothing in the body, only the number: a build that reads 11 at most
    /// must refuse a data directory whose partitions may be journaled.
    #[test]
    fn journaled_segments_are_format_12_from_onelog_version_6_with_format_11_s_body() {
        let mut checkpoint = recorded();
        raise_to(&mut checkpoint, 5);
        let at_5 = encode(&checkpoint);
        assert_eq!(version(&at_5), 11);
        raise_to(&mut checkpoint, 6);
        let at_6 = encode(&checkpoint);
        assert_eq!(version(&at_6), 12);
        assert_eq!(at_6.len(), at_5.len(), "the same body");
        assert_eq!(decode(&at_6).unwrap().state.features.level(ONELOG_VERSION), 6);
    }

    /// Level 7 appends the cross-group state; at level 6 the same state is not written, so a
    /// build that reads 12 at most reads every checkpoint until an operator finalizes 7.
    #[test]
    fn cross_group_state_is_format_13_from_onelog_version_7_and_comes_back() {
        use onelog_state::xgroup::{Coordinated, Undelivered};
        let mut checkpoint = recorded();
        raise_to(&mut checkpoint, 6);
        let xgroup = &mut checkpoint.state.xgroup;
        xgroup.groups = 3;
        xgroup.coordinated.insert(7, Coordinated { n: 2, participants: [1, 2].into() });
        let instance = onelog_state::xgroup::Instance { producer_id: 7, epoch: 0, n: 1 };
        xgroup.undelivered.insert(instance, Undelivered { commit: true, waiting: [2].into() });
        let at_6 = encode(&checkpoint);
        assert_eq!(version(&at_6), 12);
        assert_eq!(decode(&at_6).unwrap().state.xgroup, Default::default(), "format 12 has no room for it");
        raise_to(&mut checkpoint, 7);
        let at_7 = encode(&checkpoint);
        assert_eq!(version(&at_7), 13);
        let back = decode(&at_7).unwrap();
        assert_eq!(back.state.xgroup, checkpoint.state.xgroup);
        assert_eq!(back.state.features.level(ONELOG_VERSION), 7);
    }

    #[test]
    fn a_newer_format_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoint");
        let mut bytes = encode(&recorded());
        bytes[4..8].copy_from_slice(&14u32.to_be_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let message = load(&path).unwrap_err().to_string();
        let want =
            format!("{}: checkpoint format version 14 is not one this build reads (7–13", path.display());
        assert!(message.starts_with(&want), "{message}");
        // The start-up check reads the header alone, with the same message.
        assert!(check_format(&path).unwrap_err().to_string().starts_with(&want));
        std::fs::write(&path, encode(&recorded())).unwrap();
        assert!(check_format(&path).is_ok());
        assert!(check_format(&dir.path().join("none")).is_ok(), "no checkpoint: nothing to refuse");
    }
}

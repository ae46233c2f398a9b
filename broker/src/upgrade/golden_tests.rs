//! Golden files: every persistent structure as a released build wrote it, decoded by this one.
//!
//! `broker/tests/golden/0.1.0/` holds node 1's files from the data set onelog 0.1.0 wrote
//! (`scripts/upgrade-fixture.sh`; what is in it: `harness/fixtures/0.1.0/manifest.json`): its
//! checkpoint, a snapshot archive, the written part of its Raft log segment and the Raft
//! metadata files. `broker/tests/golden/0.2.0/checkpoint` is the same state with feature levels
//! recorded, in format 8; `0.2.0/checkpoint-9` adds a KIP-848 consumer group (format 9);
//! `0.2.0/ops-24-29` is one op of every kind 0.2.0 adds to Raft log entries; the Streams
//! groups' format 10 and ops 30-33 are in `golden_streams_tests`. Each test decodes a
//! file and, where the format is still written,
//! encodes it back to the same bytes: a change of any shape the file holds fails here, before
//! it could misread a user's data. A later format adds its release's files, never replaces one.

use std::path::PathBuf;

use openraft::storage::RaftLogStorage;
use openraft::{EntryPayload, RaftLogReader};
use raft_store::{LogStore, LogStoreOptions, RECORD_HEADER_BYTES};

use crate::raft::checkpoint::{self, Checkpoint};
use crate::raft::{snapshot_archive, TypeConfig};
use onelog_state::command::Op;
use onelog_state::consumer_group::{GroupSettings, Heartbeat};
use onelog_state::features::{
    FeatureUpdate, UpdateFeaturesOp, UpgradeType, GROUP_VERSION, ONELOG_VERSION, TRANSACTION_VERSION,
};

pub(super) fn golden(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(path)
}

/// Writes golden file `path` unless it exists: a golden file is written once, by the build that
/// adds its format, and never updated.
pub(super) fn write_once(path: &str, bytes: Vec<u8>) {
    let path = golden(path);
    if !path.exists() {
        std::fs::write(path, bytes).unwrap();
    }
}

/// Golden checkpoint `path`, decoded: the state it was written from, and encoded back to the
/// same bytes.
pub(super) fn decoded_as_written(path: &str, written_from: Checkpoint) -> Checkpoint {
    let bytes = read(path);
    let decoded = checkpoint::decode(&bytes).expect("decodes");
    assert_eq!(decoded.state, written_from.state, "the state {path} was written from");
    assert_eq!(checkpoint::encode(&decoded), bytes, "{path} byte for byte");
    decoded
}

pub(super) fn read(path: &str) -> Vec<u8> {
    std::fs::read(golden(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// 0.1.0's state with `levels` finalized, as a cluster that rolled and then raised them.
pub(super) fn checkpoint_0_1_0_at(levels: &[(&str, i16)]) -> Checkpoint {
    let mut checkpoint = checkpoint_0_1_0();
    let updates = levels
        .iter()
        .map(|(name, level)| FeatureUpdate {
            name: name.to_string(),
            level: *level,
            upgrade_type: UpgradeType::Upgrade,
        })
        .collect();
    checkpoint.state.features.apply(&UpdateFeaturesOp { updates }).unwrap();
    checkpoint
}

pub(super) fn checkpoint_0_1_0() -> Checkpoint {
    checkpoint::decode(&read("0.1.0/checkpoint")).expect("0.1.0's checkpoint decodes")
}

#[test]
fn checkpoint_0_1_0_decodes_with_every_kind_of_state_and_encodes_back() {
    let bytes = read("0.1.0/checkpoint");
    let checkpoint = checkpoint::decode(&bytes).expect("decodes");
    let state = &checkpoint.state;
    let topics: Vec<&str> = state.topics.keys().map(String::as_str).collect();
    assert_eq!(
        topics,
        ["fx-compressed", "fx-configured", "fx-idempotent", "fx-plain", "fx-secured", "fx-trimmed", "fx-txn"]
    );
    assert!(state.topics["fx-trimmed"].partitions.iter().any(|p| p.log_start_offset > 0), "DeleteRecords");
    assert!(!state.topics["fx-configured"].configs.is_empty(), "topic configs");
    let users: Vec<&str> = state.scram.users().map(|(u, _)| u.as_str()).collect();
    assert_eq!(users, ["alice", "bob"]);
    assert_eq!(state.acls.len(), 6);
    assert!(
        state.txns.by_id.contains_key("fx-txn-committed") && state.txns.by_id.contains_key("fx-txn-aborted")
    );
    assert!(!state.features.is_recorded(), "0.1.0 records no feature levels");
    assert_eq!(checkpoint::encode(&checkpoint), bytes, "format 7 is still written byte for byte");
}

#[test]
fn checkpoint_0_2_0_with_recorded_levels_decodes_and_encodes_back() {
    let bytes = read("0.2.0/checkpoint");
    let checkpoint = checkpoint::decode(&bytes).expect("decodes");
    assert_eq!(checkpoint.state.features.level(ONELOG_VERSION), 2);
    assert_eq!(checkpoint.state.features.level(TRANSACTION_VERSION), 2);
    let mut without = checkpoint.state.clone();
    without.features = Default::default();
    assert_eq!(without, checkpoint_0_1_0().state, "the same state as 0.1.0's file");
    assert_eq!(checkpoint::encode(&checkpoint), bytes, "format 8 byte for byte");
}

#[test]
fn snapshot_archive_0_1_0_reads() {
    let mut partitions = 0;
    let (checkpoint, _) = snapshot_archive::read(&golden("0.1.0/snapshot-1-1-84.olsnap"), |_, data, len| {
        partitions += 1;
        std::io::copy(&mut std::io::Read::take(data, len), &mut std::io::sink()).map(|_| ())
    })
    .expect("0.1.0's snapshot archive reads");
    assert_eq!(checkpoint.last_applied.map(|l| l.index), Some(84));
    assert_eq!(partitions, checkpoint.state.topics.values().map(|t| t.partitions.len()).sum::<usize>());
}

/// Every entry of 0.1.0's Raft log decodes as this build's `Command`, and encodes back to the
/// bytes 0.1.0 wrote: no op shape changed. The vote and committed files read too.
#[tokio::test]
async fn raft_log_0_1_0_decodes_and_every_op_encodes_back() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = read("0.1.0/raft-log/00000000000000000000.seg.prefix");
    let mut segment = prefix.clone();
    segment.resize(1 << 20, 0);
    std::fs::write(dir.path().join("00000000000000000000.seg"), &segment).unwrap();
    for meta in ["vote", "committed"] {
        std::fs::write(dir.path().join(meta), read(&format!("0.1.0/raft-log/{meta}"))).unwrap();
    }
    let options = LogStoreOptions { segment_bytes: 1 << 20, ..Default::default() };
    let mut store = LogStore::<TypeConfig>::open(dir.path(), options).expect("0.1.0's log opens");
    assert!(store.read_vote().await.unwrap().is_some(), "vote");
    assert_eq!(store.read_committed().await.unwrap().map(|l| l.index), Some(84));
    let entries = store.try_get_log_entries(..).await.expect("every entry decodes");
    assert_eq!(entries.len(), 85);

    let mut kinds = std::collections::BTreeSet::new();
    let mut at = 0;
    for entry in &entries {
        let len = u32::from_le_bytes(prefix[at..at + 4].try_into().unwrap()) as usize;
        let payload = &prefix[at + RECORD_HEADER_BYTES..at + RECORD_HEADER_BYTES + len];
        assert_eq!(bincode::serialize(entry).unwrap(), payload, "entry {} encodes back", entry.log_id.index);
        at += RECORD_HEADER_BYTES + len;
        if let EntryPayload::Normal(command) = &entry.payload {
            kinds.extend(command.ops.iter().map(op_kind));
            // A cluster rolled from 0.1.0 sits at onelog.version 1 until finalized: every op it
            // proposed must still be admitted there (`leader::proposer::admit`).
            assert!(command.ops.iter().all(|op| op.onelog_version() == 1), "entry {}", entry.log_id.index);
        }
    }
    let want = [
        "AlterClientQuotas",
        "AlterConfigs",
        "AlterScramCredentials",
        "CompleteGeneration",
        "CreateAcls",
        "CreateTopics",
        "DeleteRecords",
        "DeleteTopics",
        "EndTxn",
        "InitCluster",
        "InitProducerId",
        "InitTxnProducer",
        "OffsetCommit",
        "Produce",
        "TxnOffsetCommit",
    ];
    for kind in want {
        assert!(kinds.contains(kind), "0.1.0's log has a {kind} op: {kinds:?}");
    }
}

pub(super) fn op_kind(op: &Op) -> &'static str {
    match op {
        Op::InitCluster(_) => "InitCluster",
        Op::SetLimits(_) => "SetLimits",
        Op::Produce(_) => "Produce",
        Op::CreateTopics(_) => "CreateTopics",
        Op::DeleteTopics(_) => "DeleteTopics",
        Op::CreatePartitions(_) => "CreatePartitions",
        Op::TrimLog(_) => "TrimLog",
        Op::InitProducerId(_) => "InitProducerId",
        Op::ExpireProducers(_) => "ExpireProducers",
        Op::OffsetCommit(_) => "OffsetCommit",
        Op::CompleteGeneration(_) => "CompleteGeneration",
        Op::InitTxnProducer(_) => "InitTxnProducer",
        Op::TxnOffsetCommit(_) => "TxnOffsetCommit",
        Op::EndTxn(_) => "EndTxn",
        Op::AbortTxns(_) => "AbortTxns",
        Op::ExpireTransactionalIds(_) => "ExpireTransactionalIds",
        Op::DeleteGroups(_) => "DeleteGroups",
        Op::OffsetDelete(_) => "OffsetDelete",
        Op::AlterClientQuotas(_) => "AlterClientQuotas",
        Op::AlterConfigs(_) => "AlterConfigs",
        Op::DeleteRecords(_) => "DeleteRecords",
        Op::CreateAcls(_) => "CreateAcls",
        Op::DeleteAcls(_) => "DeleteAcls",
        Op::AlterScramCredentials(_) => "AlterScramCredentials",
        Op::UpdateFeatures(_) => "UpdateFeatures",
        Op::ConsumerGroupHeartbeat(_) => "ConsumerGroupHeartbeat",
        Op::FenceConsumerGroupMember(_) => "FenceConsumerGroupMember",
        Op::RecordConsumerLiveness(_) => "RecordConsumerLiveness",
        Op::ConsumerGroupClassicJoin(_) => "ConsumerGroupClassicJoin",
        Op::ConsumerGroupClassicLeave(_) => "ConsumerGroupClassicLeave",
        Op::StreamsGroupHeartbeat(_) => "StreamsGroupHeartbeat",
        Op::FenceStreamsGroupMember(_) => "FenceStreamsGroupMember",
        Op::StreamsGroupAssign(_) => "StreamsGroupAssign",
        Op::RecordStreamsLiveness(_) => "RecordStreamsLiveness",
        Op::ShareGroupHeartbeat(_) => "ShareGroupHeartbeat",
        Op::FenceShareGroupMember(_) => "FenceShareGroupMember",
        Op::ShareAcquire(_) => "ShareAcquire",
        Op::ShareAcknowledge(_) => "ShareAcknowledge",
        Op::ShareRelease(_) => "ShareRelease",
        Op::ShareExpireLocks(_) => "ShareExpireLocks",
        Op::RecordShareLiveness(_) => "RecordShareLiveness",
        Op::ShareResetOffsets(_) => "ShareResetOffsets",
        Op::ShareDeleteOffsets(_) => "ShareDeleteOffsets",
        Op::CrossGroup(_) => "CrossGroup",
    }
}

/// Writes `0.2.0/checkpoint` from 0.1.0's state, once, when the release that added format 8
/// added the file; never to update it (`cargo test -p broker --lib write_golden -- --ignored`).
#[test]
#[ignore = "writes a golden file: run by hand, once per release that adds one"]
fn write_golden_0_2_0_checkpoint() {
    let mut checkpoint = checkpoint_0_1_0();
    let updates = [(ONELOG_VERSION, 2), (TRANSACTION_VERSION, 2)]
        .map(|(name, level)| FeatureUpdate { name: name.into(), level, upgrade_type: UpgradeType::Upgrade })
        .to_vec();
    checkpoint.state.features.apply(&UpdateFeaturesOp { updates }).unwrap();
    let path = golden("0.2.0/checkpoint");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, checkpoint::encode(&checkpoint)).unwrap();
}

/// 0.1.0's state at `onelog.version` 3 and `group.version` 1 with one consumer group: member
/// "golden-1" joined to every topic the state has; and one downgraded classic group id.
fn checkpoint_9() -> Checkpoint {
    let mut checkpoint = checkpoint_0_1_0();
    let updates = [(ONELOG_VERSION, 3), (TRANSACTION_VERSION, 2), (GROUP_VERSION, 1)]
        .map(|(name, level)| FeatureUpdate { name: name.into(), level, upgrade_type: UpgradeType::Upgrade })
        .to_vec();
    checkpoint.state.features.apply(&UpdateFeaturesOp { updates }).unwrap();
    let state = &mut checkpoint.state;
    let join = Heartbeat {
        version: 1,
        group_id: "golden-consumers".into(),
        member_id: "golden-1".into(),
        rebalance_timeout_ms: 300_000,
        subscribed_topic_names: Some(state.topics.keys().cloned().collect()),
        topic_partitions: Some(vec![]),
        client_id: "golden".into(),
        client_host: "/127.0.0.1".into(),
        ..Default::default()
    };
    let settings = GroupSettings::default();
    state.consumer_groups.heartbeat(&state.topics, &join, &settings, 1_764_720_000_000).unwrap();
    state.consumer_groups.downgraded.insert("golden-downgraded".into());
    checkpoint
}

#[test]
fn checkpoint_format_9_with_a_consumer_group_decodes_and_encodes_back() {
    let decoded = decoded_as_written("0.2.0/checkpoint-9", checkpoint_9());
    assert_eq!(decoded.state.features.level(GROUP_VERSION), 1);
    let group = &decoded.state.consumer_groups.groups["golden-consumers"];
    assert!(group.members["golden-1"].member_epoch > 0, "{group:?}");
}

/// Writes `0.2.0/checkpoint-9`, once, with the build that added format 9; never to update it
/// (`cargo test -p broker --lib write_golden -- --ignored`).
#[test]
#[ignore = "writes a golden file: run by hand, once per release that adds one"]
fn write_golden_0_2_0_checkpoint_9() {
    write_once("0.2.0/checkpoint-9", checkpoint::encode(&checkpoint_9()));
}

/// One op of every kind 0.2.0 adds (24–29), each with its optional parts filled, as 0.2.0
/// writes them into Raft log entries.
fn ops_0_2_0() -> Vec<Op> {
    use onelog_state::command::{
        ClassicJoinOp, ClassicLeaveOp, ConsumerGroupHeartbeatOp, FenceMemberOp, LivenessOp, SeenMember,
    };
    use onelog_state::consumer_group::{
        ClassicGroupSnapshot, ClassicJoin, ClassicProtocol, ClassicSnapshotMember, Migration,
        MigrationPolicy, TopicPartitions,
    };
    let protocol = ClassicProtocol { name: "range".into(), metadata: vec![0, 1, 0, 0, 0, 1, 0, 1, b't'] };
    let settings = GroupSettings {
        migration: Migration { policy: MigrationPolicy::Upgrade, classic_max_size: 9 },
        ..GroupSettings::default()
    };
    let heartbeat = Heartbeat {
        version: 1,
        group_id: "g".into(),
        member_id: "m".into(),
        instance_id: Some("i".into()),
        rack_id: Some("r".into()),
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["t".into()]),
        subscribed_topic_regex: Some("t.*".into()),
        server_assignor: Some("range".into()),
        topic_partitions: Some(vec![TopicPartitions { topic_id: [7; 16], partitions: vec![0, 2] }]),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        ..Default::default()
    };
    let snapshot = ClassicGroupSnapshot {
        generation_id: 4,
        protocol_type: "consumer".into(),
        protocol_name: "range".into(),
        members: vec![ClassicSnapshotMember {
            member_id: "classic-1".into(),
            instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocols: vec![protocol.clone()],
            assignment: vec![0, 0, 0, 0, 0, 0, 255, 255, 255, 255],
        }],
    };
    let join = ClassicJoin {
        group_id: "g".into(),
        member_id: "classic-2".into(),
        unknown_member: true,
        requires_known_member_id: false,
        instance_id: Some("j".into()),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![protocol],
    };
    let levels =
        vec![FeatureUpdate { name: GROUP_VERSION.into(), level: 1, upgrade_type: UpgradeType::Upgrade }];
    let seen = SeenMember { group_id: "g".into(), member_id: "m".into(), seen_ms: 1_764_900_000_000 };
    let heartbeat_op = ConsumerGroupHeartbeatOp {
        heartbeat,
        settings: settings.clone(),
        now_ms: 1_764_900_000_000,
        upgrade: Some(snapshot),
    };
    let fence = FenceMemberOp {
        group_id: "g".into(),
        member_id: "m".into(),
        expected_epoch: Some(5),
        migration: settings.migration,
    };
    vec![
        Op::UpdateFeatures(UpdateFeaturesOp { updates: levels }),
        Op::ConsumerGroupHeartbeat(Box::new(heartbeat_op)),
        Op::FenceConsumerGroupMember(fence),
        Op::RecordConsumerLiveness(LivenessOp { members: vec![seen] }),
        Op::ConsumerGroupClassicJoin(Box::new(ClassicJoinOp { join, settings, now_ms: 1_764_900_000_000 })),
        Op::ConsumerGroupClassicLeave(ClassicLeaveOp {
            group_id: "g".into(),
            members: vec![("classic-1".into(), None), (String::new(), Some("j".into()))],
        }),
    ]
}

/// Every op kind 0.2.0 adds decodes from the bytes 0.2.0 writes and encodes back to them:
/// the entries a 0.2.0 node wrote stay readable by every later build.
#[test]
fn ops_0_2_0_decode_and_encode_back() {
    let bytes = read("0.2.0/ops-24-29");
    let decoded: Vec<Op> = bincode::deserialize(&bytes).expect("0.2.0's ops decode");
    let kinds: Vec<&str> = decoded.iter().map(op_kind).collect();
    let want = [
        "UpdateFeatures",
        "ConsumerGroupHeartbeat",
        "FenceConsumerGroupMember",
        "RecordConsumerLiveness",
        "ConsumerGroupClassicJoin",
        "ConsumerGroupClassicLeave",
    ];
    assert_eq!(kinds, want);
    assert_eq!(bincode::serialize(&decoded).unwrap(), bytes, "encode back byte for byte");
    assert_eq!(bincode::serialize(&ops_0_2_0()).unwrap(), bytes, "the ops the file was written from");
}

/// Writes `0.2.0/ops-24-29`, once, with the build that adds the ops; never to update it
/// (`cargo test -p broker --lib write_golden -- --ignored`).
#[test]
#[ignore = "writes a golden file: run by hand, once per release that adds one"]
fn write_golden_0_2_0_ops() {
    write_once("0.2.0/ops-24-29", bincode::serialize(&ops_0_2_0()).unwrap());
}

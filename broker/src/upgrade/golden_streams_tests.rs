//! Golden files of `onelog.version` 4 (KIP-1071 Streams groups): `0.2.0/checkpoint-10`, 0.1.0's
//! state with one Streams group (format 10), and `0.2.0/ops-30-33`, one op of every kind the
//! level adds. As in `golden_tests`: each decodes, and encodes back to the same bytes.

use std::collections::BTreeMap;

use onelog_state::command::{
    FenceStreamsMemberOp, Op, SeenMember, StreamsAssignOp, StreamsGroupHeartbeatOp, StreamsLivenessOp,
};
use onelog_state::features::{GROUP_VERSION, ONELOG_VERSION, STREAMS_VERSION, TRANSACTION_VERSION};
use onelog_state::streams_group::{
    CopartitionGroup, Heartbeat, StreamsSettings, Subtopology, Tasks, TopicInfo, Topology,
};

use super::golden_tests::{checkpoint_0_1_0_at, decoded_as_written, op_kind, read, write_once};
use crate::raft::checkpoint::{self, Checkpoint};

/// A topology with every part filled: a source, a repartition step, a changelog, a
/// co-partition group.
fn topology(source: &str) -> Topology {
    let first = Subtopology {
        source_topics: vec![source.into()],
        repartition_sink_topics: vec!["app-repartition".into()],
        ..Subtopology::default()
    };
    let second = Subtopology {
        repartition_source_topics: vec![TopicInfo {
            name: "app-repartition".into(),
            partitions: 0,
            replication_factor: 0,
            topic_configs: vec![("cleanup.policy".into(), "delete".into())],
        }],
        state_changelog_topics: vec![TopicInfo {
            name: "app-store-changelog".into(),
            ..TopicInfo::default()
        }],
        copartition_groups: vec![CopartitionGroup {
            repartition_source_topics: vec![0],
            ..Default::default()
        }],
        ..Subtopology::default()
    };
    Topology { epoch: 0, subtopologies: BTreeMap::from([("0".into(), first), ("1".into(), second)]) }
}

fn join(source: &str) -> Heartbeat {
    Heartbeat {
        version: 1,
        group_id: "golden-streams".into(),
        member_id: "golden-1".into(),
        rebalance_timeout_ms: 300_000,
        topology: Some(topology(source)),
        active_tasks: Some(Tasks::new()),
        standby_tasks: Some(Tasks::new()),
        warmup_tasks: Some(Tasks::new()),
        process_id: Some("process-1".into()),
        user_endpoint: Some(("localhost".into(), 8080)),
        client_tags: Some(BTreeMap::from([("zone".into(), "a".into())])),
        task_offsets: Some(vec![("1".into(), 0, 42)]),
        client_id: "golden".into(),
        client_host: "/127.0.0.1".into(),
        ..Heartbeat::default()
    }
}

/// 0.1.0's state at `onelog.version` 4 with one Streams group reading its first topic.
fn checkpoint_10() -> Checkpoint {
    let mut checkpoint = checkpoint_0_1_0_at(&[
        (ONELOG_VERSION, 4),
        (TRANSACTION_VERSION, 2),
        (GROUP_VERSION, 1),
        (STREAMS_VERSION, 1),
    ]);
    let state = &mut checkpoint.state;
    let source = state.topics.keys().next().expect("0.1.0's state has topics").clone();
    let settings = StreamsSettings::default();
    state.streams_groups.heartbeat(&state.topics, &join(&source), &settings, 1_764_720_000_000).unwrap();
    checkpoint
}

#[test]
fn checkpoint_format_10_with_a_streams_group_decodes_and_encodes_back() {
    let decoded = decoded_as_written("0.2.0/checkpoint-10", checkpoint_10());
    assert_eq!(decoded.state.features.level(STREAMS_VERSION), 1);
    let group = &decoded.state.streams_groups.groups["golden-streams"];
    assert!(group.topology.is_some() && group.members.contains_key("golden-1"), "{group:?}");
}

/// Writes `0.2.0/checkpoint-10`, once, with the build that added format 10; never to update
/// it (`cargo test -p broker --lib write_golden -- --ignored`).
#[test]
#[ignore = "writes a golden file: run by hand, once per release that adds one"]
fn write_golden_0_2_0_checkpoint_10() {
    write_once("0.2.0/checkpoint-10", checkpoint::encode(&checkpoint_10()));
}

/// One op of every kind `onelog.version` 4 adds (30–33), with its optional parts filled.
fn ops_streams() -> Vec<Op> {
    let settings = StreamsSettings { num_standby_replicas: 1, ..StreamsSettings::default() };
    let mut heartbeat = join("t");
    heartbeat.instance_id = Some("i".into());
    heartbeat.rack_id = Some("r".into());
    heartbeat.shutdown_application = true;
    let seen = SeenMember { group_id: "g".into(), member_id: "m".into(), seen_ms: 1_764_900_000_000 };
    vec![
        Op::StreamsGroupHeartbeat(Box::new(StreamsGroupHeartbeatOp {
            heartbeat,
            settings: settings.clone(),
            now_ms: 1_764_900_000_000,
        })),
        Op::FenceStreamsGroupMember(FenceStreamsMemberOp {
            group_id: "g".into(),
            member_id: "m".into(),
            expected_epoch: Some(5),
        }),
        Op::StreamsGroupAssign(StreamsAssignOp { group_id: "g".into(), settings, now_ms: 1_764_900_000_000 }),
        Op::RecordStreamsLiveness(StreamsLivenessOp { members: vec![seen] }),
    ]
}

#[test]
fn ops_30_33_decode_and_encode_back() {
    let bytes = read("0.2.0/ops-30-33");
    let decoded: Vec<Op> = bincode::deserialize(&bytes).expect("the Streams ops decode");
    let kinds: Vec<&str> = decoded.iter().map(op_kind).collect();
    let want =
        ["StreamsGroupHeartbeat", "FenceStreamsGroupMember", "StreamsGroupAssign", "RecordStreamsLiveness"];
    assert_eq!(kinds, want);
    assert!(decoded.iter().all(|op| op.onelog_version() == 4), "the level that brought them");
    assert_eq!(bincode::serialize(&decoded).unwrap(), bytes, "encode back byte for byte");
    assert_eq!(bincode::serialize(&ops_streams()).unwrap(), bytes, "the ops the file was written from");
}

/// Writes `0.2.0/ops-30-33`, once, with the build that adds the ops; never to update it.
#[test]
#[ignore = "writes a golden file: run by hand, once per release that adds one"]
fn write_golden_0_2_0_streams_ops() {
    write_once("0.2.0/ops-30-33", bincode::serialize(&ops_streams()).unwrap());
}

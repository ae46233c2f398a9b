//! Golden files of `onelog.version` 5 (KIP-932 share groups): `0.2.0/checkpoint-11`, 0.1.0's
//! state with one share group holding a member and a share partition with records in every
//! state (format 11), and `0.2.0/ops-34-42`, one op of every kind the level adds. As in
//! `golden_tests`: each decodes, and encodes back to the same bytes.

use onelog_state::command::{
    AcknowledgePartition, AcquirePartition, FenceShareMemberOp, Op, SeenMember, ShareAcknowledgeOp,
    ShareAcquireOp, ShareDeleteOffsetsOp, ShareExpireOp, ShareGroupHeartbeatOp, ShareLivenessOp,
    ShareReleaseOp, ShareResetOffsetsOp,
};
use onelog_state::features::{
    GROUP_VERSION, ONELOG_VERSION, SHARE_VERSION, STREAMS_VERSION, TRANSACTION_VERSION,
};
use onelog_state::share_group::{Heartbeat, ShareSettings};
use onelog_state::share_partition::{AckBatch, AcquireInput, Limits, LogBatch};

use super::golden_tests::{checkpoint_0_1_0_at, decoded_as_written, op_kind, read, write_once};
use crate::raft::checkpoint::{self, Checkpoint};

const NOW_MS: i64 = 1_764_950_000_000;

fn join(topic: &str) -> Heartbeat {
    Heartbeat {
        group_id: "golden-share".into(),
        member_id: "golden-1".into(),
        member_epoch: 0,
        rack_id: Some("rack-a".into()),
        subscribed_topic_names: Some(vec![topic.into()]),
        client_id: "golden".into(),
        client_host: "/127.0.0.1".into(),
    }
}

fn limits() -> Limits {
    Limits { delivery_count_limit: 5, max_in_flight_records: 2_000, renew_enabled: true }
}

/// 0.1.0's state at `onelog.version` 5 with one share group reading its first topic: ten
/// records acquired, then 0-2 accepted, 3 released, 4 rejected.
fn checkpoint_11() -> Checkpoint {
    let mut checkpoint = checkpoint_0_1_0_at(&[
        (ONELOG_VERSION, 5),
        (TRANSACTION_VERSION, 2),
        (GROUP_VERSION, 1),
        (STREAMS_VERSION, 1),
        (SHARE_VERSION, 1),
    ]);
    let state = &mut checkpoint.state;
    let (name, topic) = state.topics.iter().next().expect("0.1.0's state has topics");
    let topic_id = topic.topic_id;
    state
        .share_groups
        .heartbeat(&state.topics.clone(), &join(&name.clone()), &ShareSettings::default(), NOW_MS)
        .unwrap();
    let share = state.share_states.get_or_start("golden-share", topic_id, 0, 0);
    let batches = [LogBatch { first_offset: 0, last_offset: 9, aborted: false }];
    let input = AcquireInput {
        member_id: "golden-1",
        max_records: 500,
        batch_size: 500,
        record_limit_mode: false,
        deadline_ms: NOW_MS + 30_000,
        batches: &batches,
        log_start_offset: 0,
    };
    share.acquire(&input, &limits());
    let acks = [AckBatch { first_offset: 0, last_offset: 4, types: vec![1, 1, 1, 2, 3] }];
    share.acknowledge("golden-1", &acks, NOW_MS, 30_000, &limits()).unwrap();
    checkpoint
}

#[test]
fn checkpoint_format_11_with_a_share_group_decodes_and_encodes_back() {
    let decoded = decoded_as_written("0.2.0/checkpoint-11", checkpoint_11());
    assert_eq!(decoded.state.features.level(SHARE_VERSION), 1);
    assert!(decoded.state.share_groups.groups["golden-share"].members.contains_key("golden-1"));
    assert_eq!(decoded.state.share_states.groups["golden-share"].len(), 1, "one topic's share state");
}

/// Writes `0.2.0/checkpoint-11`, once, with the build that added format 11; never to update
/// it (`cargo test -p broker --lib write_golden -- --ignored`).
#[test]
#[ignore = "writes a golden file: run by hand, once per release that adds one"]
fn write_golden_0_2_0_checkpoint_11() {
    write_once("0.2.0/checkpoint-11", checkpoint::encode(&checkpoint_11()));
}

/// One op of every kind `onelog.version` 5 adds (34–42), with its optional parts filled.
fn ops_share() -> Vec<Op> {
    let (group_id, member_id) = ("g".to_string(), "m".to_string());
    let seen = SeenMember { group_id: group_id.clone(), member_id: member_id.clone(), seen_ms: NOW_MS };
    let batches = vec![
        LogBatch { first_offset: 0, last_offset: 9, aborted: false },
        LogBatch { first_offset: 10, last_offset: 10, aborted: true },
    ];
    vec![
        Op::ShareGroupHeartbeat(Box::new(ShareGroupHeartbeatOp {
            heartbeat: join("t"),
            settings: ShareSettings::default(),
            limits: limits(),
            now_ms: NOW_MS,
        })),
        Op::FenceShareGroupMember(FenceShareMemberOp {
            group_id: group_id.clone(),
            member_id: member_id.clone(),
            limits: limits(),
        }),
        Op::ShareAcquire(Box::new(ShareAcquireOp {
            group_id: group_id.clone(),
            member_id: member_id.clone(),
            deadline_ms: NOW_MS + 30_000,
            max_records: 500,
            batch_size: 100,
            record_limit_mode: true,
            limits: limits(),
            partitions: vec![AcquirePartition { topic_id: [7; 16], partition: 1, start_offset: 0, batches }],
        })),
        Op::ShareAcknowledge(Box::new(ShareAcknowledgeOp {
            group_id: group_id.clone(),
            member_id: member_id.clone(),
            now_ms: NOW_MS,
            lock_ms: 30_000,
            limits: limits(),
            partitions: vec![AcknowledgePartition {
                topic_id: [7; 16],
                partition: 1,
                batches: vec![AckBatch { first_offset: 0, last_offset: 2, types: vec![1, 2, 4] }],
            }],
        })),
        Op::ShareRelease(ShareReleaseOp {
            group_id: group_id.clone(),
            member_id: Some(member_id),
            partitions: Some(vec![([7; 16], 1)]),
            limits: limits(),
        }),
        Op::ShareExpireLocks(ShareExpireOp { now_ms: NOW_MS, groups: vec![(group_id, limits())] }),
        Op::RecordShareLiveness(ShareLivenessOp { members: vec![seen] }),
        Op::ShareResetOffsets(ShareResetOffsetsOp {
            group_id: "g".into(),
            partitions: vec![([7; 16], 1, 42)],
        }),
        Op::ShareDeleteOffsets(ShareDeleteOffsetsOp { group_id: "g".into(), topics: vec![[7; 16]] }),
    ]
}

#[test]
fn ops_34_42_decode_and_encode_back() {
    let bytes = read("0.2.0/ops-34-42");
    let decoded: Vec<Op> = bincode::deserialize(&bytes).expect("the share ops decode");
    let kinds: Vec<&str> = decoded.iter().map(op_kind).collect();
    let want = [
        "ShareGroupHeartbeat",
        "FenceShareGroupMember",
        "ShareAcquire",
        "ShareAcknowledge",
        "ShareRelease",
        "ShareExpireLocks",
        "RecordShareLiveness",
        "ShareResetOffsets",
        "ShareDeleteOffsets",
    ];
    assert_eq!(kinds, want);
    assert!(decoded.iter().all(|op| op.onelog_version() == 5), "the level that brought them");
    assert_eq!(bincode::serialize(&decoded).unwrap(), bytes, "encode back byte for byte");
    assert_eq!(bincode::serialize(&ops_share()).unwrap(), bytes, "the ops the file was written from");
}

/// Writes `0.2.0/ops-34-42`, once, with the build that adds the ops; never to update it.
#[test]
#[ignore = "writes a golden file: run by hand, once per release that adds one"]
fn write_golden_0_2_0_share_ops() {
    write_once("0.2.0/ops-34-42", bincode::serialize(&ops_share()).unwrap());
}

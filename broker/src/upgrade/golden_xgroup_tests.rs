//! Golden files of `onelog.version` 7 (transactions across Raft groups, issue 32), and of the
//! steps levels 8 and 9 add to op kind 43 (`ops-43-identify`, `ops-43-forget`):
//! `0.2.0/checkpoint-13`, 0.1.0's state with the cross-group state of a group that coordinates
//! one producer and holds another group's open instance (format 13), and `0.2.0/ops-43`, one
//! op of each step the level adds. As in `golden_tests`: each decodes, and encodes back to the
//! same bytes.

use bytes::Bytes;
use onelog_state::command::{OffsetCommitEntry, Op, PartitionAppend, ProduceOp, TxnOffsetCommitOp};
use onelog_state::features::{
    GROUP_VERSION, ONELOG_VERSION, SHARE_VERSION, STREAMS_VERSION, TRANSACTION_VERSION,
};
use onelog_state::groups::CommittedOffset;
use onelog_state::txns::ProducerIdEpoch;
use onelog_state::xgroup::ops::{XProduceOp, XTxnOffsetCommitOp};
use onelog_state::xgroup::{Coordinated, Decision, Instance, OpenInstance, RemoteProducer, Undelivered, XOp};

use super::golden_tests::{checkpoint_0_1_0_at, decoded_as_written, op_kind, read, write_once};
use crate::raft::checkpoint::{self, Checkpoint};

const NOW_MS: i64 = 1_765_040_000_000;

/// A producer of group 1's range (the group in the high bits, SCALING.md §8).
const REMOTE_PRODUCER: i64 = (1 << 48) + 5;

fn instance(producer_id: i64, n: u32) -> Instance {
    Instance { producer_id, epoch: 3, n }
}

/// 0.1.0's state at `onelog.version` 7 as group 0 of three: it coordinates producer 0's
/// instance n=4 (groups 1 and 2 registered) and still delivers n=3's commit to group 2; it
/// holds group 1's producer's open instance with a write and pending offsets.
fn checkpoint_13() -> Checkpoint {
    let mut checkpoint = checkpoint_0_1_0_at(&[
        (ONELOG_VERSION, 7),
        (TRANSACTION_VERSION, 2),
        (GROUP_VERSION, 1),
        (STREAMS_VERSION, 1),
        (SHARE_VERSION, 1),
    ]);
    let xgroup = &mut checkpoint.state.xgroup;
    xgroup.groups = 3;
    xgroup.coordinated.insert(0, Coordinated { n: 4, participants: [1, 2].into() });
    xgroup.undelivered.insert(instance(0, 3), Undelivered { commit: true, waiting: [2].into() });
    let committed =
        CommittedOffset { offset: 42, leader_epoch: 1, metadata: "m".into(), commit_time_ms: NOW_MS };
    let open = OpenInstance {
        instance: instance(REMOTE_PRODUCER, 9),
        partitions: [(("golden-out".to_string(), 0), 17)].into(),
        offsets: [("golden-app".to_string(), [(("golden-in".to_string(), 0), committed)].into())].into(),
        start_ms: NOW_MS,
    };
    let remote =
        RemoteProducer { coordinator: 1, open: Some(open), fence: Some(instance(REMOTE_PRODUCER, 8)) };
    xgroup.remote.insert(REMOTE_PRODUCER, remote);
    checkpoint
}

#[test]
fn checkpoint_format_13_with_cross_group_state_decodes_and_encodes_back() {
    let decoded = decoded_as_written("0.2.0/checkpoint-13", checkpoint_13());
    assert_eq!(decoded.state.features.level(ONELOG_VERSION), 7);
    assert_eq!(decoded.state.xgroup.groups, 3);
    assert!(decoded.state.xgroup.remote[&REMOTE_PRODUCER].open.is_some());
}

/// Writes `0.2.0/checkpoint-13`, once, with the build that added format 13; never to update
/// it (`cargo test -p broker --lib write_golden -- --ignored`).
#[test]
#[ignore = "writes a golden file: run by hand, once per release that adds one"]
fn write_golden_0_2_0_checkpoint_13() {
    write_once("0.2.0/checkpoint-13", checkpoint::encode(&checkpoint_13()));
}

/// One op of each step `onelog.version` 7 adds (op kind 43, five steps), optional parts filled.
fn ops_xgroup() -> Vec<Op> {
    let open = instance(REMOTE_PRODUCER, 9);
    let prior = Some(Decision { instance: instance(REMOTE_PRODUCER, 8), commit: false });
    let batch = Bytes::from_static(b"a stamped record batch, opaque to the op's format");
    let produce = ProduceOp {
        partitions: vec![PartitionAppend { topic: "golden-out".into(), partition: 0, batches: vec![batch] }],
    };
    let commit = TxnOffsetCommitOp {
        transactional_id: "golden-tx".into(),
        producer: ProducerIdEpoch { producer_id: REMOTE_PRODUCER, producer_epoch: 3 },
        group_id: "golden-app".into(),
        generation_id: 2,
        member_id: "golden-1".into(),
        commits: vec![OffsetCommitEntry {
            topic: "golden-in".into(),
            partition: 0,
            offset: 42,
            leader_epoch: 1,
            metadata: Some("m".into()),
        }],
    };
    let steps = vec![
        XOp::Register { instance: open, group: 2 },
        XOp::Delivered { confirmations: vec![(instance(0, 3), 2)] },
        XOp::Produce(XProduceOp { coordinator: 1, instance: open, prior, produce }),
        XOp::TxnOffsetCommit(XTxnOffsetCommitOp { coordinator: 1, instance: open, prior, commit }),
        XOp::Decisions { coordinator: 1, decisions: vec![Decision { instance: open, commit: true }] },
    ];
    steps.into_iter().map(|step| Op::CrossGroup(Box::new(step))).collect()
}

#[test]
fn ops_43_decode_and_encode_back() {
    let bytes = read("0.2.0/ops-43");
    let decoded: Vec<Op> = bincode::deserialize(&bytes).expect("the cross-group ops decode");
    assert!(decoded.iter().all(|op| op_kind(op) == "CrossGroup"), "{decoded:?}");
    assert_eq!(decoded.len(), 5, "one of each step");
    assert!(decoded.iter().all(|op| op.onelog_version() == 7), "the level that brought them");
    assert_eq!(bincode::serialize(&decoded).unwrap(), bytes, "encode back byte for byte");
    assert_eq!(bincode::serialize(&ops_xgroup()).unwrap(), bytes, "the ops the file was written from");
}

/// Writes `0.2.0/ops-43`, once, with the build that adds the op; never to update it.
#[test]
#[ignore = "writes a golden file: run by hand, once per release that adds one"]
fn write_golden_0_2_0_xgroup_ops() {
    write_once("0.2.0/ops-43", bincode::serialize(&ops_xgroup()).unwrap());
}

/// The step `onelog.version` 8 adds to op kind 43: a group of a cluster of several identifies
/// itself (`XOp::Identify`), which the broker proposes in each group other than 0.
fn ops_identify() -> Vec<Op> {
    vec![Op::CrossGroup(Box::new(XOp::Identify { group: 2, groups: 3 }))]
}

#[test]
fn ops_43_identify_decodes_and_encodes_back() {
    let bytes = read("0.2.0/ops-43-identify");
    let decoded: Vec<Op> = bincode::deserialize(&bytes).expect("the Identify op decodes");
    assert!(
        matches!(&decoded[..], [Op::CrossGroup(x)] if matches!(**x, XOp::Identify { group: 2, groups: 3 }))
    );
    assert_eq!(decoded[0].onelog_version(), 8, "the level that brought it");
    assert_eq!(bincode::serialize(&ops_identify()).unwrap(), bytes, "the op the file was written from");
}

/// Writes `0.2.0/ops-43-identify`, once, with the build that adds the step; never to update it.
#[test]
#[ignore = "writes a golden file: run by hand, once per release that adds one"]
fn write_golden_0_2_0_xgroup_identify() {
    write_once("0.2.0/ops-43-identify", bincode::serialize(&ops_identify()).unwrap());
}

/// The step `onelog.version` 9 adds to op kind 43: a participant forgets remote producer ids
/// their coordinator no longer knows (`XOp::Forget`).
fn ops_forget() -> Vec<Op> {
    vec![Op::CrossGroup(Box::new(XOp::Forget { producer_ids: vec![REMOTE_PRODUCER, REMOTE_PRODUCER + 1] }))]
}

#[test]
fn ops_43_forget_decodes_and_encodes_back() {
    let bytes = read("0.2.0/ops-43-forget");
    let decoded: Vec<Op> = bincode::deserialize(&bytes).expect("the Forget op decodes");
    let forgets = |x: &XOp| matches!(x, XOp::Forget { producer_ids } if producer_ids.len() == 2);
    assert!(matches!(&decoded[..], [Op::CrossGroup(x)] if forgets(x)), "{decoded:?}");
    assert_eq!(decoded[0].onelog_version(), 9, "the level that brought it");
    assert_eq!(bincode::serialize(&ops_forget()).unwrap(), bytes, "the op the file was written from");
}

/// Writes `0.2.0/ops-43-forget`, once, with the build that adds the step; never to update it.
#[test]
#[ignore = "writes a golden file: run by hand, once per release that adds one"]
fn write_golden_0_2_0_xgroup_forget() {
    write_once("0.2.0/ops-43-forget", bincode::serialize(&ops_forget()).unwrap());
}

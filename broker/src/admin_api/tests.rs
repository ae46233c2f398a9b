//! Tests of the admin digest: replicas that applied the same entries through the real state
//! machine store must agree, whatever their segment sizes; a replica behind or holding other
//! bytes must not.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;
use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Membership};

use super::digest::{self, Digest};
use crate::config::BrokerConfig;
use crate::raft::applied::AppliedView;
use crate::raft::sm_store;
use crate::raft::{NodeAddr, TypeConfig};
use onelog_state::command::{Command, LeaderStamp, Op, PartitionAppend, ProduceOp, TrimLog, TrimLogOp};
pub(super) use onelog_state::testing::create_topic as create;
use onelog_state::testing::{build, BatchSpec};

fn batch(base_offset: i64, records: i64) -> Bytes {
    batch_with_value(base_offset, records, base_offset as u8)
}

fn batch_with_value(base_offset: i64, records: i64, value_byte: u8) -> Bytes {
    let value = vec![value_byte; 100];
    build(&BatchSpec {
        base_offset,
        records,
        value,
        first_timestamp: 1000 + base_offset,
        ..Default::default()
    })
}

/// `count` batches of 2 records into `topic`-`partition`, starting at `first_offset`.
pub(super) fn produce(topic: &str, partition: i32, first_offset: i64, count: i64) -> Op {
    let batches = (0..count).map(|i| batch(first_offset + 2 * i, 2)).collect();
    Op::Produce(ProduceOp { partitions: vec![PartitionAppend { topic: topic.into(), partition, batches }] })
}

fn trim(topic: &str, partition: i32, log_start_offset: i64) -> Op {
    Op::TrimLog(TrimLogOp { trims: vec![TrimLog { topic: topic.into(), partition, log_start_offset }] })
}

fn entry(index: u64, payload: EntryPayload<TypeConfig>) -> Entry<TypeConfig> {
    Entry { log_id: LogId::new(CommittedLeaderId::new(1, 1), index), payload }
}

/// The log every replica applies: a membership, topics, produces spread over many small
/// segments, and retention moving a log start offset into the middle of a segment.
fn log() -> Vec<Entry<TypeConfig>> {
    let nodes = BTreeMap::from([(1, NodeAddr { raft: "r:1".into(), kafka: "k:1".into() })]);
    let membership = Membership::new(vec![BTreeSet::from([1u64])], nodes);
    let commands = vec![
        vec![create("a", 2, 7), create("b", 1, 9)],
        vec![produce("a", 0, 0, 10), produce("b", 0, 0, 3)],
        vec![produce("a", 1, 0, 4)],
        vec![produce("a", 0, 20, 10)],
        vec![trim("a", 0, 13)],
    ];
    let mut entries = vec![entry(1, EntryPayload::Membership(membership))];
    for ops in commands {
        entries.push(entry(
            entries.len() as u64 + 1,
            EntryPayload::Normal(Command { stamp: LeaderStamp { now_ms: 5, term: 1 }, ops }),
        ));
    }
    entries
}

async fn replica(dir: &tempfile::TempDir, overrides: &[&str], entries: &[Entry<TypeConfig>]) -> AppliedView {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let config = Arc::new(BrokerConfig::from_overrides(&overrides).expect("config"));
    let (mut store, applied) =
        sm_store::open(dir.path().join("state"), config, None).expect("open state machine");
    store.apply(entries.to_vec()).await.expect("apply");
    applied
}

fn segment_files(dir: &tempfile::TempDir) -> usize {
    fn count(path: &std::path::Path) -> usize {
        let entries = std::fs::read_dir(path).expect("read dir").map(|e| e.expect("entry").path());
        entries
            .map(
                |p| {
                    if p.is_dir() {
                        count(&p)
                    } else {
                        usize::from(p.extension().is_some_and(|e| e == "log"))
                    }
                },
            )
            .sum()
    }
    count(dir.path())
}

pub(super) fn digest_of(applied: &AppliedView) -> Digest {
    digest::compute((1, 0), applied).expect("digest")
}

#[tokio::test]
async fn replicas_that_applied_the_same_log_have_equal_digests() {
    let (d1, d2) = (tempfile::tempdir().expect("tmp"), tempfile::tempdir().expect("tmp"));
    // Different segment sizes: segment boundaries and trimmed files differ, content does not.
    let small = replica(&d1, &["log.segment.bytes=1024"], &log()).await;
    let large = replica(&d2, &[], &log()).await;
    assert!(segment_files(&d1) > segment_files(&d2) + 4, "the small replica rolled segments");
    let (a, b) = (digest_of(&small), digest_of(&large));
    assert_eq!(a, b);
    assert_eq!(a.last_applied, Some(6));
    assert_eq!(a.partitions.len(), 3);
    let a0 = &a.partitions[0];
    assert_eq!((a0.topic.as_str(), a0.partition), ("a", 0));
    assert_eq!(a0.topic_id, "07".repeat(16));
    assert_eq!((a0.log_start_offset, a0.log_end_offset), (13, 40));
    // The batch holding offset 13 starts at 12; batches 12..=38 remain: 14 of them.
    assert_eq!(a0.batches, 14);
    assert!(a0.hash.as_deref().is_some_and(|h| h.len() == 8), "{a0:?}");
    assert_ne!(a.partitions[1].hash, a.partitions[2].hash);
}

#[tokio::test]
async fn a_replica_behind_or_with_other_bytes_has_a_different_digest() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("tmp")).collect();
    let full = log();
    let reference = digest_of(&replica(&dirs[0], &[], &full).await);
    let behind = digest_of(&replica(&dirs[1], &[], &full[..full.len() - 2]).await);
    assert_ne!(behind, reference);
    assert_eq!(behind.last_applied, Some(4));

    // Same offsets, other record values in one batch of a-1: only that partition's hash moves.
    let mut other = full.clone();
    let EntryPayload::Normal(command) = &mut other[3].payload else { panic!("entry 4 is normal") };
    let Op::Produce(p) = &mut command.ops[0] else { panic!("entry 4 is a produce") };
    p.partitions[0].batches[0] = batch_with_value(0, 2, 0xee);
    let diverged = digest_of(&replica(&dirs[2], &[], &other).await);
    assert_eq!(diverged.last_applied, reference.last_applied);
    assert_eq!(diverged.partitions[0].log_end_offset, reference.partitions[0].log_end_offset);
    assert_ne!(diverged.partitions[1].hash, reference.partitions[1].hash);
    assert_eq!(diverged.partitions[0].hash, reference.partitions[0].hash);
}

//! State machine store tests: a snapshot archive carries state and partition bytes from one
//! replica to another, survives a restart, an install never mixes generations, and one cut
//! short after openraft purged the log is finished at start.

use std::collections::BTreeMap;

use bytes::Bytes;
use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, Entry, EntryPayload, RaftSnapshotBuilder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use onelog_state::testing::{build, BatchSpec};

fn batch(base_offset: i64, records: i64) -> Bytes {
    build(&BatchSpec { base_offset, records, value: vec![b'x'; 200], ..Default::default() })
}
use onelog_state::command::{Command, CreateTopicsOp, LeaderStamp, NewTopic, Op, PartitionAppend, ProduceOp};

fn entry(index: u64, ops: Vec<Op>) -> Entry<TypeConfig> {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(Command { stamp: LeaderStamp { now_ms: 1, term: 1 }, ops }),
    }
}

fn store(dir: &std::path::Path) -> StateMachineStore {
    let config = BrokerConfig::from_overrides(&["log.segment.bytes=4096".into()]).expect("config");
    open(dir.to_path_buf(), Arc::new(config), None).expect("open").0
}

fn log_entries() -> Vec<Entry<TypeConfig>> {
    let create = Op::CreateTopics(CreateTopicsOp {
        topics: vec![NewTopic {
            name: "t".into(),
            topic_id: [9; 16],
            partitions: 2,
            replication_factor: 1,
            configs: BTreeMap::new(),
        }],
    });
    let mut entries = vec![entry(1, vec![create])];
    for i in 0..20i64 {
        let partitions = vec![PartitionAppend {
            topic: "t".into(),
            partition: (i % 2) as i32,
            batches: vec![batch(i / 2 * 3, 3)],
        }];
        entries.push(entry(2 + i as u64, vec![Op::Produce(ProduceOp { partitions })]));
    }
    entries
}

/// Every stored batch of a partition, and how many batches that is.
fn read_all(sm: &StateMachineStore, partition: i32) -> (Vec<u8>, usize) {
    let log = sm.shared.partitions.read().unwrap().get(&[9; 16], partition).expect("log");
    let (mut out, mut batches, mut offset) = (Vec::new(), 0, 0);
    while let Some(r) = log.lock().read(offset, 1 << 20, i64::MAX).unwrap() {
        let mut at = 0;
        while at < r.bytes.len() {
            let h = kafka_compat::batch::parse_header(&r.bytes[at..]).expect("whole batches");
            at += h.size_bytes;
            offset = h.last_offset() + 1;
            batches += 1;
        }
        out.extend_from_slice(&r.bytes);
    }
    (out, batches)
}

/// A replica that applied `log_entries()`, took a checkpoint, and the snapshot archive of it.
async fn replica_with_archive(
    dir: &std::path::Path,
) -> (StateMachineStore, SnapshotMeta<u64, NodeAddr>, Vec<u8>) {
    let mut a = store(dir);
    a.apply(log_entries()).await.unwrap();
    a.get_snapshot_builder().await.build_snapshot().await.unwrap();
    let mut snapshot = a.get_current_snapshot().await.unwrap().expect("snapshot");
    let mut archive = Vec::new();
    snapshot.snapshot.read_to_end(&mut archive).await.unwrap();
    (a, snapshot.meta, archive)
}

#[tokio::test]
async fn snapshot_archive_moves_state_and_bytes_to_another_replica() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, meta, archive) = replica_with_archive(dir_a.path()).await;

    let mut b = store(dir_b.path());
    let mut incoming = b.begin_receiving_snapshot().await.unwrap();
    incoming.write_all(&archive).await.unwrap();
    b.install_snapshot(&meta, incoming).await.unwrap();

    let state_a = a.shared.applied.read().unwrap().state.clone();
    assert_eq!(b.shared.applied.read().unwrap().state, state_a);
    assert_eq!(b.shared.applied.read().unwrap().last_applied, meta.last_log_id);
    for p in 0..2 {
        let (bytes, batches) = read_all(&a, p);
        assert_eq!(batches, 10, "every batch of partition {p}");
        assert_eq!(read_all(&b, p), (bytes, batches), "partition {p} bytes identical");
    }
    // Appends continue on the installed replica, and a restart finds everything.
    let next = vec![PartitionAppend { topic: "t".into(), partition: 0, batches: vec![batch(30, 3)] }];
    b.apply(vec![entry(22, vec![Op::Produce(ProduceOp { partitions: next })])]).await.unwrap();
    let (before, _) = read_all(&b, 0);
    drop(b);
    let b = store(dir_b.path());
    assert_eq!(b.shared.applied.read().unwrap().state, state_a, "state is the installed checkpoint");
    let (after, batches) = read_all(&b, 0);
    assert_eq!(&after[..], &before[..after.len()], "data up to the checkpoint survives the restart");
    assert_eq!(batches, 10, "the entry after the checkpoint is re-applied from the log, not kept");
}

#[tokio::test]
async fn corrupt_archive_is_refused_and_the_old_generation_stays() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (_a, meta, mut archive) = replica_with_archive(dir_a.path()).await;
    let middle = archive.len() / 2;
    archive[middle] ^= 0x55;

    let mut b = store(dir_b.path());
    let mut incoming = b.begin_receiving_snapshot().await.unwrap();
    incoming.write_all(&archive).await.unwrap();
    assert!(b.install_snapshot(&meta, incoming).await.is_err());
    drop(b);
    let b = store(dir_b.path());
    assert!(b.shared.applied.read().unwrap().state.topics.is_empty(), "nothing of the bad archive");
}

fn open_after_purge(dir: &std::path::Path, purged: u64) -> io::Result<StateMachineStore> {
    let config = BrokerConfig::from_overrides(&["log.segment.bytes=4096".into()]).expect("config");
    open(dir.to_path_buf(), Arc::new(config), Some(purged)).map(|(store, _)| store)
}

/// openraft 0.9 purges the log a snapshot covers beside the install: a crash after the purge
/// and before the install leaves only the received archive to rebuild the state from.
#[tokio::test]
async fn an_install_cut_short_after_the_log_purge_is_finished_at_start() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, meta, archive) = replica_with_archive(dir_a.path()).await;
    let mut b = store(dir_b.path());
    let mut incoming = b.begin_receiving_snapshot().await.unwrap();
    incoming.write_all(&archive).await.unwrap();
    incoming.flush().await.unwrap();
    drop((incoming, b));

    let purged = meta.last_log_id.expect("a snapshot of applied entries").index;
    let b = open_after_purge(dir_b.path(), purged).expect("the install is finished");
    assert_eq!(b.shared.applied.read().unwrap().state, a.shared.applied.read().unwrap().state);
    assert_eq!(b.shared.applied.read().unwrap().last_applied, meta.last_log_id);
    for p in 0..2 {
        assert_eq!(read_all(&b, p), read_all(&a, p), "partition {p}");
    }
    let error = open_after_purge(dir_b.path(), purged + 1).err().expect("the archive does not cover it");
    assert!(error.to_string().contains("covers only"), "{error}");
}

#[tokio::test]
async fn a_log_purged_past_the_state_without_an_archive_stops_saying_how_to_recover() {
    let dir = tempfile::tempdir().unwrap();
    let error = open_after_purge(dir.path(), 5).err().expect("nothing to rebuild the state from");
    assert!(error.to_string().contains("remove this node's data directory"), "{error}");
}

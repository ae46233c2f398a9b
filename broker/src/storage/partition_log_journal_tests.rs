//! Journaled segments (issue 31): batches left where a real Raft log wrote them, indexed by a
//! journal, read back exactly; markers in the own file; the journal cut at a checkpoint's end;
//! a location that does not hold its batch is an error, never other bytes.

use std::collections::BTreeSet;
use std::path::Path;

use bytes::Bytes;
use kafka_compat::batch::parse_header;
use onelog_state::command::{Command, LeaderStamp, Op, PartitionAppend, ProduceOp};
use openraft::storage::RaftLogStorageExt;
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, RaftLogReader};

use super::tests::batch;
use super::*;
use crate::raft::TypeConfig;
use crate::storage::locate::LocatedBatches;
use crate::storage::reads::LogFiles;

type Store = raft_store::LogStore<TypeConfig>;

fn journaled(segment_bytes: u64) -> SegmentPolicy {
    SegmentPolicy { segment_bytes, preallocate: false, journaled: true }
}

/// A Raft log, the partition's handle on its files, and an empty partition log beside it.
struct Fixture {
    dir: tempfile::TempDir,
    store: Store,
    files: LogFiles,
    log: PartitionLog,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let options = raft_store::LogStoreOptions {
            segment_bytes: 16 * 1024,
            park_purged_segments: true,
            ..raft_store::LogStoreOptions::default()
        };
        let store = Store::open(&dir.path().join("raft-log"), options).unwrap();
        let (files, reader) = (LogFiles::unattached(), store.reader());
        files.attach(move |segment| reader.segment_file(segment));
        let log = PartitionLog::open(&dir.path().join("p"), 0, 0, files.clone()).unwrap();
        Fixture { dir, store, files, log }
    }

    fn parts(&self) -> std::path::PathBuf {
        self.dir.path().join("p")
    }
}

/// Writes `batch` as the log's next produce entry (with another partition's batch beside it, so
/// the partition's batches are not adjacent in the log), reads the entry back as apply gets
/// it, and returns its copy of the batch with where it lies.
async fn through_the_log(store: &mut Store, batch: Bytes) -> (Bytes, Option<LogLocation>) {
    let last = openraft::storage::RaftLogStorage::get_log_state(store).await.unwrap().last_log_id;
    let index = last.map_or(1, |l| l.index + 1);
    let append = |topic: &str, batches| PartitionAppend { topic: topic.into(), partition: 0, batches };
    let other = self::batch(0, 1, 300);
    let op = ProduceOp { partitions: vec![append("other", vec![other]), append("t", vec![batch])] };
    let command = Command { stamp: LeaderStamp::default(), ops: vec![Op::Produce(op)] };
    let log_id = LogId::new(CommittedLeaderId::new(1, 1), index);
    store.blocking_append([Entry { log_id, payload: EntryPayload::Normal(command) }]).await.unwrap();
    let applied = store.try_get_log_entries(index..=index).await.unwrap().remove(0);
    let located = LocatedBatches::of(&applied, store.reader().location(index).unwrap()).unwrap();
    let EntryPayload::Normal(command) = applied.payload else { unreachable!() };
    let Op::Produce(op) = &command.ops[0] else { unreachable!() };
    let ours = op.partitions[1].batches[0].clone();
    let at = located.find(&ours);
    (ours, at)
}

/// 60 batches through the log, every tenth offset range a marker apply made itself.
async fn filled(store: &mut Store, log: &mut PartitionLog, policy: SegmentPolicy) -> Vec<Bytes> {
    let mut all = Vec::new();
    for i in 0..60i64 {
        let fresh = batch(i * 2, 2, 900);
        let (stored, at) = if i % 10 == 9 { (fresh, None) } else { through_the_log(store, fresh).await };
        log.append(&stored, policy, at).unwrap();
        all.push(stored);
    }
    all
}

/// Bytes the own files of `dir` hold on disk (blocks, not lengths).
fn own_file_blocks(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let own = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"));
    own.map(|p| std::fs::metadata(p).unwrap().blocks() * 512).sum()
}

#[tokio::test]
async fn batches_in_the_raft_log_read_back_exactly_and_only_markers_are_copied() {
    let Fixture { dir: _dir, mut store, files: _, mut log } = Fixture::new();
    let parts = _dir.path().join("p");
    let all = filled(&mut store, &mut log, journaled(8 * 1024)).await;
    assert!(log.sealed_segments().len() >= 5, "{} sealed segments", log.sealed_segments().len());
    for (i, want) in all.iter().enumerate() {
        let read = log.read(i as i64 * 2 + 1, 1, i64::MAX).unwrap().unwrap();
        assert_eq!(read.bytes, want, "batch {i}");
    }
    let everything: Vec<u8> = all.concat();
    let whole = log.read(0, usize::MAX, i64::MAX).unwrap().unwrap();
    assert_eq!(parse_header(&whole.bytes).unwrap().base_offset, 0);
    let mut visited = Vec::new();
    log.visit_stored_bytes(0, 120, 3000, &mut |b| visited.extend_from_slice(b)).unwrap();
    assert_eq!(visited, everything, "every batch, in order, across segments and sources");
    assert_eq!(log.export_extent(120), (0, everything.len() as u64));
    let markers: u64 = all.iter().skip(9).step_by(10).map(|b| b.len() as u64).sum();
    assert_eq!(log.log_bytes().map(|(_, b)| b).sum::<u64>() + markers, log.total_bytes());
    let held = own_file_blocks(&parts);
    assert!(
        held <= 8 * crate::limits::SEGMENT_ALLOCATION_STEP_BYTES_MIN,
        "own files hold {held} bytes for {markers} of markers"
    );
}

#[tokio::test]
async fn reopening_cuts_the_journal_at_the_checkpoint_and_appends_continue() {
    let fixture = Fixture::new();
    let parts = fixture.parts();
    let Fixture { dir: _dir, mut store, files, mut log } = fixture;
    let all = filled(&mut store, &mut log, journaled(8 * 1024)).await;
    drop(log); // not flushed: what the page cache holds, as after a kill -9 of the process
    let mut log = PartitionLog::open(&parts, 0, 61, files.clone()).unwrap();
    assert_eq!(log.log_end_offset(), Some(60), "the batch holding offset 61 goes: it ends at 61");
    assert_eq!(log.read(58, 1, i64::MAX).unwrap().unwrap().bytes, all[29]);
    assert!(log.read(60, 1, i64::MAX).unwrap().is_none());
    let again = batch(60, 5, 100);
    let (stored, at) = through_the_log(&mut store, again).await;
    log.append(&stored, journaled(8 * 1024), at).unwrap();
    log.flush().unwrap();
    drop(log);
    let log = PartitionLog::open(&parts, 0, 65, files).unwrap();
    assert_eq!(log.log_end_offset(), Some(65));
    assert_eq!(log.read(62, 1, i64::MAX).unwrap().unwrap().bytes, stored);
}

#[tokio::test]
async fn trimming_removes_a_journal_with_its_segment_and_an_orphan_journal_goes_at_open() {
    let fixture = Fixture::new();
    let parts = fixture.parts();
    let Fixture { dir: _dir, mut store, files, mut log } = fixture;
    filled(&mut store, &mut log, journaled(8 * 1024)).await;
    let journals = |dir: &Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "refs"))
            .count()
    };
    let before = journals(&parts);
    let second = log.sealed_segments()[0].0;
    log.trim(second).unwrap();
    assert_eq!(journals(&parts), before - 1);
    log.flush().unwrap();
    drop(log);
    std::fs::write(parts.join(format!("{:020}.refs", 7)), b"OLPJ").unwrap();
    let log = PartitionLog::open(&parts, second, 120, files).unwrap();
    assert_eq!(journals(&parts), before - 1, "the orphan journal is removed");
    assert_eq!(log.log_end_offset(), Some(120));
}

/// A journal entry that points next to its batch: the read fails with InvalidData.
#[tokio::test]
async fn a_location_that_does_not_hold_the_batch_is_an_error() {
    let Fixture { dir: _dir, mut store, files: _, mut log } = Fixture::new();
    let (stored, at) = through_the_log(&mut store, batch(0, 2, 500)).await;
    let wrong = at.map(|l| LogLocation { position: l.position + 8, ..l });
    log.append(&stored, journaled(1 << 20), wrong).unwrap();
    let error = log.read(0, 1, i64::MAX).err().expect("a misplaced batch is not served");
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidData, "{error}");
}

/// The copier (`storage::copier`): batches in doomed Raft log segments move to the own files,
/// sealed and active segments alike; reads are unchanged, nothing points into the doomed
/// segments any more (in memory and after a reopen), and the next batch rolls a new segment.
#[tokio::test]
async fn copying_out_of_doomed_segments_changes_no_read_and_frees_them() {
    use crate::storage::copier;
    use crate::storage::partitions::PartitionLock;
    let fixture = Fixture::new();
    let parts = fixture.parts();
    let Fixture { dir: _dir, mut store, files, mut log } = fixture;
    let all = filled(&mut store, &mut log, journaled(8 * 1024)).await;
    let before: Vec<u64> = log.log_bytes().map(|(s, _)| s).collect::<BTreeSet<_>>().into_iter().collect();
    assert!(before.len() >= 3, "the batches lie in {before:?}");
    // The first and the last Raft segment: sealed partition segments and the active one.
    let doomed = BTreeSet::from([before[0], before[before.len() - 1]]);
    let shared = PartitionLock::new(parts.clone(), log);
    let copied = copier::copy_out(std::slice::from_ref(&shared), &doomed).unwrap();
    let in_doomed = |log: &PartitionLog| log.log_bytes().filter(|(s, _)| doomed.contains(s)).count();
    let whole = |log: &PartitionLog| {
        let mut visited = Vec::new();
        log.visit_stored_bytes(0, 120, 1 << 20, &mut |b| visited.extend_from_slice(b)).unwrap();
        visited
    };
    assert_eq!(in_doomed(&shared.lock()), 0);
    assert!(copied > 0 && copied < all.iter().map(|b| b.len() as u64).sum::<u64>(), "{copied} bytes copied");
    assert_eq!(whole(&shared.lock()), all.concat(), "the same bytes, wherever they lie");
    let segments = shared.lock().sealed_segments().len();
    let (stored, at) = through_the_log(&mut store, batch(120, 1, 10)).await;
    shared.lock().append(&stored, journaled(8 * 1024), at).unwrap();
    assert_eq!(
        shared.lock().sealed_segments().len(),
        segments + 1,
        "the closed active segment took nothing more"
    );
    drop(shared);
    let log = PartitionLog::open(&parts, 0, 120, files).unwrap();
    assert_eq!(in_doomed(&log), 0, "the switched journals are durable");
    assert_eq!(whole(&log), all.concat());
}

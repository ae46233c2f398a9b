//! Parked segments (`retention.rs`): with `park_purged_segments`, a purged segment the owner
//! still references stays on disk and readable at the record locations the owner noted while
//! its entries were live, across reopens, until the owner releases it; Raft no longer sees
//! its entries either way.

mod common;

use std::collections::BTreeSet;
use std::os::unix::fs::FileExt;
use std::path::Path;

use common::*;
use openraft::storage::RaftLogStorage;
use raft_store::{LogReader, LogStoreOptions, RecordLocation};

fn parking() -> LogStoreOptions {
    LogStoreOptions {
        segment_bytes: raft_store::limits::SEGMENT_BYTES_MIN,
        park_purged_segments: true,
        ..LogStoreOptions::default()
    }
}

/// Entries of varied sizes, so records start at irregular positions.
fn varied(indexes: std::ops::RangeInclusive<u64>) -> Vec<openraft::Entry<TestConfig>> {
    indexes.map(|i| entry(1, i, 60 + (i as usize * 37) % 200)).collect()
}

async fn append_in_chunks(store: &mut Store, all: &[openraft::Entry<TestConfig>]) {
    for chunk in all.chunks(7) {
        append(store, chunk.to_vec()).await;
    }
}

/// The payload at `at`, read from its segment's file, if the segment is still live or parked.
fn payload_at(reader: &LogReader<TestConfig>, at: RecordLocation) -> Option<Vec<u8>> {
    let file = reader.segment_file(at.segment)?;
    let mut payload = vec![0u8; at.len as usize - raft_store::RECORD_HEADER_BYTES];
    file.read_exact_at(&mut payload, at.payload_position()).expect("read a located payload");
    Some(payload)
}

fn encoded(entry: &openraft::Entry<TestConfig>) -> Vec<u8> {
    bincode::serialize(entry).expect("encode an entry")
}

fn files_named(dir: &Path, bases: &[u64]) -> usize {
    segment_files(dir).iter().filter(|p| bases.contains(&base_of(p))).count()
}

/// The whole life of a parked segment: noted while live, parked at the purge, kept over a
/// reopen (unscanned), released by `keep_only`, and never parked again once unreferenced.
#[tokio::test]
async fn a_referenced_segment_stays_readable_after_its_purge_until_released() {
    let dir = tempfile::tempdir().unwrap();
    let written = varied(1..=200);
    let mut store = open(dir.path(), &parking());
    append_in_chunks(&mut store, &written).await;
    let reader = store.reader();
    let noted: Vec<RecordLocation> = (1..=200).map(|i| reader.location(i).expect("a live entry")).collect();
    for (entry, at) in written.iter().zip(&noted) {
        assert_eq!(payload_at(&reader, *at), Some(encoded(entry)), "entry {}", entry.log_id.index);
    }

    store.purge(log_id(1, 150)).await.unwrap();
    let parked = store.retention().parked();
    let expected: BTreeSet<u64> = noted[..150].iter().map(|l| l.segment).filter(|s| *s <= 150).collect();
    assert!(parked.len() >= 5, "the purge parked {} segments", parked.len());
    assert!(parked.iter().all(|b| expected.contains(b)), "parked {parked:?}, purged segments {expected:?}");
    assert!(reader.location(150).is_none(), "a purged entry has no live location");
    let live: Vec<_> = written[150..].to_vec();
    assert_eq!(read_all(&mut store).await, live, "Raft sees only the live entries");
    assert_noted_readable(&reader, &written, &noted, &parked);
    drop(store);

    // Reopened: every purged segment on disk is parked again, until the owner says.
    let mut store = open(dir.path(), &parking());
    let reader = store.reader();
    assert_eq!(store.retention().parked(), parked, "parked at open");
    assert_eq!(read_all(&mut store).await, live, "after a reopen");
    assert_noted_readable(&reader, &written, &noted, &parked);

    // An in-flight read keeps its file; the owner keeps only the second parked segment.
    let held = reader.segment_file(parked[0]).expect("parked");
    let kept = parked[1];
    let released = store.retention().keep_only(BTreeSet::from([kept])).unwrap();
    assert_eq!(released, parked.len() - 1);
    assert_eq!(store.retention().parked(), vec![kept]);
    assert_eq!(files_named(dir.path(), &parked), 1, "released segments are deleted");
    assert!(reader.segment_file(parked[0]).is_none());
    let first = noted.iter().position(|l| l.segment == parked[0]).unwrap();
    let mut buf = vec![0u8; noted[first].len as usize - raft_store::RECORD_HEADER_BYTES];
    held.read_exact_at(&mut buf, noted[first].payload_position()).unwrap();
    assert_eq!(buf, encoded(&written[first]), "a held file outlives its release");
    assert_noted_readable(&reader, &written, &noted, &[kept]);

    // Later purges park nothing the owner does not reference.
    let more = varied(201..=300);
    append_in_chunks(&mut store, &more).await;
    store.purge(log_id(1, 280)).await.unwrap();
    assert_eq!(store.retention().parked(), vec![kept]);
    assert_eq!(store.retention().totals().segments, 1);
}

/// Every noted entry whose segment is in `parked` or still live reads back exactly.
fn assert_noted_readable(
    reader: &LogReader<TestConfig>,
    written: &[openraft::Entry<TestConfig>],
    noted: &[RecordLocation],
    parked: &[u64],
) {
    for (entry, at) in written.iter().zip(noted) {
        let live = at.segment > 150 || entry.log_id.index > 150;
        if parked.contains(&at.segment) || live {
            assert_eq!(payload_at(reader, *at), Some(encoded(entry)), "entry {}", entry.log_id.index);
        }
    }
}

/// Without the option, a purge parks nothing and a reopen deletes what a crash left.
#[tokio::test]
async fn without_parking_purged_segments_go_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let opts = LogStoreOptions { park_purged_segments: false, ..parking() };
    let mut store = open(dir.path(), &opts);
    append_in_chunks(&mut store, &varied(1..=200)).await;
    let first_segment = store.reader().location(1).unwrap().segment;
    store.purge(log_id(1, 150)).await.unwrap();
    assert!(store.retention().parked().is_empty());
    assert!(store.reader().segment_file(first_segment).is_none());
    assert_eq!(store.retention().totals(), raft_store::ParkedTotals::default());
}

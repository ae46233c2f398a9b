//! Recycled segments (`prealloc.rs`): a purged segment is reused as a later one with the records
//! of its earlier life still in it, and recovery must find where the current records end
//! without losing one of them or reading back one of the old ones.

mod common;

use std::collections::HashSet;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use common::*;
use openraft::storage::RaftLogStorage;
use raft_store::LogStoreOptions;

/// Tiny segments so that a few hundred entries roll through many of them.
fn tiny() -> LogStoreOptions {
    LogStoreOptions { segment_bytes: raft_store::limits::SEGMENT_BYTES_MIN, ..LogStoreOptions::default() }
}

fn inodes(files: &[PathBuf]) -> HashSet<u64> {
    files.iter().map(|p| std::fs::metadata(p).unwrap().ino()).collect()
}

/// Entry sizes that vary, so that the records of a segment's two lives start at different
/// positions, and some repeat, so that some line up.
fn varied(term: u64, indexes: std::ops::RangeInclusive<u64>) -> Vec<openraft::Entry<TestConfig>> {
    indexes.map(|i| entry(term, i, 60 + (i as usize * 37) % 200)).collect()
}

async fn append_in_chunks(store: &mut Store, all: Vec<openraft::Entry<TestConfig>>) {
    for chunk in all.chunks(5) {
        append(store, chunk.to_vec()).await;
    }
}

/// Purges, keeps writing into the recycled files, reopens, several times over: every live
/// entry survives each reopen, including those in sealed recycled segments followed by their
/// successor (where the bytes after the records are an old life's, not a torn tail), and the
/// new segments are the purged files, not new ones.
#[tokio::test]
async fn purged_segments_are_recycled_and_every_entry_survives_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let opts = tiny();
    let mut written = varied(1, 1..=150);
    {
        let mut store = open(dir.path(), &opts);
        append_in_chunks(&mut store, written.clone()).await;
    }
    for round in 1..=4u64 {
        let before = inodes(&segment_files(dir.path()));
        let next = written.last().unwrap().log_id.index + 1;
        let purged_upto = next - 40;
        let more = varied(round + 1, next..=next + 149);
        {
            let mut store = open(dir.path(), &opts);
            store.purge(log_id(round, purged_upto)).await.unwrap();
            append_in_chunks(&mut store, more.clone()).await;
        }
        written.extend(more);
        let after = segment_files(dir.path());
        let reused = inodes(&after).intersection(&before).count();
        let started = after.iter().filter(|p| base_of(p) > next).count();
        assert!(started > 5, "round {round}: the new entries rolled through {started} segments");
        assert!(
            reused >= started.min(8),
            "round {round}: {reused} of the {started} new segments are purged files"
        );
        let mut store = open(dir.path(), &opts);
        let want: Vec<_> = written.iter().filter(|e| e.log_id.index > purged_upto).cloned().collect();
        assert_eq!(read_all(&mut store).await, want, "round {round}: every live entry after a reopen");
    }
}

/// Builds a log whose last segment is a recycled file with old records after its new ones, then
/// tears its last record at every length and reopens: the records before it survive, nothing
/// of the earlier life comes back, and a rewrite of the torn record with the same length (so
/// that whatever followed it lines up again) reads back exactly. All entries have one size
/// (three-digit indices, one value size), so the records of both lives line up and, with the
/// last record torn away entirely, an intact old record with a valid CRC directly follows the
/// tail.
#[tokio::test]
async fn a_torn_tail_in_a_recycled_segment_is_cut_at_every_offset() {
    let dir = tempfile::tempdir().unwrap();
    let opts = tiny();
    let (last_segment, before, after, kept) = {
        let mut store = open(dir.path(), &opts);
        append_in_chunks(&mut store, entries(1, 100..=219, 120)).await;
        let purged = inodes(&segment_files(dir.path()));
        store.purge(log_id(1, 200)).await.unwrap();
        append_in_chunks(&mut store, entries(2, 220..=234, 120)).await;
        let last_segment = segment_files(dir.path()).pop().unwrap();
        assert!(
            purged.contains(&std::fs::metadata(&last_segment).unwrap().ino()),
            "the last segment is a recycled file"
        );
        let before = std::fs::read(&last_segment).unwrap();
        append(&mut store, entries(2, 235..=235, 120)).await;
        let after = std::fs::read(&last_segment).unwrap();
        let mut kept = entries(1, 201..=219, 120);
        kept.extend(entries(2, 220..=234, 120));
        (last_segment, before, after, kept)
    };
    let (pos, len) = *live_records(&last_segment).last().unwrap();
    assert_eq!(base_of(&last_segment) + live_records(&last_segment).len() as u64 - 1, 235);
    let stale_index = u64::from_le_bytes(before[pos as usize + 8..pos as usize + 16].try_into().unwrap());
    assert!(stale_index < base_of(&last_segment), "an old record ({stale_index}) lies where 235 goes");
    let pristine = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), pristine.path());
    for cut in 0..len {
        let work = tempfile::tempdir().unwrap();
        copy_dir(pristine.path(), work.path());
        let torn = work.path().join(last_segment.file_name().unwrap());
        let mut bytes = before.clone();
        bytes[pos as usize..(pos + cut) as usize].copy_from_slice(&after[pos as usize..(pos + cut) as usize]);
        std::fs::write(&torn, &bytes).unwrap();
        let rewrite = entry(3, 235, 120);
        {
            let mut store = open(work.path(), &opts);
            assert_eq!(read_all(&mut store).await, kept, "cut {cut} of {len}: the torn record is gone");
            append(&mut store, vec![rewrite.clone()]).await;
        }
        let mut store = open(work.path(), &opts);
        let mut want = kept.clone();
        want.push(rewrite);
        assert_eq!(read_all(&mut store).await, want, "cut {cut} of {len}: the rewrite, nothing after it");
    }
}

/// Truncation drops a suffix whose indices the log writes again: those segments are deleted,
/// never recycled, so no later segment can hold a record that continues the rewritten log.
#[tokio::test]
async fn truncated_segments_are_deleted_not_recycled() {
    let dir = tempfile::tempdir().unwrap();
    let opts = tiny();
    {
        let mut store = open(dir.path(), &opts);
        append_in_chunks(&mut store, varied(1, 1..=120)).await;
        store.purge(log_id(1, 30)).await.unwrap();
        let pool_after_purge = recycled_files(dir.path()).len();
        assert!(pool_after_purge > 0, "the purge recycled segments");
        store.truncate(log_id(1, 60)).await.unwrap();
        assert_eq!(recycled_files(dir.path()).len(), pool_after_purge, "truncated segments are not recycled");
        append_in_chunks(&mut store, varied(2, 60..=130)).await;
    }
    let mut store = open(dir.path(), &opts);
    let mut want = varied(1, 31..=59);
    want.extend(varied(2, 60..=130));
    assert_eq!(read_all(&mut store).await, want);
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().is_some_and(|n| n != "LOCK") {
            std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }
}

/// The pool is bounded: with `recycle_bytes_max` of two segments, a purge keeps two files and
/// deletes the rest, and a store with none keeps nothing.
#[tokio::test]
async fn the_recycled_pool_is_bounded() {
    for (max_segments, want) in [(2u64, 2usize), (0, 0)] {
        let dir = tempfile::tempdir().unwrap();
        let opts = LogStoreOptions { recycle_bytes_max: max_segments * tiny().segment_bytes, ..tiny() };
        let mut store = open(dir.path(), &opts);
        append_in_chunks(&mut store, varied(1, 1..=120)).await;
        store.purge(log_id(1, 110)).await.unwrap();
        assert_eq!(recycled_files(dir.path()).len(), want, "pool of {max_segments} segments");
        // A file of the pool reads back nothing at a reopen: `.tmp` files are deleted.
        drop(store);
        let mut store = open(dir.path(), &opts);
        assert!(recycled_files(dir.path()).is_empty());
        assert_eq!(read_all(&mut store).await, varied(1, 111..=120));
    }
}

/// A pre-written byte pattern is what a fallocated new segment must not have: its blocks read
/// as zeros, so a scan of a fresh segment ends at its first unwritten header.
#[tokio::test]
async fn a_new_segment_has_full_size_and_reads_as_zeros() {
    let dir = tempfile::tempdir().unwrap();
    let opts = small_opts();
    let mut store = open(dir.path(), &opts);
    append(&mut store, entries(1, 1..=3, 50)).await;
    let segment = segment_files(dir.path()).pop().unwrap();
    let file = std::fs::File::open(&segment).unwrap();
    assert_eq!(file.metadata().unwrap().len(), opts.segment_bytes);
    let end = live_records(&segment).last().map(|(p, l)| p + l).unwrap();
    let mut rest = vec![1u8; (opts.segment_bytes - end) as usize];
    file.read_exact_at(&mut rest, end).unwrap();
    assert!(rest.iter().all(|&b| b == 0));
}

/// With recycling switched off (the broker's state before its data is out of 0.1.0's reach),
/// a purge deletes its segments as before, and turning it off empties the pool.
#[tokio::test]
async fn recycling_switched_off_deletes_purged_segments() {
    let dir = tempfile::tempdir().unwrap();
    let opts = tiny();
    let mut store = open(dir.path(), &opts);
    let recycling = store.recycling();
    assert!(recycling.is_allowed(), "on by default");
    recycling.allow(false);
    append_in_chunks(&mut store, varied(1, 1..=120)).await;
    store.purge(log_id(1, 60)).await.unwrap();
    assert!(recycled_files(dir.path()).is_empty(), "nothing kept while off");
    recycling.allow(true);
    store.purge(log_id(1, 110)).await.unwrap();
    assert!(!recycled_files(dir.path()).is_empty(), "kept once on");
    recycling.allow(false);
    append_in_chunks(&mut store, varied(1, 121..=180)).await;
    assert!(recycled_files(dir.path()).is_empty(), "the pool emptied when a segment was next needed");
    assert_eq!(read_all(&mut store).await, varied(1, 111..=180));
}

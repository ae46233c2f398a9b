//! Restart, crash-recovery and log-maintenance tests of `LogStore`: what is on disk after a
//! reopen must be exactly what was acknowledged, whatever happened to the tail.

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;

use common::*;
use openraft::storage::RaftLogStorage;
use openraft::{RaftLogReader, Vote};
use raft_store::{LogStoreError, LogStoreOptions};

#[tokio::test]
async fn vote_entries_and_log_state_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    let opts = small_opts();
    let written = entries(5, 1..=40, 100);
    let (state_before, vote) = {
        let mut store = open(dir.path(), &opts);
        let vote = Vote::new(5, 3);
        store.save_vote(&vote).await.unwrap();
        append(&mut store, written[..25].to_vec()).await;
        append(&mut store, written[25..].to_vec()).await;
        store.save_committed(Some(log_id(5, 30))).await.unwrap();
        (store.get_log_state().await.unwrap(), vote)
    };

    let mut store = open(dir.path(), &opts);
    assert_eq!(store.read_vote().await.unwrap(), Some(vote));
    assert_eq!(store.read_vote().await.unwrap().unwrap().leader_id().term, 5);
    assert_eq!(store.get_log_state().await.unwrap(), state_before);
    assert_eq!(state_before.last_log_id, Some(log_id(5, 40)));
    assert_eq!(read_all(&mut store).await, written);
    assert_eq!(store.read_committed().await.unwrap(), Some(log_id(5, 30)));
    let mut reader = store.get_log_reader().await;
    assert_eq!(reader.try_get_log_entries(10..13).await.unwrap(), written[9..12].to_vec());
}

#[tokio::test]
async fn second_open_of_a_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _store = open(dir.path(), &small_opts());
    let second = Store::open(dir.path(), small_opts());
    assert!(matches!(second, Err(LogStoreError::Locked(_))), "two stores must never write one log");
}

/// Damages the last record of the only segment with `damage(file, pos, len)`, then checks that
/// reopening drops exactly that record and that the log keeps working across another restart.
async fn torn_last_record(damage: impl FnOnce(&std::fs::File, u64, u64)) {
    let dir = tempfile::tempdir().unwrap();
    let opts = small_opts();
    {
        let mut store = open(dir.path(), &opts);
        append(&mut store, entries(1, 1..=10, 64)).await;
    }
    let segment = segment_files(dir.path()).pop().expect("one segment");
    let (pos, len) = *record_positions(&segment).last().unwrap();
    damage(&OpenOptions::new().read(true).write(true).open(&segment).unwrap(), pos, len);

    let rewritten = entries(2, 10..=12, 80);
    {
        let mut store = open(dir.path(), &opts);
        assert_eq!(
            read_all(&mut store).await,
            entries(1, 1..=9, 64),
            "earlier entries intact, torn one gone"
        );
        assert_eq!(last_log_id(&mut store).await, Some(log_id(1, 9)));
        append(&mut store, rewritten.clone()).await;
    }
    let mut store = open(dir.path(), &opts);
    let mut want = entries(1, 1..=9, 64);
    want.extend(rewritten);
    assert_eq!(read_all(&mut store).await, want);
    assert_eq!(last_log_id(&mut store).await, Some(log_id(2, 12)));
}

#[tokio::test]
async fn torn_tail_crc_mismatch_is_cut() {
    torn_last_record(|file, pos, len| file.write_all_at(&[0xAB], pos + len - 1).unwrap()).await;
}

#[tokio::test]
async fn torn_tail_file_cut_mid_record_is_cut() {
    torn_last_record(|file, pos, len| file.set_len(pos + len / 2).unwrap()).await;
}

#[tokio::test]
async fn torn_tail_garbage_length_is_cut() {
    torn_last_record(|file, pos, _| file.write_all_at(&u32::MAX.to_le_bytes(), pos).unwrap()).await;
}

/// A record whose header never reached the disk, followed by one that did (a torn write of a
/// multi-record append). The later record must be wiped at open: otherwise a rewrite of the
/// first one with the same length would line it up again as a valid continuation.
#[tokio::test]
async fn stale_record_behind_a_lost_header_is_never_resurrected() {
    let dir = tempfile::tempdir().unwrap();
    let opts = small_opts();
    {
        let mut store = open(dir.path(), &opts);
        append(&mut store, entries(1, 1..=10, 64)).await;
    }
    let segment = segment_files(dir.path()).pop().unwrap();
    let (pos9, _) = record_positions(&segment)[8];
    let file = OpenOptions::new().write(true).open(&segment).unwrap();
    file.write_all_at(&[0u8; raft_store::RECORD_HEADER_BYTES], pos9).unwrap();
    drop(file);

    {
        let mut store = open(dir.path(), &opts);
        assert_eq!(read_all(&mut store).await, entries(1, 1..=8, 64));
        // Same term, same size as the lost record 9: old record 10 would follow it exactly.
        append(&mut store, entries(1, 9..=9, 64)).await;
    }
    let mut store = open(dir.path(), &opts);
    assert_eq!(read_all(&mut store).await, entries(1, 1..=9, 64));
    assert_eq!(last_log_id(&mut store).await, Some(log_id(1, 9)));
}

#[tokio::test]
async fn truncate_then_shorter_rewrite_never_resurrects_old_tail() {
    let dir = tempfile::tempdir().unwrap();
    let opts = small_opts();
    let mut want = entries(1, 1..=5, 200);
    {
        let mut store = open(dir.path(), &opts);
        append(&mut store, entries(1, 1..=10, 200)).await;
        store.truncate(log_id(1, 6)).await.unwrap();
        assert_eq!(last_log_id(&mut store).await, Some(log_id(1, 5)));
        append(&mut store, entries(2, 6..=7, 10)).await;
        want.extend(entries(2, 6..=7, 10));
        assert_eq!(read_all(&mut store).await, want);
    }
    let mut store = open(dir.path(), &opts);
    assert_eq!(read_all(&mut store).await, want, "exactly 1..=7, old 8..=10 gone");
    assert_eq!(last_log_id(&mut store).await, Some(log_id(2, 7)));
    assert_eq!(store.try_get_log_entries(8..=10).await.unwrap(), vec![]);
}

#[tokio::test]
async fn truncate_across_segments_removes_later_segments() {
    let dir = tempfile::tempdir().unwrap();
    let opts = LogStoreOptions {
        segment_bytes: raft_store::limits::SEGMENT_BYTES_MIN,
        ..LogStoreOptions::default()
    };
    {
        let mut store = open(dir.path(), &opts);
        for chunk in entries(1, 1..=100, 150).chunks(9) {
            append(&mut store, chunk.to_vec()).await;
        }
        assert!(segment_files(dir.path()).len() > 3);
        store.truncate(log_id(1, 20)).await.unwrap();
        append(&mut store, entries(3, 20..=21, 150)).await;
    }
    let mut store = open(dir.path(), &opts);
    let mut want = entries(1, 1..=19, 150);
    want.extend(entries(3, 20..=21, 150));
    assert_eq!(read_all(&mut store).await, want);
    let last_base =
        segment_files(dir.path()).last().map(|p| p.file_stem().unwrap().to_str().unwrap().parse::<u64>());
    assert!(last_base.unwrap().unwrap() <= 20, "segments after the truncation point are deleted");
}

#[tokio::test]
async fn purge_across_rolled_over_segments_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let opts = LogStoreOptions {
        segment_bytes: raft_store::limits::SEGMENT_BYTES_MIN,
        ..LogStoreOptions::default()
    };
    {
        let mut store = open(dir.path(), &opts);
        for chunk in entries(1, 1..=300, 150).chunks(7) {
            append(&mut store, chunk.to_vec()).await;
        }
        let segments = segment_files(dir.path());
        assert!(segments.len() >= 10, "tiny segments roll over: {} segments", segments.len());
        store.purge(log_id(1, 200)).await.unwrap();
    }
    let bases: Vec<u64> = segment_files(dir.path())
        .iter()
        .map(|p| p.file_stem().unwrap().to_str().unwrap().parse().unwrap())
        .collect();
    assert!(bases[0] <= 201, "the segment holding entry 201 is kept");
    assert!(bases.len() < 10, "segments entirely below the purge point are deleted: {bases:?}");

    let mut store = open(dir.path(), &opts);
    let state = store.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, Some(log_id(1, 200)));
    assert_eq!(state.last_log_id, Some(log_id(1, 300)));
    assert_eq!(read_all(&mut store).await, entries(1, 201..=300, 150));
    assert_eq!(store.try_get_log_entries(0..=200).await.unwrap(), vec![]);
}

/// A purge past the end of the log (a follower that installed a snapshot ahead of its log):
/// every segment goes, and the log restarts right after the purge point.
#[tokio::test]
async fn purge_past_the_end_restarts_the_log_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let opts = small_opts();
    {
        let mut store = open(dir.path(), &opts);
        append(&mut store, entries(1, 1..=10, 50)).await;
        store.purge(log_id(4, 500)).await.unwrap();
        assert_eq!(last_log_id(&mut store).await, Some(log_id(4, 500)));
        append(&mut store, entries(4, 501..=502, 50)).await;
    }
    let names: Vec<String> =
        segment_files(dir.path()).iter().map(|p| p.file_name().unwrap().to_string_lossy().into()).collect();
    assert_eq!(names, vec!["00000000000000000501.seg".to_string()]);
    let mut store = open(dir.path(), &opts);
    let state = store.get_log_state().await.unwrap();
    assert_eq!((state.last_purged_log_id, state.last_log_id), (Some(log_id(4, 500)), Some(log_id(4, 502))));
    assert_eq!(read_all(&mut store).await, entries(4, 501..=502, 50));
}

#[tokio::test]
async fn oversized_entries_are_rejected_and_big_ones_get_their_own_segment() {
    let dir = tempfile::tempdir().unwrap();
    let opts = LogStoreOptions { segment_bytes: 8192, entry_bytes_max: 20_000, ..LogStoreOptions::default() };
    let mut store = open(dir.path(), &opts);
    append(&mut store, entries(1, 1..=2, 100)).await;
    // Bigger than a whole segment but within entry_bytes_max: the segment file grows.
    append(&mut store, entries(1, 3..=3, 15_000)).await;
    append(&mut store, entries(1, 4..=4, 100)).await;
    let too_big =
        openraft::storage::RaftLogStorageExt::blocking_append(&mut store, entries(1, 5..=5, 30_000)).await;
    assert!(too_big.is_err(), "entries over entry_bytes_max are rejected");
    drop(store);
    let mut store = open(dir.path(), &opts);
    let mut want = entries(1, 1..=2, 100);
    want.extend(entries(1, 3..=3, 15_000));
    want.extend(entries(1, 4..=4, 100));
    assert_eq!(read_all(&mut store).await, want);
}

/// Replication reads through cloned readers while appends continue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_see_appends_concurrently() {
    let dir = tempfile::tempdir().unwrap();
    let opts = LogStoreOptions {
        segment_bytes: raft_store::limits::SEGMENT_BYTES_MIN,
        ..LogStoreOptions::default()
    };
    let mut store = open(dir.path(), &opts);
    let reader = store.get_log_reader().await;
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let mut reader = reader.clone();
            tokio::spawn(async move {
                let mut seen = 0;
                while seen < 200 {
                    let got = reader.try_get_log_entries(seen + 1..=seen + 16).await.unwrap();
                    for (i, e) in got.iter().enumerate() {
                        assert_eq!(*e, entry(1, seen + 1 + i as u64, 100));
                    }
                    seen += got.len() as u64;
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    for chunk in entries(1, 1..=200, 100).chunks(5) {
        append(&mut store, chunk.to_vec()).await;
    }
    for r in readers {
        r.await.unwrap();
    }
}

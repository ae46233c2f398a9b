//! Tests of partition files: append/read across segments, truncation to a checkpoint,
//! index files of sealed segments, retention trimming.

use bytes::Bytes;
use kafka_compat::batch::parse_header;

use super::*;
use crate::storage::reads::LogFiles;
use onelog_state::testing::{build, BatchSpec};

pub(super) fn batch(base_offset: i64, records: i64, value_bytes: usize) -> Bytes {
    let value = vec![7u8; value_bytes];
    build(&BatchSpec {
        base_offset,
        records,
        value,
        first_timestamp: 1000 + base_offset,
        ..Default::default()
    })
}

fn sized(segment_bytes: u64) -> SegmentPolicy {
    SegmentPolicy { segment_bytes, preallocate: false, journaled: false }
}

fn fill(log: &mut PartitionLog, batches: i64, segment_bytes: u64) {
    for i in 0..batches {
        log.append(&batch(i * 2, 2, 100), sized(segment_bytes), None).expect("append");
    }
}

#[test]
fn reads_whole_batches_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), 0, 0, LogFiles::unattached()).unwrap();
    fill(&mut log, 50, 2048); // several segments
    assert_eq!(log.log_end_offset(), Some(100));
    assert!(log.sealed_segments().len() >= 3);
    // Offset 31 lives in the batch starting at 30: that whole batch comes back first.
    let read = log.read(31, 1, 100).unwrap().expect("data");
    assert_eq!(parse_header(&read.bytes).unwrap().base_offset, 30);
    // Every offset is reachable and the upper bound is respected.
    for offset in 0..100 {
        let r = log.read(offset, 10_000, 100).unwrap().expect("data");
        let h = parse_header(&r.bytes).unwrap();
        assert!(h.base_offset <= offset && offset <= h.last_offset());
    }
    assert!(log.read(98, 10_000, 98).unwrap().is_none());
}

#[test]
fn reopen_truncates_to_the_checkpoint_and_keeps_appending() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), 0, 0, LogFiles::unattached()).unwrap();
    fill(&mut log, 50, 2048);
    log.flush().unwrap();
    drop(log);
    let mut log = PartitionLog::open(dir.path(), 0, 40, LogFiles::unattached()).unwrap();
    assert_eq!(log.log_end_offset(), Some(40));
    assert!(log.read(40, 10_000, i64::MAX).unwrap().is_none());
    log.append(&batch(40, 3, 10), sized(2048), None).unwrap();
    drop(log);
    let log = PartitionLog::open(dir.path(), 0, 43, LogFiles::unattached()).unwrap();
    assert_eq!(log.log_end_offset(), Some(43));
    let r = log.read(40, 10_000, 43).unwrap().unwrap();
    assert_eq!(parse_header(&r.bytes).unwrap().record_count, 3);
}

#[test]
fn trim_deletes_only_whole_sealed_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), 0, 0, LogFiles::unattached()).unwrap();
    fill(&mut log, 50, 2048);
    let sealed = log.sealed_segments();
    let second_base = sealed[0].0;
    log.trim(second_base + 1).unwrap();
    assert_eq!(log.sealed_segments().len(), sealed.len() - 1);
    assert!(log.read(second_base, 10_000, 100).unwrap().is_some());
    drop(log);
    let log = PartitionLog::open(dir.path(), second_base + 1, 100, LogFiles::unattached()).unwrap();
    assert_eq!(log.log_end_offset(), Some(100));
}

/// Blocks the segment files of `dir` really hold (`st_blocks` × 512), not their length.
fn allocated_bytes(dir: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().metadata().unwrap().blocks() * 512).sum()
}

const SEGMENT_128_MIB: u64 = 128 * 1024 * 1024;

#[test]
fn a_one_record_partition_reserves_one_step_not_a_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), 0, 0, LogFiles::unattached()).unwrap();
    log.append(&batch(0, 1, 100), sized(SEGMENT_128_MIB), None).unwrap();
    let held = allocated_bytes(dir.path());
    assert!(held <= 2 * crate::limits::SEGMENT_ALLOCATION_STEP_BYTES_MIN, "one record holds {held} bytes");
    // Growing past the first step reserves more, in doubling steps, and stays readable.
    for i in 1..2_000 {
        log.append(&batch(i, 1, 100), sized(SEGMENT_128_MIB), None).unwrap();
    }
    let written = log.total_bytes();
    let held = allocated_bytes(dir.path());
    assert!(
        held >= written && held <= 2 * written + crate::limits::SEGMENT_ALLOCATION_STEP_BYTES_MIN,
        "{written} bytes written hold {held}"
    );
    assert!(log.read(1_999, 10_000, 2_000).unwrap().is_some());
}

#[test]
fn log_preallocate_reserves_the_whole_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), 0, 0, LogFiles::unattached()).unwrap();
    let policy = SegmentPolicy { segment_bytes: 4 * 1024 * 1024, preallocate: true, journaled: false };
    log.append(&batch(0, 1, 100), policy, None).unwrap();
    assert!(allocated_bytes(dir.path()) >= 4 * 1024 * 1024);
}

#[test]
fn a_sparse_segment_reopens_at_its_written_end_and_reserves_nothing_more() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), 0, 0, LogFiles::unattached()).unwrap();
    for i in 0..10 {
        log.append(&batch(i, 1, 100), sized(SEGMENT_128_MIB), None).unwrap();
    }
    drop(log); // no flush: as after kill -9, the page cache still holds the bytes
    let held = allocated_bytes(dir.path());
    let step = crate::limits::SEGMENT_ALLOCATION_STEP_BYTES_MIN;
    // A checkpoint at 6: the tail is cut, and the scan stops at the written end of a file
    // whose length is the whole segment.
    let mut log = PartitionLog::open(dir.path(), 0, 6, LogFiles::unattached()).unwrap();
    assert_eq!(log.log_end_offset(), Some(6));
    assert!(allocated_bytes(dir.path()) <= held);
    log.append(&batch(6, 1, 100), sized(SEGMENT_128_MIB), None).unwrap();
    drop(log);
    let log = PartitionLog::open(dir.path(), 0, 7, LogFiles::unattached()).unwrap();
    assert_eq!(log.log_end_offset(), Some(7));
    // The next append reserved one step from the written end, not the rest of the segment.
    assert!(allocated_bytes(dir.path()) <= held + step);
}

//! Tests of partition files: append/read across segments, truncation to a checkpoint,
//! index files of sealed segments, retention trimming.

use bytes::Bytes;
use kafka_compat::batch::parse_header;

use super::*;
use onelog_state::testing::{build, BatchSpec};

fn batch(base_offset: i64, records: i64, value_bytes: usize) -> Bytes {
    let value = vec![7u8; value_bytes];
    build(&BatchSpec {
        base_offset,
        records,
        value,
        first_timestamp: 1000 + base_offset,
        ..Default::default()
    })
}

fn fill(log: &mut PartitionLog, batches: i64, segment_bytes: u64) {
    for i in 0..batches {
        log.append(&batch(i * 2, 2, 100), segment_bytes).expect("append");
    }
}

#[test]
fn reads_whole_batches_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), 0, 0).unwrap();
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
    let mut log = PartitionLog::open(dir.path(), 0, 0).unwrap();
    fill(&mut log, 50, 2048);
    log.flush().unwrap();
    drop(log);
    let mut log = PartitionLog::open(dir.path(), 0, 40).unwrap();
    assert_eq!(log.log_end_offset(), Some(40));
    assert!(log.read(40, 10_000, i64::MAX).unwrap().is_none());
    log.append(&batch(40, 3, 10), 2048).unwrap();
    drop(log);
    let log = PartitionLog::open(dir.path(), 0, 43).unwrap();
    assert_eq!(log.log_end_offset(), Some(43));
    let r = log.read(40, 10_000, 43).unwrap().unwrap();
    assert_eq!(parse_header(&r.bytes).unwrap().record_count, 3);
}

#[test]
fn trim_deletes_only_whole_sealed_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), 0, 0).unwrap();
    fill(&mut log, 50, 2048);
    let sealed = log.sealed_segments();
    let second_base = sealed[0].0;
    log.trim(second_base + 1).unwrap();
    assert_eq!(log.sealed_segments().len(), sealed.len() - 1);
    assert!(log.read(second_base, 10_000, 100).unwrap().is_some());
    drop(log);
    let log = PartitionLog::open(dir.path(), second_base + 1, 100).unwrap();
    assert_eq!(log.log_end_offset(), Some(100));
}

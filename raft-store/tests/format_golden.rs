//! Golden test pinning the on-disk record layout: the exact bytes one known entry produces.
//! If this fails, the format changed and every existing log would be misread: bump a version
//! and write a migration instead of updating the bytes.

mod common;

use common::*;
use openraft::{Entry, EntryPayload};

#[tokio::test]
async fn one_blank_entry_has_pinned_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let opts = raft_store::LogStoreOptions { segment_bytes: 4096, ..Default::default() };
    {
        let mut store = open(dir.path(), &opts);
        let blank = Entry { log_id: log_id(2, 7), payload: EntryPayload::Blank };
        append(&mut store, vec![blank]).await;
    }
    let segment = dir.path().join("00000000000000000007.seg");
    let bytes = std::fs::read(&segment).expect("segment named after its first index");

    #[rustfmt::skip]
    let want: &[u8] = &[
        // header: payload_len u32 LE = 28
        28, 0, 0, 0,
        // crc32c u32 LE of bytes 8..52 (index, term, payload)
        0xDC, 0x7B, 0x38, 0xCB,
        // log index u64 LE = 7
        7, 0, 0, 0, 0, 0, 0, 0,
        // term u64 LE = 2
        2, 0, 0, 0, 0, 0, 0, 0,
        // payload, bincode 1.3 of Entry { log_id: { leader_id: { term: 2, node_id: 1 }, index: 7 }, Blank }
        2, 0, 0, 0, 0, 0, 0, 0,
        1, 0, 0, 0, 0, 0, 0, 0,
        7, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0,
    ];
    assert_eq!(&bytes[..want.len()], want, "record bytes");
    assert_eq!(crc32c::crc32c(&want[8..]).to_le_bytes(), want[4..8], "crc covers index, term and payload");
    assert_eq!(bytes.len(), 4096, "segment pre-written to segment_bytes");
    assert!(bytes[want.len()..].iter().all(|&b| b == 0), "zeros after the last record");
}

/// A record whose CRC holds but whose format version is newer than this build's (the high bits
/// of the length word) stops the store at open, naming the segment, and leaves it as it was:
/// never misread, never cut as a torn tail.
#[tokio::test]
async fn an_intact_record_of_a_newer_format_stops_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let opts = raft_store::LogStoreOptions { segment_bytes: 4096, ..Default::default() };
    {
        let mut store = open(dir.path(), &opts);
        let blank = |index| Entry { log_id: log_id(2, index), payload: EntryPayload::Blank };
        append(&mut store, vec![blank(7), blank(8)]).await;
    }
    let segment = dir.path().join("00000000000000000007.seg");
    let mut bytes = std::fs::read(&segment).unwrap();
    let second = 24 + 28;
    bytes[second + 3] |= 0x10; // format version 1; the CRC does not cover the length word
    std::fs::write(&segment, &bytes).unwrap();

    let refused = Store::open(dir.path(), opts.clone()).err().expect("refused");
    let message = refused.to_string();
    assert!(message.contains("00000000000000000007.seg"), "{message}");
    assert!(
        message.contains("log index 8 is in format version 1, not one this build reads (0–0)"),
        "{message}"
    );
    assert_eq!(std::fs::read(&segment).unwrap(), bytes, "nothing written");
}

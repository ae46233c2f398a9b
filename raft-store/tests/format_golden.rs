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

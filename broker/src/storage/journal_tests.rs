//! The partition journal's format and its recovery: a torn or stale tail is cut, never read.

use std::os::unix::fs::FileExt;

use super::*;

fn entry(base: i64, records: i64, log_segment: Option<u64>) -> IndexEntry {
    IndexEntry {
        base_offset: base,
        last_offset: base + records - 1,
        position: 4096 + base as u64 * 100,
        size: 100 + base as u32,
        max_timestamp: 1_700_000_000_000 + base,
        log_segment,
    }
}

fn written(dir: &Path, entries: &[IndexEntry]) -> PathBuf {
    let path = dir.join("00000000000000000010.refs");
    let mut journal = Journal::create(&path).unwrap();
    for e in entries {
        journal.append(e).unwrap();
    }
    journal.flush().unwrap();
    path
}

fn five() -> Vec<IndexEntry> {
    vec![
        entry(10, 2, Some(7)),
        entry(12, 1, None),
        entry(13, 3, Some(7)),
        entry(16, 1, Some(900)),
        entry(17, 1, None),
    ]
}

/// The bytes of one entry, pinned: a change of the format must be a new format version.
#[test]
fn the_entry_format_is_pinned() {
    let bytes = encode(&entry(16, 1, Some(900)));
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let want = [
        "0000000000000010", // base offset 16
        "0000000000000010", // last offset 16
        "0000018bcfe56810", // max timestamp
        "00000074",         // size 116
        "01",               // in the Raft log
        "0000000000000384", // its segment, 900
        "0000000000001640", // position 5696
        "a6a11c3e",         // CRC32C
    ];
    assert_eq!(hex, want.concat());
    assert_eq!(decode(&bytes), Some(entry(16, 1, Some(900))));
}

#[test]
fn entries_read_back_up_to_the_end_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), &five());
    let (_, all) = Journal::open(&path, 10, 18).unwrap();
    assert_eq!(all, five());
    // The checkpoint ends at 16: the entries from 16 on are cut, and stay cut.
    let (mut journal, kept) = Journal::open(&path, 10, 16).unwrap();
    assert_eq!(kept, five()[..3]);
    journal.append(&entry(16, 2, None)).unwrap();
    let (_, again) = Journal::open(&path, 10, 100).unwrap();
    assert_eq!(again, [&five()[..3], &[entry(16, 2, None)]].concat());
}

/// The last entry torn at every length, and at every length followed by the bytes of an older
/// entry (as a journal cut at open and appended again could leave them): the entries before
/// it survive, nothing after comes back, and appending continues where they end.
#[test]
fn a_torn_last_entry_is_cut_at_every_length() {
    let dir = tempfile::tempdir().unwrap();
    let all = five();
    let path = written(dir.path(), &all);
    let full = std::fs::read(&path).unwrap();
    let last_at = HEADER_BYTES as usize + 4 * ENTRY_BYTES;
    for cut in 0..ENTRY_BYTES {
        for stale in [false, true] {
            let mut bytes = full[..last_at + cut].to_vec();
            if stale {
                bytes.extend_from_slice(&full[HEADER_BYTES as usize..][..ENTRY_BYTES]);
            }
            std::fs::write(&path, &bytes).unwrap();
            let (mut journal, kept) = Journal::open(&path, 10, 100).unwrap();
            assert_eq!(kept, all[..4], "cut at {cut}, stale {stale}");
            journal.append(&all[4]).unwrap();
            let (_, again) = Journal::open(&path, 10, 100).unwrap();
            assert_eq!(again, all, "cut at {cut}, stale {stale}: appended after the cut");
        }
    }
}

#[test]
fn a_gap_in_the_offsets_ends_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), &[entry(10, 2, None), entry(13, 1, Some(1))]);
    let (_, kept) = Journal::open(&path, 10, 100).unwrap();
    assert_eq!(kept, [entry(10, 2, None)]);
    let (_, none) = Journal::open(&path, 9, 100).unwrap();
    assert!(none.is_empty(), "a journal must start at its segment's base offset");
}

#[test]
fn a_journal_without_its_header_is_empty_and_usable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000010.refs");
    std::fs::write(&path, b"OL").unwrap();
    let (mut journal, kept) = Journal::open(&path, 10, 100).unwrap();
    assert!(kept.is_empty());
    journal.append(&entry(10, 1, None)).unwrap();
    assert_eq!(Journal::open(&path, 10, 100).unwrap().1, [entry(10, 1, None)]);
}

#[test]
fn a_newer_format_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), &five());
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(&2u32.to_be_bytes(), 4).unwrap();
    let err = Journal::open(&path, 10, 100).unwrap_err();
    assert!(err.to_string().contains("partition journal format version 2"), "{err}");
}

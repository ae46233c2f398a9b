//! Shared fixtures of the raft-store integration tests: a test type config, entry builders and
//! helpers to open, append to and read back a `LogStore`.
#![allow(dead_code)] // each test binary uses a different subset

pub mod sm;

use std::io::Cursor;
use std::path::{Path, PathBuf};

use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, RaftLogReader};
use raft_store::{LogStore, LogStoreOptions};
use serde::{Deserialize, Serialize};

/// A small application command, standing in for the broker's log entry payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cmd {
    pub key: String,
    pub value: Vec<u8>,
}

openraft::declare_raft_types!(
    pub TestConfig:
        D = Cmd,
        R = (),
        NodeId = u64,
        Node = openraft::BasicNode,
        SnapshotData = Cursor<Vec<u8>>,
);

pub type Store = LogStore<TestConfig>;

pub fn log_id(term: u64, index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

/// A normal entry whose payload is `value_bytes` long.
pub fn entry(term: u64, index: u64, value_bytes: usize) -> Entry<TestConfig> {
    let cmd = Cmd { key: format!("k{index}"), value: vec![(index % 251) as u8; value_bytes] };
    Entry { log_id: log_id(term, index), payload: EntryPayload::Normal(cmd) }
}

pub fn entries(
    term: u64,
    indexes: std::ops::RangeInclusive<u64>,
    value_bytes: usize,
) -> Vec<Entry<TestConfig>> {
    indexes.map(|i| entry(term, i, value_bytes)).collect()
}

pub fn small_opts() -> LogStoreOptions {
    LogStoreOptions { segment_bytes: 64 * 1024, ..LogStoreOptions::default() }
}

pub fn open(dir: &Path, opts: &LogStoreOptions) -> Store {
    Store::open(dir, opts.clone()).expect("open log store")
}

/// Appends and waits until the entries are durable.
pub async fn append(store: &mut Store, entries: Vec<Entry<TestConfig>>) {
    store.blocking_append(entries).await.expect("append");
}

pub async fn read_all(store: &mut Store) -> Vec<Entry<TestConfig>> {
    store.try_get_log_entries(..).await.expect("read log")
}

pub async fn last_log_id(store: &mut Store) -> Option<LogId<u64>> {
    store.get_log_state().await.expect("log state").last_log_id
}

/// Segment files of `dir`, sorted by first index.
pub fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    files.sort();
    files
}

/// `(position, total length)` of every record in a segment file, by walking the length fields.
pub fn record_positions(segment: &Path) -> Vec<(u64, u64)> {
    walk_records(segment, None)
}

/// `(position, total length)` of the records of the current life of a (possibly recycled)
/// segment: from the start, while the index in each header continues from the file's base
/// (what follows may be an earlier life's records).
pub fn live_records(segment: &Path) -> Vec<(u64, u64)> {
    walk_records(segment, Some(base_of(segment)))
}

/// The first index a segment file holds, from its name.
pub fn base_of(segment: &Path) -> u64 {
    segment.file_stem().unwrap().to_str().unwrap().parse().unwrap()
}

/// Records from the start of `segment` up to a zero length word, or, with `first_index`, up
/// to the first header whose index does not continue from it.
fn walk_records(segment: &Path, first_index: Option<u64>) -> Vec<(u64, u64)> {
    /// The length word's low 28 bits (the format version sits above them: format.rs).
    const PAYLOAD_LEN_BITS: u32 = 0x0fff_ffff;
    let bytes = std::fs::read(segment).expect("read segment");
    let (mut out, mut pos, mut index) = (Vec::new(), 0usize, first_index);
    while pos + raft_store::RECORD_HEADER_BYTES <= bytes.len() {
        let word = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap());
        let len = (word & PAYLOAD_LEN_BITS) as usize;
        let found = u64::from_le_bytes(bytes[pos + 8..pos + 16].try_into().unwrap());
        if len == 0 || index.is_some_and(|want| found != want) {
            break;
        }
        let total = raft_store::RECORD_HEADER_BYTES + len;
        out.push((pos as u64, total as u64));
        pos += total;
        index = index.map(|i| i + 1);
    }
    out
}

/// Files of `dir` waiting for reuse (`recycled-N.seg.tmp`).
pub fn recycled_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("recycled-"))
        .collect()
}

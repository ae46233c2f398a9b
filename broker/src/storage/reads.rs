//! Reading batches wherever they lie: a segment's own file, or the Raft log's files for the
//! batches of a journaled segment (issue 31). A batch read from the Raft log is checked
//! against its index entry (base offset and length) before it is served: a location that
//! does not hold the batch is an error, never another partition's bytes.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, OnceLock};

use super::segment::IndexEntry;
use crate::limits::READ_COALESCE_GAP_BYTES_MAX;

/// Opens a Raft log segment's file by its first index, live or parked.
type OpenSegment = dyn Fn(u64) -> Option<Arc<File>> + Send + Sync;

/// Opens the Raft log's segment files by first index (live or parked, `raft_store::Retention`)
/// for every partition log of a node; clones share one handle, attached to the log once it is
/// open (`raft::sm_log`).
#[derive(Clone, Default)]
pub struct LogFiles(Arc<OnceLock<Box<OpenSegment>>>);

impl LogFiles {
    /// A handle not yet attached: reads of journaled batches fail until it is.
    pub fn unattached() -> LogFiles {
        LogFiles::default()
    }

    /// Attaches the Raft log (`raft_store::LogReader::segment_file`); only the first call
    /// counts.
    pub fn attach(&self, open: impl Fn(u64) -> Option<Arc<File>> + Send + Sync + 'static) {
        let _ = self.0.set(Box::new(open));
    }

    pub fn get(&self, segment: u64) -> io::Result<Arc<File>> {
        let file = self.0.get().and_then(|open| open(segment));
        file.ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("Raft log segment {segment} is not on disk"))
        })
    }
}

/// The batches of `entries` (consecutive entries of one segment, whose own file is `own`),
/// back to back.
pub fn read_entries(own: &File, entries: &[IndexEntry], log: &LogFiles) -> io::Result<Vec<u8>> {
    let total: usize = entries.iter().map(|e| e.size as usize).sum();
    let mut out = Vec::with_capacity(total);
    let mut rest = entries;
    // The Raft log segment of the last run: a parked one is opened on each `get`, and the
    // runs of one partition's interleaved batches mostly lie in the same segment.
    let mut last: Option<(u64, Arc<File>)> = None;
    while !rest.is_empty() {
        let (run, tail) = rest.split_at(run_length(rest));
        let start = out.len();
        match run[0].log_segment {
            None => read_run(own, run, &mut out)?,
            Some(segment) => {
                let file = match last.take() {
                    Some((held, file)) if held == segment => file,
                    _ => log.get(segment)?,
                };
                read_run(&file, run, &mut out)?;
                check_run(run, &out[start..])?;
                last = Some((segment, file));
            }
        }
        rest = tail;
    }
    Ok(out)
}

/// How many leading entries one read covers: in the same file, each starting at most
/// `READ_COALESCE_GAP_BYTES_MAX` after the one before ends.
fn run_length(entries: &[IndexEntry]) -> usize {
    let first = entries[0];
    let mut end = first.position + u64::from(first.size);
    let mut n = 1;
    for entry in &entries[1..] {
        let apart = entry.position.checked_sub(end);
        if entry.log_segment != first.log_segment || apart.is_none_or(|gap| gap > READ_COALESCE_GAP_BYTES_MAX)
        {
            break;
        }
        end = entry.position + u64::from(entry.size);
        n += 1;
    }
    n
}

/// Reads a run with one `pread` and appends its batches, back to back, to `out`.
fn read_run(file: &File, run: &[IndexEntry], out: &mut Vec<u8>) -> io::Result<()> {
    let (first, last) = (run[0], run[run.len() - 1]);
    let (start, end) = (first.position, last.position + u64::from(last.size));
    let contiguous = run.windows(2).all(|w| w[1].position == w[0].position + u64::from(w[0].size));
    if contiguous {
        let at = out.len();
        out.resize(at + (end - start) as usize, 0);
        return file.read_exact_at(&mut out[at..], start);
    }
    let mut span = vec![0u8; (end - start) as usize];
    file.read_exact_at(&mut span, start)?;
    for entry in run {
        let from = (entry.position - start) as usize;
        out.extend_from_slice(&span[from..from + entry.size as usize]);
    }
    Ok(())
}

fn check_run(run: &[IndexEntry], mut bytes: &[u8]) -> io::Result<()> {
    for entry in run {
        let (batch, rest) = bytes.split_at(entry.size as usize);
        check_located(entry, batch)?;
        bytes = rest;
    }
    Ok(())
}

/// Whether `batch`, read where `entry` says, is the batch it indexes: its base offset and its
/// batch length (the 8 bytes after the base offset: the size without the first 12 bytes).
pub fn check_located(entry: &IndexEntry, batch: &[u8]) -> io::Result<()> {
    let header = batch.get(..12).map(|h| {
        let base = i64::from_be_bytes(h[..8].try_into().expect("8 bytes"));
        (base, i32::from_be_bytes(h[8..12].try_into().expect("4 bytes")))
    });
    match header {
        Some((base, length))
            if base == entry.base_offset && i64::from(length) + 12 == i64::from(entry.size) =>
        {
            Ok(())
        }
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "Raft log segment {:?} at byte {} does not hold the batch of offsets {}..={}",
                entry.log_segment, entry.position, entry.base_offset, entry.last_offset
            ),
        )),
    }
}

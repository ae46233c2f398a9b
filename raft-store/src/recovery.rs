//! Rebuilding the log from its segment files at open, and cutting off a torn tail.
//!
//! Segments are scanned in index order. A segment's records end at the first one that is not
//! valid (zero length, length over the limit, running past the file, CRC mismatch, index not
//! contiguous). What follows them is one of three things:
//! - zeros: a new segment (pre-written or fallocated) that was not full;
//! - the records of an earlier life of the file: a recycled segment (`prealloc.rs`) holds, after
//!   what was written into it since, records at or below an old purge point, so below the
//!   segment's base, and the scan stops at the first of them (`WrongIndex`);
//! - a torn tail: records that were being written when the node stopped.
//!
//! A segment whose successor starts exactly where its records end is complete, whatever follows
//! its records (the writer starts a segment only when the last is full), so that is left
//! alone. Anywhere else, non-zero bytes after the records are wiped: the rest of the segment is
//! zeroed and later segments are deleted. Nothing wiped was acknowledged: the flusher completes
//! a callback only after every segment written before it is synced. Zeroing matters: a stale
//! record left behind a shorter new one could otherwise line up with the next expected index
//! and come back to life at a later open.

use std::collections::{BTreeMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::LogStoreError;
use crate::format::{
    check_header, check_record, parse_segment_name, Invalid, RecordHeader, RECORD_FORMAT_VERSION,
    RECORD_HEADER_BYTES,
};
use crate::fsutil::{first_nonzero, fsync_dir, zero_range};
use crate::index::{EntryIndex, Loc};
use crate::limits::SCAN_BUFFER_BYTES;
use crate::retention::Parked;
use crate::segment::Segment;

/// The log as found on disk.
pub(crate) struct Recovered {
    /// In index order; the last one is where appends continue.
    pub segments: VecDeque<Segment>,
    /// Live entries: those after the purge point.
    pub index: EntryIndex,
    /// Segments holding only purged entries, kept when `park` (`retention.rs`).
    pub parked: BTreeMap<u64, Parked>,
}

/// Scans `dir`. `purged` is the index of the last purged entry, if any. `park`: segments that
/// hold only purged entries are kept (parked, not scanned) for the owner to release.
pub(crate) fn recover(
    dir: &Path,
    entry_bytes_max: u32,
    purged: Option<u64>,
    park: bool,
) -> Result<Recovered, LogStoreError> {
    let mut listed = list_segments(dir)?;
    let covered = purged_prefix(&listed, purged);
    let purged_segments = listed.drain(..covered);
    let (parked, mut dir_changed) = if park {
        (park_segments(purged_segments)?, false)
    } else {
        remove_segments(purged_segments)?;
        (BTreeMap::new(), covered > 0)
    };
    let mut segments = VecDeque::new();
    let mut index = EntryIndex::new(purged.map_or(listed.first().map_or(0, |s| s.0), |p| p + 1));
    let mut listed = listed.into_iter().peekable();
    while let Some((base, path)) = listed.next() {
        if let Some(prev) = segments.back().map(|s: &Segment| s.next_index).filter(|&next| next != base) {
            tracing::warn!(segment = %path.display(), expected = prev, "raft log segment does not continue the log; removing it and all later ones");
            remove_segments(std::iter::once((base, path)).chain(listed.by_ref()))?;
            dir_changed = true;
            break;
        }
        check_no_hole(base, purged, segments.is_empty(), &path)?;
        let successor = listed.peek().map(|(next_base, _)| *next_base);
        let (segment, torn) = load_segment(base, path, entry_bytes_max, purged, successor, &mut index)?;
        segments.push_back(segment);
        if torn {
            remove_segments(listed.by_ref())?;
            dir_changed = true;
        }
    }
    if dir_changed {
        fsync_dir(dir).map_err(|e| LogStoreError::io_at("syncing", dir, e))?;
    }
    Ok(Recovered { segments, index, parked })
}

/// Segment files in `dir` sorted by first index; deletes leftover `*.tmp` files on the way.
fn list_segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, LogStoreError> {
    let mut found = Vec::new();
    let entries = fs::read_dir(dir).map_err(|e| LogStoreError::io_at("listing", dir, e))?;
    for entry in entries {
        let path = entry.map_err(|e| LogStoreError::io_at("listing", dir, e))?.path();
        if path.extension().is_some_and(|ext| ext == "tmp") {
            // An unfinished preallocation or atomic write: never part of the log.
            fs::remove_file(&path).map_err(|e| LogStoreError::io_at("removing", &path, e))?;
        } else if let Some(base) = parse_segment_name(&path) {
            found.push((base, path));
        }
    }
    found.sort();
    Ok(found)
}

/// How many leading segments hold only purged entries: those followed by a segment that
/// starts at or before `purged + 1`. Without parking they are deleted (finishing a purge
/// interrupted between persisting the purge point and deleting the files).
fn purged_prefix(listed: &[(u64, PathBuf)], purged: Option<u64>) -> usize {
    let Some(purged) = purged else { return 0 };
    listed.windows(2).take_while(|w| w[1].0 <= purged.saturating_add(1)).count()
}

/// Takes purged segments as parked. Their records are complete and synced (only committed
/// entries are purged) and nothing of the log reads them, so they are not scanned.
fn park_segments(
    segments: impl Iterator<Item = (u64, PathBuf)>,
) -> Result<BTreeMap<u64, Parked>, LogStoreError> {
    let mut parked = BTreeMap::new();
    for (base, path) in segments {
        let bytes = fs::metadata(&path).map_err(|e| LogStoreError::io_at("opening", &path, e))?.len();
        parked.insert(base, Parked { path, bytes });
    }
    Ok(parked)
}

/// The first kept segment must start at or before the entry after the purge point; anything
/// else is a hole in the log that no crash of ours can produce.
fn check_no_hole(base: u64, purged: Option<u64>, is_first: bool, path: &Path) -> Result<(), LogStoreError> {
    match purged {
        Some(p) if is_first && base > p.saturating_add(1) => Err(LogStoreError::Corrupt(format!(
            "{} starts at log index {base} but entries are purged only up to {p}",
            path.display()
        ))),
        _ => Ok(()),
    }
}

fn remove_segments(segments: impl Iterator<Item = (u64, PathBuf)>) -> Result<(), LogStoreError> {
    for (_, path) in segments {
        tracing::warn!(segment = %path.display(), "removing raft log segment");
        fs::remove_file(&path).map_err(|e| LogStoreError::io_at("removing", &path, e))?;
    }
    Ok(())
}

/// Scans one segment, adds its live records to `index`, wipes a torn tail. `successor` is the
/// first index of the next segment file, if there is one. Returns the segment and whether its
/// tail was torn (then all later segments must go).
fn load_segment(
    base: u64,
    path: PathBuf,
    entry_bytes_max: u32,
    purged: Option<u64>,
    successor: Option<u64>,
    index: &mut EntryIndex,
) -> Result<(Segment, bool), LogStoreError> {
    let io_err = |e| LogStoreError::io_at("recovering", &path, e);
    let file = OpenOptions::new().read(true).write(true).open(&path).map_err(io_err)?;
    let capacity = file.metadata().map_err(io_err)?.len();
    let scan = scan_segment(&file, base, capacity, entry_bytes_max).map_err(io_err)?;
    let end = scan.locs.last().map_or(0, Loc::end);
    // Complete: a recycled file's earlier life may follow the records; it is never read.
    let complete = successor == Some(base + scan.locs.len() as u64);
    let torn = !complete && first_nonzero(&file, end, capacity).map_err(io_err)?.is_some();
    if torn {
        let zeroed = zero_range(&file, end, capacity).map_err(io_err)?;
        file.sync_data().map_err(io_err)?;
        tracing::warn!(segment = %path.display(), position = end, bytes_zeroed = zeroed, reason = ?scan.stop,
            last_valid_index = base + scan.locs.len() as u64, "truncated torn tail of raft log");
    }
    let next_index = base + scan.locs.len() as u64;
    for (i, loc) in (base..).zip(scan.locs) {
        if purged.map_or(true, |p| i > p) {
            index.push(loc);
        }
    }
    let segment = Segment { base, path, file: Arc::new(file), write_pos: end, next_index, capacity };
    Ok((segment, torn))
}

/// An intact record this build cannot read: the node must stop, not cut the log there.
fn newer_format(index: u64, version: u8) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "the record of log index {index} is in format version {version}, not one this build reads \
             (0–{RECORD_FORMAT_VERSION}): written by a newer onelog? Start that build or a newer one on this \
             data directory"
        ),
    )
}

/// Valid records of one segment, and why the scan stopped (`None`: end of file).
struct Scan {
    locs: Vec<Loc>,
    stop: Option<Invalid>,
}

fn scan_segment(file: &File, base: u64, file_len: u64, entry_bytes_max: u32) -> io::Result<Scan> {
    let mut reader = BufReader::with_capacity(SCAN_BUFFER_BYTES, file);
    let (mut locs, mut pos, mut payload) = (Vec::new(), 0u64, Vec::new());
    let stop = loop {
        if pos + RECORD_HEADER_BYTES as u64 > file_len {
            break None;
        }
        let mut header = [0u8; RECORD_HEADER_BYTES];
        reader.read_exact(&mut header)?;
        let parsed = RecordHeader::parse(&header);
        if let Err(why) = check_header(&parsed, entry_bytes_max) {
            break Some(why);
        }
        let (record_bytes, bytes_left) = (parsed.record_bytes(), file_len - pos);
        if record_bytes > bytes_left {
            break Some(Invalid::Truncated { record_bytes, bytes_left });
        }
        payload.resize(parsed.payload_len as usize, 0);
        reader.read_exact(&mut payload)?;
        match check_record(&header, &payload, base + locs.len() as u64) {
            Err(Invalid::NewerFormat { version }) => {
                return Err(newer_format(base + locs.len() as u64, version))
            }
            Err(why) => break Some(why),
            Ok(_) => {}
        }
        locs.push(Loc { pos, len: record_bytes as u32 });
        pos += record_bytes;
    };
    Ok(Scan { locs, stop })
}

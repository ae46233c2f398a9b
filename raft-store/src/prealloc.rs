//! Prepares the next segment file ahead of time: a purged segment recycled, else a new one.
//!
//! An fdatasync after an append must not also have to persist a change of the file's size
//! (DESIGN §3), so a segment has its full size before it is used. Two ways to get one:
//! - **Recycled.** A segment purged below a checkpoint is renamed instead of deleted and kept
//!   for reuse (as PostgreSQL recycles WAL files). Its blocks are written, so appends into it
//!   take the cheapest fdatasync there is, and nothing is written to prepare it. The records of
//!   its earlier life stay in it; all are at or below the purge point, so below any index
//!   written into it later, and recovery's scan stops at the first of them (`recovery.rs`).
//! - **New.** Created and its blocks reserved with `fallocate`, then fsynced once, on a
//!   background thread. Its blocks read as zeros without being written. Until 2026-12-06 every
//!   new segment was filled with zeros instead: that wrote every byte of the log twice (0.87
//!   of the 2.9 bytes written per byte produced, docs/PERFORMANCE.md). An fdatasync into
//!   fallocated blocks also commits the extents' conversion to written, but measured here
//!   that cost nothing a durable append shows (`examples/append_latency.rs`, three stores at
//!   once: p50 215–231 µs against 215–222 µs pre-written), while the zero fill's 64 MiB of
//!   writes had stalled appends beside it for up to 127 ms. Where fallocate is unsupported
//!   the file is filled with zeros as before.
//!
//! Both kinds live under `.tmp` names until the writer renames one into place, and recovery
//! deletes `.tmp` files: a crash loses the recycled pool (it is rebuilt by the next purges),
//! never part of the log.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crate::limits::ZERO_FILL_CHUNK_BYTES;

/// A segment file of full size under its temporary name, ready to be renamed into place.
pub(crate) struct PreparedSegment {
    pub path: PathBuf,
    pub file: File,
    /// A purged segment's file, with the records of its earlier life in it.
    pub recycled: bool,
}

/// Keeps one new segment in preparation at all times once started, and the recycled pool.
pub(crate) struct Preallocator {
    dir: PathBuf,
    segment_bytes: u64,
    next_seq: u64,
    pending: Option<JoinHandle<io::Result<PreparedSegment>>>,
    cancel: Arc<AtomicBool>,
    /// Purged segments kept for reuse, oldest first.
    recycled: VecDeque<PreparedSegment>,
    /// How many segments the pool keeps: the rest are deleted, giving their space back.
    recycled_max: usize,
    /// Whether purged segments may be kept at all (`Recycling`).
    allowed: Recycling,
}

/// Turns the recycling of purged segments on and off (on by default). A build that does not
/// know recycled files would read their old records after a sealed segment's last one as a
/// torn tail and drop every later segment: the broker allows recycling only once its data can
/// no longer be opened by such a build (a checkpoint with a recorded feature level, which
/// 0.1.0 refuses). Turning it off also empties the pool.
#[derive(Debug, Clone)]
pub struct Recycling(Arc<AtomicBool>);

impl Recycling {
    pub fn allow(&self, allowed: bool) {
        self.0.store(allowed, Ordering::Release);
    }

    pub fn is_allowed(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

impl Preallocator {
    /// `recycle_bytes_max`: the disk space purged segments may keep for reuse.
    pub fn new(dir: &Path, segment_bytes: u64, recycle_bytes_max: u64) -> Self {
        Preallocator {
            dir: dir.to_path_buf(),
            segment_bytes,
            next_seq: 0,
            pending: None,
            cancel: Arc::new(AtomicBool::new(false)),
            recycled: VecDeque::new(),
            recycled_max: usize::try_from(recycle_bytes_max / segment_bytes.max(1)).unwrap_or(usize::MAX),
            allowed: Recycling(Arc::new(AtomicBool::new(true))),
        }
    }

    /// The switch of this preallocator's recycling.
    pub fn recycling(&self) -> Recycling {
        self.allowed.clone()
    }

    /// Starts preparing a segment unless one is already under way.
    pub fn start(&mut self) -> io::Result<()> {
        if self.pending.is_some() {
            return Ok(());
        }
        let path = self.next_path("prealloc");
        let (bytes, cancel) = (self.segment_bytes, Arc::clone(&self.cancel));
        let handle = std::thread::Builder::new()
            .name("raft-log-prealloc".into())
            .spawn(move || prepare(path, bytes, &cancel))?;
        self.pending = Some(handle);
        Ok(())
    }

    /// A recycled segment if there is one, else the prepared new one, waiting for it if the
    /// writer outran the preparation (and then starting the next).
    ///
    /// A preparation that failed in the background (ENOSPC on a nearly full disk, perhaps
    /// long ago at start-up) is tried once more here: space may have been freed since, and
    /// only a failure now, when the segment is needed, is the writer's error.
    pub fn take(&mut self) -> io::Result<PreparedSegment> {
        if !self.allowed.is_allowed() {
            self.recycled.drain(..).for_each(|r| drop(std::fs::remove_file(r.path)));
        }
        if let Some(recycled) = self.recycled.pop_front() {
            tracing::debug!(path = %recycled.path.display(), "took a recycled segment");
            return Ok(recycled);
        }
        self.start()?;
        let started = Instant::now();
        let handle = self.pending.take().expect("start() leaves a pending preparation");
        let mut prepared =
            handle.join().map_err(|_| io::Error::other("segment preallocation thread panicked"))?;
        if let Err(e) = &prepared {
            tracing::warn!(error = %e, "preparing the next raft log segment failed; preparing it again");
            let path = self.next_path("prealloc");
            prepared = prepare(path, self.segment_bytes, &self.cancel);
        }
        tracing::debug!(waited_us = started.elapsed().as_micros() as u64, "took a preallocated segment");
        self.start()?;
        prepared
    }

    /// Keeps the purged segment at `path` for reuse when the pool has room and the file has
    /// the segment size (an oversized record grew it, or the size setting changed); returns
    /// false, leaving the file alone, otherwise. Every record in it must be at or below a
    /// purge point already durable. The caller fsyncs the directory.
    pub fn recycle(&mut self, path: &Path) -> io::Result<bool> {
        let full = self.recycled.len() >= self.recycled_max;
        if !self.allowed.is_allowed() || full || std::fs::metadata(path)?.len() != self.segment_bytes {
            return Ok(false);
        }
        let to = self.next_path("recycled");
        std::fs::rename(path, &to)?;
        let file = OpenOptions::new().read(true).write(true).open(&to)?;
        self.recycled.push_back(PreparedSegment { path: to, file, recycled: true });
        Ok(true)
    }

    fn next_path(&mut self, kind: &str) -> PathBuf {
        let path = self.dir.join(format!("{kind}-{}.seg.tmp", self.next_seq));
        self.next_seq += 1;
        path
    }
}

impl Drop for Preallocator {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Release);
        if let Some(Ok(Ok(prepared))) = self.pending.take().map(JoinHandle::join) {
            // Unused; the next open would delete it anyway, this just keeps the directory tidy.
            drop(std::fs::remove_file(prepared.path));
        }
    }
}

/// Creates `path` at `bytes` with its blocks reserved and fsyncs it (data and size) once. On
/// failure the partial file is removed: a preparation that ran out of space must not keep the
/// space it took, or a nearly full disk becomes a full one for everything else on it.
fn prepare(path: PathBuf, bytes: u64, cancel: &AtomicBool) -> io::Result<PreparedSegment> {
    let prepared = create(&path, bytes, cancel);
    if prepared.is_err() {
        let _ = std::fs::remove_file(&path);
    }
    prepared
}

fn create(path: &Path, bytes: u64, cancel: &AtomicBool) -> io::Result<PreparedSegment> {
    let path = path.to_path_buf();
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
    if !reserve(&file, bytes)? {
        fill_zeros(&file, bytes, cancel)?;
    }
    file.sync_all()?;
    Ok(PreparedSegment { path, file, recycled: false })
}

/// Reserves `bytes` of blocks, setting the size: `fallocate` mode 0. False where the file
/// system cannot (EOPNOTSUPP); any other failure, ENOSPC first, is an error.
fn reserve(file: &File, bytes: u64) -> io::Result<bool> {
    let len = libc::off_t::try_from(bytes).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: plain syscall on a valid, owned fd; no memory is passed.
    if unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) } == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EOPNOTSUPP) {
        return Ok(false);
    }
    Err(err)
}

fn fill_zeros(file: &File, bytes: u64, cancel: &AtomicBool) -> io::Result<()> {
    let zeros = vec![0u8; ZERO_FILL_CHUNK_BYTES];
    let mut pos = 0;
    while pos < bytes {
        if cancel.load(Ordering::Acquire) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "segment preallocation cancelled"));
        }
        let n = (bytes - pos).min(zeros.len() as u64) as usize;
        file.write_all_at(&zeros[..n], pos)?;
        pos += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tmpfs of `bytes` at `path`, unmounted on drop (the tests run as root, as CI does).
    struct Tmpfs(PathBuf);

    impl Tmpfs {
        fn mount(path: &Path, bytes: u64) -> Tmpfs {
            std::fs::create_dir_all(path).unwrap();
            let status = std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
                .arg(path)
                .status()
                .expect("running mount");
            assert!(status.success(), "mounting a tmpfs at {} needs root", path.display());
            Tmpfs(path.to_path_buf())
        }
    }

    impl Drop for Tmpfs {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }

    fn free_bytes(dir: &Path) -> u64 {
        let out = std::process::Command::new("df").args(["-B1", "--output=avail"]).arg(dir).output().unwrap();
        String::from_utf8_lossy(&out.stdout).lines().nth(1).unwrap().trim().parse().unwrap()
    }

    /// Regression (issue 13 reproduction 6: a node could not restart on a full disk): a
    /// segment fill that runs out of space kept its partial file, so a nearly full disk became
    /// a full one; and the failure stuck, so the log could not roll even after space was freed.
    #[test]
    fn a_fill_out_of_space_gives_its_space_back_and_is_retried_when_taken() {
        const MIB: u64 = 1024 * 1024;
        let root = tempfile::tempdir().unwrap();
        let fs = Tmpfs::mount(&root.path().join("fs"), 8 * MIB);
        let ballast = fs.0.join("ballast");
        std::fs::write(&ballast, vec![1u8; 6 * MIB as usize]).unwrap();
        let free_before = free_bytes(&fs.0);
        let mut prealloc = Preallocator::new(&fs.0, 4 * MIB, 0);
        prealloc.start().unwrap();
        let failed = prealloc.pending.take().unwrap().join().unwrap();
        assert!(failed.is_err(), "4 MiB cannot fit in {free_before} bytes");
        assert_eq!(free_bytes(&fs.0), free_before, "the failed fill kept space");
        // Space is freed; the next take succeeds although the background fill had failed.
        std::fs::remove_file(&ballast).unwrap();
        prealloc.pending = Some(std::thread::spawn(move || failed));
        let prepared = prealloc.take().expect("a segment once space is free");
        assert_eq!(prepared.file.metadata().unwrap().len(), 4 * MIB);
    }
}

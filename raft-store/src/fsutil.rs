//! Small file-system primitives with explicit durability: atomic replace, directory fsync,
//! zero-filling and the directory lock. Shared with the broker, whose checkpoint uses
//! `write_file_atomic` too, so both agree on what "durable" means.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::limits::ZERO_FILL_CHUNK_BYTES;

/// Replaces `path` with `bytes` atomically and durably: write a temporary file beside it, fsync
/// it, rename it over `path`, fsync the directory. After a crash `path` holds either the old or
/// the new content, never a mix, and once this returns the new content survives a crash.
pub fn write_file_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = tmp_path(path);
    {
        let mut file = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    fsync_dir(parent_dir(path))
}

/// Fsyncs a directory, making file creations, renames and deletions in it durable.
pub fn fsync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

/// `<path>.tmp`: the scratch name `write_file_atomic` renames from. Leftovers are harmless and
/// the log store deletes `*.tmp` files in its directory at open.
pub(crate) fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
}

/// The directory holding `path`; `Path::parent` yields "" for a bare file name.
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Writes zeros over `[from, to)` of `file`, skipping chunks that already read as zero so that
/// wiping a mostly-empty pre-written tail costs reads, not writes. Returns the bytes rewritten.
/// The caller fsyncs.
pub(crate) fn zero_range(file: &File, from: u64, to: u64) -> io::Result<u64> {
    let zeros = vec![0u8; ZERO_FILL_CHUNK_BYTES];
    let mut buf = vec![0u8; ZERO_FILL_CHUNK_BYTES];
    let mut pos = from;
    let mut rewritten = 0;
    while pos < to {
        let n = (to - pos).min(ZERO_FILL_CHUNK_BYTES as u64) as usize;
        file.read_exact_at(&mut buf[..n], pos)?;
        if buf[..n].iter().any(|&b| b != 0) {
            file.write_all_at(&zeros[..n], pos)?;
            rewritten += n as u64;
        }
        pos += n as u64;
    }
    Ok(rewritten)
}

/// Position of the first non-zero byte in `[from, to)`, if any.
pub(crate) fn first_nonzero(file: &File, from: u64, to: u64) -> io::Result<Option<u64>> {
    let mut buf = vec![0u8; ZERO_FILL_CHUNK_BYTES];
    let mut pos = from;
    while pos < to {
        let n = (to - pos).min(ZERO_FILL_CHUNK_BYTES as u64) as usize;
        file.read_exact_at(&mut buf[..n], pos)?;
        if let Some(i) = buf[..n].iter().position(|&b| b != 0) {
            return Ok(Some(pos + i as u64));
        }
        pos += n as u64;
    }
    Ok(None)
}

/// Takes an exclusive `flock` on `<dir>/LOCK`, so two stores can never write one log (the broker
/// locks its data directory the same way). The lock lives as long as the returned file (and
/// goes away with the process); None if another process holds it.
pub fn lock_dir(dir: &Path) -> io::Result<Option<File>> {
    let file =
        OpenOptions::new().read(true).write(true).create(true).truncate(false).open(dir.join("LOCK"))?;
    // SAFETY: flock on a file descriptor we own; no memory is passed.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(Some(file));
    }
    let err = io::Error::last_os_error();
    if err.kind() == io::ErrorKind::WouldBlock {
        return Ok(None);
    }
    Err(err)
}

//! What a node's files really cost on disk: allocated blocks (`st_blocks` × 512), not file
//! lengths, because partition segments are sparse files as long as a whole segment.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};

/// Allocated bytes of every file and directory under `dir` (not `dir` itself).
pub fn allocated_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += meta.blocks() * 512;
        if meta.is_dir() {
            total += allocated_bytes(&entry.path())?;
        }
    }
    Ok(total)
}

/// Every file under `dir`, at any depth.
pub fn files_under(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            out.extend(files_under(&path)?);
        } else {
            out.push(path);
        }
    }
    Ok(out)
}

/// Allocated bytes of a node's partition files: every `partitions` directory (one per
/// checkpoint generation) under its data directory. Fails if there is none.
pub fn partition_file_bytes(data_dir: &Path) -> Result<u64> {
    let mut roots = Vec::new();
    find_partition_roots(data_dir, &mut roots)?;
    ensure!(!roots.is_empty(), "no partitions directory under {}", data_dir.display());
    roots.iter().map(|r| allocated_bytes(r)).sum()
}

fn find_partition_roots(dir: &Path, found: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry?;
        if entry.metadata()?.is_dir() {
            if entry.file_name() == "partitions" {
                found.push(entry.path());
            } else {
                find_partition_roots(&entry.path(), found)?;
            }
        }
    }
    Ok(())
}

/// Bytes an unprivileged writer may still use on the file system holding `path` (statvfs
/// `f_bavail` × `f_frsize`: what the broker's free-space guard compares with its reserve).
pub fn available_bytes(path: &Path) -> Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: statvfs fills the zeroed struct it is given; the path is NUL-terminated.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) };
    ensure!(rc == 0, "statvfs {}: {}", path.display(), std::io::Error::last_os_error());
    Ok(stat.f_bavail as u64 * stat.f_frsize as u64)
}

/// A tmpfs of a fixed size mounted for one test (the harness runs as root, as CI does), so a
/// test can fill a real file system without touching the machine's disk. Unmounted on drop;
/// anything that runs on it (a broker) must be stopped first, i.e. declared after it.
pub struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `bytes` at `path` (created). Fails, saying why, where mounting is not
    /// allowed: a test that needs a full file system must not pass without one.
    pub fn mount(path: &Path, bytes: u64) -> Result<Tmpfs> {
        std::fs::create_dir_all(path)?;
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(path)
            .output()
            .context("running mount")?;
        ensure!(
            out.status.success(),
            "mounting a {bytes}-byte tmpfs at {} failed (this test needs root): {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(Tmpfs { path: path.to_path_buf() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = std::process::Command::new("umount").arg(&self.path).status();
        if !unmounted.is_ok_and(|s| s.success()) {
            // Something still holds it open: detach it now, it goes when they do.
            let _ = std::process::Command::new("umount").arg("-l").arg(&self.path).status();
        }
    }
}

/// Grows a file at `path` (fallocate) until the file system holding it has at most
/// `left_bytes` available, to take space away from a test's file system; deleting the file
/// gives it back. Others may be writing meanwhile (a broker preparing its next Raft log
/// segment), so it re-reads the free space after each step instead of trusting one reading.
pub fn ballast(path: &Path, left_bytes: u64) -> Result<()> {
    use std::os::unix::io::AsRawFd;
    const ATTEMPTS: usize = 100;
    let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    for _ in 0..ATTEMPTS {
        let free = available_bytes(path)?;
        if free <= left_bytes {
            return Ok(());
        }
        let at = file.metadata()?.len();
        // SAFETY: plain syscall on a valid, owned fd.
        let rc = unsafe {
            libc::fallocate(file.as_raw_fd(), 0, at as libc::off_t, (free - left_bytes) as libc::off_t)
        };
        let err = std::io::Error::last_os_error();
        ensure!(
            rc == 0 || err.raw_os_error() == Some(libc::ENOSPC),
            "fallocate at {}: {err}",
            path.display()
        );
    }
    anyhow::bail!("{} never got down to {left_bytes} bytes free", path.display())
}

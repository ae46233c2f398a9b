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

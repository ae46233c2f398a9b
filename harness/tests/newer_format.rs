//! A data directory written by a newer build (issue 33): the node stops at start with a
//! message naming the file, the version found and the versions this build reads, and writes
//! nothing into the directory, so the newer build can still be started on it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};
use harness::{Broker, BrokerOptions};

/// Every file under `dir` with its bytes' CRC, to tell whether a start wrote anything.
fn files(dir: &Path) -> Result<BTreeMap<PathBuf, (u64, u32)>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at)? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path)?;
                out.insert(path, (bytes.len() as u64, crc32c::crc32c(&bytes)));
            }
        }
    }
    Ok(out)
}

fn checkpoint_of(data_dir: &Path) -> Result<PathBuf> {
    let state = data_dir.join("state");
    let mut generations: Vec<PathBuf> = std::fs::read_dir(&state)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("checkpoint").exists())
        .collect();
    generations.sort();
    Ok(generations.pop().context("a checkpoint after SIGTERM")?.join("checkpoint"))
}

#[test]
fn a_checkpoint_of_a_newer_format_stops_the_node_and_nothing_is_written() -> Result<()> {
    let mut broker = Broker::start(BrokerOptions::default())?;
    let status = broker.terminate()?;
    ensure!(status.success(), "SIGTERM: {status}");
    let path = checkpoint_of(&broker.data_dir())?;
    let mut bytes = std::fs::read(&path)?;
    bytes[4..8].copy_from_slice(&14u32.to_be_bytes());
    std::fs::write(&path, &bytes)?;
    let before = files(&broker.data_dir())?;

    // `restart` reaps a node that exits before it is ready and names its exit status.
    let refused = broker.restart().err().context("a node started on a checkpoint of format 14")?;
    let refused = format!("{refused:#}");
    ensure!(refused.contains("exited before ready (exit status: 1)"), "{refused}");
    let want = format!("{}: checkpoint format version 14 is not one this build reads (7–13", path.display());
    let log = std::fs::read_to_string(broker.log_path())?;
    ensure!(log.contains(&want), "want {want:?} in the log:\n{}", broker.log_tail(20));
    let after = files(&broker.data_dir())?;
    ensure!(before == after, "the failed start changed the data directory");
    Ok(())
}

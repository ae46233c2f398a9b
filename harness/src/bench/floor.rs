//! The hardware floor a write can not beat, measured in the same run as the benchmark: a
//! loopback TCP round trip and an fdatasync of a preallocated, pre-written file (DESIGN §7).

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::stats::Percentiles;

/// Round trips timed for the TCP floor.
pub const RTT_SAMPLES: usize = 10_000;
/// fdatasync calls timed for the disk floor.
pub const FSYNC_SAMPLES: usize = 1_000;
/// Size of the preallocated file, in bytes (each sample overwrites the next 4 KiB block).
const FSYNC_FILE_BYTES: usize = 64 * 1024 * 1024;
const FSYNC_BLOCK_BYTES: usize = 4096;

/// Loopback TCP round trip of one byte, TCP_NODELAY on both sides.
pub fn loopback_rtt() -> Result<Percentiles> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut stream, _) = listener.accept()?;
        stream.set_nodelay(true)?;
        let mut byte = [0u8; 1];
        while stream.read(&mut byte)? == 1 {
            stream.write_all(&byte)?;
        }
        Ok(())
    });
    let mut stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    let mut samples = Vec::with_capacity(RTT_SAMPLES);
    let mut byte = [7u8; 1];
    for _ in 0..RTT_SAMPLES {
        let start = Instant::now();
        stream.write_all(&byte)?;
        stream.read_exact(&mut byte)?;
        samples.push(start.elapsed());
    }
    drop(stream);
    echo.join().expect("echo thread")?;
    Ok(Percentiles::of(samples))
}

/// fdatasync after a 4 KiB overwrite inside a file that was fully written and synced first, so
/// no sync has to update file size or extent metadata.
pub fn preallocated_fdatasync(dir: &Path) -> Result<Percentiles> {
    let file_path = tempfile::Builder::new()
        .prefix("fsync-floor-")
        .tempfile_in(dir)
        .with_context(|| format!("creating a file in {}", dir.display()))?;
    let file: &File = file_path.as_file();
    let chunk = vec![0u8; 1024 * 1024];
    for i in 0..FSYNC_FILE_BYTES / chunk.len() {
        file.write_all_at(&chunk, (i * chunk.len()) as u64)?;
    }
    file.sync_all()?;
    let block = vec![0xabu8; FSYNC_BLOCK_BYTES];
    let mut samples: Vec<Duration> = Vec::with_capacity(FSYNC_SAMPLES);
    for i in 0..FSYNC_SAMPLES {
        let offset = (i * FSYNC_BLOCK_BYTES % FSYNC_FILE_BYTES) as u64;
        file.write_all_at(&block, offset)?;
        let start = Instant::now();
        file.sync_data()?;
        samples.push(start.elapsed());
    }
    Ok(Percentiles::of(samples))
}

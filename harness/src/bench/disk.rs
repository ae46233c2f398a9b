//! The disk benchmark of issue 13: many one-record partitions on a spawned three-node cluster,
//! with whole-segment preallocation (`log.preallocate=true`, the old footprint) and without
//! (blocks reserved step by step), reporting what each node's partition files cost in real
//! blocks and the produce latency of the first and the second record of every partition.
//! Also the fdatasync of the three ways a file can grow, which is why only the Raft log keeps
//! full preallocation. It reports figures and asserts nothing.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{FutureProducer, FutureRecord};

use super::stats::Percentiles;
use crate::disk::{allocated_bytes, partition_file_bytes};
use crate::kafka::client_config;
use crate::{Cluster, ClusterOptions};

/// One cluster run.
#[derive(Debug, Clone)]
pub struct Variant {
    pub name: &'static str,
    pub segment_bytes: u64,
    pub preallocate: bool,
}

#[derive(Debug, Clone)]
pub struct DiskRow {
    pub variant: Variant,
    /// Per node: (partition files, whole data directory), allocated bytes.
    pub per_node: Vec<(u64, u64)>,
    /// Latency of the first record of each partition (creates its first segment) and of the
    /// second (appends to it).
    pub first: Percentiles,
    pub second: Percentiles,
}

/// Runs one variant: a fresh cluster of `nodes` from `binary`, one topic of `partitions`
/// partitions, two records of `record_bytes` to each, one at a time with acks=all.
pub async fn run(
    binary: &Path,
    nodes: u64,
    partitions: i32,
    record_bytes: usize,
    variant: Variant,
) -> Result<DiskRow> {
    let options = ClusterOptions { binary: Some(binary.to_path_buf()), ..ClusterOptions::new(nodes) }
        .config("log.segment.bytes", variant.segment_bytes)
        .config("log.preallocate", variant.preallocate);
    let mut cluster = Cluster::start_with(options)?;
    eprintln!("{}: cluster in {}", variant.name, cluster.root().display());
    let bootstrap = cluster.bootstrap();
    create_topic(&bootstrap, "disk", partitions, nodes as i32).await?;
    let producer: FutureProducer = client_config(&bootstrap)
        .set("acks", "all")
        .set("linger.ms", "0")
        .set("message.timeout.ms", "60000")
        .create()?;
    let payload = vec![b'x'; record_bytes];
    let mut rounds = Vec::new();
    for _ in 0..2 {
        let mut samples = Vec::with_capacity(partitions as usize);
        for p in 0..partitions {
            let record = FutureRecord::<(), _>::to("disk").partition(p).payload(&payload);
            let sent = Instant::now();
            producer.send(record, Duration::from_secs(60)).await.map_err(|(e, _)| e)?;
            samples.push(sent.elapsed());
        }
        rounds.push(Percentiles::of(samples));
    }
    cluster.assert_digests_equal()?; // every node applied every record before it is measured
    let mut per_node = Vec::new();
    for id in cluster.ids() {
        let data = cluster.data_dir(id);
        per_node.push((partition_file_bytes(&data)?, allocated_bytes(&data)?));
    }
    drop(cluster); // removes the directories
    Ok(DiskRow { variant, per_node, first: rounds[0], second: rounds[1] })
}

async fn create_topic(bootstrap: &str, name: &str, partitions: i32, replication: i32) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create()?;
    let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(replication));
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(120)));
    for result in admin.create_topics([&topic], &options).await? {
        result.map_err(|(name, code)| anyhow::anyhow!("creating {name}: {code:?}"))?;
    }
    Ok(())
}

/// How a file under test grows before each 4 KiB write + fdatasync.
#[derive(Debug, Clone, Copy)]
pub enum Growth {
    /// Written with zeros and synced first (the Raft log's segments).
    PreWritten,
    /// Sparse at full length, blocks reserved with fallocate in 64 KiB steps (partition
    /// segments now).
    ReservedSteps,
    /// Appended to, the file length growing with every write.
    Appending,
}

const SYNC_BLOCK_BYTES: usize = 4096;
const SYNC_SAMPLES: usize = 300;
const SYNC_FILE_BYTES: u64 = (SYNC_BLOCK_BYTES * SYNC_SAMPLES) as u64;
const RESERVE_STEP_BYTES: u64 = 64 * 1024;

/// fdatasync after each of SYNC_SAMPLES 4 KiB writes at increasing offsets of a file in `dir`.
pub fn fdatasync_by_growth(dir: &Path, growth: Growth) -> Result<Percentiles> {
    let temp = tempfile::Builder::new()
        .prefix("fsync-growth-")
        .tempfile_in(dir)
        .with_context(|| format!("creating a file in {}", dir.display()))?;
    let file: &File = temp.as_file();
    match growth {
        Growth::PreWritten => {
            file.write_all_at(&vec![0u8; SYNC_FILE_BYTES as usize], 0)?;
            file.sync_all()?;
        }
        Growth::ReservedSteps => {
            file.set_len(SYNC_FILE_BYTES)?;
            file.sync_all()?;
        }
        Growth::Appending => {}
    }
    let block = vec![0xabu8; SYNC_BLOCK_BYTES];
    let mut reserved = 0u64;
    let mut samples = Vec::with_capacity(SYNC_SAMPLES);
    for i in 0..SYNC_SAMPLES {
        let offset = (i * SYNC_BLOCK_BYTES) as u64;
        if matches!(growth, Growth::ReservedSteps) && offset + SYNC_BLOCK_BYTES as u64 > reserved {
            // SAFETY: plain syscall on a valid, owned fd.
            let rc = unsafe {
                libc::fallocate(
                    file.as_raw_fd(),
                    0,
                    reserved as libc::off_t,
                    RESERVE_STEP_BYTES as libc::off_t,
                )
            };
            anyhow::ensure!(rc == 0, "fallocate: {}", std::io::Error::last_os_error());
            reserved += RESERVE_STEP_BYTES;
        }
        file.write_all_at(&block, offset)?;
        let start = Instant::now();
        file.sync_data()?;
        samples.push(start.elapsed());
    }
    Ok(Percentiles::of(samples))
}

/// Where the fdatasync measurement writes: beside the clusters (the system temp directory).
pub fn sync_dir() -> PathBuf {
    std::env::temp_dir()
}

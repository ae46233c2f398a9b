//! `GET /digest`: a content hash of every partition as applied on this node, for checking
//! that replicas which applied the same log hold the same bytes (STYLE: "replay a log on
//! several replicas and compare digests").
//!
//! Everything in it comes from the Raft log, so it is identical on replicas at the same
//! applied index: offsets from the applied state, topic ids chosen by the leader and carried
//! in the entry, and batch bytes stamped (baseOffset, partitionLeaderEpoch, LogAppendTime)
//! by the leader before proposing. Segment boundaries are not: they follow each node's
//! `log.segment.bytes` and retention, so the hash starts at the batch holding the log start
//! offset, whatever precedes it in the same segment file.

use std::io;

use serde::Serialize;

use crate::limits;
use crate::raft::applied::AppliedView;
use crate::raft::sm_store::Applied;
use crate::storage::partitions::Partitions;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Digest {
    pub node_id: u64,
    /// The Raft group whose partitions these are (0 unless `?group=` names another).
    pub group: u32,
    /// Index of the last applied Raft entry the digest reflects (null before the first).
    pub last_applied: Option<u64>,
    pub partitions: Vec<PartitionDigest>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionDigest {
    pub topic: String,
    /// The topic id as 32 lowercase hex digits (as in the partition directory names).
    pub topic_id: String,
    pub partition: i32,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    /// Batches and bytes hashed: the batches holding offsets in
    /// [log_start_offset, log_end_offset).
    pub batches: u64,
    pub bytes: u64,
    /// CRC32C chained over those bytes, 8 lowercase hex digits; null if this node has no
    /// partition files for a partition its state lists (itself a divergence).
    pub hash: Option<String>,
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Computes the digest under the applied-state read lock, so offsets, bytes and
/// `last_applied` all describe the same applied entry. Apply waits meanwhile (it takes the
/// write lock); the digest is a test and operations tool, not on any client path. Blocking:
/// call it from `spawn_blocking`.
pub fn compute((node_id, group): (u64, u32), view: &AppliedView) -> io::Result<Digest> {
    view.with_partitions(|applied, partitions| digest_of((node_id, group), applied, partitions))
}

fn digest_of((node_id, group): (u64, u32), applied: &Applied, partitions: &Partitions) -> io::Result<Digest> {
    let mut out = Vec::new();
    for (name, topic) in &applied.state.topics {
        for (p, ps) in topic.partitions.iter().enumerate() {
            let mut digest = PartitionDigest {
                topic: name.clone(),
                topic_id: hex(&topic.topic_id),
                partition: p as i32,
                log_start_offset: ps.log_start_offset,
                log_end_offset: ps.log_end_offset,
                batches: 0,
                bytes: 0,
                hash: None,
            };
            if let Some(log) = partitions.get(&topic.topic_id, p as i32) {
                let log = log.lock();
                let mut crc = 0u32;
                let (batches, bytes) = log.visit_stored_bytes(
                    ps.log_start_offset,
                    ps.log_end_offset,
                    limits::ADMIN_DIGEST_READ_CHUNK_BYTES,
                    &mut |chunk| crc = crc32c::crc32c_append(crc, chunk),
                )?;
                digest.batches = batches;
                digest.bytes = bytes;
                digest.hash = Some(format!("{crc:08x}"));
            }
            out.push(digest);
        }
    }
    Ok(Digest { node_id, group, last_applied: applied.last_applied.map(|l| l.index), partitions: out })
}

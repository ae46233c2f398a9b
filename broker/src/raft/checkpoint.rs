//! Checkpoints: the broker state plus the Raft log id it covers, written atomically.
//!
//! Format: `[magic "OLCP"][format version u32][bincode body][crc32c u32]`. A checkpoint is
//! written only after every partition file has been flushed, so on start the broker can load
//! it, truncate partitions to its offsets and re-apply the Raft log after it (DESIGN §3). It
//! is also the snapshot openraft sees: the log is purged only below it.

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{LogId, StoredMembership};
use onelog_state::BrokerState;

const MAGIC: &[u8; 4] = b"OLCP";
// 2: BrokerState gained producer state (idempotent producers).
// 3: BrokerState gained committed offsets of consumer groups.
// 4: consumer groups gained their last completed generation and members.
// 5: transactions: transactional ids, open transactions per partition, the aborted index.
// 6: partitions gained the replicas of an explicit CreatePartitions assignment.
// 7: client quotas, dynamic configs (both came without a bump), ACL bindings and SCRAM
//    credentials.
const FORMAT_VERSION: u32 = 7;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Checkpoint {
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
    pub state: BrokerState,
}

pub fn encode(checkpoint: &Checkpoint) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
    bincode::serialize_into(&mut out, checkpoint).expect("serializing to a Vec cannot fail");
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

pub fn decode(bytes: &[u8]) -> io::Result<Checkpoint> {
    let invalid = |why: &str| io::Error::new(io::ErrorKind::InvalidData, format!("checkpoint: {why}"));
    if bytes.len() < 12 || &bytes[..4] != MAGIC {
        return Err(invalid("bad magic or too short"));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().expect("4 bytes")) {
        return Err(invalid("CRC mismatch"));
    }
    let version = u32::from_be_bytes(body[4..8].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        return Err(invalid(&format!("unknown format version {version}")));
    }
    bincode::deserialize(&body[8..]).map_err(|e| invalid(&e.to_string()))
}

pub fn load(path: &Path) -> io::Result<Option<(Checkpoint, Vec<u8>)>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some((decode(&bytes)?, bytes))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

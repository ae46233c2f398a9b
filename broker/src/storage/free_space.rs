//! The free-space guard: whether the data directory's file system still has room for client
//! writes (DESIGN §8: what a client can cost is bounded before it is paid, disk included).
//!
//! Below the reserve (`log.dir.free.bytes.min`) the leader refuses Produce with
//! KAFKA_STORAGE_ERROR, which Kafka clients retry (Java's `KafkaStorageException` is a
//! retriable `InvalidMetadataException`; librdkafka refreshes and retries), while reads, group
//! and transaction coordination and the Raft protocol go on: the reserve is the margin the Raft
//! log, checkpoints and retention (which frees space) still write into. Checked per request
//! with one statvfs (a microsecond against a ~0.4 ms commit floor), so the guard lifts by
//! itself the moment space is freed or the reserve is lowered.

use std::path::Path;

use crate::incident::Incident;

/// Produce requests refused for space, and failed statvfs calls: counted, logged at a bounded
/// rate (a refused producer retries quickly).
static REFUSED: Incident = Incident::new();
static STATVFS_FAILED: Incident = Incident::new();

/// Bytes an unprivileged writer may still use on the file system holding `dir`.
pub fn available_bytes(dir: &Path) -> std::io::Result<u64> {
    let s = rustix::fs::statvfs(dir)?;
    Ok(s.f_bavail.saturating_mul(s.f_frsize))
}

/// Why a write must be refused: `Some(message)` when the file system holding `dir` has less
/// than `reserve_bytes` available. A failing statvfs refuses nothing (logged): the guard must
/// not turn a monitoring failure into an outage; a real write error stays fatal as ever.
pub fn refusal(dir: &Path, reserve_bytes: u64) -> Option<String> {
    if reserve_bytes == 0 {
        return None;
    }
    let available = match available_bytes(dir) {
        Ok(bytes) => bytes,
        Err(e) => {
            STATVFS_FAILED.record(|t| {
                tracing::warn!(dir = %dir.display(), error = %e, not_logged = t.suppressed,
                    "statvfs of the log dir failed")
            });
            return None;
        }
    };
    if available >= reserve_bytes {
        return None;
    }
    REFUSED.record(|t| {
        tracing::warn!(dir = %dir.display(), available, reserve_bytes, not_logged = t.suppressed,
            refused = t.total, "log dir below log.dir.free.bytes.min: refusing writes with KAFKA_STORAGE_ERROR");
    });
    Some(format!(
        "log dir {} has {available} bytes free, below log.dir.free.bytes.min={reserve_bytes}",
        dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_only_below_the_reserve() {
        let dir = tempfile::tempdir().unwrap();
        let available = available_bytes(dir.path()).unwrap();
        assert!(available > 0);
        assert_eq!(refusal(dir.path(), 0), None);
        assert_eq!(refusal(dir.path(), 1), None);
        let message = refusal(dir.path(), u64::MAX).expect("nothing has u64::MAX bytes free");
        assert!(message.contains("log.dir.free.bytes.min"), "{message}");
    }
}

//! The free-space guard: whether the data directory's file system still has room for client
//! writes (DESIGN §8: what a client can cost is bounded before it is paid, disk included).
//!
//! Below the reserve (`log.dir.free.bytes.min`) the leader refuses Produce with
//! KAFKA_STORAGE_ERROR, which Kafka clients retry (Java's `KafkaStorageException` is a
//! retriable `InvalidMetadataException`; librdkafka refreshes and retries), while reads, group
//! and transaction coordination and the Raft protocol go on: the reserve is the margin the Raft
//! log, checkpoints and retention (which frees space) still write into. Checked per request
//! against a statvfs reading at most `FREE_SPACE_READING_MAX_AGE_MS` old, so the guard lifts
//! by itself soon after space is freed or the reserve is lowered.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::incident::Incident;
use crate::limits;

/// Produce requests refused for space, and failed statvfs calls: counted, logged at a bounded
/// rate (a refused producer retries quickly).
static REFUSED: Incident = Incident::new();
static STATVFS_FAILED: Incident = Incident::new();

/// Bytes an unprivileged writer may still use on the file system holding `dir`.
pub fn available_bytes(dir: &Path) -> std::io::Result<u64> {
    let s = rustix::fs::statvfs(dir)?;
    Ok(s.f_bavail.saturating_mul(s.f_frsize))
}

/// The last statvfs reading. A statvfs per Produce request was 1–2 % of a loaded leader's CPU
/// (issue 31's profile); what a reading can miss is bounded by what the node writes in
/// `FREE_SPACE_READING_MAX_AGE_MS`, far below any sensible reserve.
static LAST_READING: Mutex<Option<Reading>> = Mutex::new(None);

struct Reading {
    dir: PathBuf,
    at: Instant,
    available: u64,
}

/// [`available_bytes`], from a reading of the same `dir` younger than the limit if there is one.
fn available_bytes_recent(dir: &Path) -> std::io::Result<u64> {
    recent(&LAST_READING, dir, || available_bytes(dir))
}

/// The reading in `slot` if it is of `dir` and young enough, else a new one from `read`.
fn recent(
    slot: &Mutex<Option<Reading>>,
    dir: &Path,
    read: impl FnOnce() -> std::io::Result<u64>,
) -> std::io::Result<u64> {
    let max_age = Duration::from_millis(limits::FREE_SPACE_READING_MAX_AGE_MS);
    let mut last = slot.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(reading) = last.as_ref().filter(|r| r.dir == dir && r.at.elapsed() < max_age) {
        return Ok(reading.available);
    }
    let available = read()?;
    *last = Some(Reading { dir: dir.to_path_buf(), at: Instant::now(), available });
    Ok(available)
}

/// Why a write must be refused: `Some(message)` when the file system holding `dir` has less
/// than `reserve_bytes` available. A failing statvfs refuses nothing (logged): the guard must
/// not turn a monitoring failure into an outage; a real write error stays fatal as ever.
pub fn refusal(dir: &Path, reserve_bytes: u64) -> Option<String> {
    if reserve_bytes == 0 {
        return None;
    }
    let available = match available_bytes_recent(dir) {
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

    /// A reading is reused for its directory only, and only while it is young.
    #[test]
    fn a_reading_is_reused_only_while_young_and_for_its_directory() {
        let (a, b) = (Path::new("/data/a"), Path::new("/data/b"));
        let slot = |dir: &Path, age_ms: u64| {
            let at = Instant::now().checked_sub(Duration::from_millis(age_ms)).expect("uptime");
            Mutex::new(Some(Reading { dir: dir.to_path_buf(), at, available: 7 }))
        };
        let fresh = || Ok(9);
        assert_eq!(recent(&slot(a, 0), a, fresh).unwrap(), 7, "young, same directory");
        assert_eq!(recent(&slot(a, 0), b, fresh).unwrap(), 9, "another directory");
        let old = slot(a, limits::FREE_SPACE_READING_MAX_AGE_MS + 1);
        assert_eq!(recent(&old, a, fresh).unwrap(), 9, "too old");
        assert_eq!(recent(&old, a, || Ok(11)).unwrap(), 9, "the new reading is kept");
        assert_eq!(recent(&Mutex::new(None), a, fresh).unwrap(), 9, "no reading yet");
    }
}

//! Small metadata files beside the segments: the vote, the last purged log id and the committed
//! log id. Each holds one bincode value framed as `[crc32c u32][len u32][bytes]` so that damage
//! is detected instead of silently decoded. The high 4 bits of `len` are the frame's format
//! version: 0 is onelog 0.1.0's (its files are at most `META_FILE_BYTES_MAX` long), and a frame
//! whose CRC holds in a higher version is refused as written by a newer build.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::LogStoreError;
use crate::fsutil::write_file_atomic;
use crate::limits::META_FILE_BYTES_MAX;

/// Raft vote (term, voted-for, committed flag). Must be durable before `save_vote` returns.
pub(crate) const VOTE_FILE: &str = "vote";
/// Last purged log id: entries up to it are gone even if bytes of them remain in a segment.
pub(crate) const PURGED_FILE: &str = "purged";
/// Last committed log id, an optimization openraft can do without (see `CommittedFile`).
pub(crate) const COMMITTED_FILE: &str = "committed";

const FRAME_HEADER_BYTES: usize = 8;
/// The frame format version this build writes and the newest it reads (see the module doc).
const META_FORMAT_VERSION: u32 = 0;
const VERSION_SHIFT: u32 = 28;

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, LogStoreError> {
    let body = bincode::serialize(value)?;
    let len = u32::try_from(body.len()).map_err(|_| LogStoreError::Corrupt("metadata too large".into()))?;
    let mut out = Vec::with_capacity(FRAME_HEADER_BYTES + body.len());
    out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    out.extend_from_slice(&(len | META_FORMAT_VERSION << VERSION_SHIFT).to_le_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// Decodes a frame; the error says why the bytes are not a valid frame.
fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    if bytes.len() < FRAME_HEADER_BYTES {
        return Err(format!("{} bytes, shorter than the frame header", bytes.len()));
    }
    let crc = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes"));
    let word = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
    let (version, len) = (word >> VERSION_SHIFT, (word & ((1 << VERSION_SHIFT) - 1)) as usize);
    let body = bytes.get(FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + len).ok_or("truncated body")?;
    if crc32c::crc32c(body) != crc {
        return Err("crc mismatch".into());
    }
    if version > META_FORMAT_VERSION {
        return Err(format!(
            "format version {version} is not one this build reads (0–{META_FORMAT_VERSION}): written by a newer \
             onelog? Start that build or a newer one on this data directory"
        ));
    }
    bincode::deserialize(body).map_err(|e| e.to_string())
}

/// Reads at most `META_FILE_BYTES_MAX` bytes of `path`; `None` if it does not exist.
fn read_bounded(path: &Path) -> Result<Option<Vec<u8>>, LogStoreError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogStoreError::io_at("opening", path, e)),
    };
    let mut bytes = Vec::new();
    file.take(META_FILE_BYTES_MAX)
        .read_to_end(&mut bytes)
        .map_err(|e| LogStoreError::io_at("reading", path, e))?;
    Ok(Some(bytes))
}

/// Reads a durable metadata file. Damage is an error: these files are written atomically, so a
/// bad frame means the disk lost data we promised to keep.
pub(crate) fn read_meta<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, LogStoreError> {
    let Some(bytes) = read_bounded(path)? else { return Ok(None) };
    decode(&bytes).map(Some).map_err(|why| LogStoreError::Corrupt(format!("{}: {why}", path.display())))
}

/// Replaces a metadata file durably (`write_file_atomic`).
pub(crate) fn write_meta<T: Serialize>(path: &Path, value: &T) -> Result<(), LogStoreError> {
    let bytes = encode(value)?;
    write_file_atomic(path, &bytes).map_err(|e| LogStoreError::io_at("writing", path, e))
}

/// The committed log id, overwritten in place and never fsynced.
///
/// Why no fsync: openraft calls `save_committed` on every commit, and the value is only a hint.
/// If it is lost or torn, `read_committed` returns `None` and openraft re-derives the commit
/// index from the cluster; if it survives but points past the durable log, `LogStore::open`
/// drops it. Either way losing it costs a re-apply, never correctness.
pub(crate) struct CommittedFile {
    file: File,
    path: PathBuf,
}

impl CommittedFile {
    pub fn open(path: &Path) -> Result<Self, LogStoreError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| LogStoreError::io_at("opening", path, e))?;
        Ok(CommittedFile { file, path: path.to_path_buf() })
    }

    /// The stored value; `None` when absent or damaged (see the type's comment).
    pub fn read<T: DeserializeOwned>(&self) -> Result<Option<T>, LogStoreError> {
        let io_err = |e| LogStoreError::io_at("reading", &self.path, e);
        let len = self.file.metadata().map_err(io_err)?.len().min(META_FILE_BYTES_MAX);
        if len == 0 {
            return Ok(None);
        }
        let mut bytes = vec![0u8; len as usize];
        self.file.read_exact_at(&mut bytes, 0).map_err(io_err)?;
        match decode::<Option<T>>(&bytes) {
            Ok(v) => Ok(v),
            Err(why) => {
                tracing::warn!(path = %self.path.display(), why, "ignoring damaged committed log id");
                Ok(None)
            }
        }
    }

    /// Overwrites the value in place. A shorter value leaves stale bytes after the frame, which
    /// the length field makes irrelevant.
    pub fn write<T: Serialize>(&self, value: &Option<T>) -> Result<(), LogStoreError> {
        let bytes = encode(value)?;
        self.file.write_all_at(&bytes, 0).map_err(|e| LogStoreError::io("writing committed log id", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_round_trips_and_rejects_damage() {
        let bytes = encode(&(5u64, 3u64)).unwrap();
        assert_eq!(decode::<(u64, u64)>(&bytes), Ok((5, 3)));
        let mut bad = bytes.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(decode::<(u64, u64)>(&bad), Err("crc mismatch".to_string()));
        assert!(decode::<(u64, u64)>(&bytes[..5]).is_err());
    }

    #[test]
    fn frames_are_0_1_0_s_format_and_a_newer_version_is_refused() {
        let mut bytes = encode(&(5u64, 3u64)).unwrap();
        assert_eq!(bytes[4..8], 16u32.to_le_bytes(), "0.1.0's length word: the body length alone");
        bytes[7] |= 0x20;
        let refused = decode::<(u64, u64)>(&bytes).unwrap_err();
        assert!(refused.starts_with("format version 2 is not one this build reads (0–0)"), "{refused}");
    }
}

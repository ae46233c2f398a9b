//! `LogStoreError`: everything the log store can fail with, and its conversion to openraft's
//! `StorageError` at the trait boundary (openraft treats any storage error as fatal for the node).

use std::io;
use std::path::Path;

use openraft::{AnyError, ErrorSubject, ErrorVerb, NodeId, StorageError, StorageIOError};

/// Errors of the segmented Raft log store.
#[derive(Debug, thiserror::Error)]
pub enum LogStoreError {
    /// An operating-system I/O call failed.
    #[error("log store I/O error while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },

    /// An earlier write or fsync failed; the store refuses all further work (DESIGN §3: never
    /// retry an fsync and report success).
    #[error("log store is poisoned by an earlier fatal I/O error: {0}")]
    Poisoned(String),

    /// Another `LogStore` (in this or another process) holds the directory lock.
    #[error("log directory {0} is locked by another log store")]
    Locked(String),

    /// The options are unusable.
    #[error("invalid log store options: {0}")]
    InvalidOptions(String),

    /// An entry's encoded payload exceeds `entry_bytes_max`.
    #[error("entry {index} encodes to {bytes} bytes, over entry_bytes_max {max}")]
    EntryTooLarge { index: u64, bytes: u64, max: u32 },

    /// An append would leave a hole in, or overlap, the log (openraft never asks for this).
    #[error("append of log index {got} does not continue the log (expected {expected})")]
    NotContiguous { expected: u64, got: u64 },

    /// A truncate would remove entries that were already purged, i.e. committed.
    #[error("truncate at log index {index} would remove purged (committed) entries up to {purged}")]
    TruncatePurged { index: u64, purged: u64 },

    /// Data on disk is inconsistent in a way recovery cannot repair.
    #[error("log store data is corrupt: {0}")]
    Corrupt(String),

    /// bincode failed to encode or decode an entry or a metadata value.
    #[error("log store codec error: {0}")]
    Codec(#[from] bincode::Error),
}

impl LogStoreError {
    /// Wraps an `io::Error` with what we were doing.
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        LogStoreError::Io { context: context.into(), source }
    }

    /// Wraps an `io::Error` that concerns `path`.
    pub(crate) fn io_at(what: &str, path: &Path, source: io::Error) -> Self {
        LogStoreError::io(format!("{what} {}", path.display()), source)
    }

    /// True for failures of the disk itself, which must poison the store when they happen on
    /// the write path; logical errors (bad options, a non-contiguous append) do not.
    pub(crate) fn is_io(&self) -> bool {
        matches!(self, LogStoreError::Io { .. })
    }

    /// A fresh `io::Error` describing this error, for `LogFlushed` callbacks.
    pub(crate) fn to_io_error(&self) -> io::Error {
        let kind = match self {
            LogStoreError::Io { source, .. } => source.kind(),
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, self.to_string())
    }

    /// Converts to openraft's error type, naming what was being done.
    pub fn into_storage_error<NID: NodeId>(
        self,
        subject: ErrorSubject<NID>,
        verb: ErrorVerb,
    ) -> StorageError<NID> {
        StorageError::IO { source: StorageIOError::new(subject, verb, AnyError::new(&self)) }
    }
}

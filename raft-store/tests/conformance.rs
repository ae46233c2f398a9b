//! openraft's storage conformance suite (`openraft::testing::Suite`) against `LogStore`, paired
//! with the minimal in-memory state machine of `common/sm.rs` (the suite tests both halves).

mod common;

use common::sm::MemStateMachine;
use common::{Store, TestConfig};
use openraft::testing::{StoreBuilder, Suite};
use openraft::{ErrorSubject, ErrorVerb, StorageError};
use raft_store::LogStoreOptions;
use tempfile::TempDir;

/// Builds each store in a fresh temporary directory, dropped after the test case.
struct Builder {
    opts: LogStoreOptions,
}

impl StoreBuilder<TestConfig, Store, MemStateMachine, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, Store, MemStateMachine), StorageError<u64>> {
        let dir = tempfile::tempdir()
            .map_err(|e| StorageError::from_io_error(ErrorSubject::Store, ErrorVerb::Write, e))?;
        let store = Store::open(dir.path(), self.opts.clone())
            .map_err(|e| e.into_storage_error(ErrorSubject::Store, ErrorVerb::Read))?;
        Ok((dir, store, MemStateMachine::default()))
    }
}

/// `Suite::test_all` is synchronous and runs each case on its own fresh tokio runtime, so this
/// is a plain `#[test]`, not a `#[tokio::test]`.
#[test]
fn openraft_storage_suite() {
    // Small segments: the suite builds dozens of stores and each pre-writes its segment.
    let opts = LogStoreOptions { segment_bytes: 64 * 1024, ..LogStoreOptions::default() };
    Suite::test_all(Builder { opts }).expect("openraft storage conformance suite");
}

/// The same suite with the smallest segments, so its logs roll over between entries.
#[test]
fn openraft_storage_suite_tiny_segments() {
    let opts = LogStoreOptions {
        segment_bytes: raft_store::limits::SEGMENT_BYTES_MIN,
        ..LogStoreOptions::default()
    };
    Suite::test_all(Builder { opts }).expect("openraft storage conformance suite, tiny segments");
}

/// The same suite with purged segments parked (`retention.rs`): what Raft sees must not
/// change when purged segments stay on disk for another reader.
#[test]
fn openraft_storage_suite_parking_purged_segments() {
    let opts = LogStoreOptions {
        segment_bytes: raft_store::limits::SEGMENT_BYTES_MIN,
        park_purged_segments: true,
        ..LogStoreOptions::default()
    };
    Suite::test_all(Builder { opts }).expect("openraft storage conformance suite, parking");
}

//! A minimal in-memory state machine for tests: it records the applied log id, membership and
//! how many normal entries it applied; its snapshot is the bincode of that record.

use std::io::Cursor;
use std::sync::{Arc, Mutex};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, Entry, EntryPayload, ErrorSubject, ErrorVerb, LogId, RaftSnapshotBuilder, SnapshotMeta,
    StorageError, StoredMembership,
};
use serde::{Deserialize, Serialize};

use super::TestConfig;

type Membership = StoredMembership<u64, BasicNode>;

/// What the state machine holds; also its snapshot format.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SmData {
    pub last_applied: Option<LogId<u64>>,
    pub last_membership: Membership,
    pub applied_normal: u64,
}

#[derive(Debug, Default)]
pub struct SmInner {
    pub data: SmData,
    snapshot: Option<(SnapshotMeta<u64, BasicNode>, Vec<u8>)>,
    snapshot_seq: u64,
}

/// Minimal in-memory state machine: records the applied log id and membership.
#[derive(Debug, Clone, Default)]
pub struct MemStateMachine {
    pub inner: Arc<Mutex<SmInner>>,
}

fn sm_error(e: impl std::error::Error) -> StorageError<u64> {
    StorageError::from_io_error(
        ErrorSubject::StateMachine,
        ErrorVerb::Write,
        std::io::Error::other(e.to_string()),
    )
}

impl RaftSnapshotBuilder<TestConfig> for MemStateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TestConfig>, StorageError<u64>> {
        let mut inner = self.inner.lock().unwrap();
        inner.snapshot_seq += 1;
        let bytes = bincode::serialize(&inner.data).map_err(sm_error)?;
        let meta = SnapshotMeta {
            last_log_id: inner.data.last_applied,
            last_membership: inner.data.last_membership.clone(),
            snapshot_id: format!("snap-{}", inner.snapshot_seq),
        };
        inner.snapshot = Some((meta.clone(), bytes.clone()));
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) })
    }
}

impl RaftStateMachine<TestConfig> for MemStateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId<u64>>, Membership), StorageError<u64>> {
        let inner = self.inner.lock().unwrap();
        Ok((inner.data.last_applied, inner.data.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<()>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<TestConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut inner = self.inner.lock().unwrap();
        let mut replies = Vec::new();
        for entry in entries {
            inner.data.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(_) => inner.data.applied_normal += 1,
                EntryPayload::Membership(m) => {
                    inner.data.last_membership = StoredMembership::new(Some(entry.log_id), m)
                }
            }
            replies.push(());
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        let bytes = snapshot.into_inner();
        let data: SmData = bincode::deserialize(&bytes).map_err(sm_error)?;
        let mut inner = self.inner.lock().unwrap();
        inner.data = data;
        inner.snapshot = Some((meta.clone(), bytes));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TestConfig>>, StorageError<u64>> {
        let inner = self.inner.lock().unwrap();
        Ok(inner.snapshot.as_ref().map(|(meta, bytes)| Snapshot {
            meta: meta.clone(),
            snapshot: Box::new(Cursor::new(bytes.clone())),
        }))
    }
}

//! openraft's state machine storage for onelog: applies committed entries to the broker state
//! and the partition files, takes checkpoints (openraft snapshots), and recovers from them.
//!
//! Readers (Fetch, Metadata, …) share [`Applied`] through [`SmShared`]; apply holds the write
//! lock for one entry at a time, so a reader always sees the state after a whole entry — never
//! half of a multi-partition produce.

use std::io::{self, Cursor};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use openraft::storage::{RaftStateMachine, Snapshot, SnapshotMeta};
use openraft::{AnyError, EntryPayload, RaftSnapshotBuilder, StorageError, StorageIOError};
use tokio::sync::watch;

use super::checkpoint::{self, Checkpoint};
use super::{LogId, NodeAddr, StoredMembership, TypeConfig};
use crate::config::BrokerConfig;
use crate::state::apply::{apply_op, Effect};
use crate::state::command::CommandResponse;
use crate::state::BrokerState;
use crate::storage::partitions::Partitions;

type StorageResult<T> = Result<T, StorageError<u64>>;

/// The applied state as readers see it.
#[derive(Debug, Default)]
pub struct Applied {
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
    pub state: BrokerState,
}

/// State shared between the state machine and the request handlers.
pub struct SmShared {
    pub applied: RwLock<Applied>,
    pub partitions: RwLock<Partitions>,
    /// Index of the last applied entry; Fetch long-polls on it.
    pub applied_index: watch::Sender<u64>,
    /// Client bytes applied since the last checkpoint (drives byte-based checkpoints).
    pub bytes_since_checkpoint: AtomicU64,
    pub config: BrokerConfig,
    dir: PathBuf,
}

impl SmShared {
    fn checkpoint_path(&self) -> PathBuf {
        self.dir.join("checkpoint")
    }
}

fn io_err(e: io::Error) -> StorageError<u64> {
    StorageIOError::write_state_machine(AnyError::new(&e)).into()
}

/// Opens the state machine: loads the checkpoint (if any) and truncates partition files to it.
pub fn open(dir: PathBuf, config: BrokerConfig) -> io::Result<Arc<SmShared>> {
    std::fs::create_dir_all(&dir)?;
    let loaded = checkpoint::load(&dir.join("checkpoint"))?;
    let cp = loaded.map(|(cp, _)| cp).unwrap_or_default();
    tracing::info!(last_applied = ?cp.last_applied, topics = cp.state.topics.len(), "loaded checkpoint");
    let partitions = Partitions::open(&dir.join("partitions"), &cp.state, &config)?;
    let index = cp.last_applied.map_or(0, |l| l.index);
    Ok(Arc::new(SmShared {
        applied: RwLock::new(Applied {
            last_applied: cp.last_applied,
            membership: cp.membership,
            state: cp.state,
        }),
        partitions: RwLock::new(partitions),
        applied_index: watch::channel(index).0,
        bytes_since_checkpoint: AtomicU64::new(0),
        config,
        dir,
    }))
}

#[derive(Clone)]
pub struct StateMachineStore {
    pub shared: Arc<SmShared>,
}

impl StateMachineStore {
    /// Applies one entry's ops to the state and performs their effects on partition files.
    // openraft's StorageError is large; it is the error type the trait returns, so boxing here
    // would only move the allocation.
    #[allow(clippy::result_large_err)]
    fn apply_entry(&self, entry: openraft::Entry<TypeConfig>) -> StorageResult<CommandResponse> {
        let mut applied = self.shared.applied.write().expect("applied lock");
        let mut partitions = self.shared.partitions.write().expect("partitions lock");
        applied.last_applied = Some(entry.log_id);
        let mut response = CommandResponse::default();
        match entry.payload {
            EntryPayload::Blank => {}
            EntryPayload::Membership(m) => applied.membership = StoredMembership::new(Some(entry.log_id), m),
            EntryPayload::Normal(command) => {
                let mut effects: Vec<Effect> = Vec::new();
                let mut bytes = 0u64;
                for op in &command.ops {
                    effects.clear();
                    response.results.push(apply_op(&mut applied.state, op, &mut effects));
                    for effect in &effects {
                        if let Effect::Append { batch, .. } = effect {
                            bytes += batch.len() as u64;
                        }
                    }
                    // An I/O error here is fatal for the node (DESIGN §3): openraft stops.
                    partitions.execute(&applied.state, &effects).map_err(io_err)?;
                }
                self.shared.bytes_since_checkpoint.fetch_add(bytes, Ordering::Relaxed);
            }
        }
        Ok(response)
    }

    /// Flushes partition files, then writes the checkpoint atomically.
    fn write_checkpoint(&self) -> io::Result<(Checkpoint, Vec<u8>)> {
        let checkpoint = {
            let applied = self.shared.applied.read().expect("applied lock");
            Checkpoint {
                last_applied: applied.last_applied,
                membership: applied.membership.clone(),
                state: applied.state.clone(),
            }
        };
        // Data written after the snapshot of the state is flushed too; it lies beyond the
        // checkpointed offsets and is truncated and re-applied on start.
        let logs = self.shared.partitions.read().expect("partitions lock").all();
        for log in logs {
            log.lock().expect("partition lock").flush()?;
        }
        let bytes = checkpoint::encode(&checkpoint);
        raft_store::write_file_atomic(&self.shared.checkpoint_path(), &bytes)?;
        self.shared.bytes_since_checkpoint.store(0, Ordering::Relaxed);
        tracing::info!(last_applied = ?checkpoint.last_applied, bytes = bytes.len(), "checkpoint written");
        Ok((checkpoint, bytes))
    }
}

fn snapshot_of(checkpoint: &Checkpoint, bytes: Vec<u8>) -> Snapshot<TypeConfig> {
    let snapshot_id = match checkpoint.last_applied {
        Some(l) => format!("{}-{}", l.leader_id, l.index),
        None => "empty".to_string(),
    };
    Snapshot {
        meta: SnapshotMeta {
            last_log_id: checkpoint.last_applied,
            last_membership: checkpoint.membership.clone(),
            snapshot_id,
        },
        snapshot: Box::new(Cursor::new(bytes)),
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<TypeConfig>> {
        let this = self.clone();
        let (checkpoint, bytes) = tokio::task::spawn_blocking(move || this.write_checkpoint())
            .await
            .map_err(|e| io_err(io::Error::other(e)))?
            .map_err(io_err)?;
        Ok(snapshot_of(&checkpoint, bytes))
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> StorageResult<(Option<LogId>, StoredMembership)> {
        let applied = self.shared.applied.read().expect("applied lock");
        Ok((applied.last_applied, applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> StorageResult<Vec<CommandResponse>>
    where
        I: IntoIterator<Item = openraft::Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut responses = Vec::new();
        let mut last_index = None;
        for entry in entries {
            last_index = Some(entry.log_id.index);
            responses.push(self.apply_entry(entry)?);
        }
        if let Some(index) = last_index {
            self.shared.applied_index.send_replace(index);
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    /// Replaces the local state with a leader's checkpoint. Partition files are shipped with
    /// snapshots by the replication work; a one-node cluster never receives a snapshot.
    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, NodeAddr>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> StorageResult<()> {
        let bytes = snapshot.into_inner();
        let checkpoint = checkpoint::decode(&bytes).map_err(io_err)?;
        raft_store::write_file_atomic(&self.shared.checkpoint_path(), &bytes).map_err(io_err)?;
        let partitions =
            Partitions::open(&self.shared.dir.join("partitions"), &checkpoint.state, &self.shared.config)
                .map_err(io_err)?;
        let mut applied = self.shared.applied.write().expect("applied lock");
        *self.shared.partitions.write().expect("partitions lock") = partitions;
        *applied = Applied {
            last_applied: meta.last_log_id,
            membership: checkpoint.membership,
            state: checkpoint.state,
        };
        self.shared.applied_index.send_replace(meta.last_log_id.map_or(0, |l| l.index));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        let loaded = checkpoint::load(&self.shared.checkpoint_path()).map_err(io_err)?;
        Ok(loaded.map(|(checkpoint, bytes)| snapshot_of(&checkpoint, bytes)))
    }
}

//! openraft's state machine storage for onelog: applies committed entries to the broker state
//! and the partition files, takes checkpoints (openraft snapshots), and recovers from them.
//!
//! Readers (Fetch, Metadata, …) reach [`Applied`] only through `raft::applied::AppliedView`;
//! this module is the only writer, and holds the write lock for one entry at a time, so a
//! reader always sees the state after a whole entry — never half of a multi-partition produce.
//! Apply is `onelog_state::apply_command`, pure; a failed invariant in it stops the node
//! (`fatal`) before the lock could be poisoned.
//!
//! On disk the state machine lives in a generation directory, `state/gen-N/` holding
//! `checkpoint` and `partitions/`, named by `state/CURRENT`. Checkpoints are written inside the
//! current generation; installing a leader's snapshot builds a complete new generation and
//! then switches `CURRENT` atomically, so a crash mid-install leaves the old one intact.
//!
//! openraft 0.9 purges the Raft log a snapshot covers while the state machine is still
//! installing it (`PurgeLog` runs beside the install, not after it). A crash in between
//! leaves the old generation and a log purged past it, from which the state cannot be
//! rebuilt; `open` then finishes the install from the received archive, which is complete and
//! durable by then (openraft hands it over only once every chunk arrived, each written with
//! O_DSYNC; `crash_points.rs`).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use openraft::storage::{RaftStateMachine, Snapshot, SnapshotMeta};
use openraft::{AnyError, EntryPayload, RaftSnapshotBuilder, StorageError, StorageIOError};
use tokio::sync::watch;

use super::checkpoint::{self, Checkpoint};
use super::snapshot_archive;
use super::{LogId, NodeAddr, StoredMembership, TypeConfig};
use onelog_state::command::CommandResponse;
use onelog_state::BrokerState;

use super::applied::{read, write, AppliedView};
use super::sm_log::{LogAttachment, LogHold};
use crate::config::BrokerConfig;
use crate::fatal;
use crate::storage::locate::LocatedBatches;
use crate::storage::partition_log::PartitionLog;
use crate::storage::partitions::Partitions;

type StorageResult<T> = Result<T, StorageError<u64>>;

/// The applied state as readers see it.
#[derive(Debug, Default)]
pub struct Applied {
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
    pub state: BrokerState,
}

/// State shared between the state machine and its readers; written only in this module.
pub struct SmShared {
    pub(super) applied: RwLock<Applied>,
    pub(super) partitions: RwLock<Partitions>,
    /// Index of the last applied entry; Fetch long-polls on it.
    pub(super) applied_index: watch::Sender<u64>,
    /// Client bytes applied since the last checkpoint (drives byte-based checkpoints).
    pub(super) bytes_since_checkpoint: AtomicU64,
    pub(super) config: Arc<BrokerConfig>,
    /// `state/`: holds `CURRENT` and the generation directories.
    dir: PathBuf,
    /// The current generation directory.
    generation: RwLock<PathBuf>,
    /// The Raft log's files: recycling, journaled segments' batches, parked segments
    /// (`sm_log.rs`, attached by `attach_log`).
    pub(super) log: LogHold,
}

impl SmShared {
    fn checkpoint_path(&self) -> PathBuf {
        self.generation.read().expect("generation lock").join("checkpoint")
    }
}

const CURRENT: &str = "CURRENT";
/// The snapshot archive being received from the leader, or the last one received.
const INCOMING: &str = "incoming.olsnap";

/// Reads `CURRENT` (a fresh node starts at `gen-0`) and removes any other generation: one
/// left behind by an install that crashed before switching, or the one it replaced.
/// The name of the current state generation (`gen-N`).
fn current_name(dir: &Path) -> io::Result<String> {
    match std::fs::read_to_string(dir.join(CURRENT)) {
        Ok(s) => Ok(s.trim().to_string()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok("gen-0".to_string()),
        Err(e) => Err(e),
    }
}

/// Refuses a current checkpoint in a format this build does not read (`upgrade::TooNew`),
/// before anything of the data directory is opened or written: the node stops and the
/// directory stays as the newer build left it.
pub fn check_format(dir: &Path) -> io::Result<()> {
    checkpoint::check_format(&dir.join(current_name(dir)?).join("checkpoint"))
}

fn current_generation(dir: &Path) -> io::Result<PathBuf> {
    let name = current_name(dir)?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let file_name = entry.file_name().to_string_lossy().to_string();
        if file_name.starts_with("gen-") && file_name != name {
            tracing::info!(dir = %entry.path().display(), "removing stale state generation");
            std::fs::remove_dir_all(entry.path())?;
        }
    }
    let generation = dir.join(&name);
    std::fs::create_dir_all(&generation)?;
    Ok(generation)
}

fn generation_number(path: &Path) -> u64 {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("gen-"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn io_err(e: io::Error) -> StorageError<u64> {
    StorageIOError::write_state_machine(AnyError::new(&e)).into()
}

/// Opens the state machine: loads the checkpoint (if any) and truncates partition files to it.
/// `log_purged_index` is where the Raft log now starts: past the checkpoint, a snapshot
/// install was interrupted and is finished first (see the module documentation).
/// Returns the store openraft drives and the view every reader gets.
pub fn open(
    dir: PathBuf,
    config: Arc<BrokerConfig>,
    log_purged_index: Option<u64>,
) -> io::Result<(StateMachineStore, AppliedView)> {
    std::fs::create_dir_all(&dir)?;
    let mut generation = current_generation(&dir)?;
    let mut loaded = checkpoint::load(&generation.join("checkpoint"))?;
    let checkpoint_index = loaded.as_ref().and_then(|(cp, _)| cp.last_applied).map(|l| l.index);
    if let Some(purged) = log_purged_index.filter(|p| Some(*p) > checkpoint_index) {
        generation = finish_interrupted_install(&dir, &generation, purged)?;
        loaded = checkpoint::load(&generation.join("checkpoint"))?;
    }
    let log = LogHold::new(loaded.as_ref().map(|(cp, _)| &cp.state.features));
    let cp = loaded.map(|(cp, _)| cp).unwrap_or_default();
    tracing::info!(last_applied = ?cp.last_applied, topics = cp.state.topics.len(), "loaded checkpoint");
    let partitions = Partitions::open(&generation.join("partitions"), &cp.state, &config, log.files.clone())?;
    let index = cp.last_applied.map_or(0, |l| l.index);
    let shared = Arc::new(SmShared {
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
        generation: RwLock::new(generation),
        log,
    });
    Ok((StateMachineStore { shared: shared.clone() }, AppliedView::new(shared)))
}

#[derive(Clone)]
pub struct StateMachineStore {
    shared: Arc<SmShared>,
}

impl StateMachineStore {
    /// Applies one entry's ops to the state and performs their effects on partition files.
    // openraft's StorageError is large; it is the error type the trait returns, so boxing here
    // would only move the allocation.
    #[allow(clippy::result_large_err)]
    fn apply_entry(&self, entry: openraft::Entry<TypeConfig>) -> StorageResult<CommandResponse> {
        let mut applied = write(&self.shared.applied);
        let mut partitions = write(&self.shared.partitions);
        let journaled = self.shared.log.may_journal(&applied.state);
        partitions.set_journaled(journaled);
        let located = match &entry.payload {
            EntryPayload::Normal(_) if journaled => self.shared.log.locate(&entry),
            _ => LocatedBatches::default(),
        };
        applied.last_applied = Some(entry.log_id);
        let mut response = CommandResponse::default();
        match entry.payload {
            EntryPayload::Blank => {}
            EntryPayload::Membership(m) => applied.membership = StoredMembership::new(Some(entry.log_id), m),
            EntryPayload::Normal(command) => {
                let mut bytes = 0u64;
                let open_txns = crate::metrics::txn_outcomes::open_before(&applied.state, &command);
                let state = &mut applied.state;
                // A failed invariant inside the pure apply panics; the node stops here, with
                // the locks still held, so no reader ever sees the half-applied state.
                let applied_command = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    onelog_state::apply_command(state, &command, |state, effects| {
                        if effects.iter().any(|e| matches!(e, onelog_state::Effect::Append { .. })) {
                            crate::fault::panic_point("invariant-fails-in-apply");
                        }
                        for effect in effects {
                            if let onelog_state::Effect::Append { batch, .. } = effect {
                                bytes += batch.len() as u64;
                            }
                        }
                        // An I/O error here is fatal for the node (DESIGN §3): openraft stops.
                        partitions.execute(state, effects, &located)
                    })
                }));
                response = match applied_command {
                    Ok(result) => result.map_err(io_err)?,
                    Err(panic) => fatal::invariant(&panic_message(&panic)),
                };
                crate::metrics::txn_outcomes::count_ended(&applied.state, &open_txns);
                self.shared.bytes_since_checkpoint.fetch_add(bytes, Ordering::Relaxed);
            }
        }
        Ok(response)
    }

    /// Flushes partition files, then writes the checkpoint atomically.
    fn write_checkpoint(&self) -> io::Result<(Checkpoint, Vec<u8>)> {
        let checkpoint = {
            let applied = read(&self.shared.applied);
            Checkpoint {
                last_applied: applied.last_applied,
                membership: applied.membership.clone(),
                state: applied.state.clone(),
            }
        };
        // Data written after the snapshot of the state is flushed too; it lies beyond the
        // checkpointed offsets and is truncated and re-applied on start.
        let (logs, referenced) = {
            let partitions = read(&self.shared.partitions);
            // Short files left from open or an installed archive, if not judged yet.
            partitions.report_short_logs(&checkpoint.state);
            // Every entry the checkpoint covers is applied: what they point into is here.
            (partitions.all(), partitions.log_segment_bytes())
        };
        for log in &logs {
            log.lock().flush()?;
        }
        self.shared.log.sync_referenced(&referenced)?;
        let bytes = checkpoint::encode(&checkpoint);
        // Partition files flushed past the previous checkpoint, the new one not yet written.
        crate::fault::point("crash-mid-checkpoint");
        raft_store::write_file_atomic(&self.shared.checkpoint_path(), &bytes)?;
        self.shared.bytes_since_checkpoint.store(0, Ordering::Relaxed);
        // Durable before openraft purges below it: the purge may recycle, and parks only
        // what this checkpoint's partitions reference, from now on.
        self.shared.log.after_checkpoint(&checkpoint.state.features, &referenced)?;
        self.shared.log.free_parked(&logs, &referenced);
        tracing::info!(last_applied = ?checkpoint.last_applied, bytes = bytes.len(), "checkpoint written");
        Ok((checkpoint, bytes))
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    match (panic.downcast_ref::<String>(), panic.downcast_ref::<&str>()) {
        (Some(s), _) => s.clone(),
        (None, Some(s)) => s.to_string(),
        (None, None) => "apply panicked".to_string(),
    }
}

fn snapshot_meta(checkpoint: &Checkpoint) -> SnapshotMeta<u64, NodeAddr> {
    let snapshot_id = match checkpoint.last_applied {
        Some(l) => format!("{}-{}-{}", l.leader_id.term, l.leader_id.node_id, l.index),
        None => "empty".to_string(),
    };
    SnapshotMeta {
        last_log_id: checkpoint.last_applied,
        last_membership: checkpoint.membership.clone(),
        snapshot_id,
    }
}

impl StateMachineStore {
    /// The archive of the current checkpoint, built on first use and kept until the next
    /// checkpoint (followers far behind need it; most checkpoints are never shipped).
    fn current_archive(&self) -> io::Result<Option<(SnapshotMeta<u64, NodeAddr>, PathBuf)>> {
        let generation = self.shared.generation.read().expect("generation lock").clone();
        let Some((checkpoint, bytes)) = checkpoint::load(&generation.join("checkpoint"))? else {
            return Ok(None);
        };
        let meta = snapshot_meta(&checkpoint);
        let path = generation.join(format!("snapshot-{}.olsnap", meta.snapshot_id));
        if !path.exists() {
            let partitions = read(&self.shared.partitions);
            snapshot_archive::write(&path, &checkpoint, &bytes, &partitions)?;
            remove_other_archives(&generation, &path)?;
            tracing::info!(snapshot = %meta.snapshot_id, "snapshot archive written");
        }
        Ok(Some((meta, path)))
    }

    /// Builds a complete new generation from a received archive and switches `CURRENT` to it.
    /// The caller swaps state and partitions in memory together.
    fn install_archive(&self, archive: &Path) -> io::Result<(Checkpoint, Partitions, PathBuf)> {
        let current = self.shared.generation.read().expect("generation lock").clone();
        let (checkpoint, next) = build_generation(&self.shared.dir, &current, archive, |_| Ok(()))?;
        // An archive exported at a node's start-up carries that node's short files (records
        // deleted after its checkpoint); the entries after the snapshot delete them here too,
        // so they are judged at the next checkpoint (`write_checkpoint`).
        let root = next.join("partitions");
        let partitions =
            Partitions::open(&root, &checkpoint.state, &self.shared.config, self.shared.log.files.clone())?;
        Ok((checkpoint, partitions, next))
    }
}

/// Writes the generation after `current` from `archive` and, if `accept` agrees with its
/// checkpoint, switches `CURRENT` to it.
fn build_generation(
    dir: &Path,
    current: &Path,
    archive: &Path,
    accept: impl FnOnce(&Checkpoint) -> io::Result<()>,
) -> io::Result<(Checkpoint, PathBuf)> {
    let next = dir.join(format!("gen-{}", generation_number(current) + 1));
    let _ = std::fs::remove_dir_all(&next);
    let root = next.join("partitions");
    std::fs::create_dir_all(&root)?;
    let mut firsts = Vec::new();
    let (mut checkpoint, _) = snapshot_archive::read(archive, |part, data, len| {
        firsts.push((part.topic_id, part.partition, part.first_offset));
        PartitionLog::import(
            &Partitions::dir_in(&root, &part.topic_id, part.partition),
            part.first_offset,
            data,
            len,
        )
    })?;
    // Retention on the leader may have removed segments after its checkpoint; the data
    // then starts later than the checkpointed log start, and the log start follows it.
    for topic in checkpoint.state.topics.values_mut() {
        for (p, ps) in topic.partitions.iter_mut().enumerate() {
            let first = firsts.iter().find(|(id, q, _)| *id == topic.topic_id && *q == p as i32).map(|f| f.2);
            if let Some(first) = first.filter(|f| *f > ps.log_start_offset) {
                ps.log_start_offset = first.min(ps.log_end_offset);
            }
        }
    }
    accept(&checkpoint)?;
    raft_store::write_file_atomic(&next.join("checkpoint"), &checkpoint::encode(&checkpoint))?;
    raft_store::fsync_dir(&next)?;
    // A complete new generation, `CURRENT` still naming the old one.
    crate::fault::point("crash-mid-snapshot-install");
    let name = next.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
    raft_store::write_file_atomic(&dir.join(CURRENT), name.as_bytes())?;
    // `CURRENT` switched; the old generation is still on disk.
    crate::fault::point("crash-after-snapshot-install-switch");
    Ok((checkpoint, next))
}

/// The Raft log starts after `purged`, past the current generation's checkpoint: a snapshot
/// install was cut short after openraft purged the log it covers. Finishes it from the
/// received archive; returns the new generation. Fails, saying how to recover, when no
/// archive covering the purge is here.
fn finish_interrupted_install(dir: &Path, current: &Path, purged: u64) -> io::Result<PathBuf> {
    let unrecoverable = |why: &str| {
        io::Error::other(format!(
            "the Raft log starts after index {purged}, past this node's checkpoint, and {why}; \
             remove this node's data directory to let it catch up from the leader"
        ))
    };
    let archive = dir.join(INCOMING);
    if !archive.exists() {
        return Err(unrecoverable("no received snapshot is here to finish installing"));
    }
    let covers = |checkpoint: &Checkpoint| match checkpoint.last_applied {
        Some(l) if l.index >= purged => Ok(()),
        other => Err(unrecoverable(&format!("the received snapshot covers only {other:?}"))),
    };
    let (checkpoint, next) = build_generation(dir, current, &archive, covers)
        .map_err(|e| io::Error::new(e.kind(), format!("finishing an interrupted snapshot install: {e}")))?;
    tracing::warn!(
        last_applied = ?checkpoint.last_applied,
        purged,
        "finished a snapshot install that a crash had interrupted"
    );
    if let Err(e) = std::fs::remove_dir_all(current) {
        tracing::warn!(dir = %current.display(), error = %e, "could not remove the replaced generation");
    }
    Ok(next)
}

fn remove_other_archives(generation: &Path, keep: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(generation)? {
        let path = entry?.path();
        if path != keep && path.extension().is_some_and(|e| e == "olsnap" || e == "tmp") {
            std::fs::remove_file(path)?;
        }
    }
    Ok(())
}

async fn open_file(path: PathBuf) -> StorageResult<Box<tokio::fs::File>> {
    Ok(Box::new(tokio::fs::File::open(&path).await.map_err(io_err)?))
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    /// Takes a checkpoint. openraft keeps only the meta of what this returns; the archive a
    /// follower receives is built from the checkpoint when one is asked for.
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<TypeConfig>> {
        let this = self.clone();
        let (checkpoint, _) = tokio::task::spawn_blocking(move || this.write_checkpoint())
            .await
            .map_err(|e| io_err(io::Error::other(e)))?
            .map_err(io_err)?;
        let snapshot = open_file(self.shared.checkpoint_path()).await?;
        Ok(Snapshot { meta: snapshot_meta(&checkpoint), snapshot })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> StorageResult<(Option<LogId>, StoredMembership)> {
        let applied = read(&self.shared.applied);
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
            if matches!(entry.payload, EntryPayload::Blank) {
                // Widens the moment a new leader leads but takes no writes yet (tests).
                crate::fault::delay("apply.blank").await;
            }
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

    /// O_DSYNC: every chunk is on disk before openraft sees it written, so when openraft
    /// purges the log a completed archive covers (beside the install, see the module
    /// documentation) the archive survives a power loss too, and start-up can finish it.
    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<tokio::fs::File>> {
        let path = self.shared.dir.join(INCOMING);
        let file = tokio::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_DSYNC)
            .open(&path)
            .await
            .map_err(io_err)?;
        // The name too.
        let dir = self.shared.dir.clone();
        tokio::task::spawn_blocking(move || raft_store::fsync_dir(&dir))
            .await
            .map_err(|e| io_err(io::Error::other(e)))?
            .map_err(io_err)?;
        Ok(Box::new(file))
    }

    /// Replaces the local state and partition files with a leader's snapshot archive.
    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, NodeAddr>,
        mut snapshot: Box<tokio::fs::File>,
    ) -> StorageResult<()> {
        use tokio::io::AsyncWriteExt;
        snapshot.flush().await.map_err(io_err)?;
        snapshot.sync_all().await.map_err(io_err)?;
        drop(snapshot);
        let this = self.clone();
        let archive = self.shared.dir.join(INCOMING);
        let (checkpoint, partitions, next) =
            tokio::task::spawn_blocking(move || this.install_archive(&archive))
                .await
                .map_err(|e| io_err(io::Error::other(e)))?
                .map_err(io_err)?;
        tracing::info!(snapshot = %meta.snapshot_id, topics = checkpoint.state.topics.len(), "installed snapshot");
        // State and files change under the applied lock together: readers see either the old
        // pair or the new one.
        let old = {
            let mut applied = write(&self.shared.applied);
            *write(&self.shared.partitions) = partitions;
            let old = std::mem::replace(&mut *self.shared.generation.write().expect("generation lock"), next);
            *applied = Applied {
                last_applied: meta.last_log_id,
                membership: checkpoint.membership,
                state: checkpoint.state,
            };
            old
        };
        if let Err(e) = std::fs::remove_dir_all(&old) {
            tracing::warn!(dir = %old.display(), error = %e, "could not remove the replaced generation");
        }
        // The received checkpoint is durable and current: what the replaced partitions
        // pointed into goes.
        let installed = read(&self.shared.applied).state.features.clone();
        let referenced = read(&self.shared.partitions).log_segment_bytes();
        self.shared.log.after_checkpoint(&installed, &referenced).map_err(io_err)?;
        self.shared.applied_index.send_replace(meta.last_log_id.map_or(0, |l| l.index));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        let this = self.clone();
        let archive = tokio::task::spawn_blocking(move || this.current_archive())
            .await
            .map_err(|e| io_err(io::Error::other(e)))?
            .map_err(io_err)?;
        match archive {
            Some((meta, path)) => Ok(Some(Snapshot { meta, snapshot: open_file(path).await? })),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
#[path = "sm_store_tests.rs"]
mod tests;

impl StateMachineStore {
    /// Hands the Raft log to the state machine (`sm_log.rs`): recycling and the journal gate
    /// are set from the loaded checkpoint now and from every checkpoint it writes.
    pub fn attach_log(&self, attachment: LogAttachment) -> io::Result<()> {
        let features = read(&self.shared.applied).state.features.clone();
        let referenced = read(&self.shared.partitions).log_segment_bytes();
        self.shared.log.attach(attachment, &features, &referenced)
    }
}

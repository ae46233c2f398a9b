//! The state machine's hold on the Raft log's files (issue 31: each byte written once per
//! node). A journaled partition segment leaves its batches where the Raft log wrote them, so
//! the state machine needs three things from the log, attached once both are open
//! ([`LogAttachment`]):
//!
//! - **Where an applied entry's batches lie** (`storage::locate`), from the entry's record
//!   location.
//! - **Durable records before a checkpoint names them.** openraft may apply an entry that a
//!   quorum of *other* nodes made durable before this node's own fsync of it completes. A
//!   partition index pointing into that record must not be checkpointed before the record is
//!   on disk here: after a crash the log would lose it and the checkpoint would keep pointing
//!   at it. So the live segments the partitions point into are synced before each checkpoint.
//! - **Segments kept while referenced.** The log parks a purged segment the partitions still
//!   point into (`raft_store::Retention`); after each checkpoint the state machine names the
//!   segments that checkpoint references and the others are deleted.
//!
//! The gate: segments are journaled only once no build without journals can open this data
//! directory. That is when the newest checkpoint is format 12 or later (`onelog.version` 6 finalized),
//! or, before this node ever wrote or received a checkpoint, once the applied state has level
//! 6: a build of level 5 opens a directory without a checkpoint by removing every partition
//! directory and replaying the whole Raft log, which nothing has purged yet.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

use onelog_state::features::{Features, ONELOG_VERSION, ONELOG_VERSION_JOURNALED_SEGMENTS};
use onelog_state::BrokerState;

use super::TypeConfig;
use crate::storage::copier;
use crate::storage::locate::LocatedBatches;
use crate::storage::partitions::SharedLog;
use crate::storage::reads::LogFiles;

/// What the Raft log hands the state machine once both are open.
pub struct LogAttachment {
    pub reader: raft_store::LogReader<TypeConfig>,
    pub retention: raft_store::Retention,
    pub recycling: raft_store::Recycling,
}

/// What the newest checkpoint on disk allows.
const NO_CHECKPOINT: u8 = 0;
const CHECKPOINT_WITHOUT_JOURNALS: u8 = 1;
const CHECKPOINT_WITH_JOURNALS: u8 = 2;

pub struct LogHold {
    /// Shared by every partition log of the node.
    pub files: LogFiles,
    attached: OnceLock<LogAttachment>,
    checkpoint: AtomicU8,
}

impl LogHold {
    /// `checkpointed`: the feature levels of the checkpoint loaded at open, if there was one.
    pub fn new(checkpointed: Option<&Features>) -> LogHold {
        let hold = LogHold {
            files: LogFiles::unattached(),
            attached: OnceLock::new(),
            checkpoint: AtomicU8::new(0),
        };
        if let Some(features) = checkpointed {
            hold.note_checkpoint(features);
        }
        hold
    }

    fn note_checkpoint(&self, features: &Features) {
        let journals = features.level(ONELOG_VERSION) >= ONELOG_VERSION_JOURNALED_SEGMENTS;
        let kind = if journals { CHECKPOINT_WITH_JOURNALS } else { CHECKPOINT_WITHOUT_JOURNALS };
        self.checkpoint.store(kind, Ordering::Release);
    }

    /// Attaches the Raft log, then, as after a checkpoint, sets recycling and releases the
    /// parked segments the loaded partitions do not reference (`referenced`: their bytes per
    /// Raft log segment, `Partitions::log_segment_bytes`).
    pub fn attach(
        &self,
        attachment: LogAttachment,
        checkpointed: &Features,
        referenced: &BTreeMap<u64, u64>,
    ) -> io::Result<()> {
        let reader = attachment.reader.clone();
        self.files.attach(move |segment| reader.segment_file(segment));
        let _ = self.attached.set(attachment);
        self.keep_what_partitions_use(checkpointed, referenced)
    }

    /// What is parked (nothing before the log is attached).
    pub fn parked(&self) -> raft_store::ParkedTotals {
        self.attached.get().map(|a| a.retention.totals()).unwrap_or_default()
    }

    /// Whether segments rolled now may be journaled, `applied` being the state so far.
    pub fn may_journal(&self, applied: &BrokerState) -> bool {
        if self.attached.get().is_none() {
            return false;
        }
        match self.checkpoint.load(Ordering::Acquire) {
            CHECKPOINT_WITH_JOURNALS => true,
            NO_CHECKPOINT => applied.features.level(ONELOG_VERSION) >= ONELOG_VERSION_JOURNALED_SEGMENTS,
            _ => false,
        }
    }

    /// Where the batches of the entry at `index` lie in the log; nothing found (they go to
    /// the partitions' own files, as without journals) if the record is not where its
    /// encoding says.
    pub fn locate(&self, entry: &openraft::Entry<TypeConfig>) -> LocatedBatches {
        let Some(attached) = self.attached.get() else { return LocatedBatches::default() };
        let index = entry.log_id.index;
        let located = attached.reader.location(index).map(|record| LocatedBatches::of(entry, record));
        match located {
            Some(Ok(located)) => located,
            other => {
                let why = match other {
                    Some(Err(e)) => e.to_string(),
                    _ => "no record location".to_string(),
                };
                tracing::warn!(index, why, "batches of an entry not located in the Raft log; copied instead");
                LocatedBatches::default()
            }
        }
    }

    /// Syncs the live segments the partitions point into (`referenced`): a checkpoint must
    /// never name an entry whose record is not durable here (see the module documentation).
    pub fn sync_referenced(&self, referenced: &BTreeMap<u64, u64>) -> io::Result<()> {
        let Some(attached) = self.attached.get() else { return Ok(()) };
        let parked: BTreeSet<u64> = attached.retention.parked().into_iter().collect();
        for segment in referenced.keys().filter(|s| !parked.contains(s)) {
            self.files.get(*segment)?.sync_data()?;
        }
        Ok(())
    }

    /// Copies what the partitions keep of mostly dead parked segments into their own files
    /// (`storage::copier`), so that the next checkpoint releases those segments. A failure is
    /// reported and changes nothing: the copy is switched to only once complete and durable.
    pub fn free_parked(&self, logs: &[SharedLog], live: &BTreeMap<u64, u64>) {
        let Some(attached) = self.attached.get() else { return };
        let doomed = copier::doomed(&attached.retention.parked_bytes(), live);
        match copier::copy_out(logs, &doomed) {
            Ok(0) => {}
            Ok(bytes) => {
                tracing::info!(?doomed, bytes, "copied batches out of mostly dead Raft log segments")
            }
            Err(e) => {
                tracing::warn!(?doomed, error = %e, "copying batches out of Raft log segments failed; retried after the next checkpoint")
            }
        }
    }

    /// After a checkpoint of `checkpointed` is durable: allows recycling once 0.1.0 cannot
    /// read it, opens the journal gate once no build without journals can, and keeps only the
    /// parked segments the partitions reference.
    /// `referenced`: what the partitions keep per Raft log segment, taken once every entry the
    /// checkpoint covers was applied.
    pub fn after_checkpoint(
        &self,
        checkpointed: &Features,
        referenced: &BTreeMap<u64, u64>,
    ) -> io::Result<()> {
        self.note_checkpoint(checkpointed);
        self.keep_what_partitions_use(checkpointed, referenced)
    }

    /// Recycling and the parked segments as the newest checkpoint (of `checkpointed`) allows.
    fn keep_what_partitions_use(
        &self,
        checkpointed: &Features,
        referenced: &BTreeMap<u64, u64>,
    ) -> io::Result<()> {
        let Some(attached) = self.attached.get() else { return Ok(()) };
        // Recycled Raft log segments hold old records after their new ones, which 0.1.0's
        // recovery would take for a torn tail: allowed only once the newest checkpoint is
        // one 0.1.0 refuses (format 8 and up, written once a feature level is recorded).
        attached.recycling.allow(checkpointed.is_recorded());
        let keep = referenced.keys().copied().collect();
        let released = attached.retention.keep_only(keep).map_err(io::Error::other)?;
        if released > 0 {
            tracing::info!(released, "released Raft log segments no partition points into");
        }
        Ok(())
    }
}

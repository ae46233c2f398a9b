//! Opening one Raft group's storage and its openraft node: the Raft log, the state machine's
//! checkpoint, and the `Raft` over them, not yet serving. Group 0 lives in the data directory
//! itself (`raft-log/`, `state/`, as in every release); group g > 0 in `groups/<g>/`
//! (docs/SCALING.md §2), so a one-group node's files are where they always were.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use raft_store::{LogStore, LogStoreOptions};

use super::applied::AppliedView;
use super::network::Network;
use super::sm_log::LogAttachment;
use super::transport::peers::Peers;
use super::transport::transfer::LeaderTransfer;
use super::transport::vote_gate::VoteGate;
use super::{rejoin, sm_store, Raft, TypeConfig};
use crate::config::BrokerConfig;
use crate::limits;

/// The directory Raft group `group` keeps its log, state and rejoin marker in.
pub fn group_root(data_dir: &Path, group: u32) -> PathBuf {
    match group {
        0 => data_dir.to_path_buf(),
        g => data_dir.join("groups").join(g.to_string()),
    }
}

pub fn raft_config() -> anyhow::Result<openraft::Config> {
    let config = openraft::Config {
        cluster_name: "onelog".to_string(),
        heartbeat_interval: limits::RAFT_HEARTBEAT_MS,
        election_timeout_min: limits::RAFT_ELECTION_TIMEOUT_MIN_MS,
        election_timeout_max: limits::RAFT_ELECTION_TIMEOUT_MAX_MS,
        install_snapshot_timeout: limits::RAFT_INSTALL_SNAPSHOT_TIMEOUT_MS,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(limits::CHECKPOINT_INTERVAL_ENTRIES),
        max_in_snapshot_log_to_keep: limits::LOG_ENTRIES_KEPT_BELOW_CHECKPOINT,
        commit_notify_delay_us: limits::RAFT_COMMIT_NOTIFY_DELAY_US,
        ..Default::default()
    };
    Ok(config.validate()?)
}

/// One Raft group's storage and Raft node, opened but not yet serving.
pub struct Opened {
    pub group: u32,
    /// The group's directory ([`group_root`]).
    pub root: PathBuf,
    pub raft: Raft,
    pub applied: AppliedView,
    pub votes: Arc<VoteGate>,
    pub start: rejoin::Start,
    pub log_reader: raft_store::LogReader<TypeConfig>,
    /// The group's transfer on this node: it pauses the group's writes and withholds its
    /// heartbeats only.
    pub transfer: Arc<LeaderTransfer>,
}

/// What opening a group needs besides its number: the node's id, data directory and
/// configuration, and its connections to its peers (shared by every group and forwarding).
pub struct OpenWith<'a> {
    pub node_id: u64,
    pub data_dir: &'a Path,
    pub config: &'a Arc<BrokerConfig>,
    pub peers: &'a Arc<Peers>,
    /// Whether the group has voters other than this node (a node with an empty log asks them
    /// whether the group exists: `raft::rejoin`).
    pub has_peers: bool,
}

/// Opens Raft group `group`'s log and checkpoint and creates its Raft node.
pub async fn open(with: &OpenWith<'_>, group: u32) -> anyhow::Result<Opened> {
    let root = group_root(with.data_dir, group);
    std::fs::create_dir_all(&root)?;
    // A checkpoint of a newer build stops the node before anything is opened or written.
    sm_store::check_format(&root.join("state"))?;
    // The log is purged at checkpoints, about every CHECKPOINT_INTERVAL_BYTES of it: a pool that
    // large recycles every segment in steady state (raft-store's prealloc.rs).
    let log_options = LogStoreOptions {
        segment_bytes: with.config.settings.raft_segment_bytes,
        recycle_bytes_max: limits::CHECKPOINT_INTERVAL_BYTES,
        // Journaled partition segments point into purged segments (`raft::sm_log`).
        park_purged_segments: true,
        ..LogStoreOptions::default()
    };
    let mut log_store = LogStore::<TypeConfig>::open(&root.join("raft-log"), log_options)?;
    // Off until the checkpoint says 0.1.0 can no longer open this data (sm_store).
    let log_recycling = log_store.recycling();
    log_recycling.allow(false);
    let log_state = openraft::storage::RaftLogStorage::get_log_state(&mut log_store).await?;
    let log_purged = log_state.last_purged_log_id;
    let log_reader = log_store.reader();
    let start = rejoin::at_start(&root, log_state.last_log_id.is_none(), with.has_peers)?;
    let votes = Arc::new(VoteGate::new(start.votes()));
    let (state_machine, applied) =
        sm_store::open(root.join("state"), with.config.clone(), log_purged.map(|l| l.index))?;
    let attachment = LogAttachment {
        reader: log_store.reader(),
        retention: log_store.retention(),
        recycling: log_recycling,
    };
    state_machine.attach_log(attachment)?;
    let checkpoint_index = applied.read(|a| a.last_applied.map(|l| l.index));
    let last_log_index = log_state.last_log_id.map(|l| l.index);
    // What the restart costs: every entry above the checkpoint is applied again.
    let to_replay = last_log_index.map_or(0, |last| last.saturating_sub(checkpoint_index.unwrap_or(0)));
    tracing::info!(group, ?checkpoint_index, ?last_log_index, to_replay, "opened the log and the checkpoint");
    tokio::spawn(report_short_partition_logs(applied.clone(), last_log_index));
    let transfer = Arc::new(LeaderTransfer::default());
    let network = Network::for_group(with.peers.clone(), transfer.clone(), group);
    let raft = Raft::new(with.node_id, Arc::new(raft_config()?), network, log_store, state_machine).await?;
    Ok(Opened { group, root, raft, applied, votes, start, log_reader, transfer })
}

/// Once every entry the log held at open is applied (the replay above the checkpoint, or, if
/// a new leader cut the tail, as many new ones), judges the partitions whose files ended
/// before the checkpoint.
async fn report_short_partition_logs(applied: AppliedView, replay_to: Option<u64>) {
    let mut index = applied.applied_index();
    if let Some(to) = replay_to {
        if index.wait_for(|i| *i >= to).await.is_err() {
            return;
        }
    }
    applied.report_short_partition_logs();
}

//! onelog's replicated state machine, without I/O: the broker state that applying the Raft log
//! produces (everything but the partition bytes, which the broker's storage keeps as a
//! materialized view), the commands the log carries, the pure apply, and the leader's entry
//! builder that turns queued requests into one entry and says how each is answered.
//!
//! No clock, no randomness, no threads, no files: the same log applied anywhere gives the
//! same state and the same [`Effect`]s, which is what the replay test checks and what lets
//! the state be simulated outside the broker. `BrokerState` is small and serializable; a
//! checkpoint is this struct plus the Raft log id it covers. Collections are `BTreeMap`s so
//! serialization and digests are deterministic.

pub mod acls;
pub mod apply;
mod apply_admin;
pub mod apply_consumer;
pub mod apply_share;
pub mod apply_streams;
mod apply_txn;
pub mod assignment;
pub mod command;
pub mod configs;
pub mod consumer_group;
pub mod digest;
pub mod effect;
pub mod entry;
pub mod features;
pub mod group_config;
pub mod groups;
pub mod in_flight;
pub mod internal_topic;
pub mod limits;
pub mod producers;
pub mod quotas;
pub mod scram;
pub mod share_group;
pub mod share_partition;
pub mod share_states;
pub mod streams_group;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod topic_config;
pub mod txn_adds;
pub mod txn_errors;
pub mod txns;
pub mod xgroup;

pub use apply::{apply_command, apply_op};
pub use effect::Effect;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use command::ReplicatedLimits;
use groups::Groups;
use producers::Producers;
use txns::Transactions;

/// Replicated metadata and offsets of the whole broker.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct BrokerState {
    pub cluster_id: Option<String>,
    pub topics: BTreeMap<String, Topic>,
    /// Idempotent producers (KIP-98): live ids and their per-partition sequence state.
    #[serde(default)]
    pub producers: Producers,
    /// Consumer groups' committed offsets (OffsetCommit / OffsetFetch).
    #[serde(default)]
    pub groups: Groups,
    /// Transactional ids and their open transactions.
    #[serde(default)]
    pub txns: Transactions,
    /// The limits apply decides by, as the current term's leader set them.
    #[serde(default)]
    pub limits: ReplicatedLimits,
    /// Client quotas (KIP-546), enforced by every node against its own traffic.
    #[serde(default)]
    pub client_quotas: quotas::ClientQuotas,
    /// Dynamic broker, group and client-metrics configs (topic overrides are on the topic).
    #[serde(default)]
    pub configs: configs::DynamicConfigs,
    /// ACL bindings (Kafka's StandardAuthorizer data), enforced by every node's authorizer.
    #[serde(default)]
    pub acls: acls::Acls,
    /// SCRAM credentials (KIP-554): salt, StoredKey, ServerKey and iterations per user and
    /// mechanism, never a password.
    #[serde(default)]
    pub scram: scram::ScramCredentials,
    /// Finalized feature levels (KIP-584). Skipped by serde so that the state's shape stays
    /// 0.1.0's: the checkpoint writes it after the state, from format 8 on (`features`).
    #[serde(skip)]
    pub features: features::Features,
    /// KIP-848 consumer groups (`group.protocol=consumer`): members, epochs and assignments.
    /// Skipped by serde like `features`: the checkpoint writes them after the features from
    /// format 9 on (`onelog.version` 3), and only ops of that level change them.
    #[serde(skip)]
    pub consumer_groups: consumer_group::ConsumerGroups,
    /// KIP-1071 Streams groups (`group.protocol=streams`): topologies, members, epochs and
    /// task assignments. Skipped by serde like `consumer_groups`: the checkpoint writes them
    /// after those from format 10 on (`onelog.version` 4).
    #[serde(skip)]
    pub streams_groups: streams_group::StreamsGroups,
    /// KIP-932 share groups: members, epochs and assignments. Skipped by serde like
    /// `streams_groups`: the checkpoint writes them after those from format 11 on
    /// (`onelog.version` 5).
    #[serde(skip)]
    pub share_groups: share_group::ShareGroups,
    /// Every share group's share-partition record states (acquisitions, acknowledgements,
    /// delivery counts, start offsets). Written after `share_groups` from format 11 on.
    #[serde(skip)]
    pub share_states: share_states::ShareStates,
    /// Transactions across Raft groups (docs/SCALING.md): empty in a one-group cluster.
    /// Skipped by serde like `share_states`: the checkpoint writes it after those from format
    /// 13 on (`onelog.version` 7).
    #[serde(skip)]
    pub xgroup: xgroup::CrossGroup,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Topic {
    pub topic_id: [u8; 16],
    pub replication_factor: i16,
    /// Only the configs set on the topic; defaults come from the broker config.
    pub configs: BTreeMap<String, String>,
    pub partitions: Vec<PartitionState>,
}

/// Offsets of one partition. `high_watermark` equals `log_end_offset` because only committed
/// entries are applied (DESIGN §5); it is kept as its own name so that reads say what they mean.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PartitionState {
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    /// Largest batch max-timestamp seen, and the last offset of that batch (ListOffsets -3).
    pub max_timestamp: i64,
    pub max_timestamp_offset: i64,
    /// Leader epoch cache (KIP-101): (epoch, first offset written in it), ascending.
    #[serde(default)]
    pub leader_epochs: Vec<(i32, i64)>,
    /// Open transactions with data here: producer id → first offset (the LSO's bound).
    #[serde(default)]
    pub open_txns: BTreeMap<i64, i64>,
    /// Aborted transactions whose marker is still in the log, by marker offset (the Fetch
    /// `aborted_transactions` list, DESIGN §5).
    #[serde(default)]
    pub aborted_txns: Vec<AbortedTxn>,
    /// The replicas an explicit CreatePartitions assignment named (Metadata reports them);
    /// empty: every voter. Every node stores every partition either way (one Raft log).
    #[serde(default)]
    pub replicas: Vec<i32>,
}

/// One aborted transaction on one partition: its data spans `first_offset..=last_offset`,
/// where `last_offset` is the abort marker.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
}

impl PartitionState {
    pub fn new() -> Self {
        PartitionState {
            log_start_offset: 0,
            log_end_offset: 0,
            max_timestamp: -1,
            max_timestamp_offset: -1,
            leader_epochs: Vec::new(),
            open_txns: BTreeMap::new(),
            aborted_txns: Vec::new(),
            replicas: Vec::new(),
        }
    }

    /// KIP-101/KIP-320: the end offset of `epoch` on this log, as (epoch, end offset): the
    /// largest epoch not above the one asked for, ending where the next epoch starts.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        let Some(&(latest, _)) = self.leader_epochs.last() else { return (-1, -1) };
        if epoch == latest {
            return (latest, self.log_end_offset);
        }
        let higher = self.leader_epochs.iter().find(|(e, _)| *e > epoch);
        let floor = self.leader_epochs.iter().rev().find(|(e, _)| *e <= epoch);
        match (floor, higher) {
            (_, None) => (-1, -1),
            (Some((e, _)), Some((_, start))) => (*e, *start),
            (None, Some((_, start))) => (epoch, *start),
        }
    }

    pub fn high_watermark(&self) -> i64 {
        self.log_end_offset
    }

    /// Last stable offset: the first offset of the earliest open transaction, else the high
    /// watermark (DESIGN §5).
    pub fn last_stable_offset(&self) -> i64 {
        self.open_txns.values().copied().min().unwrap_or_else(|| self.high_watermark())
    }

    /// The aborted transactions a read_committed fetch of `[from, upper)` must be told about:
    /// those whose marker is at or after `from` and whose data starts before `upper`.
    pub fn aborted_in(&self, from: i64, upper: i64) -> impl Iterator<Item = &AbortedTxn> {
        let start = self.aborted_txns.partition_point(|a| a.last_offset < from);
        self.aborted_txns[start..].iter().filter(move |a| a.first_offset < upper)
    }

    /// Appends a marker or batch's bookkeeping common to every write at `base_offset`.
    pub fn note_epoch(&mut self, partition_leader_epoch: i32, base_offset: i64) {
        if self.leader_epochs.last().is_none_or(|(e, _)| *e < partition_leader_epoch) {
            self.leader_epochs.push((partition_leader_epoch, base_offset));
        }
    }

    /// Checks the invariants that must hold after every apply, in release builds too.
    pub fn assert_invariants(&self, topic: &str, partition: i32) {
        assert!(
            0 <= self.log_start_offset && self.log_start_offset <= self.log_end_offset,
            "{topic}-{partition}: log_start_offset {} must be within [0, log_end_offset {}]",
            self.log_start_offset,
            self.log_end_offset
        );
        assert!(
            self.last_stable_offset() <= self.high_watermark(),
            "{topic}-{partition}: lso {} > hw {}",
            self.last_stable_offset(),
            self.high_watermark()
        );
    }
}

impl BrokerState {
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionState> {
        let index = usize::try_from(partition).ok()?;
        self.topics.get(topic)?.partitions.get(index)
    }

    /// The partitions of `group` with offsets pending in an open transaction, of this group's
    /// own or of one coordinated elsewhere (KIP-447 `require_stable`).
    pub fn pending_offsets_of(&self, group: &str) -> std::collections::BTreeSet<(String, i32)> {
        let mut pending = self.txns.pending_offsets_of(group);
        pending.extend(self.xgroup.pending_offsets_of(group));
        pending
    }

    /// Whether any consumer, Streams, share or classic group (committed offsets, a recorded
    /// generation, offsets pending in a transaction) has state here.
    pub fn has_group_state(&self) -> bool {
        !self.groups.groups.is_empty()
            || !self.consumer_groups.groups.is_empty()
            || !self.streams_groups.groups.is_empty()
            || !self.share_groups.groups.is_empty()
            || !self.share_states.groups.is_empty()
            || self.txns.by_id.values().any(|m| !m.pending_offsets.is_empty())
            || self.xgroup.has_pending_offsets()
    }

    pub fn topic_by_id(&self, topic_id: &[u8; 16]) -> Option<(&String, &Topic)> {
        self.topics.iter().find(|(_, t)| &t.topic_id == topic_id)
    }

    /// What offset commits are checked against (`groups::CommitRules`).
    pub fn commit_rules(&self) -> groups::CommitRules {
        groups::CommitRules {
            metadata_bytes_max: self.limits.offset_metadata_bytes_max,
            internal_topic: self.features.level(features::ONELOG_VERSION)
                >= features::ONELOG_VERSION_CONSUMER_GROUPS,
        }
    }
}

//! Consumer groups' committed offsets: replicated per-group state, written by OffsetCommit ops
//! and read by OffsetFetch and ListGroups from the applied state (DESIGN §1).
//!
//! Live membership is held in memory by the leader's coordinator (the broker's `coord::group`); the log
//! holds each group's last completed generation and its member ids (`CompleteGeneration`),
//! so that commits are fenced alike on every replica and after a failover. A group exists
//! while it has committed offsets or a recorded generation; deleting a topic drops its
//! offsets.
//!
//! One pure function, [`Groups::check_commit`], decides each commit's error code; the handler
//! runs it against the applied state to answer without a log entry when nothing would be
//! stored, and apply runs it again against the state the op meets, so replicas agree.

use std::collections::BTreeMap;

use kafka_compat::error_code;
use serde::{Deserialize, Serialize};

use super::command::{GenerationOp, GroupDeletion, OffsetCommitOp, OffsetDeleteOp};
use super::{internal_topic, Topic};

/// Every group with committed offsets.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Groups {
    pub groups: BTreeMap<String, Group>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Group {
    /// topic → partition → committed offset.
    pub offsets: BTreeMap<String, BTreeMap<i32, CommittedOffset>>,
    /// The last completed generation (a `CompleteGeneration` op), if any.
    pub generation: Option<GenerationOp>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    /// KIP-320: the leader epoch of the record before `offset`, or -1.
    pub leader_epoch: i32,
    /// Kafka stores a null metadata string as "" (`OffsetAndMetadata.NoMetadata`).
    pub metadata: String,
    /// Leader clock of the op that committed it (for offset retention, later).
    pub commit_time_ms: i64,
}

/// The outcome of one commit: Kafka error code and, for errors, a message.
pub type CommitResult = (i16, Option<String>);

/// What a commit is checked against besides the group: the metadata bound, and whether the
/// virtual `__consumer_offsets` takes commits (from `onelog.version` 3, so that every replica
/// of a rolled cluster decides alike: 0.1.0 refused them, as a topic that does not exist).
#[derive(Debug, Clone, Copy)]
pub struct CommitRules {
    pub metadata_bytes_max: usize,
    pub internal_topic: bool,
}

impl Groups {
    /// One result per commit of `op`, in order; the op's group-level check first.
    pub fn check_commit(
        &self,
        topics: &BTreeMap<String, Topic>,
        op: &OffsetCommitOp,
        rules: CommitRules,
    ) -> Vec<CommitResult> {
        let metadata_bytes_max = rules.metadata_bytes_max;
        if let Err(refused) = self.check_generation(op) {
            return vec![refused; op.commits.len()];
        }
        op.commits
            .iter()
            .map(|c| {
                let known = match topics.get(&c.topic) {
                    Some(t) => usize::try_from(c.partition).is_ok_and(|p| p < t.partitions.len()),
                    None => {
                        rules.internal_topic
                            && internal_topic::lookup(topics, &c.topic)
                                .is_some_and(|(_, n)| (0..n).contains(&c.partition))
                    }
                };
                if !known {
                    let message = format!("{}-{} does not exist", c.topic, c.partition);
                    (error_code::UNKNOWN_TOPIC_OR_PARTITION, Some(message))
                } else if c.metadata.as_ref().is_some_and(|m| m.len() > metadata_bytes_max) {
                    let message = format!("metadata is longer than {metadata_bytes_max} bytes");
                    (error_code::OFFSET_METADATA_TOO_LARGE, Some(message))
                } else {
                    (error_code::NONE, None)
                }
            })
            .collect()
    }

    /// Kafka's group coordinator (`ClassicGroup.validateOffsetCommit`): generation < 0 is a
    /// simple consumer or admin client and may commit (creating the group if need be). A real
    /// generation names a member. Against the last completed generation in the log: an older
    /// generation is ILLEGAL_GENERATION (a zombie), the same generation must name one of its
    /// members (else UNKNOWN_MEMBER_ID); a newer one was vetted by the leader's coordinator
    /// against a rebalance whose record may still be on its way through the log, and passes.
    /// A group without a recorded generation answers as Kafka's `Empty` group: an existing
    /// group UNKNOWN_MEMBER_ID, an unknown one ILLEGAL_GENERATION (OffsetCommit ≤ v8).
    fn check_generation(&self, op: &OffsetCommitOp) -> Result<(), CommitResult> {
        if op.generation_id < 0 {
            return Ok(());
        }
        let unknown_member = || {
            let message = format!("member '{}' is not in group '{}'", op.member_id, op.group_id);
            Err((error_code::UNKNOWN_MEMBER_ID, Some(message)))
        };
        let illegal_generation = || {
            let message = format!("group '{}' has no generation {}", op.group_id, op.generation_id);
            Err((error_code::ILLEGAL_GENERATION, Some(message)))
        };
        let Some(group) = self.groups.get(&op.group_id) else { return illegal_generation() };
        let Some(generation) = &group.generation else { return unknown_member() };
        if op.generation_id > generation.generation_id {
            Ok(())
        } else if op.generation_id < generation.generation_id {
            illegal_generation()
        } else if generation.members.iter().any(|m| m.member_id == op.member_id) {
            Ok(())
        } else {
            unknown_member()
        }
    }

    /// Records a completed generation; an older one than recorded (a deposed leader's entry
    /// applied late) changes nothing, so the recorded generation never decreases. A generation
    /// without members only overwrites a record with members: for a group the log does not
    /// know (deleted by DeleteGroups meanwhile) it would bring back a group nobody has.
    pub fn complete_generation(&mut self, op: &GenerationOp) {
        if op.members.is_empty() && !self.groups.contains_key(&op.group_id) {
            return;
        }
        let group = self.groups.entry(op.group_id.clone()).or_default();
        if group.generation.as_ref().is_some_and(|g| g.generation_id > op.generation_id) {
            return;
        }
        group.generation = Some(op.clone());
    }

    /// Stores every commit that passes [`Self::check_commit`]; later commits of the same
    /// partition in one op win, as in Kafka's request map.
    pub fn store_offset_commit(
        &mut self,
        topics: &BTreeMap<String, Topic>,
        op: &OffsetCommitOp,
        now_ms: i64,
        rules: CommitRules,
    ) -> Vec<CommitResult> {
        let results = self.check_commit(topics, op, rules);
        if results.iter().all(|(code, _)| *code != error_code::NONE) {
            return results;
        }
        let group = self.groups.entry(op.group_id.clone()).or_default();
        for (commit, (code, _)) in op.commits.iter().zip(&results) {
            if *code != error_code::NONE {
                continue;
            }
            let committed = CommittedOffset {
                offset: commit.offset,
                leader_epoch: commit.leader_epoch,
                metadata: commit.metadata.clone().unwrap_or_default(),
                commit_time_ms: now_ms,
            };
            group.offsets.entry(commit.topic.clone()).or_default().insert(commit.partition, committed);
        }
        results
    }

    /// Stores offsets a committed transaction held (TxnOffsetCommit, checked when written).
    pub fn store_txn_offsets(&mut self, group_id: &str, offsets: BTreeMap<(String, i32), CommittedOffset>) {
        let group = self.groups.entry(group_id.to_string()).or_default();
        for ((topic, partition), committed) in offsets {
            group.offsets.entry(topic).or_default().insert(partition, committed);
        }
    }

    /// DeleteGroups of one group (Kafka's `ClassicGroup.validateDeleteGroup`): an unknown
    /// group is GROUP_ID_NOT_FOUND; a recorded generation with members at or above the one
    /// the coordinator saw empty is NON_EMPTY_GROUP; otherwise the group goes with its
    /// committed offsets and its recorded generation.
    pub fn delete_group(&mut self, deletion: &GroupDeletion) -> CommitResult {
        let Some(group) = self.groups.get(&deletion.group_id) else {
            let message = format!("group '{}' does not exist", deletion.group_id);
            return (error_code::GROUP_ID_NOT_FOUND, Some(message));
        };
        let has_members = group
            .generation
            .as_ref()
            .is_some_and(|g| !g.members.is_empty() && g.generation_id >= deletion.generation_id);
        if has_members {
            let message = format!("group '{}' has members", deletion.group_id);
            return (error_code::NON_EMPTY_GROUP, Some(message));
        }
        self.groups.remove(&deletion.group_id);
        (error_code::NONE, None)
    }

    /// OffsetDelete (KIP-496): drops the named partitions' committed offsets; the leader left
    /// out partitions a live member subscribes to. A group left with no offsets and no
    /// recorded generation goes, as after a topic deletion.
    pub fn delete_offsets(&mut self, op: &OffsetDeleteOp) -> Result<(), CommitResult> {
        let Some(group) = self.groups.get_mut(&op.group_id) else {
            let message = format!("group '{}' does not exist", op.group_id);
            return Err((error_code::GROUP_ID_NOT_FOUND, Some(message)));
        };
        for (topic, partition) in &op.partitions {
            if let Some(partitions) = group.offsets.get_mut(topic) {
                partitions.remove(partition);
                if partitions.is_empty() {
                    group.offsets.remove(topic);
                }
            }
        }
        self.retain_live();
        Ok(())
    }

    pub(crate) fn retain_live(&mut self) {
        self.groups.retain(|_, g| !g.offsets.is_empty() || g.generation.is_some());
    }

    pub fn committed(&self, group_id: &str, topic: &str, partition: i32) -> Option<&CommittedOffset> {
        self.groups.get(group_id)?.offsets.get(topic)?.get(&partition)
    }

    /// A deleted topic's offsets go with it (Kafka's `onPartitionsDeleted`), and so does a
    /// group left with no offsets and no recorded generation.
    pub fn forget_topic(&mut self, topic: &str) {
        for group in self.groups.values_mut() {
            group.offsets.remove(topic);
        }
        self.retain_live();
    }
}

#[cfg(test)]
#[path = "groups_tests.rs"]
mod tests;

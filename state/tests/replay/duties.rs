//! Everything generated besides producers: consumer groups (offset commits, generations,
//! OffsetDelete, DeleteGroups), topics (created, grown, deleted) and the leader's duties
//! (retention, transaction timeouts, admin aborts).

use std::collections::BTreeMap;

use onelog_state::command::{
    AbortTxnsOp, AlterConfigsOp, CreatePartitionsOp, CreateTopicsOp, DeleteGroupsOp, DeleteRecordsOp,
    DeleteTopicsOp, GenerationMember, GenerationOp, GroupDeletion, NewPartitions, NewTopic,
    OffsetCommitEntry, OffsetCommitOp, OffsetDeleteOp, Op, TrimLog, TrimLogOp,
};
use onelog_state::configs::{AlterKind, ConfigAlteration, ConfigResource, ResourceAlteration};
use onelog_state::entry::Proposal;
use onelog_state::txns::{BrokerAbort, ProducerIdEpoch};
use onelog_state::BrokerState;
use rand::Rng;

use crate::clients::{ItemsKind, Queue, Sent};
use crate::sim::Sim;
use crate::{GROUPS, MEMBERS, TOPICS};

impl Sim {
    /// A generation and member for a commit to `group`: mostly a simple consumer (-1), else
    /// the recorded generation with one of its members, a stale one, an unknown member or a
    /// generation the log has not seen yet.
    pub(crate) fn member_of(&mut self, state: &BrokerState, group: &str) -> (i32, String) {
        let recorded = state.groups.groups.get(group).and_then(|g| g.generation.as_ref());
        match (self.rng.gen_range(0..10), recorded) {
            (0..=3, _) | (_, None) => (-1, String::new()),
            (4..=6, Some(g)) => {
                let member = g.members.first().map_or("m0".to_string(), |m| m.member_id.clone());
                (g.generation_id, member)
            }
            (7, Some(g)) => (g.generation_id - 1, "m0".into()),
            (8, Some(g)) => (g.generation_id, "stranger".into()),
            (_, Some(g)) => (g.generation_id + 1, "m1".into()),
        }
    }

    pub(crate) fn commits(&mut self, state: &BrokerState) -> Vec<OffsetCommitEntry> {
        let metadata_max = self.limits.offset_metadata_bytes_max;
        self.pick_partitions(state, 3)
            .into_iter()
            .map(|(topic, partition)| {
                let end = state.partition(&topic, partition).map_or(0, |p| p.log_end_offset);
                let metadata = match self.rng.gen_range(0..10) {
                    0..=5 => None,
                    6..=8 => Some(format!("c{}", self.rng.gen_range(0..100))),
                    _ => Some("x".repeat(metadata_max + 1)),
                };
                OffsetCommitEntry {
                    topic,
                    partition,
                    offset: self.rng.gen_range(0..=end + 2),
                    leader_epoch: self.rng.gen_range(-1..=self.term),
                    metadata,
                }
            })
            .collect()
    }

    pub(crate) fn group_action(&mut self, state: &BrokerState, q: &mut Queue) {
        let group = GROUPS[self.rng.gen_range(0..GROUPS.len())];
        let recorded = state.groups.groups.get(group).and_then(|g| g.generation.as_ref());
        let recorded_id = recorded.map_or(0, |g| g.generation_id);
        match self.rng.gen_range(0..100) {
            0..=49 => {
                let (generation_id, member_id) = self.member_of(state, group);
                let commits = self.commits(state);
                let op = OffsetCommitOp { group_id: group.into(), generation_id, member_id, commits };
                q.push(Proposal::Op(Op::OffsetCommit(op)), Sent::Items(ItemsKind::OffsetCommit));
            }
            50..=71 => {
                let generation_id = if self.rng.gen_bool(0.1) { recorded_id - 1 } else { recorded_id + 1 };
                let members = (0..self.rng.gen_range(0..=3))
                    .map(|i| GenerationMember {
                        member_id: MEMBERS[(i + self.rng.gen_range(0..MEMBERS.len())) % MEMBERS.len()].into(),
                        group_instance_id: self.rng.gen_bool(0.3).then(|| format!("instance-{i}")),
                        session_timeout_ms: 45_000,
                        rebalance_timeout_ms: 300_000,
                    })
                    .collect();
                let op = GenerationOp {
                    group_id: group.into(),
                    generation_id,
                    protocol_type: "consumer".into(),
                    protocol_name: if self.rng.gen_bool(0.5) { "range" } else { "cooperative-sticky" }.into(),
                    members,
                };
                self.stats.generations += 1;
                q.duty(Op::CompleteGeneration(op));
            }
            72..=87 => {
                let committed: Vec<(String, i32)> = state
                    .groups
                    .groups
                    .get(group)
                    .map(|g| {
                        g.offsets.iter().flat_map(|(t, ps)| ps.keys().map(move |p| (t.clone(), *p))).collect()
                    })
                    .unwrap_or_default();
                let mut partitions: Vec<(String, i32)> = Vec::new();
                for _ in 0..self.rng.gen_range(1..=2) {
                    if !committed.is_empty() {
                        let p = committed[self.rng.gen_range(0..committed.len())].clone();
                        if !partitions.contains(&p) {
                            partitions.push(p);
                        }
                    }
                }
                if self.rng.gen_bool(0.2) {
                    if let Some(p) = self.pick_partition(state) {
                        if !partitions.contains(&p) {
                            partitions.push(p);
                        }
                    }
                }
                let offsets = partitions.iter().filter(|p| committed.contains(p)).count() as u64;
                let op = OffsetDeleteOp { group_id: group.into(), partitions };
                q.push(Proposal::Op(Op::OffsetDelete(op)), Sent::OffsetDelete { offsets });
            }
            _ => {
                let mut groups = vec![GroupDeletion {
                    group_id: group.into(),
                    generation_id: recorded_id + self.rng.gen_range(0..=1),
                }];
                if self.rng.gen_bool(0.3) {
                    let other = GROUPS[self.rng.gen_range(0..GROUPS.len())];
                    if other != group {
                        groups.push(GroupDeletion { group_id: other.into(), generation_id: 0 });
                    }
                }
                q.push(
                    Proposal::Op(Op::DeleteGroups(DeleteGroupsOp { groups })),
                    Sent::Items(ItemsKind::DeleteGroups),
                );
            }
        }
    }

    /// Retention: the leader moves log starts forward, sometimes past the last stable offset
    /// (apply holds them there) or backwards (apply ignores it).
    pub(crate) fn trim(&mut self, state: &BrokerState, q: &mut Queue) {
        let trims: Vec<TrimLog> = self
            .pick_partitions(state, 3)
            .into_iter()
            .map(|(topic, partition)| {
                let (start, end) = state
                    .partition(&topic, partition)
                    .map_or((0, 0), |p| (p.log_start_offset, p.log_end_offset));
                let log_start_offset = self.rng.gen_range(start.saturating_sub(2)..=end + 2);
                TrimLog { topic, partition, log_start_offset }
            })
            .collect();
        match (trims.is_empty(), self.rng.gen_range(0..10)) {
            (true, _) => {}
            // DeleteRecords: the client's offsets, past the LSO too; -1 is the high watermark.
            (false, 0..=2) => {
                let partitions = trims
                    .into_iter()
                    .map(|t| TrimLog {
                        log_start_offset: if self.rng.gen_bool(0.2) { -1 } else { t.log_start_offset },
                        ..t
                    })
                    .collect();
                q.duty(Op::DeleteRecords(DeleteRecordsOp { partitions }));
            }
            (false, _) => q.duty(Op::TrimLog(TrimLogOp { trims })),
        }
        if self.rng.gen_bool(0.2) {
            self.alter_configs(state, q);
        }
    }

    /// Config alterations that change what later entries do: the topic or broker default
    /// `message.timestamp.type` (the entry builder stamps LogAppendTime by it), and list
    /// configs, valid or not.
    fn alter_configs(&mut self, state: &BrokerState, q: &mut Queue) {
        let topic = self.pick_partition(state).map(|(t, _)| t).unwrap_or_else(|| TOPICS[0].into());
        let resource = match self.rng.gen_range(0..3) {
            0 => ConfigResource::Topic(topic),
            1 => ConfigResource::BrokerDefault,
            _ => ConfigResource::Broker(1),
        };
        let (name, kind, value) = match (self.rng.gen_range(0..5), &resource) {
            (0, ConfigResource::Topic(_)) => ("message.timestamp.type", AlterKind::Set, "LogAppendTime"),
            (0, _) => ("log.message.timestamp.type", AlterKind::Set, "LogAppendTime"),
            (1, ConfigResource::Topic(_)) => ("message.timestamp.type", AlterKind::Delete, ""),
            (1, _) => ("log.message.timestamp.type", AlterKind::Delete, ""),
            (2, ConfigResource::Topic(_)) => ("cleanup.policy", AlterKind::Append, "compact"),
            (2, _) => ("log.cleanup.policy", AlterKind::Subtract, "delete"),
            _ => ("retention.ms", AlterKind::Set, "soon"),
        };
        let alteration = ConfigAlteration { name: name.into(), kind, value: Some(value.into()) };
        let change =
            ResourceAlteration { resource, replace: self.rng.gen_bool(0.1), alterations: vec![alteration] };
        q.duty(Op::AlterConfigs(AlterConfigsOp { resources: vec![change] }));
    }

    /// The leader's timeout duty: every open transaction past its timeout, as it sees them.
    pub(crate) fn abort_timed_out(&mut self, state: &BrokerState, q: &mut Queue) {
        let now = self.now_ms;
        let due = state.txns.timed_out(now);
        if !due.is_empty() {
            q.duty(Op::AbortTxns(AbortTxnsOp { reason: BrokerAbort::Timeout, transactions: due }));
        }
    }

    /// `kafka-transactions.sh abort`, sometimes naming an epoch that has moved on.
    pub(crate) fn admin_abort(&mut self, state: &BrokerState, q: &mut Queue) {
        if state.txns.by_id.is_empty() {
            return;
        }
        let (tid, meta) =
            state.txns.by_id.iter().nth(self.rng.gen_range(0..state.txns.by_id.len())).expect("in range");
        let stale = i16::from(self.rng.gen_bool(0.3));
        let seen =
            ProducerIdEpoch { producer_id: meta.producer_id, producer_epoch: meta.producer_epoch - stale };
        // Takeover aborts are no longer proposed (issue 17), but logs written before still hold
        // them, and they must apply as before.
        let reason = if self.rng.gen_bool(0.8) { BrokerAbort::Admin } else { BrokerAbort::Takeover };
        q.duty(Op::AbortTxns(AbortTxnsOp { reason, transactions: vec![(tid.clone(), seen)] }));
    }

    pub(crate) fn create_topics(&mut self, q: &mut Queue) {
        let topics = (0..self.rng.gen_range(1..=2))
            .map(|_| {
                self.topic_serial += 1;
                let mut topic_id = [0u8; 16];
                topic_id[..8].copy_from_slice(&self.seed.to_be_bytes());
                topic_id[8..].copy_from_slice(&self.topic_serial.to_be_bytes());
                let timestamp_type = match self.rng.gen_range(0..10) {
                    0..=2 => Some("LogAppendTime"),
                    3 => Some("CreateTime"),
                    _ => None,
                };
                let configs: BTreeMap<String, String> = timestamp_type
                    .map(|t| ("message.timestamp.type".to_string(), t.to_string()))
                    .into_iter()
                    .collect();
                NewTopic {
                    name: TOPICS[self.rng.gen_range(0..TOPICS.len())].into(),
                    topic_id,
                    partitions: if self.rng.gen_bool(0.03) { 0 } else { self.rng.gen_range(1..=4) },
                    replication_factor: 3,
                    configs,
                }
            })
            .collect();
        q.push(
            Proposal::Op(Op::CreateTopics(CreateTopicsOp { topics })),
            Sent::Items(ItemsKind::CreateTopics),
        );
    }

    pub(crate) fn create_partitions(&mut self, state: &BrokerState, q: &mut Queue) {
        let Some((topic, _)) = self.pick_partition(state) else { return };
        let current = state.topics.get(&topic).map_or(0, |t| t.partitions.len() as i32);
        let count = current + self.rng.gen_range(-1..=2);
        let op = CreatePartitionsOp { topics: vec![NewPartitions { topic, count, assignments: Vec::new() }] };
        q.push(Proposal::Op(Op::CreatePartitions(op)), Sent::Items(ItemsKind::CreatePartitions));
    }

    pub(crate) fn delete_topic(&mut self, state: &BrokerState, q: &mut Queue) {
        if state.topics.len() < 4 {
            return;
        }
        let name =
            state.topics.keys().nth(self.rng.gen_range(0..state.topics.len())).expect("in range").clone();
        q.push(
            Proposal::Op(Op::DeleteTopics(DeleteTopicsOp { names: vec![name] })),
            Sent::Items(ItemsKind::DeleteTopics),
        );
    }
}

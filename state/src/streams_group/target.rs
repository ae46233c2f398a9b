//! The group-wide parts of a heartbeat: the fingerprint of the topics a topology needs (a
//! change re-assigns), computing the target assignment when one is owed and neither the
//! initial rebalance delay nor the assignment interval holds it back, and the endpoint →
//! partitions map members use for interactive queries.

use std::collections::{BTreeMap, BTreeSet};

use kafka_compat::error_code::UNKNOWN_SERVER_ERROR;

use super::assignor::{assign, AssignmentConfigs, AssignorMember};
use super::model::StreamsGroup;
use super::request::{EndpointPartitions, Refusal, StatusEntry, StreamsSettings};
use super::tasks::{Tasks, TasksTuple};
use super::topology::{ConfiguredTopology, Status, Topology};
use crate::consumer_group::Fnv64;
use crate::{internal_topic, Topic};

/// Fingerprint of every topic the topology names (source, repartition, changelog): its id
/// and partition count, or its absence. Kafka's metadata hash, as a stable FNV.
pub(super) fn fingerprint(topology: &Topology, topics: &BTreeMap<String, Topic>) -> u64 {
    let mut names = BTreeSet::new();
    for s in topology.subtopologies.values() {
        names.extend(s.source_topics.iter());
        names.extend(s.repartition_source_topics.iter().map(|t| &t.name));
        names.extend(s.state_changelog_topics.iter().map(|t| &t.name));
    }
    let mut fp = Fnv64::new();
    for name in names {
        match internal_topic::lookup(topics, name) {
            Some((id, count)) => fp.topic(name, &id, count),
            None => fp.bytes(name.as_bytes()),
        }
    }
    fp.finish()
}

/// Computes the target when the group epoch is ahead of it, unless a delay holds it back
/// (then says so in `status`, as Kafka's ASSIGNMENT_DELAYED).
pub(super) fn maybe_assign(
    group: &mut StreamsGroup,
    configured: &ConfiguredTopology,
    settings: &StreamsSettings,
    now_ms: i64,
    status: &mut Vec<StatusEntry>,
) -> Result<(), Refusal> {
    let delayed =
        |detail: &str| StatusEntry { code: Status::AssignmentDelayed.code(), detail: detail.to_string() };
    if now_ms < group.assign_not_before_ms {
        status.push(delayed("Assignment delayed due to the configured initial rebalance delay."));
        return Ok(());
    }
    // Past: forget it, so that the leader's timer stops asking (`assignment_due_at`).
    group.assign_not_before_ms = 0;
    if group.assignment_epoch >= group.group_epoch {
        return Ok(());
    }
    if !interval_passed(group, settings, now_ms) {
        status.push(delayed("Assignment delayed due to the configured assignment interval."));
        return Ok(());
    }
    compute_target(group, configured, settings, now_ms)
}

/// Whether a target owed now may be computed: the assignment interval has passed since the
/// last one (or there was none).
pub fn interval_passed(group: &StreamsGroup, settings: &StreamsSettings, now_ms: i64) -> bool {
    let interval = i64::from(settings.assignment_interval_ms);
    group.assignment_time_ms == 0
        || interval == 0
        || now_ms >= group.assignment_time_ms.saturating_add(interval)
}

/// A new target for every member at the group epoch: the sticky assignor's when the
/// topology is ready, nothing for anyone otherwise.
pub(super) fn compute_target(
    group: &mut StreamsGroup,
    configured: &ConfiguredTopology,
    settings: &StreamsSettings,
    now_ms: i64,
) -> Result<(), Refusal> {
    let targets = match &configured.subtopologies {
        Some(subtopologies) => {
            let counts = subtopologies.iter().map(|(id, s)| (id.clone(), s.num_tasks)).collect();
            let stateless = subtopologies
                .iter()
                .filter(|(_, s)| s.state_changelog_topics.is_empty())
                .map(|(id, _)| id.clone());
            let configs = AssignmentConfigs {
                num_standby_replicas: settings.num_standby_replicas,
                stateless: stateless.collect(),
            };
            assign(&assignor_members(group), &counts, &configs).map_err(|reason| {
                let message = format!(
                    "Failed to compute a new target assignment for epoch {}: {reason}",
                    group.group_epoch
                );
                Refusal::new(UNKNOWN_SERVER_ERROR, message)
            })?
        }
        None => group.members.keys().map(|id| (id.clone(), TasksTuple::default())).collect(),
    };
    group.targets = targets;
    group.assignment_epoch = group.group_epoch;
    group.assignment_time_ms = now_ms;
    group.assign_not_before_ms = 0;
    Ok(())
}

fn assignor_members(group: &StreamsGroup) -> BTreeMap<String, AssignorMember> {
    let member = |m: &super::model::Member| AssignorMember {
        process_id: m.process_id.clone(),
        current: m.assigned.tuple(),
        task_offsets: m
            .task_offsets
            .iter()
            .flat_map(|(s, ps)| ps.iter().map(move |(p, o)| ((s.clone(), *p), *o)))
            .collect(),
    };
    group.members.iter().map(|(id, m)| (id.clone(), member(m))).collect()
}

/// Every member's endpoint with the partitions its active and standby (and warm-up) tasks
/// read; empty until the topology is ready.
pub(super) fn endpoints(
    group: &StreamsGroup,
    configured: &ConfiguredTopology,
    topics: &BTreeMap<String, Topic>,
) -> Vec<EndpointPartitions> {
    let Some(subtopologies) = &configured.subtopologies else { return Vec::new() };
    let partitions = |tasks: &Tasks| {
        let mut out: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for (id, ps) in tasks {
            let Some(sub) = subtopologies.get(id) else { continue };
            let names = sub.source_topics.iter().chain(sub.repartition_source_topics.keys());
            for name in names {
                let count = internal_topic::lookup(topics, name).map_or(0, |(_, n)| n);
                out.entry(name.clone()).or_default().extend(ps.iter().filter(|p| **p < count));
            }
        }
        out.retain(|_, ps| !ps.is_empty());
        out
    };
    let mut list = Vec::new();
    for m in group.members.values() {
        let Some((host, port)) = &m.user_endpoint else { continue };
        let tuple = m.assigned.tuple();
        let mut standby = tuple.standby.clone();
        for (s, ps) in &tuple.warmup {
            standby.entry(s.clone()).or_default().extend(ps.iter().copied());
        }
        list.push(EndpointPartitions {
            host: host.clone(),
            port: *port,
            active: partitions(&tuple.active),
            standby: partitions(&standby),
        });
    }
    list
}

impl StreamsGroup {
    /// The leader's timer: computes the target if one is owed and no delay holds it back.
    pub fn assign_due(
        &mut self,
        configured: &ConfiguredTopology,
        settings: &StreamsSettings,
        now_ms: i64,
    ) -> Result<(), Refusal> {
        let mut status = Vec::new();
        maybe_assign(self, configured, settings, now_ms, &mut status)
    }

    /// When the leader's timer should next try [`StreamsGroup::assign_due`]: the later of the
    /// initial delay and the assignment interval, if a target is owed; None otherwise.
    pub fn assignment_due_at(&self, settings: &StreamsSettings) -> Option<i64> {
        if self.members.is_empty()
            || (self.assignment_epoch >= self.group_epoch && self.assign_not_before_ms == 0)
        {
            return None;
        }
        let interval = i64::from(settings.assignment_interval_ms);
        let after_interval =
            if self.assignment_time_ms == 0 { 0 } else { self.assignment_time_ms.saturating_add(interval) };
        Some(self.assign_not_before_ms.max(after_interval))
    }
}

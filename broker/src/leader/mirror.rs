//! Keeping a Raft group's topics those group 0 placed in it (issue 32, docs/SCALING.md §2
//! "Topic creation"): group 0 holds every topic's metadata, and records at creation which group
//! holds its data (`onelog.raft.group`); the leader of that group, which replicates group 0,
//! sees the topic applied there and puts it in its own log, whose apply creates the partition
//! logs under `groups/<g>/`. Deletion, new partitions and config changes follow the same way.
//! Where consumer groups are placed per group too, every group keeps every topic.
//!
//! The group's copy is matched to group 0's by topic id, so a topic deleted and created again
//! under its name is dropped and made anew, never confused with the old one. Each pass is
//! idempotent: what a lost entry or a leader change left undone is done by the next pass, on
//! this leader or the next.

use std::collections::BTreeMap;

use onelog_state::command::{
    AlterConfigsOp, CreatePartitionsOp, CreateTopicsOp, DeleteTopicsOp, NewPartitions, NewTopic,
};
use onelog_state::configs::{AlterKind, ConfigAlteration, ConfigResource, ResourceAlteration};
use onelog_state::features::GROUP_PLACEMENT;
use onelog_state::xgroup::placement::{is_topic_placement_config, recorded_topic_group};
use onelog_state::BrokerState;

use super::duties::DutyCtx;
use crate::raft::applied::AppliedView;

/// What a group must hold of one topic.
#[derive(Clone, PartialEq)]
struct Held {
    topic_id: [u8; 16],
    partitions: usize,
    replication_factor: i16,
    configs: BTreeMap<String, String>,
}

/// The topics `state` holds for `group`: all its topics (`group` `None`), else those placed
/// in `group`.
fn held(state: &BrokerState, group: Option<u32>) -> BTreeMap<String, Held> {
    let placed_here =
        |configs: &BTreeMap<String, String>| group.is_none_or(|g| recorded_topic_group(configs) == g);
    state
        .topics
        .iter()
        .filter(|(_, t)| placed_here(&t.configs))
        .map(|(name, t)| {
            let held = Held {
                topic_id: t.topic_id,
                partitions: t.partitions.len(),
                replication_factor: t.replication_factor,
                configs: t.configs.clone(),
            };
            (name.clone(), held)
        })
        .collect()
}

/// The entries that bring `current` (the group's topics) to `wanted` (group 0's for it):
/// deletions first; a topic whose id changed is created again by the next pass.
#[derive(Default)]
struct Changes {
    delete: Vec<String>,
    create: Vec<NewTopic>,
    grow: Vec<NewPartitions>,
    configs: Vec<ResourceAlteration>,
}

fn changes(wanted: &BTreeMap<String, Held>, current: &BTreeMap<String, Held>) -> Changes {
    let mut changes = Changes::default();
    for (name, have) in current {
        match wanted.get(name) {
            Some(want) if want.topic_id == have.topic_id => {
                if want.partitions > have.partitions {
                    let count = i32::try_from(want.partitions).unwrap_or(i32::MAX);
                    changes.grow.push(NewPartitions { topic: name.clone(), count, assignments: Vec::new() });
                }
                if want.configs != have.configs {
                    changes.configs.push(replacing(name, &want.configs));
                }
            }
            _ => changes.delete.push(name.clone()),
        }
    }
    for (name, want) in wanted.iter().filter(|(name, _)| !current.contains_key(*name)) {
        changes.create.push(NewTopic {
            name: name.clone(),
            topic_id: want.topic_id,
            partitions: i32::try_from(want.partitions).unwrap_or(i32::MAX),
            replication_factor: want.replication_factor,
            configs: want.configs.clone(),
        });
    }
    changes
}

/// A replacing AlterConfigs that sets `configs` (the placement is kept by apply, and cannot be
/// named).
fn replacing(name: &str, configs: &BTreeMap<String, String>) -> ResourceAlteration {
    let alterations = configs
        .iter()
        .filter(|(key, _)| !is_topic_placement_config(key))
        .map(|(key, value)| ConfigAlteration {
            name: key.clone(),
            kind: AlterKind::Set,
            value: Some(value.clone()),
        })
        .collect();
    ResourceAlteration { resource: ConfigResource::Topic(name.to_string()), replace: true, alterations }
}

/// One pass, while this node leads `group`: proposes what the group's topics lack. A cluster
/// that places its consumer, Streams and share groups (`onelog.group.placement`) copies every
/// topic's metadata, as group 0 holds it, since a group placed here assigns and commits
/// offsets of topics placed anywhere; the partitions of the others stay empty here.
pub async fn mirror_once(ctx: &DutyCtx, group0: &AppliedView, group: u32) {
    let wanted = group0.state(|s| {
        let every_topic = s.features.level(GROUP_PLACEMENT) >= 1;
        held(s, (!every_topic).then_some(group))
    });
    let current = ctx.applied.state(|s| held(s, None));
    let changes = changes(&wanted, &current);
    let proposer = &ctx.proposer;
    if !changes.delete.is_empty() {
        tracing::info!(group, topics = ?changes.delete, "dropping topics group 0 no longer places in this group");
        report(
            group,
            "deleting topics",
            proposer.propose(DeleteTopicsOp { names: changes.delete }).await.map(drop),
        );
    }
    if !changes.create.is_empty() {
        let names: Vec<&str> = changes.create.iter().map(|t| t.name.as_str()).collect();
        tracing::info!(group, topics = ?names, "creating the topics group 0 placed in this group");
        report(
            group,
            "creating topics",
            proposer.propose(CreateTopicsOp { topics: changes.create }).await.map(drop),
        );
    }
    if !changes.grow.is_empty() {
        let op = CreatePartitionsOp { topics: changes.grow };
        report(group, "adding partitions", proposer.propose(op).await.map(drop));
    }
    if !changes.configs.is_empty() {
        let op = AlterConfigsOp { resources: changes.configs };
        report(group, "altering topic configs", proposer.propose(op).await.map(drop));
    }
}

fn report(group: u32, what: &str, outcome: Result<(), crate::leader::proposer::ProposeError>) {
    if let Err(e) = outcome {
        tracing::warn!(group, error = %e, "{what} in the Raft group did not commit; the next pass retries");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(id: u8, partitions: usize, configs: &[(&str, &str)]) -> Held {
        let configs = configs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Held { topic_id: [id; 16], partitions, replication_factor: 3, configs }
    }

    #[test]
    fn a_group_follows_group_0_by_topic_id() {
        let wanted: BTreeMap<String, Held> = [
            ("new".to_string(), topic(1, 2, &[("onelog.raft.group", "1")])),
            ("grown".to_string(), topic(2, 4, &[("onelog.raft.group", "1"), ("retention.ms", "5")])),
            ("recreated".to_string(), topic(9, 1, &[("onelog.raft.group", "1")])),
        ]
        .into();
        let current: BTreeMap<String, Held> = [
            ("grown".to_string(), topic(2, 2, &[("onelog.raft.group", "1")])),
            ("recreated".to_string(), topic(3, 1, &[("onelog.raft.group", "1")])),
            ("gone".to_string(), topic(4, 1, &[("onelog.raft.group", "1")])),
        ]
        .into();
        let c = changes(&wanted, &current);
        assert_eq!(c.delete, vec!["gone".to_string(), "recreated".to_string()]);
        let created: Vec<_> =
            c.create.iter().map(|t| (t.name.as_str(), t.topic_id[0], t.partitions)).collect();
        assert_eq!(created, vec![("new", 1, 2)], "the recreated topic waits for the next pass");
        assert_eq!(c.grow.len(), 1);
        assert_eq!((c.grow[0].topic.as_str(), c.grow[0].count), ("grown", 4));
        let names: Vec<_> = c.configs[0].alterations.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, vec!["retention.ms"], "the placement is kept by apply, never named");
        assert!(changes(&wanted, &wanted).delete.is_empty());
    }
}

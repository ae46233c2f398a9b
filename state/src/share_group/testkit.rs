//! Test helpers for share groups: topics, requests as the Java share consumer sends them, and
//! the group invariants every test and the random run check.

use std::collections::{BTreeMap, BTreeSet};

use super::model::ShareGroups;
use super::request::{Heartbeat, HeartbeatAnswer, ShareSettings};
use crate::consumer_group::{Assignment, Refusal, TopicId};
use crate::{PartitionState, Topic};

pub(crate) fn tid(id: u8) -> TopicId {
    [id; 16]
}

/// (name, partition count, id byte) per topic.
pub(crate) fn topics(list: &[(&str, usize, u8)]) -> BTreeMap<String, Topic> {
    list.iter().map(|(name, n, id)| (name.to_string(), topic(*id, *n))).collect()
}

pub(crate) fn topic(id: u8, partitions: usize) -> Topic {
    Topic {
        topic_id: tid(id),
        replication_factor: 1,
        configs: BTreeMap::new(),
        partitions: vec![PartitionState::new(); partitions],
    }
}

/// (topic id byte, partitions) per topic.
pub(crate) fn parts(list: &[(u8, &[i32])]) -> Assignment {
    list.iter().map(|(id, ps)| (tid(*id), ps.iter().copied().collect::<BTreeSet<i32>>())).collect()
}

/// Settings that compute a target on every heartbeat that owes one.
pub(crate) fn eager() -> ShareSettings {
    ShareSettings { assignment_interval_ms: 0, ..ShareSettings::default() }
}

/// A join as the Java share consumer sends it.
pub(crate) fn join(group: &str, member: &str, names: &[&str]) -> Heartbeat {
    Heartbeat {
        group_id: group.into(),
        member_id: member.into(),
        member_epoch: 0,
        subscribed_topic_names: Some(names.iter().map(|n| n.to_string()).collect()),
        client_id: "client".into(),
        client_host: "/10.0.0.1".into(),
        ..Heartbeat::default()
    }
}

/// A steady heartbeat: nothing changed since the last one.
pub(crate) fn beat(group: &str, member: &str, epoch: i32) -> Heartbeat {
    Heartbeat { member_epoch: epoch, subscribed_topic_names: None, ..join(group, member, &[]) }
}

pub(crate) fn leave(group: &str, member: &str) -> Heartbeat {
    beat(group, member, -1)
}

/// Runs a heartbeat at time 0 with `eager` settings.
pub(crate) fn run(
    groups: &mut ShareGroups,
    topics: &BTreeMap<String, Topic>,
    hb: &Heartbeat,
) -> Result<HeartbeatAnswer, Refusal> {
    groups.heartbeat(topics, hb, &eager(), 0)
}

/// What must hold at all times: epochs ordered, targets only for members.
pub(crate) fn check_epochs(groups: &ShareGroups) {
    for (group_id, group) in &groups.groups {
        assert!(group.assignment_epoch <= group.group_epoch, "{group_id}: {group:?}");
        assert!(group.targets.keys().all(|m| group.members.contains_key(m)), "{group_id}: {group:?}");
        for (member_id, member) in &group.members {
            assert!(member.member_epoch <= group.assignment_epoch, "{group_id}/{member_id}: {member:?}");
        }
    }
}

/// What must hold of a member right after its heartbeat (topics may change afterwards):
/// every assigned partition exists and belongs to a topic the member subscribes to.
pub(crate) fn check_member(
    groups: &ShareGroups,
    topics: &BTreeMap<String, Topic>,
    group_id: &str,
    member_id: &str,
) {
    let member = &groups.groups[group_id].members[member_id];
    for (topic_id, ps) in &member.assignment {
        let (name, topic) =
            topics.iter().find(|(_, t)| t.topic_id == *topic_id).expect("assigned topic exists");
        assert!(member.subscribed_topic_names.contains(name), "{member_id} assigned unsubscribed {name}");
        let count = i32::try_from(topic.partitions.len()).unwrap();
        assert!(ps.iter().all(|p| (0..count).contains(p)), "{member_id}: {name} {ps:?} of {count}");
    }
}

/// Both, for every member: when every member heartbeated since the topics last changed.
pub(crate) fn check_invariants(groups: &ShareGroups, topics: &BTreeMap<String, Topic>) {
    check_epochs(groups);
    for (group_id, group) in &groups.groups {
        for member_id in group.members.keys() {
            check_member(groups, topics, group_id, member_id);
        }
    }
}

/// After every member has heartbeated past the assignment: each existing partition some
/// member subscribes to is assigned to at least one member.
pub(crate) fn check_coverage(groups: &ShareGroups, topics: &BTreeMap<String, Topic>) {
    for (group_id, group) in &groups.groups {
        let assigned = group.assigned_partitions();
        for member in group.members.values() {
            for name in &member.subscribed_topic_names {
                let Some(topic) = topics.get(name) else { continue };
                for p in 0..i32::try_from(topic.partitions.len()).unwrap() {
                    assert!(
                        assigned.contains(&(topic.topic_id, p)),
                        "{group_id}: {name}-{p} unassigned: {group:?}"
                    );
                }
            }
        }
    }
}

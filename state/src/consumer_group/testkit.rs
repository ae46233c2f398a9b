//! Test helpers for consumer groups: topics, requests as the Java client sends them, and a
//! small simulated coordinator that checks the group invariants after every heartbeat.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::{Encodable, StrBytes};
use rand::rngs::StdRng;
use rand::Rng;

use super::assignor::MemberSpec;
use super::model::{Assignment, ConsumerGroup, ConsumerGroups, TopicId};
use super::request::{GroupSettings, Heartbeat, HeartbeatAnswer, Refusal, TopicPartitions};
use crate::{PartitionState, Topic};

pub(crate) fn tid(id: u8) -> TopicId {
    [id; 16]
}

pub(crate) fn topic(id: u8, partitions: usize) -> Topic {
    Topic {
        topic_id: tid(id),
        replication_factor: 1,
        configs: BTreeMap::new(),
        partitions: vec![PartitionState::new(); partitions],
    }
}

/// (name, partition count, id byte) per topic.
pub(crate) fn topics(list: &[(&str, usize, u8)]) -> BTreeMap<String, Topic> {
    list.iter().map(|(name, n, id)| (name.to_string(), topic(*id, *n))).collect()
}

/// (topic id byte, partitions) per topic; topics with no partitions are left out.
pub(crate) fn parts(list: &[(u8, &[i32])]) -> Assignment {
    list.iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(id, ps)| (tid(*id), ps.iter().copied().collect::<BTreeSet<i32>>()))
        .collect()
}

pub(crate) fn topic_partitions(a: &Assignment) -> Vec<TopicPartitions> {
    a.iter()
        .map(|(t, ps)| TopicPartitions { topic_id: *t, partitions: ps.iter().copied().collect() })
        .collect()
}

/// A v1 join as the Java client sends it: a full request with the topic names.
pub(crate) fn join(group: &str, member: &str, names: &[&str]) -> Heartbeat {
    Heartbeat {
        version: 1,
        group_id: group.into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 300_000,
        subscribed_topic_names: Some(names.iter().map(|n| n.to_string()).collect()),
        topic_partitions: Some(Vec::new()),
        client_id: "client".into(),
        client_host: "/10.0.0.1".into(),
        ..Heartbeat::default()
    }
}

/// A regular heartbeat reporting what the member owns, nothing else.
pub(crate) fn beat(group: &str, member: &str, epoch: i32, owned: &Assignment) -> Heartbeat {
    Heartbeat {
        version: 1,
        group_id: group.into(),
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        topic_partitions: Some(topic_partitions(owned)),
        client_id: "client".into(),
        client_host: "/10.0.0.1".into(),
        ..Heartbeat::default()
    }
}

/// Settings with the assignment interval off: targets are computed on the heartbeat that
/// owes one.
pub(crate) fn settings() -> GroupSettings {
    GroupSettings { assignment_interval_ms: 0, ..GroupSettings::default() }
}

/// A coordinator in a test: the state, the topics, the settings and a clock that advances
/// 100 ms per heartbeat.
pub(crate) struct Sim {
    pub groups: ConsumerGroups,
    pub topics: BTreeMap<String, Topic>,
    pub settings: GroupSettings,
    pub now_ms: i64,
}

impl Sim {
    pub fn new(list: &[(&str, usize, u8)]) -> Sim {
        Sim { groups: ConsumerGroups::default(), topics: topics(list), settings: settings(), now_ms: 1_000 }
    }

    pub fn send(&mut self, hb: Heartbeat) -> Result<HeartbeatAnswer, Refusal> {
        self.now_ms += 100;
        let before = self.groups.clone();
        let result = self.groups.heartbeat(&self.topics, &hb, &self.settings, self.now_ms);
        if result.is_err() {
            assert_eq!(self.groups, before, "a refused heartbeat changed the state: {hb:?}");
        }
        self.check_invariants();
        result
    }

    pub fn group(&self, id: &str) -> &ConsumerGroup {
        &self.groups.groups[id]
    }

    /// No partition held by two members (assigned or pending revocation), nor targeted at
    /// two; the assignment epoch never passes the group epoch.
    pub fn check_invariants(&self) {
        for (group_id, group) in &self.groups.groups {
            assert!(group.assignment_epoch <= group.group_epoch, "{group_id}: {group:?}");
            let mut held = BTreeSet::new();
            for (member_id, m) in &group.members {
                for (t, ps) in m.assigned.iter().chain(&m.pending_revocation) {
                    for p in ps.keys() {
                        assert!(held.insert((*t, *p)), "{group_id}: {member_id} holds {p} held by another");
                    }
                }
            }
            let mut targeted = BTreeSet::new();
            for (t, p) in group
                .targets
                .values()
                .flat_map(|a| a.iter().flat_map(|(t, ps)| ps.iter().map(move |p| (t, p))))
            {
                assert!(targeted.insert((*t, *p)), "{group_id}: partition {p} targeted twice");
            }
        }
    }
}

/// A group as an assignor sees it, member-aligned vectors, for the assignors' properties.
pub(crate) struct Group {
    pub ids: Vec<String>,
    pub instances: Vec<Option<String>>,
    pub topics: Vec<BTreeSet<TopicId>>,
    pub targets: Vec<Assignment>,
    pub partitions: BTreeMap<TopicId, i32>,
}

impl Group {
    pub fn specs(&self) -> Vec<MemberSpec<'_>> {
        (0..self.ids.len())
            .map(|i| MemberSpec {
                member_id: &self.ids[i],
                instance_id: self.instances[i].as_deref(),
                topics: &self.topics[i],
                target: &self.targets[i],
            })
            .collect()
    }
}

/// A random group: 1-8 members over 1-4 topics of 0-12 partitions; all members subscribe
/// alike if `homogeneous`. Targets are empty.
pub(crate) fn random_group(rng: &mut StdRng, homogeneous: bool) -> Group {
    let partitions: BTreeMap<TopicId, i32> =
        (0..rng.gen_range(1..=4u8)).map(|t| (tid(t + 1), rng.gen_range(0..=12))).collect();
    let n = rng.gen_range(1..=8usize);
    let all: BTreeSet<TopicId> = partitions.keys().copied().collect();
    let topics = (0..n)
        .map(|_| {
            if homogeneous {
                all.clone()
            } else {
                all.iter().copied().filter(|_| rng.gen_bool(0.6)).collect()
            }
        })
        .collect();
    Group {
        ids: (0..n).map(|i| format!("m{i:02}")).collect(),
        instances: (0..n).map(|i| rng.gen_bool(0.3).then(|| format!("i{}", n - i))).collect(),
        topics,
        targets: vec![Assignment::new(); n],
        partitions,
    }
}

/// Every partition of a subscribed topic exactly once, to a subscriber; nothing else.
pub(crate) fn assert_complete(group: &Group, result: &[Assignment], seed: u64) {
    assert_eq!(result.len(), group.ids.len(), "seed {seed}");
    let mut seen = BTreeSet::new();
    for (i, assignment) in result.iter().enumerate() {
        for (t, ps) in assignment {
            assert!(group.topics[i].contains(t), "seed {seed}: member {i} got an unsubscribed topic");
            for p in ps {
                assert!((0..group.partitions[t]).contains(p), "seed {seed}: partition {p} does not exist");
                assert!(seen.insert((*t, *p)), "seed {seed}: partition {p} assigned twice");
            }
        }
    }
    let subscribed: BTreeSet<&TopicId> = group.topics.iter().flatten().collect();
    let expected: usize = subscribed.iter().map(|t| group.partitions[*t].max(0) as usize).sum();
    assert_eq!(seen.len(), expected, "seed {seed}: some partition left unassigned");
}

/// A classic member's JoinGroup metadata (`ConsumerProtocolSubscription`) at `version`:
/// topics, and owned partitions by topic name (v1+).
pub(crate) fn subscription_bytes(version: i16, topics: &[&str], owned: &[(&str, &[i32])]) -> Vec<u8> {
    use kafka_protocol::messages::consumer_protocol_subscription::{
        ConsumerProtocolSubscription, TopicPartition,
    };
    let owned = by_topic_name(owned, |topic, partitions| {
        TopicPartition::default().with_topic(topic).with_partitions(partitions)
    });
    let body = ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| StrBytes::from_string(t.to_string())).collect())
        .with_owned_partitions(if version >= 1 { owned } else { Vec::new() })
        .with_rack_id((version >= 3).then(|| StrBytes::from_static_str("rack-a")));
    versioned_bytes(version, &body)
}

/// A classic member's SyncGroup assignment (`ConsumerProtocolAssignment` v0), by topic name,
/// with `user_data` if given.
pub(crate) fn assignment_bytes(assigned: &[(&str, &[i32])], user_data: Option<&[u8]>) -> Vec<u8> {
    use kafka_protocol::messages::consumer_protocol_assignment::{
        ConsumerProtocolAssignment, TopicPartition,
    };
    let assigned = by_topic_name(assigned, |topic, partitions| {
        TopicPartition::default().with_topic(topic).with_partitions(partitions)
    });
    let body = ConsumerProtocolAssignment::default()
        .with_assigned_partitions(assigned)
        .with_user_data(user_data.map(bytes::Bytes::copy_from_slice));
    versioned_bytes(0, &body)
}

/// One protocol entry per topic of `partitions`, made by `make` from its name and partitions.
fn by_topic_name<T>(partitions: &[(&str, &[i32])], make: impl Fn(TopicName, Vec<i32>) -> T) -> Vec<T> {
    partitions
        .iter()
        .map(|(t, ps)| make(TopicName(StrBytes::from_string(t.to_string())), ps.to_vec()))
        .collect()
}

/// The consumer protocol's framing: the version, then `body` encoded at it.
fn versioned_bytes(version: i16, body: &impl Encodable) -> Vec<u8> {
    use bytes::BufMut;
    let mut out = bytes::BytesMut::new();
    out.put_i16(version);
    body.encode(&mut out, version).unwrap();
    out.to_vec()
}

/// A classic member of a snapshot: subscribed to `topics` (v1 metadata under "range" and
/// "cooperative-sticky"), last assigned `assigned`.
pub(crate) fn classic_member(
    id: &str,
    topics: &[&str],
    assigned: &[(&str, &[i32])],
) -> super::ClassicSnapshotMember {
    let metadata = subscription_bytes(1, topics, assigned);
    super::ClassicSnapshotMember {
        member_id: id.into(),
        instance_id: None,
        client_id: format!("client-{id}"),
        client_host: "/10.0.0.2".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocols: ["range", "cooperative-sticky"]
            .iter()
            .map(|name| super::ClassicProtocol { name: name.to_string(), metadata: metadata.clone() })
            .collect(),
        assignment: assignment_bytes(assigned, None),
    }
}

/// A live classic group at generation 5: A owns t-0..2, B owns t-3..5.
pub(crate) fn classic_snapshot() -> super::ClassicGroupSnapshot {
    super::ClassicGroupSnapshot {
        generation_id: 5,
        protocol_type: "consumer".into(),
        protocol_name: "range".into(),
        members: vec![
            classic_member("A", &["t"], &[("t", &[0, 1, 2])]),
            classic_member("B", &["t"], &[("t", &[3, 4, 5])]),
        ],
    }
}

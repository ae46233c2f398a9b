//! Classic members inside a consumer group, as a Java classic consumer meets them after an
//! online upgrade: told to rejoin when the group moves on, revoking before anything is given
//! away, served their partitions by SyncGroup, and refused as Kafka refuses them.

use std::collections::BTreeMap;

use kafka_compat::error_code;

use super::*;
use crate::consumer_group::embedded::parse_assignment;
use crate::consumer_group::model::{Assignment, ConsumerGroups, MemberState};
use crate::consumer_group::request::GroupSettings;
use crate::consumer_group::testkit::{
    beat, classic_snapshot, join, parts, settings, subscription_bytes, topics,
};
use crate::consumer_group::{upgrade, Migration};
use crate::Topic;

struct Group {
    groups: ConsumerGroups,
    topics: BTreeMap<String, Topic>,
    settings: GroupSettings,
}

/// The classic group of `classic_snapshot` upgraded by consumer-protocol member C's join.
fn upgraded_by_c() -> Group {
    let topics = topics(&[("t", 6, 1)]);
    let mut groups = ConsumerGroups::default();
    let group = upgrade("g", &classic_snapshot(), &topics, i32::MAX, Migration::default(), 0).unwrap();
    groups.groups.insert("g".into(), group);
    let c = groups.heartbeat(&topics, &join("g", "C", &["t"]), &settings(), 1).unwrap();
    assert_eq!(c.member_epoch, 6, "C's subscription is new: the epoch moves past the generation");
    Group { groups, topics, settings: settings() }
}

fn classic_join(member: &str, owned: &[(&str, &[i32])]) -> ClassicJoin {
    let metadata = subscription_bytes(1, &["t"], owned);
    ClassicJoin {
        group_id: "g".into(),
        member_id: member.into(),
        instance_id: None,
        client_id: format!("client-{member}"),
        client_host: "/10.0.0.2".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: ["range", "cooperative-sticky"]
            .iter()
            .map(|name| ClassicProtocol { name: name.to_string(), metadata: metadata.clone() })
            .collect(),
        ..ClassicJoin::default()
    }
}

impl Group {
    fn join(&mut self, member: &str, owned: &[(&str, &[i32])]) -> Result<ClassicJoinAnswer, Refusal> {
        self.groups.classic_join(&self.topics, &classic_join(member, owned), &self.settings, 2)
    }

    fn sync(&self, member: &str, generation: i32) -> Result<Assignment, Refusal> {
        let sync = self.groups.classic_sync(
            &self.topics,
            "g",
            (member, None),
            generation,
            (Some("consumer"), Some("range")),
        )?;
        Ok(parse_assignment(&sync.assignment, &self.topics).unwrap().0)
    }

    fn beat(&self, member: &str, generation: i32) -> i16 {
        self.groups
            .classic_heartbeat("g", (member, None), generation)
            .map_or_else(|r| r.code, |b| b.error_code)
    }

    fn member(&self, id: &str) -> &Member {
        &self.groups.groups["g"].members[id]
    }
}

fn names(a: &Assignment) -> Vec<(&str, Vec<i32>)> {
    a.values().map(|ps| ("t", ps.iter().copied().collect())).collect()
}

/// A classic member rejoins until it is reconciled: each round is a JoinGroup with what it
/// owns, a SyncGroup at the generation it was given, and the partitions SyncGroup hands it.
fn reconcile_classic(g: &mut Group, member: &str, mut owned: Assignment) -> (i32, Assignment) {
    for _ in 0..4 {
        let owned_names = names(&owned);
        let owned_ref: Vec<(&str, &[i32])> = owned_names.iter().map(|(t, ps)| (*t, ps.as_slice())).collect();
        let joined = g.join(member, &owned_ref).unwrap();
        owned = g.sync(member, joined.generation_id).unwrap();
        if g.beat(member, joined.generation_id) == error_code::NONE {
            return (joined.generation_id, owned);
        }
    }
    panic!("{member} never settled: {:?}", g.member(member));
}

#[test]
fn classic_members_revoke_before_a_consumer_member_gets_their_partitions() {
    let mut g = upgraded_by_c();
    // A and B heartbeat at generation 5 and are told to rejoin: the group is at epoch 6.
    assert_eq!(g.beat("A", 5), error_code::REBALANCE_IN_PROGRESS);
    assert_eq!(g.beat("B", 5), error_code::REBALANCE_IN_PROGRESS);
    // C may take nothing while A and B still own everything.
    let c = g.groups.heartbeat(&g.topics, &beat("g", "C", 6, &parts(&[])), &g.settings, 3).unwrap();
    assert_eq!(c.assignment.unwrap_or_default(), parts(&[]));

    // A rejoins owning all it had: it must give some up, and stays at generation 5 meanwhile.
    let a = g.join("A", &[("t", &[0, 1, 2])]).unwrap();
    assert_eq!((a.generation_id, a.protocol_name.as_str()), (5, "range"));
    assert_eq!(g.member("A").state, MemberState::UnrevokedPartitions);
    let kept = g.sync("A", 5).unwrap();
    assert!(kept.values().all(|ps| ps.len() < 3), "A keeps fewer than it owned: {kept:?}");
    let (a_gen, a_owns) = reconcile_classic(&mut g, "A", kept);
    let (b_gen, b_owns) = reconcile_classic(&mut g, "B", parts(&[(1, &[3, 4, 5])]));
    assert_eq!((a_gen, b_gen), (6, 6));

    // Now C gets what A and B let go; nobody owns a partition twice.
    let c = g.groups.heartbeat(&g.topics, &beat("g", "C", 6, &parts(&[])), &g.settings, 4).unwrap();
    let c_owns = g.member("C").assigned_partitions();
    assert_eq!(c.member_epoch, 6);
    let mut all: Vec<i32> =
        [&a_owns, &b_owns, &c_owns].iter().flat_map(|a| a.values().flatten().copied()).collect();
    all.sort();
    assert_eq!(all, vec![0, 1, 2, 3, 4, 5], "A {a_owns:?} B {b_owns:?} C {c_owns:?}");
    assert_eq!(g.groups.groups["g"].state(), super::super::GroupState::Stable);
}

#[test]
fn classic_requests_are_refused_as_kafka_refuses_them() {
    let mut g = upgraded_by_c();
    let code = |r: Result<ClassicSync, Refusal>| r.unwrap_err().code;
    let sync = |g: &Group, member: &str, generation: i32, name: &str| {
        g.groups.classic_sync(&g.topics, "g", (member, None), generation, (Some("consumer"), Some(name)))
    };
    assert_eq!(code(sync(&g, "nobody", 5, "range")), error_code::UNKNOWN_MEMBER_ID);
    let consumer = sync(&g, "C", 6, "range").unwrap_err();
    assert_eq!(consumer.code, error_code::UNKNOWN_MEMBER_ID);
    assert_eq!(consumer.message.as_deref(), Some("Member C does not use the classic protocol."));
    assert_eq!(code(sync(&g, "A", 4, "range")), error_code::ILLEGAL_GENERATION);
    assert_eq!(code(sync(&g, "A", 5, "roundrobin")), error_code::INCONSISTENT_GROUP_PROTOCOL);
    assert_eq!(code(sync(&g, "A", 5, "range")), error_code::REBALANCE_IN_PROGRESS, "epoch 6 is ahead of A");
    let fenced = g.groups.classic_heartbeat("g", ("A", Some("someone-else")), 5).unwrap_err();
    assert_eq!(fenced.code, error_code::UNKNOWN_MEMBER_ID, "no member holds that instance id");

    // A join offering only a protocol the classic members lack; a v4 first join; a full group.
    let mut other = classic_join("D", &[]);
    other.protocols.truncate(1);
    other.protocols[0].name = "roundrobin".into();
    let before = g.groups.clone();
    let refused = g.groups.classic_join(&g.topics, &other, &g.settings, 2).unwrap_err();
    assert_eq!(refused.code, error_code::INCONSISTENT_GROUP_PROTOCOL);
    let first =
        ClassicJoin { unknown_member: true, requires_known_member_id: true, ..classic_join("D", &[]) };
    assert_eq!(
        g.groups.classic_join(&g.topics, &first, &g.settings, 2).unwrap_err().code,
        error_code::MEMBER_ID_REQUIRED
    );
    let mut huge = classic_join("D", &[]);
    huge.protocols[1].metadata = vec![0; crate::limits::CLASSIC_MEMBER_PROTOCOLS_BYTES_MAX];
    assert_eq!(
        g.groups.classic_join(&g.topics, &huge, &g.settings, 2).unwrap_err().code,
        error_code::INVALID_REQUEST
    );
    g.settings.max_size = 3;
    assert_eq!(g.join("D", &[]).unwrap_err().code, error_code::GROUP_MAX_SIZE_REACHED);
    assert_eq!(g.groups, before, "refused joins change nothing");
}

#[test]
fn a_classic_leave_removes_its_members_with_one_epoch_bump() {
    let mut g = upgraded_by_c();
    let members =
        vec![("A".to_string(), None), ("C".to_string(), None), ("B".to_string(), Some("i".to_string()))];
    let left = g.groups.classic_leave(&g.topics, "g", &members);
    let codes: Vec<i16> = left.iter().map(|l| l.error_code).collect();
    // C speaks the consumer protocol; no member holds instance id "i".
    assert_eq!(codes, [error_code::NONE, error_code::UNKNOWN_MEMBER_ID, error_code::UNKNOWN_MEMBER_ID]);
    let group = &g.groups.groups["g"];
    assert_eq!(group.group_epoch, 7);
    assert!(!group.members.contains_key("A") && group.members.contains_key("B"));
}

#[test]
fn a_classic_member_commits_with_its_generation() {
    use crate::consumer_group::{CommitApi, CommitRequest};
    let g = upgraded_by_c();
    let request = |member_epoch| CommitRequest {
        group_id: "g",
        member_id: "A",
        instance_id: None,
        member_epoch,
        api: CommitApi::OffsetCommit { version: 8 },
        partitions: &[],
    };
    assert_eq!(
        g.groups.check_commit(&request(5)),
        error_code::NONE,
        "a classic OffsetCommit below v9 is fine"
    );
    assert_eq!(g.groups.check_commit(&request(4)), error_code::ILLEGAL_GENERATION);
}

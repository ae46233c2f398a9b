//! The conversions of online migration: a live classic group becomes a consumer group whose
//! members keep their generation and partitions, refused as Kafka refuses one it will not
//! convert; and a consumer group whose last consumer-protocol member leaves goes back to a
//! classic generation of the classic members that remain.

use kafka_compat::error_code;

use super::*;
use crate::consumer_group::request::{Migration, MigrationPolicy};
use crate::consumer_group::testkit::{assignment_bytes, classic_snapshot, join, parts, settings, topics};
use crate::consumer_group::{ConsumerGroups, MemberState};

fn upgraded() -> ConsumerGroup {
    upgrade("g", &classic_snapshot(), &topics(&[("t", 6, 1)]), i32::MAX, Migration::default(), 7).unwrap()
}

#[test]
fn an_upgrade_keeps_every_classic_members_generation_and_partitions() {
    let group = upgraded();
    assert_eq!((group.group_epoch, group.assignment_epoch), (5, 5));
    let a = &group.members["A"];
    assert_eq!((a.member_epoch, a.previous_member_epoch, a.state), (5, 5, MemberState::Stable));
    assert_eq!(a.assigned_partitions(), parts(&[(1, &[0, 1, 2])]));
    assert_eq!(group.targets["B"], parts(&[(1, &[3, 4, 5])]));
    let classic = a.classic.as_ref().expect("a classic member");
    assert_eq!((classic.session_timeout_ms, classic.protocol_name()), (10_000, "range"));
    assert_eq!((a.client_id.as_str(), a.last_seen_ms), ("client-A", 7));
    assert!(a.subscribed_topic_names.contains("t"));
    assert_eq!(group.state(), super::super::GroupState::Stable);
}

fn refused(snapshot: &ClassicGroupSnapshot, max_size: i32, policy: MigrationPolicy) -> String {
    let migration = Migration { policy, classic_max_size: i32::MAX };
    let refusal = upgrade("g", snapshot, &topics(&[("t", 6, 1)]), max_size, migration, 0).unwrap_err();
    assert_eq!(refusal.code, error_code::GROUP_ID_NOT_FOUND);
    refusal.message.unwrap()
}

#[test]
fn an_upgrade_is_refused_as_kafka_refuses_it() {
    let ok = classic_snapshot();
    let prefix = "Cannot upgrade classic group g to consumer group because";
    assert_eq!(refused(&ok, 10, MigrationPolicy::Downgrade), format!("{prefix} online upgrade is disabled."));
    let connect = ClassicGroupSnapshot { protocol_type: "connect".into(), ..ok.clone() };
    assert!(refused(&connect, 10, MigrationPolicy::Bidirectional)
        .contains("does not use the consumer embedded protocol"));
    assert!(refused(&ok, 1, MigrationPolicy::Upgrade).contains("exceeds the consumer group maximum size"));
    let mut malformed = ok.clone();
    malformed.members[0].protocols[0].metadata = vec![0, 0, 0x7f];
    assert!(refused(&malformed, 10, MigrationPolicy::Bidirectional)
        .contains("embedded consumer protocol is malformed"));
    let mut huge = ok.clone();
    huge.members[0].protocols[1].metadata = vec![0; crate::limits::CLASSIC_MEMBER_PROTOCOLS_BYTES_MAX];
    assert!(refused(&huge, 10, MigrationPolicy::Bidirectional).contains("exceed the bytes a member may keep"));
    let mut sticky = ok;
    sticky.members[1].assignment = assignment_bytes(&[("t", &[3])], Some(b"generation"));
    assert!(refused(&sticky, 10, MigrationPolicy::Bidirectional).contains("unsupported custom assignor"));
}

#[test]
fn the_last_consumer_member_leaving_downgrades_to_the_classic_members() {
    let topics = topics(&[("t", 6, 1)]);
    let mut groups = ConsumerGroups::default();
    groups.groups.insert("g".into(), upgraded());
    groups.heartbeat(&topics, &join("g", "C", &["t"]), &settings(), 10).unwrap();
    let group = &groups.groups["g"];
    assert!(downgrades_without(group, "C", Migration::default()));
    assert!(!downgrades_without(group, "A", Migration::default()), "A is classic");
    let no = Migration { policy: MigrationPolicy::Upgrade, classic_max_size: i32::MAX };
    assert!(!downgrades_without(group, "C", no), "the policy forbids it");
    let small = Migration { policy: MigrationPolicy::Bidirectional, classic_max_size: 1 };
    assert!(!downgrades_without(group, "C", small), "two classic members exceed group.max.size 1");

    let generation = downgraded_generation("g", group, "C");
    assert_eq!(generation.generation_id, group.group_epoch);
    assert_eq!((generation.protocol_type.as_str(), generation.protocol_name.as_str()), ("consumer", "range"));
    let ids: Vec<&str> = generation.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(ids, ["A", "B"]);
    assert_eq!(
        (generation.members[0].session_timeout_ms, generation.members[0].rebalance_timeout_ms),
        (10_000, 30_000)
    );
}

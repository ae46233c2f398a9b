//! The SimpleAssignor's builders on their own: balance, sharing, stickiness, heterogeneous
//! passes, and Kafka's own quirks kept for fidelity.

use std::collections::{BTreeMap, BTreeSet};

use super::super::testkit::{parts, tid};
use super::{assign, desired_count, MemberSpec};
use crate::consumer_group::{Assignment, TopicId};

fn ids(list: &[u8]) -> BTreeSet<TopicId> {
    list.iter().map(|b| tid(*b)).collect()
}

fn counts(list: &[(u8, i32)]) -> BTreeMap<TopicId, i32> {
    list.iter().map(|(b, n)| (tid(*b), *n)).collect()
}

/// Runs the assignor for members given as (subscribed topic bytes, previous target).
fn run(
    members: &[(&BTreeSet<TopicId>, &Assignment)],
    partitions: &BTreeMap<TopicId, i32>,
) -> Vec<Assignment> {
    let specs: Vec<MemberSpec<'_>> =
        members.iter().map(|(topics, target)| MemberSpec { topics, target }).collect();
    let homogeneous = members.windows(2).all(|w| w[0].0 == w[1].0);
    assign(&specs, partitions, homogeneous)
}

/// How many members hold each (topic, partition).
fn holders(result: &[Assignment]) -> BTreeMap<(TopicId, i32), usize> {
    let mut holders = BTreeMap::new();
    for a in result {
        for (t, ps) in a {
            for p in ps {
                *holders.entry((*t, *p)).or_default() += 1;
            }
        }
    }
    holders
}

fn size(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

#[test]
fn homogeneous_fewer_members_than_partitions_splits_evenly() {
    let (topics, none) = (ids(&[1]), Assignment::new());
    let result = run(&[(&topics, &none), (&topics, &none), (&topics, &none)], &counts(&[(1, 7)]));
    let sizes: Vec<usize> = result.iter().map(size).collect();
    assert_eq!(sizes, vec![3, 2, 2]);
    let held = holders(&result);
    assert_eq!(held.len(), 7);
    assert!(held.values().all(|n| *n == 1), "each partition to exactly one member: {result:?}");
}

#[test]
fn homogeneous_more_members_than_partitions_shares() {
    // 5 members, 2 partitions: desired sharing 3, desired counts [2, 1, 1, 1, 1].
    let (topics, none) = (ids(&[1]), Assignment::new());
    let members = vec![(&topics, &none); 5];
    let result = run(&members, &counts(&[(1, 2)]));
    assert_eq!(result.iter().map(size).collect::<Vec<_>>(), vec![2, 1, 1, 1, 1]);
    assert!(holders(&result).values().all(|n| *n == 3), "{result:?}");
}

#[test]
fn homogeneous_keeps_a_balanced_previous_target() {
    let topics = ids(&[1]);
    let (a, b) = (parts(&[(1, &[1, 3])]), parts(&[(1, &[0, 2])]));
    let result = run(&[(&topics, &a), (&topics, &b)], &counts(&[(1, 4)]));
    assert_eq!(result, vec![a, b]);
}

#[test]
fn homogeneous_moves_only_what_a_newcomer_needs() {
    let topics = ids(&[1]);
    let (a, b, none) = (parts(&[(1, &[0, 1, 2])]), parts(&[(1, &[3, 4, 5])]), Assignment::new());
    let result = run(&[(&topics, &a), (&topics, &b), (&topics, &none)], &counts(&[(1, 6)]));
    assert_eq!(result[0], parts(&[(1, &[1, 2])]));
    assert_eq!(result[1], parts(&[(1, &[4, 5])]));
    assert_eq!(result[2], parts(&[(1, &[0, 3])]));
}

#[test]
fn homogeneous_drops_topics_no_longer_subscribed() {
    let topics = ids(&[1]);
    let a = parts(&[(1, &[0]), (2, &[0, 1])]);
    let result = run(&[(&topics, &a)], &counts(&[(1, 2)]));
    assert_eq!(result, vec![parts(&[(1, &[0, 1])])]);
}

#[test]
fn heterogeneous_assigns_each_topic_among_its_subscribers() {
    let (just_a, a_and_b, none) = (ids(&[1]), ids(&[1, 2]), Assignment::new());
    let result = run(&[(&just_a, &none), (&a_and_b, &none)], &counts(&[(1, 2), (2, 3)]));
    assert_eq!(result[0], parts(&[(1, &[0])]));
    assert_eq!(result[1], parts(&[(1, &[1]), (2, &[0, 1, 2])]));
}

#[test]
fn heterogeneous_takes_back_a_topic_from_a_member_that_left_it() {
    let (just_a, a_and_b) = (ids(&[1]), ids(&[1, 2]));
    let (old0, old1) = (parts(&[(1, &[0]), (2, &[0, 1])]), parts(&[(1, &[1])]));
    let result = run(&[(&just_a, &old0), (&a_and_b, &old1)], &counts(&[(1, 2), (2, 2)]));
    assert_eq!(result[0], parts(&[(1, &[0])]));
    assert_eq!(result[1], parts(&[(1, &[1]), (2, &[0, 1])]));
}

#[test]
fn heterogeneous_leaves_a_topic_nobody_subscribes_to_in_the_target() {
    // Kafka's builder only visits subscribed topics; the member's assignment filters it out.
    let (just_a, just_b) = (ids(&[1]), ids(&[2]));
    let old = parts(&[(1, &[0]), (3, &[0])]);
    let result = run(&[(&just_a, &old), (&just_b, &Assignment::new())], &counts(&[(1, 1), (2, 1)]));
    assert_eq!(result[0], parts(&[(1, &[0]), (3, &[0])]));
    assert_eq!(result[1], parts(&[(2, &[0])]));
}

#[test]
fn a_wrap_around_can_count_a_member_twice_as_in_kafka() {
    // 3 members, 2 partitions: sharing 2, desired [2, 1, 1]. Members 1 and 2 keep P0; the
    // round robin gives P1 to member 0, wraps around and picks member 0 again, so P1 ends
    // with one member where the sharing asked for two.
    let topics = ids(&[1]);
    let (none, p0) = (Assignment::new(), parts(&[(1, &[0])]));
    let result = run(&[(&topics, &none), (&topics, &p0), (&topics, &p0)], &counts(&[(1, 2)]));
    assert_eq!(result, vec![parts(&[(1, &[1])]), p0.clone(), p0]);
}

#[test]
fn no_topics_or_no_members_assign_nothing() {
    let (topics, old) = (ids(&[]), parts(&[(1, &[0])]));
    assert_eq!(run(&[(&topics, &old)], &counts(&[])), vec![Assignment::new()]);
    assert!(run(&[], &counts(&[(1, 1)])).is_empty());
}

#[test]
fn desired_counts_follow_kafkas_double_arithmetic() {
    let of = |sharing, partitions, members| -> Vec<usize> {
        (0..members).map(|k| desired_count(sharing, partitions, members, k)).collect()
    };
    assert_eq!(of(1, 7, 3), vec![3, 2, 2]);
    assert_eq!(of(3, 2, 5), vec![2, 1, 1, 1, 1]);
    assert_eq!(of(0, 0, 2), vec![0, 0]);
}

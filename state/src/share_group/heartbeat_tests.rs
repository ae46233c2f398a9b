//! The ShareGroupHeartbeat flow end to end: joins, balance, sharing, leaves, fencing,
//! refusals with Kafka's codes and messages, topic changes, the assignment interval, and the
//! no-op heartbeat that must leave the state equal.

use kafka_compat::error_code;

use super::testkit::{beat, check_invariants, eager, join, leave, parts, run, tid, topic, topics};
use super::{Heartbeat, ShareGroupState, ShareGroups, ShareSettings, ASSIGNOR_NAME};
use crate::consumer_group::Assignment;

fn size(a: &Assignment) -> usize {
    a.values().map(|ps| ps.len()).sum()
}

#[test]
fn first_join_creates_the_group_and_takes_everything() {
    let t = topics(&[("a", 3, 1)]);
    let mut groups = ShareGroups::default();
    let answer = run(&mut groups, &t, &join("g", "m1", &["a"])).unwrap();
    assert_eq!(answer.member_epoch, 2, "a new group is at 1; the join bumps it");
    assert_eq!(answer.heartbeat_interval_ms, 5_000);
    assert_eq!(answer.assignment, Some(parts(&[(1, &[0, 1, 2])])));
    let group = &groups.groups["g"];
    assert_eq!((group.group_epoch, group.assignment_epoch), (2, 2));
    assert_eq!(group.state(), ShareGroupState::Stable);
    assert_eq!(group.members["m1"].previous_member_epoch, 0);
    check_invariants(&groups, &t);
}

#[test]
fn a_second_member_splits_the_partitions() {
    let t = topics(&[("a", 4, 1)]);
    let mut groups = ShareGroups::default();
    run(&mut groups, &t, &join("g", "m1", &["a"])).unwrap();
    let second = run(&mut groups, &t, &join("g", "m2", &["a"])).unwrap();
    assert_eq!(second.member_epoch, 3);
    let first = run(&mut groups, &t, &beat("g", "m1", 2)).unwrap();
    assert_eq!(first.member_epoch, 3);
    let (a1, a2) = (first.assignment.unwrap(), second.assignment.unwrap());
    assert_eq!((size(&a1), size(&a2)), (2, 2));
    assert!(a1[&tid(1)].is_disjoint(&a2[&tid(1)]));
    // Nothing changed since: a steady heartbeat gets no assignment.
    assert_eq!(run(&mut groups, &t, &beat("g", "m2", 3)).unwrap().assignment, None);
    check_invariants(&groups, &t);
}

#[test]
fn more_members_than_partitions_share_them() {
    let t = topics(&[("a", 1, 1)]);
    let mut groups = ShareGroups::default();
    for m in ["m1", "m2", "m3"] {
        run(&mut groups, &t, &join("g", m, &["a"])).unwrap();
    }
    for m in ["m1", "m2"] {
        let epoch = groups.groups["g"].members[m].member_epoch;
        run(&mut groups, &t, &beat("g", m, epoch)).unwrap();
    }
    for m in ["m1", "m2", "m3"] {
        assert!(groups.is_assigned("g", m, &tid(1), 0), "{m} shares a-0");
    }
}

#[test]
fn heterogeneous_subscriptions_assign_each_topic_to_its_subscribers() {
    let t = topics(&[("a", 2, 1), ("b", 2, 2)]);
    let mut groups = ShareGroups::default();
    run(&mut groups, &t, &join("g", "m1", &["a"])).unwrap();
    run(&mut groups, &t, &join("g", "m2", &["a", "b"])).unwrap();
    run(&mut groups, &t, &beat("g", "m1", 2)).unwrap();
    let group = &groups.groups["g"];
    // m1 had all of a: it keeps the partition it does not give up (sticky).
    assert_eq!(group.members["m1"].assignment, parts(&[(1, &[1])]));
    assert_eq!(group.members["m2"].assignment, parts(&[(1, &[0]), (2, &[0, 1])]));
    check_invariants(&groups, &t);
}

#[test]
fn a_leave_removes_the_member_and_its_partitions_go_to_the_others() {
    let t = topics(&[("a", 2, 1)]);
    let mut groups = ShareGroups::default();
    run(&mut groups, &t, &join("g", "m1", &["a"])).unwrap();
    run(&mut groups, &t, &join("g", "m2", &["a"])).unwrap();
    assert_eq!(size(&run(&mut groups, &t, &beat("g", "m1", 2)).unwrap().assignment.unwrap()), 1);
    let answer = run(&mut groups, &t, &leave("g", "m2")).unwrap();
    assert_eq!((answer.member_epoch, answer.heartbeat_interval_ms, answer.assignment), (-1, 0, None));
    let group = &groups.groups["g"];
    assert_eq!(group.group_epoch, 4);
    assert!(!group.targets.contains_key("m2"));
    let back = run(&mut groups, &t, &beat("g", "m1", 3)).unwrap();
    assert_eq!((back.member_epoch, back.assignment), (4, Some(parts(&[(1, &[0, 1])]))));
}

#[test]
fn the_last_leave_empties_the_group_and_the_next_join_assigns_at_once() {
    let t = topics(&[("a", 2, 1)]);
    let mut groups = ShareGroups::default();
    let slow = ShareSettings { assignment_interval_ms: 60_000, ..ShareSettings::default() };
    groups.heartbeat(&t, &join("g", "m1", &["a"]), &slow, 1_000).unwrap();
    groups.heartbeat(&t, &leave("g", "m1"), &slow, 2_000).unwrap();
    let group = &groups.groups["g"];
    assert_eq!(group.state(), ShareGroupState::Empty);
    assert_eq!((group.group_epoch, group.assignment_epoch, group.assignment_time_ms), (3, 3, 0));
    assert!(group.subscribed_topics.is_empty());
    let answer = groups.heartbeat(&t, &join("g", "m2", &["a"]), &slow, 3_000).unwrap();
    assert_eq!((answer.member_epoch, answer.assignment), (4, Some(parts(&[(1, &[0, 1])]))));
}

#[test]
fn fence_removes_a_member_once() {
    let t = topics(&[("a", 2, 1), ("b", 1, 2)]);
    let mut groups = ShareGroups::default();
    run(&mut groups, &t, &join("g", "m1", &["a"])).unwrap();
    run(&mut groups, &t, &join("g", "m2", &["a", "b"])).unwrap();
    assert!(groups.fence("g", "m2"));
    assert!(!groups.fence("g", "m2"));
    assert!(!groups.fence("nope", "m1"));
    let group = &groups.groups["g"];
    assert_eq!(group.group_epoch, 4);
    // The fenced member's topic b is no longer in the group's metadata, so m1's next
    // heartbeat does not move the epoch again.
    assert_eq!(group.subscribed_topics.keys().collect::<Vec<_>>(), vec!["a"]);
    assert_eq!(run(&mut groups, &t, &beat("g", "m1", 2)).unwrap().member_epoch, 4);
    assert_eq!(groups.groups["g"].group_epoch, 4);
}

#[test]
fn unknown_group_and_member_are_refused_with_kafkas_messages() {
    let t = topics(&[("a", 1, 1)]);
    let mut groups = ShareGroups::default();
    let refusal = run(&mut groups, &t, &beat("g", "m1", 3)).unwrap_err();
    assert_eq!(refusal.code, error_code::GROUP_ID_NOT_FOUND);
    assert_eq!(refusal.message.as_deref(), Some("Share group g not found."));
    let refusal = run(&mut groups, &t, &leave("g", "m1")).unwrap_err();
    assert_eq!(refusal.message.as_deref(), Some("Group g not found."));
    run(&mut groups, &t, &join("g", "m1", &["a"])).unwrap();
    let before = groups.clone();
    for hb in [beat("g", "m9", 2), leave("g", "m9")] {
        let refusal = run(&mut groups, &t, &hb).unwrap_err();
        assert_eq!(refusal.code, error_code::UNKNOWN_MEMBER_ID);
        assert_eq!(refusal.message.as_deref(), Some("Member m9 is not a member of group g."));
    }
    assert_eq!(groups, before);
}

#[test]
fn a_stale_or_future_epoch_is_fenced_but_the_previous_one_is_accepted() {
    let t = topics(&[("a", 2, 1)]);
    let mut groups = ShareGroups::default();
    run(&mut groups, &t, &join("g", "m1", &["a"])).unwrap();
    run(&mut groups, &t, &join("g", "m2", &["a"])).unwrap();
    run(&mut groups, &t, &beat("g", "m1", 2)).unwrap(); // m1: epoch 3, previous 2
    let greater = run(&mut groups, &t, &beat("g", "m1", 7)).unwrap_err();
    assert_eq!(greater.code, error_code::FENCED_MEMBER_EPOCH);
    assert_eq!(
        greater.message.as_deref(),
        Some(
            "The share group member has a greater member epoch (7) than the one known by the group coordinator \
             (3). The member must abandon all its partitions and rejoin."
        )
    );
    let smaller = run(&mut groups, &t, &beat("g", "m1", 1)).unwrap_err();
    assert_eq!(
        smaller.message.as_deref(),
        Some(
            "The share group member has a smaller member epoch (1) than the one known by the group coordinator \
             (3), and it does not match the previous member epoch (2). The member must abandon all its \
             partitions and rejoin."
        )
    );
    // The response that moved m1 to 3 may have been lost: 2 still works.
    assert_eq!(run(&mut groups, &t, &beat("g", "m1", 2)).unwrap().member_epoch, 3);
}

#[test]
fn a_full_group_refuses_newcomers_only() {
    let t = topics(&[("a", 1, 1)]);
    let mut groups = ShareGroups::default();
    let one = ShareSettings { max_size: 1, ..eager() };
    groups.heartbeat(&t, &join("g", "m1", &["a"]), &one, 0).unwrap();
    let before = groups.clone();
    for hb in [join("g", "m2", &["a"]), beat("g", "m2", 2)] {
        let refusal = groups.heartbeat(&t, &hb, &one, 0).unwrap_err();
        assert_eq!(refusal.code, error_code::GROUP_MAX_SIZE_REACHED);
        assert_eq!(
            refusal.message.as_deref(),
            Some("The share group has reached its maximum capacity of 1 members.")
        );
    }
    assert_eq!(groups, before);
    groups.heartbeat(&t, &beat("g", "m1", 2), &one, 0).unwrap();
    groups.heartbeat(&t, &join("g", "m1", &["a"]), &one, 0).unwrap();
}

#[test]
fn invalid_requests_are_refused_in_kafkas_order() {
    let t = topics(&[("a", 1, 1)]);
    let mut groups = ShareGroups::default();
    let cases: Vec<(Heartbeat, &str)> = vec![
        (join("g", "", &["a"]), "MemberId can't be empty."),
        (join(" ", "m", &["a"]), "GroupId can't be empty."),
        (Heartbeat { rack_id: Some(" ".into()), ..join("g", "m", &["a"]) }, "RackId can't be empty."),
        (join("g", "m", &[]), "SubscribedTopicNames must be set in first request."),
        (beat("g", "m", 0), "SubscribedTopicNames must be set in first request."),
        (beat("g", "m", -2), "MemberEpoch is invalid."),
    ];
    for (hb, message) in cases {
        let refusal = run(&mut groups, &t, &hb).unwrap_err();
        assert_eq!((refusal.code, refusal.message.as_deref()), (error_code::INVALID_REQUEST, Some(message)));
    }
    assert_eq!(groups, ShareGroups::default());
}

#[test]
fn a_topic_created_later_is_assigned_on_the_next_heartbeat() {
    let mut t = topics(&[("a", 1, 1)]);
    let mut groups = ShareGroups::default();
    let first = run(&mut groups, &t, &join("g", "m1", &["a", "b"])).unwrap();
    assert_eq!(first.assignment, Some(parts(&[(1, &[0])])));
    t.insert("b".into(), topic(2, 2));
    let next = run(&mut groups, &t, &beat("g", "m1", 2)).unwrap();
    assert_eq!(next.member_epoch, 3);
    assert_eq!(next.assignment, Some(parts(&[(1, &[0]), (2, &[0, 1])])));
}

#[test]
fn added_partitions_and_a_deleted_topic_move_the_epoch() {
    let mut t = topics(&[("a", 1, 1), ("b", 1, 2)]);
    let mut groups = ShareGroups::default();
    run(&mut groups, &t, &join("g", "m1", &["a", "b"])).unwrap();
    t.insert("a".into(), topic(1, 3));
    let grown = run(&mut groups, &t, &beat("g", "m1", 2)).unwrap();
    assert_eq!((grown.member_epoch, grown.assignment), (3, Some(parts(&[(1, &[0, 1, 2]), (2, &[0])]))));
    t.remove("b");
    let shrunk = run(&mut groups, &t, &beat("g", "m1", 3)).unwrap();
    assert_eq!((shrunk.member_epoch, shrunk.assignment), (4, Some(parts(&[(1, &[0, 1, 2])]))));
    // Recreated under the same name: a new topic id is a change too.
    t.insert("b".into(), topic(9, 1));
    let again = run(&mut groups, &t, &beat("g", "m1", 4)).unwrap();
    assert_eq!((again.member_epoch, again.assignment), (5, Some(parts(&[(1, &[0, 1, 2]), (9, &[0])]))));
}

#[test]
fn a_steady_heartbeat_leaves_the_state_equal() {
    let t = topics(&[("a", 3, 1)]);
    let mut groups = ShareGroups::default();
    run(&mut groups, &t, &join("g", "m1", &["a"])).unwrap();
    run(&mut groups, &t, &join("g", "m2", &["a"])).unwrap();
    run(&mut groups, &t, &beat("g", "m1", 2)).unwrap();
    let settled = groups.clone();
    for hb in [beat("g", "m1", 3), beat("g", "m2", 3), join("g", "m1", &["a"])] {
        let (answer, changed) = groups.trial("g", |copy| copy.heartbeat(&t, &hb, &eager(), 99));
        assert!(!changed, "{hb:?}");
        assert_eq!(answer.unwrap().member_epoch, 3);
        groups.heartbeat(&t, &hb, &eager(), 99).unwrap();
        assert_eq!(groups, settled, "{hb:?}");
    }
    // A rejoin at 0 or a full request echoes the assignment without changing anything.
    let rejoin = run(&mut groups, &t, &join("g", "m2", &["a"])).unwrap();
    assert_eq!(rejoin.assignment, Some(settled.groups["g"].members["m2"].assignment.clone()));
    assert_eq!(groups, settled);
}

#[test]
fn the_assignment_interval_delays_the_next_target() {
    let t = topics(&[("a", 2, 1)]);
    let mut groups = ShareGroups::default();
    let settings = ShareSettings::default(); // 1 s
    groups.heartbeat(&t, &join("g", "m1", &["a"]), &settings, 10_000).unwrap();
    let early = groups.heartbeat(&t, &join("g", "m2", &["a"]), &settings, 10_500).unwrap();
    // Epoch 3 is owed but not computed: m2 takes the current target (nothing) at epoch 2.
    assert_eq!((early.member_epoch, early.assignment), (2, Some(Assignment::new())));
    let group = &groups.groups["g"];
    assert_eq!((group.group_epoch, group.assignment_epoch), (3, 2));
    let still = groups.heartbeat(&t, &beat("g", "m1", 2), &settings, 10_900).unwrap();
    assert_eq!((still.member_epoch, still.assignment), (2, None));
    let due = groups.heartbeat(&t, &beat("g", "m1", 2), &settings, 11_000).unwrap();
    assert_eq!(due.member_epoch, 3);
    assert_eq!(size(&due.assignment.unwrap()), 1);
    assert_eq!(groups.groups["g"].assignment_time_ms, 11_000);
}

#[test]
fn describe_reports_members_with_named_partitions() {
    let mut t = topics(&[("a", 2, 1), ("b", 1, 2)]);
    let mut groups = ShareGroups::default();
    let hb = Heartbeat { rack_id: Some("r1".into()), ..join("g", "m1", &["b", "a"]) };
    run(&mut groups, &t, &hb).unwrap();
    t.remove("b");
    let described = groups.describe("g", &t).unwrap();
    assert_eq!((described.group_epoch, described.assignment_epoch), (2, 2));
    assert_eq!((described.state.as_str(), described.assignor_name), ("Stable", ASSIGNOR_NAME));
    let member = &described.members[0];
    assert_eq!((member.member_id, member.member.rack_id.as_deref()), ("m1", Some("r1")));
    assert_eq!(member.member.client_host, "/10.0.0.1");
    // b is gone: Kafka leaves a topic it cannot name out.
    assert_eq!(member.assignment.len(), 1);
    assert_eq!(
        (member.assignment[0].topic_name.as_str(), &member.assignment[0].partitions),
        ("a", &vec![0, 1])
    );
    let missing = groups.describe("h", &t).unwrap_err();
    assert_eq!(
        (missing.code, missing.message.as_deref()),
        (error_code::GROUP_ID_NOT_FOUND, Some("Group h not found."))
    );
}

#[test]
fn liveness_only_moves_forward_and_timers_list_every_member() {
    let t = topics(&[("a", 1, 1)]);
    let mut groups = ShareGroups::default();
    run(&mut groups, &t, &join("g", "m1", &["a"])).unwrap();
    groups.seen("g", "m1", 500);
    groups.seen("g", "m1", 400);
    groups.seen("g", "gone", 600);
    let timers = groups.timers();
    assert_eq!(timers.len(), 1);
    assert_eq!((timers[0].member_id.as_str(), timers[0].last_seen_ms), ("m1", 500));
    assert_eq!(groups.groups["g"].assigned_partitions().into_iter().collect::<Vec<_>>(), vec![(tid(1), 0)]);
}

//! Heartbeat rules one at a time: fencing, leaves, static members, group size, assignors,
//! regex subscriptions, the assignment interval, and a heartbeat that changes nothing.

use kafka_compat::error_code;

use super::describe::GroupState;
use super::model::{ConsumerGroups, MemberState};
use super::request::{Assignor, GroupSettings, Heartbeat, RevocationTimer, LEAVE_GROUP_MEMBER_EPOCH};
use super::testkit::{beat, join, parts, topic, Sim};

fn static_join(group: &str, member: &str, instance: &str) -> Heartbeat {
    Heartbeat { instance_id: Some(instance.into()), ..join(group, member, &["t"]) }
}

fn leave(group: &str, member: &str, epoch: i32, instance: Option<&str>) -> Heartbeat {
    Heartbeat { instance_id: instance.map(Into::into), ..beat(group, member, epoch, &parts(&[])) }
}

#[test]
fn a_heartbeat_for_an_unknown_group_or_member_is_refused() {
    let mut sim = Sim::new(&[("t", 2, 1)]);
    assert_eq!(sim.send(beat("g", "A", 1, &parts(&[]))).unwrap_err().code, error_code::GROUP_ID_NOT_FOUND);
    sim.send(join("g", "A", &["t"])).unwrap();
    let refused = sim.send(beat("g", "X", 2, &parts(&[]))).unwrap_err();
    assert_eq!(refused.code, error_code::UNKNOWN_MEMBER_ID);
    assert_eq!(refused.message.as_deref(), Some("Member X is not a member of group g."));
}

#[test]
fn a_fenced_member_is_unknown_and_may_rejoin() {
    let mut sim = Sim::new(&[("t", 2, 1)]);
    sim.send(join("g", "A", &["t"])).unwrap();
    sim.send(join("g", "B", &["t"])).unwrap();
    // A rebalance-timeout fence armed at another epoch does nothing.
    assert!(!sim.groups.fence(&sim.topics, "g", "A", Some(7)));
    let epoch = sim.group("g").group_epoch;
    assert!(sim.groups.fence(&sim.topics, "g", "A", None));
    assert_eq!(sim.group("g").group_epoch, epoch + 1);
    assert!(!sim.groups.fence(&sim.topics, "g", "A", None));
    let refused = sim.send(beat("g", "A", 2, &parts(&[(1, &[0, 1])]))).unwrap_err();
    assert_eq!(refused.code, error_code::UNKNOWN_MEMBER_ID);
    // The Java client then rejoins with the same id at epoch 0.
    let a = sim.send(join("g", "A", &["t"])).unwrap();
    assert_eq!(a.member_epoch, sim.group("g").group_epoch);
}

#[test]
fn a_known_member_rejoining_at_epoch_0_gets_its_partitions_back() {
    let mut sim = Sim::new(&[("t", 2, 1)]);
    sim.send(join("g", "A", &["t"])).unwrap();
    // KAFKA-19233 (4.3+): no epoch check on a rejoin; the full assignment is echoed.
    let a = sim.send(join("g", "A", &["t"])).unwrap();
    assert_eq!((a.member_epoch, a.assignment), (2, Some(parts(&[(1, &[0, 1])]))));
}

#[test]
fn leaving_bumps_the_epoch_and_an_emptied_group_is_not_assigning() {
    let mut sim = Sim::new(&[("t", 2, 1)]);
    sim.send(join("g", "A", &["t"])).unwrap();
    let answer = sim.send(leave("g", "A", LEAVE_GROUP_MEMBER_EPOCH, None)).unwrap();
    assert_eq!((answer.member_epoch, answer.heartbeat_interval_ms), (-1, 0));
    assert_eq!(answer.revocation_timer, RevocationTimer::Cancel);
    let group = sim.group("g");
    assert_eq!((group.group_epoch, group.assignment_epoch, group.assignment_time_ms), (3, 3, 0));
    assert_eq!(group.state(), GroupState::Empty);
    let refused = sim.send(leave("g", "A", LEAVE_GROUP_MEMBER_EPOCH, None)).unwrap_err();
    assert_eq!(refused.code, error_code::UNKNOWN_MEMBER_ID);
}

#[test]
fn a_static_member_leaves_temporarily_and_rejoins_with_its_partitions() {
    let mut sim = Sim::new(&[("t", 4, 1)]);
    sim.send(static_join("g", "S1", "i1")).unwrap();
    sim.send(join("g", "B", &["t"])).unwrap();
    sim.send(beat("g", "S1", 2, &parts(&[(1, &[0, 1, 2, 3])]))).unwrap();
    sim.send(beat("g", "S1", 2, &parts(&[(1, &[0, 1])]))).unwrap();
    sim.send(beat("g", "B", 3, &parts(&[]))).unwrap();
    assert_eq!(sim.group("g").state(), GroupState::Stable);
    let epoch = sim.group("g").group_epoch;

    let answer = sim.send(leave("g", "S1", -2, Some("i1"))).unwrap();
    assert_eq!((answer.member_epoch, answer.revocation_timer), (-2, RevocationTimer::Keep));
    let away = &sim.group("g").members["S1"];
    assert_eq!(away.member_epoch, -2);
    assert!(away.assigned.values().flat_map(|ps| ps.values()).all(|e| *e == 0));
    assert_eq!(sim.group("g").group_epoch, epoch, "a temporary leave is no rebalance");

    // The same instance restarts under a new member id: it takes over S1's partitions.
    let s2 = sim.send(static_join("g", "S2", "i1")).unwrap();
    assert_eq!((s2.member_epoch, s2.assignment), (epoch, Some(parts(&[(1, &[0, 1])]))));
    assert!(!sim.group("g").members.contains_key("S1"));
    assert_eq!(sim.group("g").targets["S2"], parts(&[(1, &[0, 1])]));
    assert_eq!(sim.group("g").group_epoch, epoch);
    assert_eq!(sim.group("g").state(), GroupState::Stable);
}

#[test]
fn static_instance_ids_are_guarded() {
    let mut sim = Sim::new(&[("t", 2, 1)]);
    sim.send(static_join("g", "S1", "i1")).unwrap();
    let refused = sim.send(static_join("g", "S2", "i1")).unwrap_err();
    assert_eq!(refused.code, error_code::UNRELEASED_INSTANCE_ID);
    let mut hb = beat("g", "S2", 2, &parts(&[]));
    hb.instance_id = Some("i1".into());
    assert_eq!(sim.send(hb).unwrap_err().code, error_code::FENCED_INSTANCE_ID);
    let mut hb = beat("g", "S1", 2, &parts(&[]));
    hb.instance_id = Some("i9".into());
    assert_eq!(sim.send(hb).unwrap_err().code, error_code::UNKNOWN_MEMBER_ID);
    assert_eq!(sim.send(leave("g", "S2", -2, Some("i1"))).unwrap_err().code, error_code::FENCED_INSTANCE_ID);
}

#[test]
fn a_full_group_refuses_newcomers_only() {
    let mut sim = Sim::new(&[("t", 2, 1)]);
    sim.settings.max_size = 1;
    sim.send(join("g", "A", &["t"])).unwrap();
    let refused = sim.send(join("g", "B", &["t"])).unwrap_err();
    assert_eq!(refused.code, error_code::GROUP_MAX_SIZE_REACHED);
    assert_eq!(
        refused.message.as_deref(),
        Some("The consumer group has reached its maximum capacity of 1 members.")
    );
    // Checked before the member lookup: a stranger's heartbeat gets 81, not 25.
    assert_eq!(
        sim.send(beat("g", "B", 5, &parts(&[]))).unwrap_err().code,
        error_code::GROUP_MAX_SIZE_REACHED
    );
    sim.send(beat("g", "A", 2, &parts(&[(1, &[0, 1])]))).unwrap();
}

#[test]
fn an_unsupported_assignor_is_refused_and_a_new_preferred_one_bumps_the_epoch() {
    let mut sim = Sim::new(&[("t", 2, 1)]);
    let hb = Heartbeat { server_assignor: Some("sticky".into()), ..join("g", "A", &["t"]) };
    let refused = sim.send(hb).unwrap_err();
    assert_eq!(refused.code, error_code::UNSUPPORTED_ASSIGNOR);
    assert_eq!(
        refused.message.as_deref(),
        Some("ServerAssignor sticky is not supported. Supported assignors: uniform, range.")
    );
    assert!(sim.groups.groups.is_empty());

    sim.send(join("g", "A", &["t"])).unwrap();
    let mut hb = beat("g", "A", 2, &parts(&[(1, &[0, 1])]));
    hb.server_assignor = Some("range".into());
    let a = sim.send(hb).unwrap();
    assert_eq!(a.member_epoch, 3, "KAFKA-20434: a new preferred assignor is a new assignment");
    assert_eq!(sim.group("g").preferred_assignor(&sim.settings), Assignor::Range);
}

#[test]
fn an_invalid_regex_is_refused_without_creating_the_group() {
    let mut sim = Sim::new(&[("t", 2, 1)]);
    let hb = Heartbeat {
        subscribed_topic_names: None,
        subscribed_topic_regex: Some("[".into()),
        ..join("g", "A", &[])
    };
    let refused = sim.send(hb).unwrap_err();
    assert_eq!(refused.code, error_code::INVALID_REGULAR_EXPRESSION);
    assert!(refused
        .message
        .as_deref()
        .is_some_and(|m| m.starts_with("SubscribedTopicRegex `[` is not a valid")));
    assert_eq!(sim.groups, ConsumerGroups::default());
    // `a)|(b` is not a valid pattern, even though `^(?:a)|(b)$` would compile.
    let hb = Heartbeat { subscribed_topic_regex: Some("a)|(b".into()), ..join("g", "A", &[]) };
    assert_eq!(sim.send(hb).unwrap_err().code, error_code::INVALID_REGULAR_EXPRESSION);
}

#[test]
fn a_topic_created_that_matches_a_regex_bumps_the_epoch() {
    let mut sim = Sim::new(&[("foo1", 2, 1), ("bar", 2, 2)]);
    let hb = Heartbeat {
        subscribed_topic_names: None,
        subscribed_topic_regex: Some("foo.*".into()),
        ..join("g", "A", &[])
    };
    let a = sim.send(hb).unwrap();
    // Full match: `bar` is not matched, nor would `xfoo` be.
    assert_eq!((a.member_epoch, a.assignment), (2, Some(parts(&[(1, &[0, 1])]))));

    sim.topics.insert("xfoo".into(), topic(4, 1));
    let a = sim.send(beat("g", "A", 2, &parts(&[(1, &[0, 1])]))).unwrap();
    assert_eq!((a.member_epoch, a.assignment), (2, None), "xfoo does not match: no bump");

    sim.topics.insert("foo2".into(), topic(3, 1));
    let a = sim.send(beat("g", "A", 2, &parts(&[(1, &[0, 1])]))).unwrap();
    assert_eq!((a.member_epoch, a.assignment), (3, Some(parts(&[(1, &[0, 1]), (3, &[0])]))));

    // Deleting it bumps again: the member first gives it up at its epoch, then moves on.
    sim.topics.remove("foo2");
    let a = sim.send(beat("g", "A", 3, &parts(&[(1, &[0, 1]), (3, &[0])]))).unwrap();
    assert_eq!((a.member_epoch, a.assignment), (3, Some(parts(&[(1, &[0, 1])]))));
    let a = sim.send(beat("g", "A", 3, &parts(&[(1, &[0, 1])]))).unwrap();
    assert_eq!((a.member_epoch, sim.group("g").group_epoch), (4, 4));
}

#[test]
fn the_assignment_interval_delays_the_target() {
    let mut sim = Sim::new(&[("t", 2, 1)]);
    sim.settings = GroupSettings::default();
    assert_eq!(sim.settings.assignment_interval_ms, 1_000);
    sim.send(join("g", "A", &["t"])).unwrap(); // at 1100: never computed, so at once
    assert_eq!(sim.group("g").assignment_time_ms, 1_100);

    let b = sim.send(join("g", "B", &["t"])).unwrap(); // at 1200: owed, not yet allowed
    assert_eq!((b.member_epoch, b.assignment), (2, Some(parts(&[]))));
    assert_eq!(sim.group("g").state(), GroupState::Assigning);
    assert_eq!(sim.group("g").assignment_epoch, 2);

    sim.now_ms = 2_000; // the next heartbeat is at 2100, past 1100 + 1000
    let a = sim.send(beat("g", "A", 2, &parts(&[(1, &[0, 1])]))).unwrap();
    assert_eq!((sim.group("g").assignment_epoch, sim.group("g").assignment_time_ms), (3, 2_100));
    assert_eq!((a.member_epoch, a.assignment), (2, Some(parts(&[(1, &[0])]))));
}

#[test]
fn a_heartbeat_that_changes_nothing_leaves_the_group_equal() {
    let mut sim = Sim::new(&[("t", 2, 1)]);
    sim.send(join("g", "A", &["t"])).unwrap();
    let before = sim.groups.clone();
    // A full request repeating what the member has (what the client sends after an error).
    let hb = Heartbeat { member_epoch: 2, topic_partitions: Some(vec![]), ..join("g", "A", &["t"]) };
    let mut owned = hb.clone();
    owned.topic_partitions = Some(super::testkit::topic_partitions(&parts(&[(1, &[0, 1])])));
    let a = sim.send(owned).unwrap();
    assert_eq!(a.assignment, Some(parts(&[(1, &[0, 1])])), "a full request gets the assignment");
    assert_eq!(sim.groups, before);
    // A new client host is stored, as Kafka does.
    let mut moved = beat("g", "A", 2, &parts(&[(1, &[0, 1])]));
    moved.client_host = "/10.0.0.2".into();
    sim.send(moved).unwrap();
    assert_eq!(sim.group("g").members["A"].client_host, "/10.0.0.2");
    assert_eq!(sim.group("g").group_epoch, 2);
}

#[test]
fn a_subscription_shrink_revokes_the_dropped_topic_first() {
    let mut sim = Sim::new(&[("t", 1, 1), ("u", 1, 2)]);
    sim.send(join("g", "A", &["t", "u"])).unwrap();
    let mut hb = beat("g", "A", 2, &parts(&[(1, &[0]), (2, &[0])]));
    hb.subscribed_topic_names = Some(vec!["t".into()]);
    let a = sim.send(hb).unwrap();
    assert_eq!((a.member_epoch, a.assignment), (2, Some(parts(&[(1, &[0])]))));
    assert_eq!(sim.group("g").members["A"].state, MemberState::UnrevokedPartitions);
    let a = sim.send(beat("g", "A", 2, &parts(&[(1, &[0])]))).unwrap();
    assert_eq!(a.member_epoch, 3);
    assert_eq!(sim.group("g").state(), GroupState::Stable);
}

#[test]
fn timers_name_every_member_and_the_revoking_ones_deadline() {
    let mut sim = Sim::new(&[("t", 2, 1)]);
    sim.send(join("g", "A", &["t"])).unwrap();
    sim.send(join("g", "B", &["t"])).unwrap();
    sim.send(beat("g", "A", 2, &parts(&[(1, &[0, 1])]))).unwrap();
    let timers = sim.groups.timers(|_| sim.settings.session_timeout_ms);
    assert_eq!(timers.len(), 2);
    assert!(timers.iter().all(|t| t.session_timeout_ms == 45_000));
    // A group's own session timeout (its `consumer.session.timeout.ms`) is what gets armed.
    assert!(sim
        .groups
        .timers(|g| if g == "g" { 50_000 } else { 0 })
        .iter()
        .all(|t| t.session_timeout_ms == 50_000));
    let a = timers.iter().find(|t| t.member_id == "A").unwrap();
    let deadline = a.revocation.unwrap();
    assert_eq!((deadline.member_epoch, deadline.rebalance_timeout_ms), (2, 300_000));
    // The rebalance timer fires while A is still revoking: A is fenced, B gets everything.
    assert!(sim.groups.fence(&sim.topics, "g", "A", Some(deadline.member_epoch)));
    let b = sim.send(beat("g", "B", 3, &parts(&[]))).unwrap();
    assert_eq!((b.member_epoch, b.assignment), (4, Some(parts(&[(1, &[0, 1])]))));
}

#[test]
fn describe_reports_current_and_target_assignments() {
    let mut sim = Sim::new(&[("t", 2, 1)]);
    sim.send(join("g", "A", &["t"])).unwrap();
    sim.send(join("g", "B", &["t"])).unwrap();
    let members = sim.group("g").describe_members();
    assert_eq!(members.iter().map(|m| m.member_id).collect::<Vec<_>>(), ["A", "B"]);
    assert_eq!(
        (members[0].assignment.clone(), members[0].target.clone()),
        (parts(&[(1, &[0, 1])]), parts(&[(1, &[0])]))
    );
    assert_eq!((members[1].assignment.clone(), members[1].target.clone()), (parts(&[]), parts(&[(1, &[1])])));
    assert_eq!(sim.group("g").state().as_str(), "Reconciling");
}

#[test]
fn subscribed_topic_names_cover_names_and_regex_matches() {
    let mut sim = Sim::new(&[("foo1", 1, 1), ("bar", 1, 2)]);
    sim.send(join("g", "A", &["gone"])).unwrap();
    let hb = Heartbeat {
        subscribed_topic_names: None,
        subscribed_topic_regex: Some("foo.*".into()),
        ..join("g", "B", &[])
    };
    sim.send(hb).unwrap();
    let names = sim.group("g").subscribed_topic_names(&sim.topics);
    assert_eq!(names.into_iter().collect::<Vec<_>>(), ["foo1", "gone"]);
}

/// Kafka resolves a regex against every topic, internal ones included (franz-go's
/// `Test848RegexBrokerResolves`): the virtual `__consumer_offsets` is assigned to a member
/// whose regex matches it, unless a real topic of that name shadows it.
#[test]
fn a_regex_matching_the_internal_offsets_topic_is_assigned_it() {
    use crate::internal_topic;
    let topics = super::testkit::topics(&[("orders", 1, 1)]);
    let mut groups = ConsumerGroups::default();
    let mut hb = super::testkit::join("g", "A", &[]);
    hb.subscribed_topic_names = None;
    hb.subscribed_topic_regex = Some("orders|__consumer_offsets".into());
    let answer = groups.heartbeat(&topics, &hb, &super::testkit::settings(), 1).unwrap();
    let assigned = answer.assignment.expect("a join gets its assignment");
    let ids: Vec<[u8; 16]> = assigned.keys().copied().collect();
    assert_eq!(ids, vec![super::testkit::tid(1), internal_topic::TOPIC_ID]);
    assert_eq!(assigned[&internal_topic::TOPIC_ID], [0].into_iter().collect());
}

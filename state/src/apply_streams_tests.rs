//! Where Streams groups meet the other group types in the log: a consumer group never takes a
//! Streams group's id, a classic generation takes only an empty one's (keeping the committed
//! offsets), and DeleteGroups takes an Empty Streams group with its offsets but never one with
//! members.

use std::collections::BTreeMap;

use kafka_compat::error_code;

use crate::command::{
    ConsumerGroupHeartbeatOp, DeleteGroupsOp, GenerationMember, GenerationOp, GroupDeletion,
    OffsetCommitEntry, OffsetCommitOp, Op, OpResult, StreamsGroupHeartbeatOp,
};
use crate::consumer_group::testkit;
use crate::streams_group::{
    Heartbeat, StreamsSettings, Subtopology, Topology, LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};
use crate::testing::{at, create_topic};
use crate::BrokerState;

fn apply(state: &mut BrokerState, op: Op) -> OpResult {
    at(1_000, op).apply(state, &mut Vec::new())
}

/// A Streams member's join (epoch 0) with a one-subtopology topology reading `t`.
fn streams_join(group: &str, member: &str) -> Heartbeat {
    let subtopology = Subtopology { source_topics: vec!["t".into()], ..Default::default() };
    Heartbeat {
        group_id: group.into(),
        member_id: member.into(),
        rebalance_timeout_ms: 10_000,
        topology: Some(Topology { epoch: 0, subtopologies: BTreeMap::from([("0".into(), subtopology)]) }),
        active_tasks: Some(Default::default()),
        standby_tasks: Some(Default::default()),
        warmup_tasks: Some(Default::default()),
        process_id: Some("process".into()),
        ..Default::default()
    }
}

fn streams_heartbeat(state: &mut BrokerState, hb: Heartbeat) -> OpResult {
    let op = StreamsGroupHeartbeatOp { heartbeat: hb, settings: StreamsSettings::default(), now_ms: 1_000 };
    apply(state, Op::StreamsGroupHeartbeat(Box::new(op)))
}

fn streams_joined(state: &mut BrokerState, group: &str, member: &str) {
    assert_served(streams_heartbeat(state, streams_join(group, member)), "streams join");
}

/// A Streams heartbeat op that was served, not refused.
fn assert_served(result: OpResult, what: &str) {
    let OpResult::StreamsHeartbeat(answer) = result else { panic!("{what}: not a Streams heartbeat result") };
    assert!(answer.is_ok(), "{what} refused: {answer:?}");
}

/// The member leaves: -1, or a static member's temporary leave (-2).
fn streams_leave(state: &mut BrokerState, group: &str, member: &str, epoch: i32) {
    let hb = Heartbeat {
        group_id: group.into(),
        member_id: member.into(),
        member_epoch: epoch,
        instance_id: (epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH).then(|| "instance".into()),
        ..Default::default()
    };
    assert_served(streams_heartbeat(state, hb), "leave");
}

fn consumer_heartbeat(state: &mut BrokerState, group: &str) -> OpResult {
    let heartbeat = testkit::join(group, "c", &["t"]);
    let op =
        ConsumerGroupHeartbeatOp { heartbeat, settings: testkit::settings(), now_ms: 1_000, upgrade: None };
    apply(state, Op::ConsumerGroupHeartbeat(Box::new(op)))
}

fn generation(group: &str, members: &[&str]) -> Op {
    let members = members
        .iter()
        .map(|m| GenerationMember {
            member_id: m.to_string(),
            group_instance_id: None,
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
        })
        .collect();
    Op::CompleteGeneration(GenerationOp {
        group_id: group.into(),
        generation_id: 1,
        protocol_type: "consumer".into(),
        protocol_name: "range".into(),
        members,
    })
}

/// An admin client's commit (generation -1, no member): stored only while the group is Empty.
fn admin_commit(state: &mut BrokerState, group: &str, offset: i64) -> i16 {
    let commit =
        OffsetCommitEntry { topic: "t".into(), partition: 0, offset, leader_epoch: -1, metadata: None };
    let op = OffsetCommitOp {
        group_id: group.into(),
        generation_id: -1,
        member_id: String::new(),
        commits: vec![commit],
    };
    let OpResult::Items(items) = apply(state, Op::OffsetCommit(op)) else { panic!("not items") };
    items[0].0
}

fn delete(state: &mut BrokerState, group: &str) -> i16 {
    let op = DeleteGroupsOp { groups: vec![GroupDeletion { group_id: group.into(), generation_id: 0 }] };
    let OpResult::Items(items) = apply(state, Op::DeleteGroups(op)) else { panic!("not items") };
    items[0].0
}

/// A Streams group with one member `m` on topic `t`.
fn with_streams_group() -> BrokerState {
    let mut state = BrokerState::default();
    apply(&mut state, create_topic("t", 2, 7));
    streams_joined(&mut state, "g", "m");
    state
}

fn assert_not_consumer(state: &mut BrokerState) {
    let before = state.clone();
    let OpResult::Heartbeat(Err(refusal)) = consumer_heartbeat(state, "g") else {
        panic!("consumer heartbeat accepted")
    };
    assert_eq!(refusal.code, error_code::GROUP_ID_NOT_FOUND);
    assert_eq!(refusal.message.as_deref(), Some("Group g is not a consumer group."));
    assert_eq!(*state, before, "a refused heartbeat changes nothing");
}

#[test]
fn a_consumer_heartbeat_is_refused_for_a_streams_group_id_empty_or_not() {
    let mut state = with_streams_group();
    assert_not_consumer(&mut state);
    streams_leave(&mut state, "g", "m", LEAVE_GROUP_MEMBER_EPOCH);
    // Kafka converts only an empty classic group to a consumer group, never a Streams group.
    assert_not_consumer(&mut state);
    assert!(state.consumer_groups.groups.is_empty());
}

#[test]
fn delete_refuses_a_streams_group_with_members() {
    let mut state = with_streams_group();
    assert_eq!(delete(&mut state, "g"), error_code::NON_EMPTY_GROUP);
    assert!(state.streams_groups.groups.contains_key("g"));
}

#[test]
fn delete_refuses_a_streams_group_whose_static_member_is_away() {
    let mut state = BrokerState::default();
    apply(&mut state, create_topic("t", 2, 7));
    let mut join = streams_join("g", "m");
    join.instance_id = Some("instance".into());
    assert_served(streams_heartbeat(&mut state, join), "static join");
    streams_leave(&mut state, "g", "m", LEAVE_GROUP_STATIC_MEMBER_EPOCH);
    assert_eq!(delete(&mut state, "g"), error_code::NON_EMPTY_GROUP);
}

#[test]
fn delete_takes_an_empty_streams_group_with_its_offsets() {
    let mut state = with_streams_group();
    streams_leave(&mut state, "g", "m", LEAVE_GROUP_MEMBER_EPOCH);
    assert_eq!(admin_commit(&mut state, "g", 5), error_code::NONE);
    assert_eq!(delete(&mut state, "g"), error_code::NONE);
    assert!(!state.streams_groups.groups.contains_key("g"));
    assert!(state.groups.committed("g", "t", 0).is_none());
    assert_eq!(delete(&mut state, "g"), error_code::GROUP_ID_NOT_FOUND, "deleted once");
}

#[test]
fn a_classic_generation_converts_an_empty_streams_group_keeping_its_offsets() {
    let mut state = with_streams_group();
    streams_leave(&mut state, "g", "m", LEAVE_GROUP_MEMBER_EPOCH);
    assert_eq!(admin_commit(&mut state, "g", 5), error_code::NONE);
    apply(&mut state, generation("g", &["classic-1"]));
    assert!(!state.streams_groups.groups.contains_key("g"));
    assert!(crate::apply_consumer::classic_group_has_members(&state, "g"));
    assert_eq!(state.groups.committed("g", "t", 0).map(|c| c.offset), Some(5));
}

#[test]
fn a_classic_generation_is_not_recorded_over_a_streams_group_with_members() {
    let mut state = with_streams_group();
    let before = state.clone();
    apply(&mut state, generation("g", &["classic-1"]));
    assert_eq!(state, before);
}

#[test]
fn an_emptied_classic_generation_leaves_an_empty_streams_group_alone() {
    let mut state = with_streams_group();
    streams_leave(&mut state, "g", "m", LEAVE_GROUP_MEMBER_EPOCH);
    let before = state.clone();
    apply(&mut state, generation("g", &[]));
    assert_eq!(state, before);
}

/// The offline migration from `classic` to `streams` (issue 30): an application whose classic
/// group emptied (every instance stopped) restarts on the Streams protocol under the same
/// application id, and its committed offsets are still there; a classic group with members
/// keeps its id.
#[test]
fn a_streams_join_takes_an_emptied_classic_group_keeping_its_offsets() {
    let mut state = BrokerState::default();
    apply(&mut state, create_topic("t", 2, 7));
    apply(&mut state, generation("g", &["classic-1"]));
    let refused = streams_heartbeat(&mut state, streams_join("g", "m"));
    let OpResult::StreamsHeartbeat(answer) = refused else { panic!("not a Streams heartbeat result") };
    assert_eq!(answer.unwrap_err().code, error_code::GROUP_ID_NOT_FOUND, "a live classic group keeps its id");
    apply(&mut state, generation("g", &[]));
    assert_eq!(admin_commit(&mut state, "g", 42), error_code::NONE);
    streams_joined(&mut state, "g", "m");
    assert!(state.streams_groups.groups["g"].members.contains_key("m"));
    assert!(
        state.groups.groups.get("g").and_then(|g| g.generation.as_ref()).is_none(),
        "the classic record went"
    );
    assert_eq!(state.groups.committed("g", "t", 0).map(|c| c.offset), Some(42), "the offsets stayed");
}

/// Kafka's `getOrCreateStreamsGroup` takes over only an empty classic group: a share group's
/// id, empty or not, is refused and left as it was.
#[test]
fn a_streams_heartbeat_is_refused_for_a_share_group_id_empty_or_not() {
    use crate::testing::share_heartbeat;
    let mut state = BrokerState::default();
    apply(&mut state, create_topic("t", 2, 7));
    apply(&mut state, share_heartbeat("g", "s", 0, &["t"]));
    assert!(state.share_groups.groups["g"].members.contains_key("s"));
    for leave_first in [false, true] {
        if leave_first {
            apply(&mut state, share_heartbeat("g", "s", -1, &[]));
        }
        let before = state.clone();
        let OpResult::StreamsHeartbeat(answer) = streams_heartbeat(&mut state, streams_join("g", "m")) else {
            panic!("not a Streams heartbeat result")
        };
        let refusal = answer.unwrap_err();
        assert_eq!(refusal.code, error_code::GROUP_ID_NOT_FOUND);
        assert_eq!(refusal.message.as_deref(), Some("Group g is not a streams group."));
        assert_eq!(state, before);
    }
}

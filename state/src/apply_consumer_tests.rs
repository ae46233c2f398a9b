//! Where consumer groups meet classic groups in the log: a group id is held by one protocol at a
//! time, conversions of empty groups keep the committed offsets, and DeleteGroups takes an
//! empty consumer group with its offsets but never one with members.

use kafka_compat::error_code;

use crate::command::{
    ConsumerGroupHeartbeatOp, DeleteGroupsOp, GenerationMember, GenerationOp, GroupDeletion,
    OffsetCommitEntry, OffsetCommitOp, Op, OpResult,
};
use crate::consumer_group::testkit::{join, settings};
use crate::consumer_group::LEAVE_GROUP_MEMBER_EPOCH;
use crate::testing::{at, create_topic};
use crate::BrokerState;

fn apply(state: &mut BrokerState, op: Op) -> OpResult {
    at(1_000, op).apply(state, &mut Vec::new())
}

fn heartbeat(state: &mut BrokerState, hb: crate::consumer_group::Heartbeat) -> OpResult {
    let op = ConsumerGroupHeartbeatOp { heartbeat: hb, settings: settings(), now_ms: 1_000, upgrade: None };
    apply(state, Op::ConsumerGroupHeartbeat(Box::new(op)))
}

fn generation(group: &str, id: i32, members: &[&str]) -> Op {
    let members = members
        .iter()
        .map(|m| GenerationMember {
            member_id: m.to_string(),
            group_instance_id: None,
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
        })
        .collect();
    let op = GenerationOp {
        group_id: group.into(),
        generation_id: id,
        protocol_type: "consumer".into(),
        protocol_name: "range".into(),
        members,
    };
    Op::CompleteGeneration(op)
}

fn admin_commit(group: &str, offset: i64) -> Op {
    let commit =
        OffsetCommitEntry { topic: "t".into(), partition: 0, offset, leader_epoch: -1, metadata: None };
    Op::OffsetCommit(OffsetCommitOp {
        group_id: group.into(),
        generation_id: -1,
        member_id: String::new(),
        commits: vec![commit],
    })
}

fn delete(state: &mut BrokerState, group: &str) -> i16 {
    let op = DeleteGroupsOp { groups: vec![GroupDeletion { group_id: group.into(), generation_id: 0 }] };
    let OpResult::Items(items) = apply(state, Op::DeleteGroups(op)) else { panic!("not items") };
    items[0].0
}

fn joined(state: &mut BrokerState, group: &str, member: &str) {
    let OpResult::Heartbeat(Ok(_)) = heartbeat(state, join(group, member, &["t"])) else {
        panic!("join refused")
    };
}

fn leave(state: &mut BrokerState, group: &str, member: &str) {
    let mut hb = join(group, member, &["t"]);
    hb.member_epoch = LEAVE_GROUP_MEMBER_EPOCH;
    let OpResult::Heartbeat(Ok(_)) = heartbeat(state, hb) else { panic!("leave refused") };
}

fn with_topic() -> BrokerState {
    let mut state = BrokerState::default();
    apply(&mut state, create_topic("t", 2, 7));
    state
}

#[test]
fn a_consumer_group_with_members_is_not_deleted_and_an_empty_one_goes_with_its_offsets() {
    let mut state = with_topic();
    joined(&mut state, "g", "m1");
    assert_eq!(delete(&mut state, "g"), error_code::NON_EMPTY_GROUP);
    assert!(state.consumer_groups.groups["g"].members.contains_key("m1"));
    leave(&mut state, "g", "m1");
    apply(&mut state, admin_commit("g", 5));
    assert!(state.groups.committed("g", "t", 0).is_some());
    assert_eq!(delete(&mut state, "g"), error_code::NONE);
    assert!(!state.consumer_groups.groups.contains_key("g"));
    assert!(state.groups.committed("g", "t", 0).is_none());
    assert_eq!(delete(&mut state, "g"), error_code::GROUP_ID_NOT_FOUND);
}

#[test]
fn an_empty_consumer_group_without_offsets_can_be_deleted() {
    let mut state = with_topic();
    joined(&mut state, "g", "m1");
    leave(&mut state, "g", "m1");
    assert_eq!(delete(&mut state, "g"), error_code::NONE);
    assert!(state.consumer_groups.groups.is_empty());
}

#[test]
fn a_classic_generation_converts_an_empty_consumer_group_and_keeps_its_offsets() {
    let mut state = with_topic();
    joined(&mut state, "g", "m1");
    apply(&mut state, admin_commit("g", 0));
    leave(&mut state, "g", "m1");
    apply(&mut state, admin_commit("g", 9));
    // An emptied classic generation has nothing to convert.
    apply(&mut state, generation("g", 1, &[]));
    assert!(state.consumer_groups.groups.contains_key("g"));
    apply(&mut state, generation("g", 1, &["classic-1"]));
    assert!(!state.consumer_groups.groups.contains_key("g"));
    assert_eq!(state.groups.committed("g", "t", 0).map(|c| c.offset), Some(9));
    assert!(state.groups.groups["g"].generation.is_some());
}

#[test]
fn a_classic_generation_does_not_take_a_consumer_group_with_members() {
    let mut state = with_topic();
    joined(&mut state, "g", "m1");
    apply(&mut state, generation("g", 1, &["classic-1"]));
    assert!(state.consumer_groups.groups["g"].members.contains_key("m1"));
    assert!(state.groups.groups.get("g").and_then(|g| g.generation.as_ref()).is_none());
}

#[test]
fn a_consumer_group_takes_over_an_emptied_classic_group_and_its_offsets() {
    let mut state = with_topic();
    apply(&mut state, generation("g", 3, &["classic-1"]));
    apply(&mut state, generation("g", 4, &[]));
    apply(&mut state, admin_commit("g", 11));
    // A live classic group keeps the id (see `heartbeat`); an emptied one is converted.
    joined(&mut state, "g", "m1");
    assert!(state.groups.groups["g"].generation.is_none());
    assert_eq!(state.groups.committed("g", "t", 0).map(|c| c.offset), Some(11));
    assert!(state.consumer_groups.groups["g"].members.contains_key("m1"));
}

#[test]
fn a_consumer_join_onto_a_classic_group_with_members_is_refused_and_changes_nothing() {
    let mut state = with_topic();
    apply(&mut state, generation("g", 3, &["classic-1"]));
    let before = state.groups.groups["g"].clone();
    let OpResult::Heartbeat(Err(refusal)) = heartbeat(&mut state, join("g", "m1", &["t"])) else {
        panic!("join accepted")
    };
    assert_eq!(refusal.code, error_code::GROUP_ID_NOT_FOUND);
    assert!(state.consumer_groups.groups.is_empty());
    assert_eq!(state.groups.groups["g"], before);
}

fn upgrading_join(state: &mut BrokerState, group: &str, member: &str) -> OpResult {
    let mut snapshot = crate::consumer_group::testkit::classic_snapshot();
    snapshot.generation_id = 3;
    for m in &mut snapshot.members {
        m.member_id = format!("classic-{}", m.member_id);
        // Topic "t" has two partitions here: each classic member owns one.
        let p: &[i32] = if m.member_id.ends_with('A') { &[0] } else { &[1] };
        m.assignment = crate::consumer_group::testkit::assignment_bytes(&[("t", p)], None);
    }
    let op = ConsumerGroupHeartbeatOp {
        heartbeat: join(group, member, &["t"]),
        settings: settings(),
        now_ms: 1_000,
        upgrade: Some(snapshot),
    };
    apply(state, Op::ConsumerGroupHeartbeat(Box::new(op)))
}

#[test]
fn a_consumer_join_with_the_leaders_snapshot_upgrades_a_live_classic_group() {
    let mut state = with_topic();
    apply(&mut state, generation("g", 3, &["classic-A", "classic-B"]));
    apply(&mut state, admin_commit("g", 4));
    let OpResult::Heartbeat(Ok(answer)) = upgrading_join(&mut state, "g", "m1") else { panic!("refused") };
    assert_eq!(answer.member_epoch, 4, "the classic generation 3, bumped by the new subscription");
    let group = &state.consumer_groups.groups["g"];
    assert_eq!(group.members.len(), 3);
    assert!(group.members["classic-A"].classic.is_some() && group.members["m1"].classic.is_none());
    // The classic record goes; the committed offsets stay.
    assert!(state.groups.groups["g"].generation.is_none());
    assert_eq!(state.groups.committed("g", "t", 0).map(|c| c.offset), Some(4));
}

#[test]
fn a_refused_upgrade_changes_nothing() {
    let mut state = with_topic();
    apply(&mut state, generation("g", 3, &["classic-A", "classic-B"]));
    let before = state.clone();
    let mut s = settings();
    s.migration.policy = crate::consumer_group::MigrationPolicy::Disabled;
    let snapshot = Some(crate::consumer_group::testkit::classic_snapshot());
    let op = ConsumerGroupHeartbeatOp {
        heartbeat: join("g", "m1", &["t"]),
        settings: s,
        now_ms: 1_000,
        upgrade: snapshot,
    };
    let OpResult::Heartbeat(Err(refusal)) = apply(&mut state, Op::ConsumerGroupHeartbeat(Box::new(op)))
    else {
        panic!("accepted")
    };
    assert_eq!(refusal.code, error_code::GROUP_ID_NOT_FOUND);
    assert_eq!(state.consumer_groups, before.consumer_groups);
    assert_eq!(state.groups, before.groups);
}

#[test]
fn the_last_consumer_member_leaving_downgrades_and_the_first_classic_generation_ends_it() {
    let mut state = with_topic();
    apply(&mut state, generation("g", 3, &["classic-A", "classic-B"]));
    let OpResult::Heartbeat(Ok(_)) = upgrading_join(&mut state, "g", "m1") else { panic!("refused") };
    leave(&mut state, "g", "m1");
    assert!(!state.consumer_groups.groups.contains_key("g"));
    assert!(state.consumer_groups.downgraded.contains("g"), "the leader adopts it rebalancing");
    let recorded = state.groups.groups["g"].generation.clone().expect("a classic generation");
    let ids: Vec<&str> = recorded.members.iter().map(|m| m.member_id.as_str()).collect();
    // The group epoch as it was (Kafka converts instead of removing the member).
    assert_eq!((recorded.generation_id, ids), (4, vec!["classic-A", "classic-B"]));
    // The classic rebalance completes its next generation: the group is an ordinary one again.
    apply(&mut state, generation("g", 6, &["classic-A", "classic-B"]));
    assert!(state.consumer_groups.downgraded.is_empty());
}

#[test]
fn fencing_the_last_consumer_member_downgrades_unless_the_policy_forbids() {
    use crate::command::FenceMemberOp;
    use crate::consumer_group::{Migration, MigrationPolicy};
    for (policy, downgraded) in [(MigrationPolicy::Bidirectional, true), (MigrationPolicy::Upgrade, false)] {
        let mut state = with_topic();
        apply(&mut state, generation("g", 3, &["classic-A", "classic-B"]));
        let OpResult::Heartbeat(Ok(_)) = upgrading_join(&mut state, "g", "m1") else { panic!("refused") };
        let migration = Migration { policy, classic_max_size: i32::MAX };
        let fence =
            FenceMemberOp { group_id: "g".into(), member_id: "m1".into(), expected_epoch: None, migration };
        assert!(matches!(
            apply(&mut state, Op::FenceConsumerGroupMember(fence)),
            OpResult::MemberFenced(true)
        ));
        assert_eq!(!state.consumer_groups.groups.contains_key("g"), downgraded, "{policy:?}");
        assert_eq!(state.consumer_groups.downgraded.contains("g"), downgraded, "{policy:?}");
    }
}

/// The virtual `__consumer_offsets` takes commits, as Kafka's real one does (a consumer whose
/// regex matched it commits its position there), but only from `onelog.version` 3: a rolled
/// cluster whose 0.1.0 nodes refuse them keeps deciding alike until the level is finalized.
#[test]
fn commits_to_the_internal_offsets_topic_are_taken_from_onelog_version_3() {
    use crate::features::{FeatureUpdate, UpdateFeaturesOp, UpgradeType, ONELOG_VERSION};
    let commit = |state: &mut BrokerState| {
        let entry = OffsetCommitEntry {
            topic: crate::internal_topic::NAME.into(),
            partition: 0,
            offset: 0,
            leader_epoch: -1,
            metadata: None,
        };
        let op = OffsetCommitOp {
            group_id: "g".into(),
            generation_id: -1,
            member_id: String::new(),
            commits: vec![entry],
        };
        let OpResult::Items(items) = apply(state, Op::OffsetCommit(op)) else { panic!("not items") };
        items[0].0
    };
    let mut state = with_topic();
    assert_eq!(commit(&mut state), error_code::UNKNOWN_TOPIC_OR_PARTITION, "as 0.1.0 answers");
    let update = FeatureUpdate { name: ONELOG_VERSION.into(), level: 3, upgrade_type: UpgradeType::Upgrade };
    state.features.apply(&UpdateFeaturesOp { updates: vec![update] }).unwrap();
    assert_eq!(commit(&mut state), error_code::NONE);
    assert_eq!(state.groups.committed("g", crate::internal_topic::NAME, 0).map(|c| c.offset), Some(0));
}

/// A share group `g` with member `s` on topic `t`, and after `empty` with none: Kafka refuses
/// the other types alike in both cases.
fn with_share_group(empty: bool) -> BrokerState {
    use crate::testing::share_heartbeat;
    let mut state = with_topic();
    let OpResult::ShareHeartbeat(answer) = apply(&mut state, share_heartbeat("g", "s", 0, &["t"])) else {
        panic!("not a share heartbeat result")
    };
    assert!(answer.is_ok(), "share join refused: {answer:?}");
    if empty {
        apply(&mut state, share_heartbeat("g", "s", -1, &[]));
        assert!(state.share_groups.groups["g"].members.is_empty());
    }
    state
}

#[test]
fn a_consumer_heartbeat_is_refused_for_a_share_group_id_empty_or_not() {
    for empty in [false, true] {
        let mut state = with_share_group(empty);
        let before = state.clone();
        // Kafka's `getOrMaybeCreateConsumerGroup`: only an empty classic group is taken over.
        let OpResult::Heartbeat(Err(refusal)) = heartbeat(&mut state, join("g", "m1", &["t"])) else {
            panic!("consumer join accepted onto a share group (empty: {empty})")
        };
        assert_eq!(refusal.code, error_code::GROUP_ID_NOT_FOUND);
        assert_eq!(refusal.message.as_deref(), Some("Group g is not a consumer group."));
        assert_eq!(state, before, "a refused heartbeat changes nothing");
    }
}

#[test]
fn a_classic_generation_is_never_recorded_over_a_share_group() {
    for empty in [false, true] {
        let mut state = with_share_group(empty);
        let before = state.clone();
        apply(&mut state, generation("g", 1, &["classic-1"]));
        assert_eq!(state, before, "empty: {empty}");
    }
}

#[test]
fn commits_to_a_share_group_id_are_refused_as_kafkas_share_group_refuses_them() {
    use crate::command::TxnOffsetCommitOp;
    use crate::txns::ProducerIdEpoch;
    for empty in [false, true] {
        let mut state = with_share_group(empty);
        let before = state.clone();
        let OpResult::Items(items) = apply(&mut state, admin_commit("g", 5)) else { panic!("not items") };
        assert_eq!(items, vec![(error_code::GROUP_ID_NOT_FOUND, None)]);
        assert_eq!(state, before, "nothing stored (empty: {empty})");
        let Op::OffsetCommit(commit) = admin_commit("g", 5) else { unreachable!() };
        let member = OffsetCommitOp { generation_id: 3, member_id: "s".into(), ..commit.clone() };
        let checked = crate::apply_consumer::check_offset_commit(&state, &member, 9);
        assert_eq!(checked, Some(error_code::GROUP_ID_NOT_FOUND));
        let txn = TxnOffsetCommitOp {
            transactional_id: "tx".into(),
            producer: ProducerIdEpoch { producer_id: 1, producer_epoch: 0 },
            group_id: "g".into(),
            generation_id: -1,
            member_id: String::new(),
            commits: commit.commits,
        };
        let checked = crate::apply_consumer::check_txn_offset_commit(&state, &txn);
        assert_eq!(checked, Some(error_code::GROUP_ID_NOT_FOUND));
    }
}

/// `onelog.group.placement` cannot be turned on over groups that already have state in this
/// log: the new placement would strand them (a cluster's first levels, when nothing exists
/// yet, are the only time it is set).
#[test]
fn group_placement_is_refused_once_a_group_has_state() {
    use crate::features::{FeatureUpdate, UpdateFeaturesOp, UpgradeType, GROUP_PLACEMENT, ONELOG_VERSION};
    let first_levels = || {
        let update = |name: &str, level| FeatureUpdate {
            name: name.into(),
            level,
            upgrade_type: UpgradeType::Upgrade,
        };
        Op::UpdateFeatures(UpdateFeaturesOp {
            updates: vec![update(ONELOG_VERSION, 8), update(GROUP_PLACEMENT, 1)],
        })
    };
    let mut fresh = with_topic();
    let OpResult::FeaturesUpdated(done) = apply(&mut fresh, first_levels()) else {
        panic!("not a features result")
    };
    assert!(done.is_ok(), "a new cluster's first levels: {done:?}");

    let mut used = with_topic();
    let commit = OffsetCommitOp {
        group_id: "g".into(),
        generation_id: -1,
        member_id: String::new(),
        commits: vec![OffsetCommitEntry {
            topic: "t".into(),
            partition: 0,
            offset: 3,
            leader_epoch: -1,
            metadata: None,
        }],
    };
    apply(&mut used, Op::OffsetCommit(commit));
    assert!(used.has_group_state());
    let OpResult::FeaturesUpdated(refused) = apply(&mut used, first_levels()) else {
        panic!("not a features result")
    };
    let refusal = refused.expect_err("refused over a group with offsets");
    assert!(refusal.message.contains("cannot be set while"), "{}", refusal.message);
    assert_eq!(used.features.level(GROUP_PLACEMENT), 0, "nothing applied");
}

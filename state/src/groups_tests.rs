//! Tests of committed offsets through the pure state machine: commit → fetch round trips,
//! Kafka's error codes per partition, topic deletion, and replicas (one of them restarted from
//! a checkpoint) reaching identical state.

use kafka_compat::error_code;

use crate::command::{
    DeleteGroupsOp, DeleteTopicsOp, OffsetCommitEntry, OffsetCommitOp, Op, OpResult, Refusal,
};
use crate::testing::{at, Step};
use crate::BrokerState;

fn create(name: &str, partitions: i32, id: u8) -> Step {
    crate::testing::create_topic(name, partitions, id).into()
}

/// What a checkpoint holds of the state: its serialized form (the broker's checkpoint adds a
/// header, the covered log id and a CRC around it).
fn checkpoint_round_trip(state: &BrokerState) -> BrokerState {
    bincode::deserialize(&bincode::serialize(state).expect("encodes")).expect("checkpoint decodes")
}

/// A commit in an entry stamped at 1000, with 8 bytes of metadata allowed.
fn commit_step(op: OffsetCommitOp) -> Step {
    at(1_000, Op::OffsetCommit(op)).with_limits(|l| l.offset_metadata_bytes_max = 8)
}

fn entry(topic: &str, partition: i32, offset: i64, metadata: Option<&str>) -> OffsetCommitEntry {
    OffsetCommitEntry {
        topic: topic.into(),
        partition,
        offset,
        leader_epoch: 3,
        metadata: metadata.map(Into::into),
    }
}

fn commit(group: &str, generation_id: i32, commits: Vec<OffsetCommitEntry>) -> Step {
    commit_step(OffsetCommitOp { group_id: group.into(), generation_id, member_id: String::new(), commits })
}

fn delete_topics(names: Vec<String>) -> Step {
    Op::DeleteTopics(DeleteTopicsOp { names }).into()
}

fn apply_all(state: &mut BrokerState, steps: &[Step]) -> Vec<OpResult> {
    let mut effects = Vec::new();
    steps.iter().map(|step| step.apply(state, &mut effects)).collect()
}

fn codes(result: &OpResult) -> Vec<i16> {
    let OpResult::Items(items) = result else { panic!("{result:?}") };
    items.iter().map(|(code, _)| *code).collect()
}

#[test]
fn committed_offsets_round_trip_through_apply() {
    let mut state = BrokerState::default();
    let results = apply_all(
        &mut state,
        &[
            create("orders", 2, 1),
            commit("g", -1, vec![entry("orders", 0, 42, Some("m")), entry("orders", 1, 7, None)]),
            commit("g", -1, vec![entry("orders", 0, 50, None)]),
        ],
    );
    assert_eq!(codes(&results[1]), vec![error_code::NONE, error_code::NONE]);
    assert_eq!(codes(&results[2]), vec![error_code::NONE]);
    let latest = state.groups.committed("g", "orders", 0).expect("committed");
    assert_eq!((latest.offset, latest.leader_epoch, latest.metadata.as_str()), (50, 3, ""));
    let other = state.groups.committed("g", "orders", 1).expect("committed");
    assert_eq!((other.offset, other.metadata.as_str(), other.commit_time_ms), (7, "", 1_000));
    assert!(state.groups.committed("g", "orders", 2).is_none());
    assert!(state.groups.committed("h", "orders", 0).is_none());
}

#[test]
fn each_partition_gets_its_own_code_and_only_good_ones_are_stored() {
    let mut state = BrokerState::default();
    let op = commit(
        "g",
        -1,
        vec![
            entry("orders", 0, 1, Some("12345678")),
            entry("orders", 1, 1, None),
            entry("missing", 0, 1, None),
            entry("orders", 0, 2, Some("123456789")),
            entry("orders", -1, 1, None),
        ],
    );
    let results = apply_all(&mut state, &[create("orders", 1, 1), op]);
    assert_eq!(
        codes(&results[1]),
        vec![
            error_code::NONE,
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            error_code::OFFSET_METADATA_TOO_LARGE,
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
        ]
    );
    assert_eq!(state.groups.committed("g", "orders", 0).map(|c| c.offset), Some(1));
    assert_eq!(state.groups.groups["g"].offsets["orders"].len(), 1);
}

#[test]
fn nothing_valid_creates_no_group() {
    let mut state = BrokerState::default();
    let results = apply_all(&mut state, &[commit("g", -1, vec![entry("missing", 0, 1, None)])]);
    assert_eq!(codes(&results[0]), vec![error_code::UNKNOWN_TOPIC_OR_PARTITION]);
    assert!(state.groups.groups.is_empty());
}

/// Kafka's coordinator for a group without members: a real generation is ILLEGAL_GENERATION
/// for an unknown group and UNKNOWN_MEMBER_ID for an existing (Empty) one (OffsetCommit ≤ v8).
#[test]
fn a_real_generation_is_refused_as_kafka_refuses_it_for_an_empty_group() {
    let mut state = BrokerState::default();
    let results = apply_all(
        &mut state,
        &[
            create("orders", 1, 1),
            commit("g", 1, vec![entry("orders", 0, 5, None), entry("missing", 0, 5, None)]),
            commit("g", -1, vec![entry("orders", 0, 6, None)]),
            commit("g", 1, vec![entry("orders", 0, 7, None)]),
        ],
    );
    assert_eq!(codes(&results[1]), vec![error_code::ILLEGAL_GENERATION; 2]);
    assert_eq!(codes(&results[2]), vec![error_code::NONE]);
    assert_eq!(codes(&results[3]), vec![error_code::UNKNOWN_MEMBER_ID]);
    assert_eq!(state.groups.committed("g", "orders", 0).map(|c| c.offset), Some(6));
}

#[test]
fn deleting_a_topic_drops_its_offsets_and_groups_left_empty() {
    let mut state = BrokerState::default();
    apply_all(
        &mut state,
        &[
            create("a", 1, 1),
            create("b", 1, 2),
            commit("only-a", -1, vec![entry("a", 0, 1, None)]),
            commit("both", -1, vec![entry("a", 0, 2, None), entry("b", 0, 3, None)]),
            delete_topics(vec!["a".into()]),
        ],
    );
    assert!(!state.groups.groups.contains_key("only-a"));
    assert!(state.groups.committed("both", "a", 0).is_none());
    assert_eq!(state.groups.committed("both", "b", 0).map(|c| c.offset), Some(3));
    // A topic created again under the old name starts without committed offsets.
    apply_all(&mut state, &[create("a", 1, 9)]);
    assert!(state.groups.committed("both", "a", 0).is_none());
}

#[test]
fn replicas_and_a_restarted_replica_reach_identical_state() {
    let log = [
        create("a", 2, 1),
        commit("g1", -1, vec![entry("a", 0, 10, Some("x")), entry("a", 1, 4, None)]),
        commit("g2", -1, vec![entry("a", 1, 8, None), entry("nope", 0, 1, None)]),
        commit("g1", 3, vec![entry("a", 0, 11, None)]),
        create("b", 1, 2),
        commit("g2", -1, vec![entry("b", 0, 2, Some("toolongmetadata"))]),
        commit("g1", -1, vec![entry("a", 0, 12, None), entry("b", 0, 1, None)]),
        delete_topics(vec!["b".into()]),
    ];
    let replay = |restart_at: Option<usize>| {
        let mut state = BrokerState::default();
        for (index, op) in log.iter().enumerate() {
            if restart_at == Some(index) {
                state = checkpoint_round_trip(&state);
            }
            apply_all(&mut state, std::slice::from_ref(op));
        }
        state
    };
    let replicas = [replay(None), replay(None), replay(Some(4))];
    let digests: Vec<Vec<u8>> = replicas.iter().map(|s| bincode::serialize(s).unwrap()).collect();
    assert_eq!(digests[0], digests[1]);
    assert_eq!(digests[1], digests[2]);
    let state = &replicas[0];
    assert_eq!(state.groups.committed("g1", "a", 0).map(|c| c.offset), Some(12));
    assert_eq!(state.groups.committed("g2", "a", 1).map(|c| c.offset), Some(8));
    assert!(state.groups.committed("g1", "b", 0).is_none());
}

fn member_commit(group: &str, generation_id: i32, member_id: &str) -> Step {
    commit_step(OffsetCommitOp {
        group_id: group.into(),
        generation_id,
        member_id: member_id.into(),
        commits: vec![entry("orders", 0, 9, None)],
    })
}

fn generation(group: &str, generation_id: i32, members: &[&str]) -> Step {
    use crate::command::{GenerationMember, GenerationOp};
    Op::CompleteGeneration(GenerationOp {
        group_id: group.into(),
        generation_id,
        protocol_type: "consumer".into(),
        protocol_name: "range".into(),
        members: members
            .iter()
            .map(|id| GenerationMember {
                member_id: (*id).into(),
                group_instance_id: None,
                session_timeout_ms: 10_000,
                rebalance_timeout_ms: 30_000,
            })
            .collect(),
    })
    .into()
}

/// The recorded generation fences commits on every replica, also after a failover: an older
/// generation (a zombie) is ILLEGAL_GENERATION, a stranger in the same generation
/// UNKNOWN_MEMBER_ID; a newer generation (recorded later in the log) passes.
#[test]
fn a_recorded_generation_fences_zombie_commits_and_survives_a_checkpoint() {
    let mut state = BrokerState::default();
    let results = apply_all(
        &mut state,
        &[
            create("orders", 1, 1),
            generation("g", 2, &["a", "b"]),
            member_commit("g", 2, "a"),
            member_commit("g", 1, "a"),
            member_commit("g", 2, "zombie"),
            member_commit("g", 3, "c"),
            generation("g", 1, &["old"]),
            member_commit("g", 2, "b"),
        ],
    );
    assert_eq!(codes(&results[2]), vec![error_code::NONE]);
    assert_eq!(codes(&results[3]), vec![error_code::ILLEGAL_GENERATION]);
    assert_eq!(codes(&results[4]), vec![error_code::UNKNOWN_MEMBER_ID]);
    assert_eq!(codes(&results[5]), vec![error_code::NONE]);
    assert_eq!(codes(&results[7]), vec![error_code::NONE], "a late older generation changes nothing");
    let recorded = state.groups.groups["g"].generation.as_ref().expect("recorded");
    assert_eq!(recorded.generation_id, 2);
    let restored = checkpoint_round_trip(&state);
    assert_eq!(restored.groups, state.groups);
    // A group whose topic goes keeps its recorded generation.
    state.groups.forget_topic("orders");
    assert!(state.groups.groups.contains_key("g"));
}

fn delete_groups(groups: &[(&str, i32)]) -> Step {
    use crate::command::GroupDeletion;
    Op::DeleteGroups(DeleteGroupsOp {
        groups: groups
            .iter()
            .map(|(g, generation_id)| GroupDeletion { group_id: (*g).into(), generation_id: *generation_id })
            .collect(),
    })
    .into()
}

fn delete_offsets(group: &str, partitions: &[(&str, i32)]) -> Step {
    use crate::command::OffsetDeleteOp;
    Op::OffsetDelete(OffsetDeleteOp {
        group_id: group.into(),
        partitions: partitions.iter().map(|(t, p)| ((*t).into(), *p)).collect(),
    })
    .into()
}

/// DeleteGroups through apply: each group its own code; a deleted group's offsets and
/// generation are gone on every replica, and an empty generation applied late (the
/// coordinator's record of the group emptying) does not bring it back.
#[test]
fn deleting_groups_drops_offsets_and_generation_and_refuses_groups_with_members() {
    let mut state = BrokerState::default();
    let results = apply_all(
        &mut state,
        &[
            create("orders", 1, 1),
            commit("simple", -1, vec![entry("orders", 0, 5, None)]),
            generation("emptied", 3, &["a"]),
            generation("busy", 2, &["b"]),
            // The coordinator saw "emptied" at generation 4 (its members left) and "busy" at 2.
            delete_groups(&[("simple", 0), ("emptied", 4), ("busy", 2), ("never", 0)]),
            generation("emptied", 4, &[]),
            delete_groups(&[("simple", 0)]),
        ],
    );
    assert_eq!(
        codes(&results[4]),
        vec![error_code::NONE, error_code::NONE, error_code::NON_EMPTY_GROUP, error_code::GROUP_ID_NOT_FOUND]
    );
    assert_eq!(codes(&results[6]), vec![error_code::GROUP_ID_NOT_FOUND]);
    assert!(state.groups.committed("simple", "orders", 0).is_none());
    let names: Vec<&str> = state.groups.groups.keys().map(String::as_str).collect();
    assert_eq!(names, vec!["busy"]);
    // A zombie of the deleted group is still fenced: its group no longer has its generation.
    let zombie = apply_all(&mut state, &[member_commit("emptied", 3, "a")]);
    assert_eq!(codes(&zombie[0]), vec![error_code::ILLEGAL_GENERATION]);
}

/// OffsetDelete through apply: the named partitions' offsets go, others stay; a group left
/// with nothing goes too; an unknown group is refused GROUP_ID_NOT_FOUND.
#[test]
fn deleting_offsets_drops_only_the_named_partitions() {
    let mut state = BrokerState::default();
    let results = apply_all(
        &mut state,
        &[
            create("orders", 2, 1),
            commit("g", -1, vec![entry("orders", 0, 5, None), entry("orders", 1, 6, None)]),
            delete_offsets("g", &[("orders", 0), ("elsewhere", 3)]),
            delete_offsets("nobody", &[("orders", 0)]),
        ],
    );
    assert!(matches!(results[2], OpResult::Deleted(Ok(()))));
    assert!(
        matches!(&results[3], OpResult::Deleted(Err(Refusal { error_code, .. })) if *error_code == error_code::GROUP_ID_NOT_FOUND)
    );
    assert!(state.groups.committed("g", "orders", 0).is_none());
    assert_eq!(state.groups.committed("g", "orders", 1).map(|c| c.offset), Some(6));
    apply_all(&mut state, &[delete_offsets("g", &[("orders", 1)])]);
    assert!(state.groups.groups.is_empty(), "a group with nothing left goes");
}

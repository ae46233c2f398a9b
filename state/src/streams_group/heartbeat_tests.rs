//! The StreamsGroupHeartbeat flow against hand-built topics: a first join held back by the
//! initial rebalance delay, the target computed when it comes due, a second member taking
//! tasks only once the first gave them up, leaves and fences, Kafka's refusals, and steady
//! heartbeats that leave the state equal.

use std::collections::BTreeMap;

use kafka_compat::error_code::{FENCED_MEMBER_EPOCH, GROUP_ID_NOT_FOUND, INVALID_REQUEST, UNKNOWN_MEMBER_ID};

use super::*;
use crate::consumer_group::{CommitApi, CommitRequest, RevocationTimer};
use crate::{PartitionState, Topic};

fn topics(list: &[(&str, usize)]) -> BTreeMap<String, Topic> {
    let topic = |n: usize| Topic {
        topic_id: [n as u8; 16],
        replication_factor: 1,
        configs: BTreeMap::new(),
        partitions: vec![PartitionState::new(); n],
    };
    list.iter().map(|&(name, n)| (name.to_string(), topic(n))).collect()
}

/// One stateless subtopology reading `in` (4 partitions).
fn topology() -> Topology {
    let sub = Subtopology { source_topics: vec!["in".to_string()], ..Subtopology::default() };
    Topology { epoch: 0, subtopologies: BTreeMap::from([("0".to_string(), sub)]) }
}

fn settings() -> StreamsSettings {
    StreamsSettings {
        initial_rebalance_delay_ms: 3_000,
        assignment_interval_ms: 0,
        ..StreamsSettings::default()
    }
}

fn join(member: &str, process: &str) -> Heartbeat {
    Heartbeat {
        group_id: "app".to_string(),
        member_id: member.to_string(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        topology: Some(topology()),
        active_tasks: Some(Tasks::new()),
        standby_tasks: Some(Tasks::new()),
        warmup_tasks: Some(Tasks::new()),
        process_id: Some(process.to_string()),
        ..Heartbeat::default()
    }
}

/// A steady heartbeat at `epoch` owning `active`.
fn beat(member: &str, epoch: i32, active: &[i32]) -> Heartbeat {
    let owned: Tasks = if active.is_empty() {
        Tasks::new()
    } else {
        BTreeMap::from([("0".to_string(), active.iter().copied().collect())])
    };
    Heartbeat {
        group_id: "app".to_string(),
        member_id: member.to_string(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        active_tasks: Some(owned),
        standby_tasks: Some(Tasks::new()),
        warmup_tasks: Some(Tasks::new()),
        ..Heartbeat::default()
    }
}

fn active(answer: &HeartbeatAnswer) -> Vec<i32> {
    let tasks = answer.tasks.as_ref().expect("the tasks");
    tasks.active.get("0").map(|ps| ps.iter().copied().collect()).unwrap_or_default()
}

/// A group with member A running all four tasks at epoch 2.
fn one_member_running() -> (StreamsGroups, BTreeMap<String, Topic>) {
    let (mut groups, topics) = (StreamsGroups::default(), topics(&[("in", 4)]));
    let first = groups.heartbeat(&topics, &join("A", "p1"), &settings(), 1_000).unwrap();
    assert_eq!(first.member_epoch, 1, "a new group starts at epoch 1");
    assert_eq!(
        first.status.iter().map(|s| s.code).collect::<Vec<_>>(),
        vec![Status::AssignmentDelayed.code()]
    );
    let group = groups.groups.get_mut("app").unwrap();
    assert_eq!(group.assignment_due_at(&settings()), Some(4_000));
    let configured = configure(group.topology.as_ref().unwrap(), &topics);
    group.assign_due(&configured, &settings(), 4_000).unwrap();
    let second = groups.heartbeat(&topics, &beat("A", 1, &[]), &settings(), 4_100).unwrap();
    assert_eq!((second.member_epoch, active(&second)), (2, vec![0, 1, 2, 3]));
    (groups, topics)
}

#[test]
fn a_first_member_waits_out_the_initial_delay_then_gets_every_task() {
    let (groups, _) = one_member_running();
    let group = &groups.groups["app"];
    assert_eq!(group.state(), GroupState::Stable);
    assert_eq!(group.assignment_due_at(&settings()), None, "nothing owed: the leader's timer rests");
}

#[test]
fn a_second_member_gets_tasks_only_after_the_first_revoked_them() {
    let (mut groups, topics) = one_member_running();
    let b = groups.heartbeat(&topics, &join("B", "p2"), &settings(), 5_000).unwrap();
    assert_eq!((b.member_epoch, active(&b)), (3, vec![]), "B waits: A still runs what B is to get");
    let a = groups.heartbeat(&topics, &beat("A", 2, &[0, 1, 2, 3]), &settings(), 5_100).unwrap();
    assert_eq!(a.member_epoch, 2, "A revokes at its old epoch");
    let kept = active(&a);
    assert_eq!(kept.len(), 2);
    assert!(matches!(a.revocation_timer, RevocationTimer::Arm(_)));
    let a = groups.heartbeat(&topics, &beat("A", 2, &kept), &settings(), 5_200).unwrap();
    assert_eq!(a.member_epoch, 3, "A moves on once it no longer runs the revoked tasks");
    let b = groups.heartbeat(&topics, &beat("B", 3, &[]), &settings(), 5_300).unwrap();
    let given = active(&b);
    assert_eq!(given.len(), 2);
    assert!(given.iter().all(|t| !kept.contains(t)));
    assert_eq!(groups.groups["app"].state(), GroupState::Stable);
}

#[test]
fn a_steady_heartbeat_leaves_the_group_equal() {
    let (groups, topics) = one_member_running();
    let (answer, changed) =
        groups.trial("app", |copy| copy.heartbeat(&topics, &beat("A", 2, &[0, 1, 2, 3]), &settings(), 4_200));
    assert!(answer.unwrap().tasks.is_none());
    assert!(!changed);
}

#[test]
fn leaving_and_fencing_remove_the_member_and_bump_the_epoch() {
    let (mut groups, topics) = one_member_running();
    groups.heartbeat(&topics, &join("B", "p2"), &settings(), 5_000).unwrap();
    let epoch = groups.groups["app"].group_epoch;
    let mut leave = beat("B", 3, &[]);
    leave.member_epoch = LEAVE_GROUP_MEMBER_EPOCH;
    groups.heartbeat(&topics, &leave, &settings(), 5_100).unwrap();
    assert_eq!(groups.groups["app"].group_epoch, epoch + 1);
    assert!(!groups.groups["app"].members.contains_key("B"));
    assert!(!groups.fence("app", "A", Some(99)), "a revocation deadline of another epoch fences nobody");
    assert!(groups.fence("app", "A", None));
    let group = &groups.groups["app"];
    assert_eq!((group.state(), group.assignment_epoch), (GroupState::Empty, group.group_epoch));
}

#[test]
fn kafkas_refusals_leave_the_group_unchanged() {
    let (mut groups, topics) = one_member_running();
    let before = groups.clone();
    let refuse = |groups: &mut StreamsGroups, hb: &Heartbeat| {
        groups.heartbeat(&topics, hb, &settings(), 6_000).unwrap_err().code
    };
    assert_eq!(refuse(&mut groups, &beat("A", 7, &[])), FENCED_MEMBER_EPOCH);
    assert_eq!(refuse(&mut groups, &beat("Z", 2, &[])), UNKNOWN_MEMBER_ID);
    let mut other = beat("A", 2, &[]);
    other.group_id = "other".to_string();
    assert_eq!(refuse(&mut groups, &other), GROUP_ID_NOT_FOUND);
    let mut changed = join("C", "p3");
    changed.topology.as_mut().unwrap().subtopologies.insert("1".to_string(), Subtopology::default());
    assert_eq!(refuse(&mut groups, &changed), INVALID_REQUEST, "topology updates are not supported");
    assert_eq!(refuse(&mut groups, &beat("A", 2, &[9])), INVALID_REQUEST, "task 9 does not exist");
    let mut no_timeout = join("C", "p3");
    no_timeout.rebalance_timeout_ms = -1;
    assert_eq!(refuse(&mut groups, &no_timeout), INVALID_REQUEST);
    assert_eq!(groups, before);
}

#[test]
fn commits_are_checked_against_the_member_epoch_and_its_tasks() {
    let (groups, _) = one_member_running();
    let api = CommitApi::TxnOffsetCommit { version: 5 };
    let request = |member: &'static str, epoch| CommitRequest {
        group_id: "app",
        member_id: member,
        instance_id: None,
        member_epoch: epoch,
        api,
        partitions: &[],
    };
    assert_eq!(groups.check_commit(&request("A", 2), &[("in", 0)]), 0);
    assert_eq!(
        groups.check_commit(&request("A", 3), &[("in", 0)]),
        kafka_compat::error_code::ILLEGAL_GENERATION
    );
    assert_eq!(groups.check_commit(&request("Z", 2), &[("in", 0)]), UNKNOWN_MEMBER_ID);
    assert_eq!(groups.check_commit(&request("", -1), &[("in", 0)]), 0, "a producer without group metadata");
}

/// Hostile and confused members: random joins, heartbeats at random epochs owning random tasks,
/// leaves and fences, against a group whose input topic grows. Nothing panics, a refusal
/// changes nothing, and no task ever runs active on two members.
#[test]
fn random_heartbeats_never_panic_and_never_run_a_task_twice() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    for seed in 0..200u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut topics = topics(&[("in", 4)]);
        let mut groups = StreamsGroups::default();
        for step in 0..60i64 {
            let member = ["A", "B", "C"][rng.gen_range(0..3)];
            let hb = random_heartbeat(&mut rng, member);
            let before = groups.clone();
            let now = 1_000 + step * 500;
            if groups.heartbeat(&topics, &hb, &settings(), now).is_err() {
                assert_eq!(groups, before, "seed {seed} step {step}: a refusal changed the group");
            }
            if rng.gen_bool(0.05) {
                groups.fence("app", member, None);
            }
            if rng.gen_bool(0.03) {
                topics = self::topics(&[("in", rng.gen_range(1..8))]);
            }
            if let Some(group) = groups.groups.get_mut("app") {
                if let Some(topology) = group.topology.clone() {
                    let _ = group.assign_due(&configure(&topology, &topics), &settings(), now);
                }
                assert_single_owner(group, seed);
            }
        }
    }
}

fn random_heartbeat(rng: &mut impl rand::Rng, member: &str) -> Heartbeat {
    let mut hb = match rng.gen_range(0..6) {
        0 => join(member, &format!("p{}", rng.gen_range(0..2))),
        1 => {
            let mut leave = beat(member, LEAVE_GROUP_MEMBER_EPOCH, &[]);
            leave.active_tasks = None;
            leave
        }
        _ => {
            let owned: Vec<i32> = (0..rng.gen_range(0..5)).map(|_| rng.gen_range(-1..9)).collect();
            beat(member, rng.gen_range(-3..8), &owned)
        }
    };
    if rng.gen_bool(0.1) {
        hb.standby_tasks = None;
    }
    if rng.gen_bool(0.05) {
        hb.topology = Some(topology());
    }
    hb
}

fn assert_single_owner(group: &StreamsGroup, seed: u64) {
    let mut owners: BTreeMap<i32, &str> = BTreeMap::new();
    for (id, m) in &group.members {
        for tasks in [&m.assigned.active, &m.pending_revocation.active] {
            for p in tasks.get("0").into_iter().flat_map(|ps| ps.keys()) {
                if let Some(other) = owners.insert(*p, id) {
                    assert_eq!(other, id.as_str(), "seed {seed}: task 0_{p} runs on {other} and {id}");
                }
            }
        }
    }
}

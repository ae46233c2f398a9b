//! The sticky task assignor: every task active exactly once, balance among equal members,
//! stickiness across membership changes, members grouped by process, standby placement
//! (never beside the active, at most once per process, previous holders and warmer state
//! first, fewer replicas when processes run out), determinism and empty inputs. A seeded
//! random sweep checks the invariants over many shapes; a failing case prints its seed.

use std::collections::{BTreeMap, BTreeSet};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{assign, AssignmentConfigs, AssignorMember};
use crate::streams_group::tasks::{self, Tasks, TasksTuple};

type Assignment = BTreeMap<String, TasksTuple>;

fn member(process: &str) -> AssignorMember {
    AssignorMember { process_id: process.to_string(), ..AssignorMember::default() }
}

/// Members from (member id, process id) pairs.
fn members(specs: &[(&str, &str)]) -> BTreeMap<String, AssignorMember> {
    specs.iter().map(|(id, process)| (id.to_string(), member(process))).collect()
}

fn subtopologies(specs: &[(&str, i32)]) -> BTreeMap<String, i32> {
    specs.iter().map(|(id, n)| (id.to_string(), *n)).collect()
}

fn replicas(n: i32) -> AssignmentConfigs {
    AssignmentConfigs { num_standby_replicas: n, ..Default::default() }
}

fn run(
    members: &BTreeMap<String, AssignorMember>,
    subtopologies: &BTreeMap<String, i32>,
    configs: &AssignmentConfigs,
) -> Assignment {
    assign(members, subtopologies, configs).expect("assignment")
}

fn list(tasks: &Tasks) -> Vec<(String, i32)> {
    tasks.iter().flat_map(|(s, ps)| ps.iter().map(move |p| (s.clone(), *p))).collect()
}

fn count(tasks: &Tasks) -> usize {
    tasks.values().map(BTreeSet::len).sum()
}

fn tasks_of(specs: &[(&str, &[i32])]) -> Tasks {
    let mut out = Tasks::new();
    for (s, ps) in specs {
        for p in *ps {
            tasks::insert(&mut out, s, *p);
        }
    }
    out
}

/// Every task of the topology is active on exactly one member, and nothing else is.
fn assert_actives_exactly_once(assignment: &Assignment, subtopologies: &BTreeMap<String, i32>, ctx: &str) {
    let mut seen: BTreeMap<(String, i32), usize> = BTreeMap::new();
    for tuple in assignment.values() {
        for task in list(&tuple.active) {
            *seen.entry(task).or_default() += 1;
        }
    }
    let expected: BTreeMap<(String, i32), usize> =
        subtopologies.iter().flat_map(|(s, n)| (0..*n).map(move |p| ((s.clone(), p), 1))).collect();
    assert_eq!(seen, expected, "{ctx}");
}

/// Each task has min(replicas, processes - 1) standbys, none on the process running it active
/// and at most one per process; no warm-up tasks.
fn assert_standbys(
    assignment: &Assignment,
    members: &BTreeMap<String, AssignorMember>,
    replicas: usize,
    ctx: &str,
) {
    let processes: BTreeSet<&str> = members.values().map(|m| m.process_id.as_str()).collect();
    let mut holders: BTreeMap<(String, i32), Vec<&str>> = BTreeMap::new();
    let mut active_on: BTreeMap<(String, i32), &str> = BTreeMap::new();
    for (id, tuple) in assignment {
        let process = members[id].process_id.as_str();
        assert!(tuple.warmup.is_empty(), "{ctx}: warm-up on {id}");
        for task in list(&tuple.standby) {
            holders.entry(task).or_default().push(process);
        }
        for task in list(&tuple.active) {
            active_on.insert(task, process);
        }
    }
    let want = replicas.min(processes.len().saturating_sub(1));
    for (task, process) in &active_on {
        let on = holders.remove(task).unwrap_or_default();
        let distinct: BTreeSet<&str> = on.iter().copied().collect();
        assert_eq!(distinct.len(), on.len(), "{ctx}: {task:?} twice on one process: {on:?}");
        assert!(!distinct.contains(process), "{ctx}: {task:?} standby beside its active on {process}");
        assert_eq!(on.len(), want, "{ctx}: {task:?} has {on:?}");
    }
    assert!(holders.is_empty(), "{ctx}: standbys of unknown tasks {holders:?}");
}

fn active_counts(assignment: &Assignment) -> Vec<usize> {
    assignment.values().map(|t| count(&t.active)).collect()
}

#[test]
fn every_task_is_active_exactly_once() {
    let subs = subtopologies(&[("0", 5), ("1", 3), ("2", 1), ("3", 0)]);
    for n in 1..=10 {
        let specs: Vec<(String, String)> = (0..n).map(|i| (format!("m{i}"), format!("p{}", i % 3))).collect();
        let members: BTreeMap<String, AssignorMember> =
            specs.iter().map(|(id, p)| (id.clone(), member(p))).collect();
        let assignment = run(&members, &subs, &replicas(0));
        assert_eq!(assignment.len(), n, "every member has an entry");
        assert_actives_exactly_once(&assignment, &subs, &format!("{n} members"));
    }
}

#[test]
fn equal_members_are_balanced_within_one() {
    let subs = subtopologies(&[("0", 7), ("1", 5), ("2", 4)]);
    for n in 1..=9 {
        let members: BTreeMap<String, AssignorMember> =
            (0..n).map(|i| (format!("m{i}"), member(&format!("p{i}")))).collect();
        let counts = active_counts(&run(&members, &subs, &replicas(0)));
        let (min, max) = (counts.iter().min().copied(), counts.iter().max().copied());
        assert!(max.zip(min).is_some_and(|(a, b)| a - b <= 1), "{n} members: {counts:?}");
    }
}

#[test]
fn small_group_is_placed_in_task_order_by_least_load() {
    // No history: tasks in (subtopology, partition) order to the least-loaded process,
    // smallest process id among equals.
    let members = members(&[("a", "p1"), ("b", "p2"), ("c", "p3")]);
    let assignment = run(&members, &subtopologies(&[("0", 2), ("1", 2)]), &replicas(0));
    assert_eq!(assignment["a"].active, tasks_of(&[("0", &[0]), ("1", &[1])]));
    assert_eq!(assignment["b"].active, tasks_of(&[("0", &[1])]));
    assert_eq!(assignment["c"].active, tasks_of(&[("1", &[0])]));
}

/// Members with `current` set to what `assignment` gave them.
fn with_current(
    members: &BTreeMap<String, AssignorMember>,
    assignment: &Assignment,
) -> BTreeMap<String, AssignorMember> {
    let mut out = members.clone();
    for (id, m) in &mut out {
        m.current = assignment.get(id).cloned().unwrap_or_default();
    }
    out
}

#[test]
fn adding_a_member_moves_only_its_share() {
    let subs = subtopologies(&[("0", 6), ("1", 6)]);
    let three = members(&[("m1", "p1"), ("m2", "p2"), ("m3", "p3")]);
    let first = run(&three, &subs, &replicas(0));
    assert_eq!(active_counts(&first), vec![4, 4, 4]);

    let mut four = with_current(&three, &first);
    four.insert("m4".to_string(), member("p4"));
    let second = run(&four, &subs, &replicas(0));
    assert_actives_exactly_once(&second, &subs, "after adding m4");
    for id in ["m1", "m2", "m3"] {
        let kept: BTreeSet<_> = list(&second[id].active).into_iter().collect();
        let had: BTreeSet<_> = list(&first[id].active).into_iter().collect();
        assert!(kept.is_subset(&had), "{id} got a task it did not have: {kept:?} vs {had:?}");
        assert_eq!(kept.len(), 3, "{id} keeps its quota");
    }
    assert_eq!(count(&second["m4"].active), 3, "only the new member's share moved");
}

#[test]
fn removing_a_member_keeps_the_others_tasks() {
    let subs = subtopologies(&[("0", 6), ("1", 6)]);
    let four = members(&[("m1", "p1"), ("m2", "p2"), ("m3", "p3"), ("m4", "p4")]);
    let first = run(&four, &subs, &replicas(0));
    let mut three = with_current(&four, &first);
    three.remove("m4");
    let second = run(&three, &subs, &replicas(0));
    assert_actives_exactly_once(&second, &subs, "after removing m4");
    for id in ["m1", "m2", "m3"] {
        let had: BTreeSet<_> = list(&first[id].active).into_iter().collect();
        let now: BTreeSet<_> = list(&second[id].active).into_iter().collect();
        assert!(had.is_subset(&now), "{id} lost a task: {had:?} vs {now:?}");
        assert_eq!(now.len(), 4);
    }
}

#[test]
fn previous_owner_keeps_only_up_to_its_quota() {
    // m1 ran everything; now two members share: m1 keeps half, the rest moves to m2.
    let subs = subtopologies(&[("0", 4)]);
    let mut group = members(&[("m1", "p1"), ("m2", "p2")]);
    if let Some(m) = group.get_mut("m1") {
        m.current.active = tasks_of(&[("0", &[0, 1, 2, 3])]);
    }
    let assignment = run(&group, &subs, &replicas(0));
    assert_eq!(assignment["m1"].active, tasks_of(&[("0", &[0, 1])]));
    assert_eq!(assignment["m2"].active, tasks_of(&[("0", &[2, 3])]));
}

#[test]
fn previous_standby_takes_over_an_orphaned_active() {
    // The owner of 0_0 left; b had its standby, so b becomes the active owner.
    let subs = subtopologies(&[("0", 1)]);
    let mut group = members(&[("a", "p1"), ("b", "p2"), ("c", "p3")]);
    if let Some(m) = group.get_mut("b") {
        m.current.standby = tasks_of(&[("0", &[0])]);
    }
    let assignment = run(&group, &subs, &replicas(0));
    assert_eq!(assignment["b"].active, tasks_of(&[("0", &[0])]));
}

#[test]
fn members_of_one_process_share_its_load() {
    // p1 runs two members, p2 one: each member gets two actives, so p1 runs four tasks and
    // their standbys can only go to p2, while p2's two tasks get standbys on p1.
    let group = members(&[("a", "p1"), ("b", "p1"), ("c", "p2")]);
    let subs = subtopologies(&[("0", 6)]);
    let assignment = run(&group, &subs, &replicas(1));
    assert_actives_exactly_once(&assignment, &subs, "process grouping");
    assert_eq!(active_counts(&assignment), vec![2, 2, 2]);
    assert_standbys(&assignment, &group, 1, "process grouping");
    assert_eq!(count(&assignment["c"].standby), 4);
    assert_eq!(count(&assignment["a"].standby) + count(&assignment["b"].standby), 2);
}

#[test]
fn standbys_avoid_the_active_process_and_honour_the_replica_count() {
    let group = members(&[("a", "p1"), ("b", "p2"), ("c", "p3"), ("d", "p4"), ("e", "p4")]);
    let subs = subtopologies(&[("0", 5), ("1", 3)]);
    for r in 1..=3 {
        let assignment = run(&group, &subs, &replicas(r));
        assert_actives_exactly_once(&assignment, &subs, &format!("{r} replicas"));
        assert_standbys(&assignment, &group, r as usize, &format!("{r} replicas"));
    }
}

#[test]
fn fewer_processes_than_replicas_assigns_fewer_standbys() {
    let subs = subtopologies(&[("0", 4)]);
    let two = members(&[("a", "p1"), ("b", "p2"), ("c", "p2")]);
    let assignment = run(&two, &subs, &replicas(3));
    assert_standbys(&assignment, &two, 3, "two processes");
    assert_eq!(assignment.values().map(|t| count(&t.standby)).sum::<usize>(), 4);

    let one = members(&[("a", "p1"), ("b", "p1")]);
    let assignment = run(&one, &subs, &replicas(1));
    assert_actives_exactly_once(&assignment, &subs, "one process");
    assert!(assignment.values().all(|t| t.standby.is_empty()), "{assignment:?}");
}

#[test]
fn standby_prefers_previous_standby_then_warmer_state() {
    let subs = subtopologies(&[("0", 1)]);
    let mut group = members(&[("a", "p1"), ("b", "p2"), ("c", "p3")]);
    let offsets = |o: i64| BTreeMap::from([(("0".to_string(), 0), o)]);
    if let Some(m) = group.get_mut("a") {
        m.current.active = tasks_of(&[("0", &[0])]);
    }
    if let Some(m) = group.get_mut("b") {
        m.task_offsets = offsets(10);
    }
    if let Some(m) = group.get_mut("c") {
        m.task_offsets = offsets(100);
    }
    // Nobody had the standby: the warmer state (c) wins.
    let assignment = run(&group, &subs, &replicas(1));
    assert_eq!(assignment["a"].active, tasks_of(&[("0", &[0])]));
    assert_eq!(assignment["c"].standby, tasks_of(&[("0", &[0])]));

    // b had it as a standby: that beats c's larger offset sum.
    if let Some(m) = group.get_mut("b") {
        m.current.standby = tasks_of(&[("0", &[0])]);
    }
    let assignment = run(&group, &subs, &replicas(1));
    assert_eq!(assignment["b"].standby, tasks_of(&[("0", &[0])]));
    assert!(assignment["c"].standby.is_empty());
}

#[test]
fn previous_active_owner_gets_the_standby_when_the_active_moves() {
    // a ran 0_0 and 0_1 alone; with b joining, one of them moves to b, and a, which still has
    // the state, gets its standby.
    let subs = subtopologies(&[("0", 2)]);
    let mut group = members(&[("a", "p1"), ("b", "p2")]);
    if let Some(m) = group.get_mut("a") {
        m.current.active = tasks_of(&[("0", &[0, 1])]);
    }
    let assignment = run(&group, &subs, &replicas(1));
    assert_eq!(assignment["a"].active, tasks_of(&[("0", &[0])]));
    assert_eq!(assignment["a"].standby, tasks_of(&[("0", &[1])]));
    assert_eq!(assignment["b"].active, tasks_of(&[("0", &[1])]));
    assert_eq!(assignment["b"].standby, tasks_of(&[("0", &[0])]));
}

#[test]
fn same_input_same_output() {
    let mut group = members(&[("a", "p1"), ("b", "p1"), ("c", "p2"), ("d", "p3")]);
    if let Some(m) = group.get_mut("c") {
        m.current.active = tasks_of(&[("0", &[1, 2, 3])]);
        m.task_offsets = BTreeMap::from([(("1".to_string(), 0), 7)]);
    }
    let subs = subtopologies(&[("0", 6), ("1", 4)]);
    let first = run(&group, &subs, &replicas(2));
    for _ in 0..5 {
        assert_eq!(run(&group, &subs, &replicas(2)), first);
    }
}

#[test]
fn empty_inputs() {
    let subs = subtopologies(&[("0", 3)]);
    assert_eq!(assign(&BTreeMap::new(), &subs, &replicas(1)), Ok(BTreeMap::new()));
    assert_eq!(assign(&BTreeMap::new(), &BTreeMap::new(), &replicas(0)), Ok(BTreeMap::new()));

    // Members but nothing to run: everyone gets an empty entry.
    let group = members(&[("a", "p1"), ("b", "p2")]);
    let none = run(&group, &BTreeMap::new(), &replicas(2));
    assert_eq!(none.len(), 2);
    assert!(none.values().all(TasksTuple::is_empty));

    // Subtopologies with no (or a nonsensical) task count contribute nothing.
    let odd = subtopologies(&[("0", 0), ("1", -3), ("2", 1)]);
    let assignment = run(&group, &odd, &replicas(-1));
    assert_actives_exactly_once(&assignment, &subtopologies(&[("2", 1)]), "odd counts");
    assert!(assignment.values().all(|t| t.standby.is_empty()));

    // More members than tasks: the idle ones still get an (empty) entry.
    let many = members(&[("a", "p1"), ("b", "p2"), ("c", "p3")]);
    let assignment = run(&many, &subtopologies(&[("0", 1)]), &replicas(0));
    assert_eq!(assignment.len(), 3);
    assert_eq!(assignment.values().filter(|t| t.is_empty()).count(), 2);
}

#[test]
fn stale_history_is_ignored() {
    // Current tasks and offsets for tasks that no longer exist, and two members claiming one
    // task, must neither panic nor leak into the result.
    let subs = subtopologies(&[("0", 2)]);
    let mut group = members(&[("a", "p1"), ("b", "p2")]);
    for m in group.values_mut() {
        m.current.active = tasks_of(&[("0", &[0, 7]), ("gone", &[0])]);
        m.current.standby = tasks_of(&[("0", &[9])]);
        m.task_offsets = BTreeMap::from([(("gone".to_string(), 3), 5)]);
    }
    let assignment = run(&group, &subs, &replicas(1));
    assert_actives_exactly_once(&assignment, &subs, "stale history");
    assert_standbys(&assignment, &group, 1, "stale history");
}

/// A random group: 1-8 members over 1-5 processes, 0-4 subtopologies of 0-9 tasks, 0-3
/// replicas, random reported offsets.
fn random_group(
    rng: &mut StdRng,
) -> (BTreeMap<String, AssignorMember>, BTreeMap<String, i32>, AssignmentConfigs) {
    let processes = rng.gen_range(1..=5);
    let subs: BTreeMap<String, i32> =
        (0..rng.gen_range(0..=4)).map(|s| (s.to_string(), rng.gen_range(0..10))).collect();
    let mut group = BTreeMap::new();
    for i in 0..rng.gen_range(1..=8) {
        let mut m = member(&format!("p{}", rng.gen_range(0..processes)));
        for (s, n) in &subs {
            for p in 0..*n {
                if rng.gen_bool(0.2) {
                    m.task_offsets.insert((s.clone(), p), rng.gen_range(0..1000));
                }
            }
        }
        group.insert(format!("m{i}"), m);
    }
    (group, subs, replicas(rng.gen_range(0..=3)))
}

#[test]
fn random_groups_keep_the_invariants_across_rebalances() {
    for seed in 0..300 {
        let mut rng = StdRng::seed_from_u64(seed);
        let (group, subs, configs) = random_group(&mut rng);
        let ctx = format!("seed {seed}");
        let first = run(&group, &subs, &configs);
        assert_actives_exactly_once(&first, &subs, &ctx);
        assert_standbys(&first, &group, configs.num_standby_replicas as usize, &ctx);
        assert_eq!(run(&group, &subs, &configs), first, "{ctx}: not deterministic");

        // Some members leave, one joins; the rest carry their assignment as history.
        let mut next = with_current(&group, &first);
        next.retain(|_, _| rng.gen_bool(0.7));
        next.insert("new".to_string(), member(&format!("p{}", rng.gen_range(0..6))));
        let second = run(&next, &subs, &configs);
        assert_eq!(second.keys().collect::<Vec<_>>(), next.keys().collect::<Vec<_>>(), "{ctx}");
        assert_actives_exactly_once(&second, &subs, &ctx);
        assert_standbys(&second, &next, configs.num_standby_replicas as usize, &ctx);
    }
}

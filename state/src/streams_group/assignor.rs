//! Broker-side task assignment: Kafka 4.4.0's sticky task assignor (`StickyTaskAssignor`,
//! the only one it ships besides a test mock).
//!
//! Members are grouped by process (the threads of one Streams instance share a process id):
//! load is balanced per process first (tasks over member count), then per member within it.
//! Active tasks go, in order of preference, to the member that ran them in the current
//! target assignment, to the best previous standby holder, then to the least-loaded process.
//! Standby replicas go to the previous active owner, then to previous standby holders (ranked
//! by "was a standby" and then by the offset sum it reported, i.e. how warm its state is), then
//! to the least-loaded process; never to a process that already holds the task (active or
//! standby), so a task gets at most one replica per process. When processes run out, Kafka
//! logs a warning and assigns fewer replicas; so does this (without the log: pure state).
//! Warm-up tasks: none, as Kafka 4.4.0's `AssignmentRefiner` is a no-op.
//!
//! Sticky placement is bounded by quotas, ceil(tasks / members) for actives and for all tasks
//! (actives plus standbys). A member that reaches its quota leaves the pool with its tasks and
//! the quota is recomputed for the rest, so early fills do not starve later members.
//!
//! Determinism: Kafka walks HashMaps and PriorityQueues whose ties fall arbitrarily. Here every
//! tie between processes goes to the smaller process id, between members to the smaller
//! member id, and previous holders are ranked stably in member id order.
//!
//! Standbys go to stateful subtopologies only (those with state changelog topics), as in
//! Kafka; the caller names the stateless ones in [`AssignmentConfigs`].

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet};

use super::tasks::{self, TasksTuple};

/// What the assignor knows of one member.
#[derive(Debug, Clone, Default)]
pub struct AssignorMember {
    pub process_id: String,
    /// The tasks the member runs now (Kafka passes the current, not the target, assignment):
    /// what stickiness keeps.
    pub current: TasksTuple,
    /// Offset sums the member reported per task (subtopology, partition): how far its local
    /// state is, for placing standbys.
    pub task_offsets: BTreeMap<(String, i32), i64>,
}

/// The group configs the assignor reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AssignmentConfigs {
    /// `streams.num.standby.replicas`.
    pub num_standby_replicas: i32,
    /// Subtopologies without state changelog topics: they get no standbys (Kafka's
    /// `TopologyDescriber.isStateful`).
    pub stateless: BTreeSet<String>,
}

/// Assigns every task of `subtopologies` (subtopology id → number of tasks) to `members`
/// (by member id). Every member gets an entry, possibly empty. Err: Kafka's
/// `TaskAssignorException` message.
pub fn assign(
    members: &BTreeMap<String, AssignorMember>,
    subtopologies: &BTreeMap<String, i32>,
    configs: &AssignmentConfigs,
) -> Result<BTreeMap<String, TasksTuple>, String> {
    // No member, nothing to hand out to: Kafka would throw if there were tasks, but a group
    // without members has no target assignment to compute.
    if members.is_empty() {
        return Ok(BTreeMap::new());
    }
    let subtopologies: Vec<Subtopology<'_>> = subtopologies
        .iter()
        .map(|(id, &num_tasks)| Subtopology {
            id,
            num_tasks: num_tasks.max(0),
            stateful: !configs.stateless.contains(id),
        })
        .collect();
    let replicas = configs.num_standby_replicas.max(0);
    let mut state = State::new(members, &subtopologies, replicas);
    state.assign_active(task_ids(&subtopologies, false))?;
    if replicas > 0 {
        state.assign_standby(task_ids(&subtopologies, true));
    }
    Ok(state.assignment)
}

/// A task: subtopology id and partition (Kafka's `TaskId`).
type Task<'a> = (&'a str, i32);

struct Subtopology<'a> {
    id: &'a str,
    num_tasks: i32,
    /// Whether its tasks get standby replicas (Kafka: it has state changelog topics).
    stateful: bool,
}

/// The tasks of the subtopologies, all or only the stateful ones, in (subtopology, partition)
/// order.
fn task_ids<'a>(subtopologies: &[Subtopology<'a>], stateful_only: bool) -> Vec<Task<'a>> {
    subtopologies
        .iter()
        .filter(|s| s.stateful || !stateful_only)
        .flat_map(|s| (0..s.num_tasks).map(move |p| (s.id, p)))
        .collect()
}

/// Ceil(tasks / members), 0 without members. Integer semantics match Kafka's (truncating
/// division), so a pool driven negative by the bookkeeping below behaves as it does there.
fn tasks_per_member(tasks: i64, members: i64) -> i64 {
    if members == 0 {
        return 0;
    }
    let quotient = tasks.checked_div(members).unwrap_or(0);
    match tasks.checked_rem(members) {
        Some(rest) if rest > 0 => quotient.saturating_add(1),
        _ => quotient,
    }
}

/// A per-member quota over a pool of tasks shared by the members that have not filled theirs.
struct Quota {
    tasks: i64,
    members: i64,
    per_member: i64,
}

impl Quota {
    fn new(tasks: i64, members: i64) -> Self {
        Quota { tasks, members, per_member: tasks_per_member(tasks, members) }
    }

    /// A member now has `count` tasks: if that fills its quota it leaves the pool, and what
    /// is left is spread over the others.
    fn note(&mut self, count: i64) {
        if count == self.per_member {
            self.members = self.members.saturating_sub(1);
            self.tasks = self.tasks.saturating_sub(count);
            self.per_member = tasks_per_member(self.tasks, self.members);
        }
    }
}

/// One process: its members (with their task counts, actives and standbys alike) and every
/// task placed on it.
#[derive(Default)]
struct Process<'a> {
    members: BTreeMap<&'a str, i64>,
    task_count: i64,
    tasks: BTreeSet<Task<'a>>,
}

impl<'a> Process<'a> {
    /// Orders by load, tasks per member, comparing the fractions exactly.
    fn cmp_load(&self, other: &Self) -> Ordering {
        let mine = i128::from(self.task_count) * other.members.len() as i128;
        let theirs = i128::from(other.task_count) * self.members.len() as i128;
        mine.cmp(&theirs)
    }

    fn member_count(&self, member: &str) -> i64 {
        self.members.get(member).copied().unwrap_or(0)
    }

    /// The member with the fewest tasks, the smallest id among equals.
    fn least_loaded_member(&self) -> Option<&'a str> {
        self.members.iter().min_by_key(|(_, &count)| count).map(|(&id, _)| id)
    }
}

struct State<'a> {
    processes: BTreeMap<&'a str, Process<'a>>,
    process_of: BTreeMap<&'a str, &'a str>,
    /// Who ran each task active in the current assignment.
    prev_active: BTreeMap<Task<'a>, &'a str>,
    /// Who has state for each task, best first (see [`rank_standby_candidates`]).
    prev_standby: BTreeMap<Task<'a>, Vec<&'a str>>,
    replicas: i32,
    active_quota: Quota,
    total_quota: Quota,
    assignment: BTreeMap<String, TasksTuple>,
}

impl<'a> State<'a> {
    fn new(
        members: &'a BTreeMap<String, AssignorMember>,
        subtopologies: &[Subtopology<'a>],
        replicas: i32,
    ) -> Self {
        let active: i64 = subtopologies.iter().map(|s| i64::from(s.num_tasks)).sum();
        let standby: i64 = subtopologies
            .iter()
            .filter(|s| s.stateful)
            .map(|s| i64::from(s.num_tasks).saturating_mul(i64::from(replicas)))
            .fold(0, i64::saturating_add);
        let count = i64::try_from(members.len()).unwrap_or(i64::MAX);
        let mut state = State {
            processes: BTreeMap::new(),
            process_of: BTreeMap::new(),
            prev_active: BTreeMap::new(),
            prev_standby: rank_standby_candidates(members),
            replicas,
            active_quota: Quota::new(active, count),
            total_quota: Quota::new(active.saturating_add(standby), count),
            assignment: BTreeMap::new(),
        };
        for (id, member) in members {
            state.add_member(id, member);
        }
        state
    }

    fn add_member(&mut self, id: &'a str, member: &'a AssignorMember) {
        let process = self.processes.entry(&member.process_id).or_default();
        process.members.insert(id, 0);
        self.process_of.insert(id, &member.process_id);
        self.assignment.insert(id.to_string(), TasksTuple::default());
        for (subtopology, partitions) in &member.current.active {
            for &p in partitions {
                // Two members claiming one task: the later one in id order wins, as Kafka's
                // map put keeps the last.
                self.prev_active.insert((subtopology.as_str(), p), id);
            }
        }
    }

    fn process(&self, member: &str) -> Option<&Process<'a>> {
        self.process_of.get(member).and_then(|p| self.processes.get(p))
    }

    fn member_count(&self, member: &str) -> i64 {
        self.process(member).map_or(0, |p| p.member_count(member))
    }

    fn process_has(&self, member: &str, task: Task<'_>) -> bool {
        self.process(member).is_some_and(|p| p.tasks.contains(&task))
    }

    /// Places the task on the member and updates the quotas it counts against.
    fn place(&mut self, member: &'a str, task: Task<'a>, active: bool) {
        let Some(process) = self.process_of.get(member).and_then(|p| self.processes.get_mut(p)) else {
            return;
        };
        let count = process.members.entry(member).or_default();
        *count += 1;
        let count = *count;
        process.task_count += 1;
        process.tasks.insert(task);
        if let Some(tuple) = self.assignment.get_mut(member) {
            let tasks = if active { &mut tuple.active } else { &mut tuple.standby };
            tasks::insert(tasks, task.0, task.1);
        }
        if active {
            self.active_quota.note(count);
        }
        self.total_quota.note(count);
    }

    /// Among previous holders, the first in rank order unless a later one is strictly less
    /// loaded both as a process and as a member; `exclude` skips processes holding that task.
    fn prev_member_with_least_load(&self, task: Task<'_>, exclude: bool) -> Option<&'a str> {
        let mut best: Option<(&'a str, &Process<'a>, i64)> = None;
        for &member in self.prev_standby.get(&task).into_iter().flatten() {
            let Some(process) = self.process(member) else { continue };
            if exclude && process.tasks.contains(&task) {
                continue;
            }
            let count = process.member_count(member);
            let better = match best {
                None => true,
                Some((_, p, c)) => process.cmp_load(p) == Ordering::Less && count < c,
            };
            if better {
                best = Some((member, process, count));
            }
        }
        best.map(|(member, _, _)| member)
    }

    /// The least-loaded process (smallest id among equals), skipping those that hold `task`
    /// when `exclude`; then its least-loaded member.
    fn least_loaded_member(&self, task: Task<'_>, exclude: bool) -> Option<&'a str> {
        let (_, process) = self
            .processes
            .iter()
            .filter(|(_, p)| !(exclude && p.tasks.contains(&task)))
            .min_by(|a, b| a.1.cmp_load(b.1))?;
        process.least_loaded_member()
    }

    /// Kafka's orders throughout (partition-major for the sticky passes, subtopology-major
    /// for the rest): under shrinking quotas the order decides who keeps what, and the result
    /// should be Kafka's.
    fn assign_active(&mut self, mut tasks: Vec<Task<'a>>) -> Result<(), String> {
        tasks.sort_by_key(|&(s, p)| (p, s));
        tasks.retain(|&task| !self.place_with_prev_active(task));
        tasks.retain(|&task| !self.place_active_with_prev_standby(task));
        tasks.sort();
        for task in tasks {
            let Some(member) = self.least_loaded_member(task, false) else {
                return Err(format!("No process available to assign active task {}_{}.", task.0, task.1));
            };
            self.place(member, task, true);
        }
        Ok(())
    }

    /// Keeps the task with its current owner if that member is under the active quota.
    fn place_with_prev_active(&mut self, task: Task<'a>) -> bool {
        match self.prev_active.get(&task).copied() {
            Some(member) if self.member_count(member) < self.active_quota.per_member => {
                self.place(member, task, true);
                true
            }
            _ => false,
        }
    }

    /// Gives the task to the best previous holder of its state, if under the active quota.
    fn place_active_with_prev_standby(&mut self, task: Task<'a>) -> bool {
        match self.prev_member_with_least_load(task, false) {
            Some(member) if self.member_count(member) < self.active_quota.per_member => {
                self.place(member, task, true);
                true
            }
            _ => false,
        }
    }

    fn assign_standby(&mut self, mut tasks: Vec<Task<'a>>) {
        tasks.sort_by_key(|&(s, p)| Reverse((p, s)));
        let mut leftovers: Vec<(Task<'a>, i32)> = Vec::new();
        for task in tasks {
            // Sticky placement stops at the first replica without an eligible previous
            // holder; that one and the rest go by load once every task had its turn.
            if let Some(placed) = (0..self.replicas).find(|_| !self.place_standby_sticky(task)) {
                leftovers.push((task, self.replicas - placed));
            }
        }
        leftovers.sort_by_key(|&(task, _)| Reverse(task));
        for (task, remaining) in leftovers {
            for _ in 0..remaining {
                // No process left without the task: fewer replicas, as Kafka (it warns).
                let Some(member) = self.least_loaded_member(task, true) else { break };
                self.place(member, task, false);
            }
        }
    }

    /// One standby replica with the previous active owner, else with the best previous
    /// standby holder, each only under the total quota and on a process without the task.
    fn place_standby_sticky(&mut self, task: Task<'a>) -> bool {
        let prev_active = self.prev_active.get(&task).copied();
        let member = match prev_active {
            Some(m) if !self.process_has(m, task) && self.under_total_quota(m) => Some(m),
            _ => self.prev_member_with_least_load(task, true).filter(|&m| self.under_total_quota(m)),
        };
        match member {
            Some(m) => {
                self.place(m, task, false);
                true
            }
            None => false,
        }
    }

    fn under_total_quota(&self, member: &str) -> bool {
        self.member_count(member) < self.total_quota.per_member
    }
}

/// For each task, the members that hold state for it, best first: those that had it as a
/// standby, then those that merely reported an offset sum for it (e.g. its former active
/// owner), each group by larger offset sum; member id order among equals.
fn rank_standby_candidates(members: &BTreeMap<String, AssignorMember>) -> BTreeMap<Task<'_>, Vec<&str>> {
    let mut candidates: BTreeMap<Task<'_>, Vec<(bool, i64, &str)>> = BTreeMap::new();
    for (id, member) in members {
        for (subtopology, partitions) in &member.current.standby {
            for &p in partitions {
                let offset = member.task_offsets.get(&(subtopology.clone(), p)).copied().unwrap_or(0);
                candidates.entry((subtopology.as_str(), p)).or_default().push((true, offset, id));
            }
        }
        for ((subtopology, p), &offset) in &member.task_offsets {
            if !tasks::contains(&member.current.standby, subtopology, *p) {
                candidates.entry((subtopology.as_str(), *p)).or_default().push((false, offset, id));
            }
        }
    }
    candidates
        .into_iter()
        .map(|(task, mut list)| {
            list.sort_by_key(|&(was_standby, offset, _)| (!was_standby, Reverse(offset)));
            (task, list.into_iter().map(|(_, _, id)| id).collect())
        })
        .collect()
}

#[cfg(test)]
#[path = "assignor_tests.rs"]
mod tests;

//! Moving one member towards its target, revoke before assign (Kafka 4.4.0's Streams
//! `CurrentAssignmentBuilder`): a member first gives up the tasks it must lose, at its old
//! epoch; only then does it move to the target's epoch and get the tasks no other member
//! still holds. A standby or warm-up task the target makes active on the same member is
//! promoted in place; an active task the target makes standby is demoted in place.

use std::collections::{BTreeMap, BTreeSet};

use super::model::{AssignedTasks, EpochTasks, Member, MemberState, StreamsGroup};
use super::tasks::{self, Tasks, TasksTuple};

/// Which processes hold each task right now, across every member (assigned or pending
/// revocation): Kafka's `currentActiveTaskProcessId` and its standby and warm-up twins.
#[derive(Default)]
pub(super) struct Holders {
    active: BTreeMap<(String, i32), String>,
    standby: BTreeMap<(String, i32), BTreeSet<String>>,
    warmup: BTreeMap<(String, i32), BTreeSet<String>>,
}

impl Holders {
    pub(super) fn of(group: &StreamsGroup) -> Holders {
        let mut holders = Holders::default();
        for member in group.members.values() {
            for tasks in [&member.assigned, &member.pending_revocation] {
                holders.add(tasks, &member.process_id);
            }
        }
        holders
    }

    fn add(&mut self, tasks: &AssignedTasks, process: &str) {
        for (s, ps) in &tasks.active {
            for p in ps.keys() {
                self.active.insert((s.clone(), *p), process.to_string());
            }
        }
        for (set, map) in [(&tasks.standby, &mut self.standby), (&tasks.warmup, &mut self.warmup)] {
            for (s, ps) in set {
                for p in ps {
                    map.entry((s.clone(), *p)).or_default().insert(process.to_string());
                }
            }
        }
    }

    fn active_on(&self, s: &str, p: i32) -> Option<&str> {
        self.active.get(&(s.to_string(), p)).map(String::as_str)
    }

    fn on(map: &BTreeMap<(String, i32), BTreeSet<String>>, s: &str, p: i32, process: &str) -> bool {
        map.get(&(s.to_string(), p)).is_some_and(|ps| ps.contains(process))
    }
}

/// What one reconcile step works with.
pub(super) struct Step<'a> {
    pub target_epoch: i32,
    pub target: &'a TasksTuple,
    /// The tasks the member says it runs (`None`: it did not say).
    pub owned: Option<&'a TasksTuple>,
    pub holders: &'a Holders,
}

/// One step of the member's state machine.
pub(super) fn reconcile(member: &Member, step: &Step<'_>) -> Member {
    match member.state {
        MemberState::Stable if member.member_epoch == step.target_epoch => member.clone(),
        MemberState::Stable | MemberState::UnreleasedTasks => next(member, member.member_epoch, step),
        MemberState::UnrevokedTasks if not_released(&member.pending_revocation, step.owned) => member.clone(),
        MemberState::UnrevokedTasks => next(member, member.member_epoch.saturating_add(1), step),
    }
}

/// Whether the member may still run one of `pending`: it did not say what it owns, or what
/// it owns overlaps them.
fn not_released(pending: &AssignedTasks, owned: Option<&TasksTuple>) -> bool {
    let Some(owned) = owned else { return true };
    let overlaps = |mine: &Tasks, theirs: &Tasks| {
        mine.iter().any(|(s, ps)| theirs.get(s).is_some_and(|qs| !ps.is_disjoint(qs)))
    };
    let pending = pending.tuple();
    overlaps(&owned.active, &pending.active)
        || overlaps(&owned.standby, &pending.standby)
        || overlaps(&owned.warmup, &pending.warmup)
}

/// The three-way split of one kind of task: kept, to revoke, to assign.
#[derive(Default)]
struct Split {
    kept: Tasks,
    revoke: Tasks,
    assign: Tasks,
    unreleased: bool,
}

fn split(current: &Tasks, target: &Tasks, unreleased: impl Fn(&str, i32) -> bool) -> Split {
    let mut out = Split::default();
    let ids: BTreeSet<&String> = current.keys().chain(target.keys()).collect();
    let empty = BTreeSet::new();
    for s in ids {
        let (cur, tgt) = (current.get(s).unwrap_or(&empty), target.get(s).unwrap_or(&empty));
        for p in cur {
            let into = if tgt.contains(p) { &mut out.kept } else { &mut out.revoke };
            tasks::insert(into, s, *p);
        }
        for p in tgt.difference(cur) {
            if unreleased(s, *p) {
                out.unreleased = true;
            } else {
                tasks::insert(&mut out.assign, s, *p);
            }
        }
    }
    out
}

fn next(member: &Member, epoch: i32, step: &Step<'_>) -> Member {
    let cur = member.assigned.tuple();
    let h = step.holders;
    let me = member.process_id.as_str();
    let mut active = split(&cur.active, &step.target.active, |s, p| {
        h.active_on(s, p).is_some()
            || (Holders::on(&h.standby, s, p, me) && !tasks::contains(&cur.standby, s, p))
            || (Holders::on(&h.warmup, s, p, me) && !tasks::contains(&cur.warmup, s, p))
    });
    let mut standby = split(&cur.standby, &step.target.standby, |s, p| {
        (h.active_on(s, p) == Some(me) && !tasks::contains(&cur.active, s, p))
            || Holders::on(&h.standby, s, p, me)
            || (Holders::on(&h.warmup, s, p, me) && !tasks::contains(&cur.warmup, s, p))
    });
    let mut warmup = split(&cur.warmup, &step.target.warmup, |s, p| {
        h.active_on(s, p) == Some(me)
            || (Holders::on(&h.standby, s, p, me) && !tasks::contains(&cur.standby, s, p))
            || Holders::on(&h.warmup, s, p, me)
    });
    convert_roles(&cur, &mut standby, &mut warmup);
    let revoke = promote(&cur, step, &mut active, &mut standby, &mut warmup, member);
    let unreleased = active.unreleased || standby.unreleased || warmup.unreleased;
    build(member, epoch, step, Parts { active, standby, warmup, revoke, unreleased })
}

/// In-place role changes that need no other member: an active task the target makes standby,
/// a standby the target makes warm-up and the reverse, are granted now.
fn convert_roles(cur: &TasksTuple, standby: &mut Split, warmup: &mut Split) {
    for (s, ps) in &cur.active {
        for p in ps {
            grant(&mut standby.assign, &mut standby.kept, s, *p);
        }
    }
    move_role(&cur.standby, warmup, &mut standby.revoke);
    move_role(&cur.warmup, standby, &mut warmup.revoke);
}

fn move_role(from: &Tasks, into: &mut Split, out_revoke: &mut Tasks) {
    for (s, ps) in from {
        for p in ps {
            if grant(&mut into.assign, &mut into.kept, s, *p) {
                remove(out_revoke, s, *p);
            }
        }
    }
}

/// Moves a task from pending-assignment to kept, if it is pending.
fn grant(pending: &mut Tasks, kept: &mut Tasks, s: &str, p: i32) -> bool {
    if !tasks::contains(pending, s, p) {
        return false;
    }
    remove(pending, s, p);
    tasks::insert(kept, s, p);
    true
}

fn remove(set: &mut Tasks, s: &str, p: i32) {
    if let Some(ps) = set.get_mut(s) {
        ps.remove(&p);
    }
    tasks::compact(set);
}

/// Standby and warm-up tasks the target makes active are not revoked; until the active
/// grant lands they stay as they are (Kafka's `applyPromotionsToActive`). Returns what is
/// pending revocation.
fn promote(
    cur: &TasksTuple,
    step: &Step<'_>,
    active: &mut Split,
    standby: &mut Split,
    warmup: &mut Split,
    member: &Member,
) -> AssignedTasks {
    let target_active = &step.target.active;
    drop_promoted(&cur.standby, target_active, &mut standby.revoke);
    drop_promoted(&cur.warmup, target_active, &mut warmup.revoke);
    let revoke = AssignedTasks {
        active: with_epochs(&active.revoke, &member.assigned.active, 0),
        standby: standby.revoke.clone(),
        warmup: warmup.revoke.clone(),
    };
    let revoking = !revoke.is_empty() && not_released(&revoke, step.owned);
    keep_until_granted(&cur.standby, target_active, &active.assign, revoking, &mut standby.kept);
    keep_until_granted(&cur.warmup, target_active, &active.assign, revoking, &mut warmup.kept);
    revoke
}

fn drop_promoted(mine: &Tasks, target_active: &Tasks, revoke: &mut Tasks) {
    for (s, ps) in mine {
        for p in ps.iter().filter(|p| tasks::contains(target_active, s, **p)) {
            remove(revoke, s, *p);
        }
    }
}

fn keep_until_granted(
    mine: &Tasks,
    target_active: &Tasks,
    granted: &Tasks,
    revoking: bool,
    kept: &mut Tasks,
) {
    for (s, ps) in mine {
        for p in ps {
            let promoted_now = !revoking && tasks::contains(granted, s, *p);
            if tasks::contains(target_active, s, *p) && !promoted_now {
                tasks::insert(kept, s, *p);
            }
        }
    }
}

/// `tasks` with each one's epoch from `epochs`, or `default` for a task not found there.
fn with_epochs(tasks: &Tasks, epochs: &EpochTasks, default: i32) -> EpochTasks {
    let mut out = EpochTasks::new();
    for (s, ps) in tasks {
        for p in ps {
            let epoch = epochs.get(s).and_then(|e| e.get(p)).copied().unwrap_or(default);
            out.entry(s.clone()).or_default().insert(*p, epoch);
        }
    }
    out
}

struct Parts {
    active: Split,
    standby: Split,
    warmup: Split,
    revoke: AssignedTasks,
    unreleased: bool,
}

fn build(member: &Member, epoch: i32, step: &Step<'_>, parts: Parts) -> Member {
    let mut out = member.clone();
    let kept = AssignedTasks {
        active: with_epochs(&parts.active.kept, &member.assigned.active, 0),
        standby: parts.standby.kept.clone(),
        warmup: parts.warmup.kept.clone(),
    };
    if !parts.revoke.is_empty() && not_released(&parts.revoke, step.owned) {
        out.state = MemberState::UnrevokedTasks;
        set_epoch(&mut out, epoch);
        out.assigned = kept;
        out.pending_revocation = parts.revoke;
        return out;
    }
    let pending_assign = !parts.active.assign.is_empty()
        || !parts.standby.assign.is_empty()
        || !parts.warmup.assign.is_empty();
    out.state = if parts.unreleased { MemberState::UnreleasedTasks } else { MemberState::Stable };
    set_epoch(&mut out, step.target_epoch);
    out.assigned = kept;
    if pending_assign {
        merge(
            &mut out.assigned.active,
            &with_epochs(&parts.active.assign, &EpochTasks::new(), step.target_epoch),
        );
        merge_set(&mut out.assigned.standby, &parts.standby.assign);
        merge_set(&mut out.assigned.warmup, &parts.warmup.assign);
    }
    out.pending_revocation = AssignedTasks::default();
    out
}

/// Kafka's `updateMemberEpoch`: the previous epoch follows the current one.
fn set_epoch(member: &mut Member, epoch: i32) {
    member.previous_member_epoch = member.member_epoch;
    member.member_epoch = epoch;
}

fn merge(into: &mut EpochTasks, from: &EpochTasks) {
    for (s, ps) in from {
        into.entry(s.clone()).or_default().extend(ps.iter().map(|(p, e)| (*p, *e)));
    }
}

fn merge_set(into: &mut Tasks, from: &Tasks) {
    for (s, ps) in from {
        into.entry(s.clone()).or_default().extend(ps.iter().copied());
    }
}

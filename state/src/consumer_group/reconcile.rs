//! Reconciliation of one member towards its target (Kafka's CurrentAssignmentBuilder, spec
//! §4): the engine that guarantees a partition reaches its new owner only after the previous
//! owner's heartbeat reported it gone. A member first gives up what it must revoke, at its
//! old epoch (UNREVOKED_PARTITIONS); only then does it move to the target epoch and receive
//! partitions, and only those no other member still holds (else UNRELEASED_PARTITIONS, and it
//! picks them up on a later heartbeat).
//!
//! Pure: the member in, the next member out (equal to the input when nothing can move).

use std::collections::BTreeSet;

use super::model::{Assignment, EpochAssignment, Member, MemberState, TopicId};

pub(crate) struct ReconcileInput<'a> {
    /// The assignment epoch of the group's current target.
    pub target_epoch: i32,
    /// This member's target (empty if it has none).
    pub target: &'a Assignment,
    /// The existing topics the member subscribes to now.
    pub subscribed: &'a BTreeSet<TopicId>,
    /// What the heartbeat says the member owns; `None`: not said, assume it still owns all.
    pub owned: Option<&'a Assignment>,
    /// Partitions other members hold, assigned or pending revocation (Kafka's
    /// `currentPartitionEpoch != -1`, minus this member's own).
    pub held_by_others: &'a Assignment,
}

pub(crate) fn reconcile(member: &Member, input: &ReconcileInput<'_>) -> Member {
    // Kafka's `subscriptionConsistent`: nothing assigned from a topic it no longer follows
    // (or that no longer exists).
    let consistent = member.assigned.keys().all(|t| input.subscribed.contains(t));
    let epoch = member.member_epoch;
    match member.state {
        MemberState::Stable if epoch != input.target_epoch => compute_next(member, epoch, input),
        MemberState::Stable if !consistent => strip_unsubscribed(member, epoch, input),
        MemberState::Stable => member.clone(),
        MemberState::UnrevokedPartitions if owns_any(input.owned, &member.pending_revocation) => {
            if consistent {
                member.clone()
            } else {
                strip_unsubscribed(member, epoch, input)
            }
        }
        MemberState::UnrevokedPartitions | MemberState::UnreleasedPartitions => {
            compute_next(member, epoch, input)
        }
    }
}

/// Kafka's `ownsRevokedPartitions`: whether the member still owns any of `partitions`.
fn owns_any(owned: Option<&Assignment>, partitions: &EpochAssignment) -> bool {
    let Some(owned) = owned else { return true };
    owned
        .iter()
        .any(|(t, ps)| partitions.get(t).is_some_and(|pending| ps.iter().any(|p| pending.contains_key(p))))
}

/// Kafka's `updateMemberEpoch`: the previous epoch is always the one being replaced.
fn set_epoch(member: &mut Member, epoch: i32) {
    member.previous_member_epoch = member.member_epoch;
    member.member_epoch = epoch;
}

/// One step towards the target: keep what is in both, revoke the rest (and wait, at
/// `epoch`, if the member still owns any of it), else add what is free at the target epoch.
fn compute_next(member: &Member, epoch: i32, input: &ReconcileInput<'_>) -> Member {
    let mut keep = EpochAssignment::new();
    let mut revoke = EpochAssignment::new();
    let mut add = Assignment::new();
    let mut unreleased = false;
    let topics: BTreeSet<&TopicId> = input.target.keys().chain(member.assigned.keys()).collect();
    for topic in topics {
        let current = member.assigned.get(topic);
        // A topic the member no longer subscribes to has an empty target.
        let target = input.target.get(topic).filter(|_| input.subscribed.contains(topic));
        for (p, e) in current.into_iter().flatten() {
            let side = if target.is_some_and(|t| t.contains(p)) { &mut keep } else { &mut revoke };
            side.entry(*topic).or_default().insert(*p, *e);
        }
        let held = input.held_by_others.get(topic);
        for p in target.into_iter().flatten().filter(|p| !current.is_some_and(|c| c.contains_key(*p))) {
            if held.is_some_and(|h| h.contains(p)) {
                unreleased = true;
            } else {
                add.entry(*topic).or_default().insert(*p);
            }
        }
    }
    let mut next = member.clone();
    if !revoke.is_empty() && owns_any(input.owned, &revoke) {
        next.state = MemberState::UnrevokedPartitions;
        set_epoch(&mut next, epoch);
        next.assigned = keep;
        next.pending_revocation = revoke;
        return next;
    }
    // KIP-1251: kept partitions keep their assignment epoch, new ones get the target's.
    for (topic, ps) in add {
        keep.entry(topic).or_default().extend(ps.into_iter().map(|p| (p, input.target_epoch)));
    }
    next.state = if unreleased { MemberState::UnreleasedPartitions } else { MemberState::Stable };
    set_epoch(&mut next, input.target_epoch);
    next.assigned = keep;
    next.pending_revocation = EpochAssignment::new();
    next
}

/// Kafka's fast path when only the subscription shrank: move the topics no longer
/// subscribed to pending revocation, at the same epoch; if the member already dropped them,
/// just shrink its assignment.
fn strip_unsubscribed(member: &Member, epoch: i32, input: &ReconcileInput<'_>) -> Member {
    let (kept, moved): (EpochAssignment, EpochAssignment) =
        member.assigned.clone().into_iter().partition(|(t, _)| input.subscribed.contains(t));
    if moved.is_empty() {
        return member.clone();
    }
    let mut pending = member.pending_revocation.clone();
    for (topic, ps) in moved {
        pending.entry(topic).or_default().extend(ps);
    }
    let mut next = member.clone();
    next.assigned = kept;
    set_epoch(&mut next, epoch);
    if owns_any(input.owned, &pending) {
        next.state = MemberState::UnrevokedPartitions;
        next.pending_revocation = pending;
    }
    next
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;

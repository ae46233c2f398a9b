//! The reconciliation engine's transitions (spec §4.4), one member at a time.

use std::collections::BTreeSet;

use super::{reconcile, ReconcileInput};
use crate::consumer_group::model::{Assignment, EpochAssignment, Member, MemberState, TopicId};
use crate::consumer_group::testkit::{parts, tid};

fn member(epoch: i32, state: MemberState, assigned: &[(u8, &[(i32, i32)])]) -> Member {
    let assigned: EpochAssignment =
        assigned.iter().map(|(t, ps)| (tid(*t), ps.iter().copied().collect())).collect();
    Member { member_epoch: epoch, previous_member_epoch: epoch - 1, state, assigned, ..Member::new() }
}

struct Case {
    target: Assignment,
    subscribed: BTreeSet<TopicId>,
    owned: Option<Assignment>,
    held: Assignment,
}

impl Case {
    fn new(target: Assignment) -> Case {
        let subscribed = target.keys().copied().collect();
        Case { target, subscribed, owned: None, held: Assignment::new() }
    }

    fn run(&self, m: &Member, epoch: i32) -> Member {
        let input = ReconcileInput {
            target_epoch: epoch,
            target: &self.target,
            subscribed: &self.subscribed,
            owned: self.owned.as_ref(),
            held_by_others: &self.held,
        };
        reconcile(m, &input)
    }
}

#[test]
fn a_reconciled_member_is_left_as_it_is() {
    let m = member(5, MemberState::Stable, &[(1, &[(0, 3)])]);
    assert_eq!(Case::new(parts(&[(1, &[0])])).run(&m, 5), m);
}

#[test]
fn revocation_comes_first_and_keeps_the_epoch() {
    let m = member(5, MemberState::Stable, &[(1, &[(0, 3), (1, 5)])]);
    let mut case = Case::new(parts(&[(1, &[0, 2])]));
    case.owned = Some(parts(&[(1, &[0, 1])]));
    let next = case.run(&m, 6);
    assert_eq!(
        (next.state, next.member_epoch, next.previous_member_epoch),
        (MemberState::UnrevokedPartitions, 5, 5)
    );
    assert_eq!(next.assigned, [(tid(1), [(0, 3)].into())].into());
    assert_eq!(next.pending_revocation, [(tid(1), [(1, 5)].into())].into());

    // Still owning 1: nothing moves. Once 1 is gone, 2 is added at epoch 6, 0 keeps epoch 3.
    assert_eq!(case.run(&next, 6), next);
    case.owned = Some(parts(&[(1, &[0])]));
    let done = case.run(&next, 6);
    assert_eq!((done.state, done.member_epoch, done.previous_member_epoch), (MemberState::Stable, 6, 5));
    assert_eq!(done.assigned, [(tid(1), [(0, 3), (2, 6)].into())].into());
    assert!(done.pending_revocation.is_empty());
}

#[test]
fn a_member_that_already_dropped_the_revoked_partitions_moves_on_at_once() {
    let m = member(5, MemberState::Stable, &[(1, &[(0, 3), (1, 5)])]);
    let mut case = Case::new(parts(&[(1, &[0])]));
    case.owned = Some(parts(&[(1, &[0])]));
    let next = case.run(&m, 6);
    assert_eq!((next.state, next.member_epoch), (MemberState::Stable, 6));
}

#[test]
fn partitions_held_by_others_are_unreleased_until_freed() {
    let m = member(5, MemberState::Stable, &[]);
    let mut case = Case::new(parts(&[(1, &[0, 1])]));
    case.held = parts(&[(1, &[1])]);
    let next = case.run(&m, 6);
    assert_eq!((next.state, next.member_epoch), (MemberState::UnreleasedPartitions, 6));
    assert_eq!(next.assigned_partitions(), parts(&[(1, &[0])]));
    // Asked again while still held: only the previous epoch catches up (then it is stable).
    let again = case.run(&next, 6);
    assert_eq!(
        (again.member_epoch, again.previous_member_epoch, again.assigned.clone()),
        (6, 6, next.assigned.clone())
    );
    assert_eq!(case.run(&again, 6), again);
    case.held = Assignment::new();
    let done = case.run(&again, 6);
    assert_eq!((done.state, done.assigned_partitions()), (MemberState::Stable, parts(&[(1, &[0, 1])])));
}

#[test]
fn an_unsubscribed_topic_is_revoked_at_the_same_epoch() {
    let m = member(5, MemberState::Stable, &[(1, &[(0, 5)]), (2, &[(0, 5)])]);
    let mut case = Case::new(parts(&[(1, &[0])]));
    // The target still has topic 2 (computed before the change): it counts as empty.
    case.target = parts(&[(1, &[0]), (2, &[0])]);
    case.subscribed = [tid(1)].into();
    let next = case.run(&m, 5);
    assert_eq!((next.state, next.member_epoch), (MemberState::UnrevokedPartitions, 5));
    assert_eq!(next.pending_revocation, [(tid(2), [(0, 5)].into())].into());
    // Already dropped: the assignment just shrinks.
    case.owned = Some(parts(&[(1, &[0])]));
    let shrunk = case.run(&m, 5);
    assert_eq!((shrunk.state, shrunk.assigned_partitions()), (MemberState::Stable, parts(&[(1, &[0])])));
}

//! Kafka's SimpleAssignor (`group.share.assignors=simple`, the only share assignor in 4.4.0):
//! partitions are shared, so every partition goes to at least one member and, when there are
//! more members than partitions, to several (`desired sharing` = ⌈members / partitions⌉),
//! while each member's count stays within one of the others'. Sticky: what a member's
//! previous target holds is kept unless it overfills the member or overshares the partition.
//!
//! Two builders, picked by the subscription type as Kafka does: `simple_homogeneous` when
//! every member subscribes to the same topics, `simple_heterogeneous` (one pass per topic,
//! among its subscribers) otherwise. Their steps follow Kafka's one for one; Java's hash-set
//! iteration orders are replaced by ascending ones (member id order, topic id, partition), so
//! the output is deterministic and matches Kafka's wherever Kafka's order is ascending.
//! Shared here: the members' assignments as they are rewritten, the per-member counts, and
//! the round-robin that hands out what remains.

use std::collections::{BTreeMap, BTreeSet};

use super::simple_heterogeneous::assign_heterogeneous;
use super::simple_homogeneous::assign_homogeneous;
use crate::consumer_group::{Assignment, TopicId};

/// The assignor's name, as ShareGroupDescribe reports it.
pub const ASSIGNOR_NAME: &str = "simple";

/// One member as the assignor sees it (members in member id order).
pub(crate) struct MemberSpec<'a> {
    /// The existing topics it subscribes to.
    pub topics: &'a BTreeSet<TopicId>,
    /// Its previous target.
    pub target: &'a Assignment,
}

/// Each member's new target, in the order of `members`. `partitions` has the partition count
/// of every topic some member subscribes to.
pub(crate) fn assign(
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<TopicId, i32>,
    homogeneous: bool,
) -> Vec<Assignment> {
    if members.is_empty() {
        return Vec::new();
    }
    if homogeneous {
        assign_homogeneous(members, partitions)
    } else {
        assign_heterogeneous(members, partitions)
    }
}

/// Kafka's desired sharing: ⌈members / partitions⌉, 0 without partitions.
pub(super) fn desired_sharing(members: usize, partitions: usize) -> usize {
    if partitions == 0 {
        0
    } else {
        members.div_ceil(partitions)
    }
}

/// How many partitions the k-th of `members` members should get, by Kafka's own floating
/// point formula (a double's ceil, so that rounding matches Java's exactly).
pub(super) fn desired_count(sharing: usize, partitions: usize, members: usize, k: usize) -> usize {
    let precise = (sharing * partitions) as f64 / members as f64;
    let upto = |n: usize| (precise * n as f64).ceil() as i64;
    usize::try_from(upto(k + 1) - upto(k)).unwrap_or(0)
}

/// The members' targets while a builder rewrites them: a member's previous target is copied
/// on its first change (Kafka's `newGroupAssignment`), and kept as it was otherwise.
pub(super) struct Draft<'a> {
    pub old: Vec<&'a Assignment>,
    new: Vec<Option<Assignment>>,
}

impl<'a> Draft<'a> {
    pub fn new(members: &[MemberSpec<'a>]) -> Self {
        Draft { old: members.iter().map(|m| m.target).collect(), new: vec![None; members.len()] }
    }

    /// Member `i`'s new target, copied from its previous one on first use.
    pub fn edit(&mut self, i: usize) -> &mut Assignment {
        let old = self.old[i];
        self.new[i].get_or_insert_with(|| old.clone())
    }

    /// Every member's target, topics left without partitions dropped.
    pub fn finish(self) -> Vec<Assignment> {
        let old = self.old;
        self.new
            .into_iter()
            .zip(old)
            .map(|(new, old)| {
                let mut target = new.unwrap_or_else(|| old.clone());
                target.retain(|_, ps| !ps.is_empty());
                target
            })
            .collect()
    }
}

/// Kafka's `assignRemainingPartitions`: walks the partitions in order and gives each one that
/// has fewer than `sharing` members the next unfilled members, round robin (the cursor runs
/// on from partition to partition and wraps around), until no member is unfilled or a whole
/// round gave nothing. `give(member, partition)` records the assignment and says whether the
/// member is now filled.
///
/// As in Kafka, a partition's member set is not updated here, so a wrap-around within one
/// partition can pick a member again: that gives it nothing new but counts towards the
/// partition's sharing. Kept for fidelity; it never leaves a partition without a member.
pub(super) fn fill<K: Ord + Copy>(
    by_partition: &BTreeMap<K, BTreeSet<usize>>,
    unfilled: &mut BTreeSet<usize>,
    sharing: usize,
    mut give: impl FnMut(usize, K) -> bool,
) {
    let mut cursor: Option<usize> = None;
    let mut gave_this_round = false;
    for (&partition, assigned) in by_partition {
        let mut to_make = sharing.saturating_sub(assigned.len());
        while to_make > 0 {
            let next = match cursor {
                None => unfilled.first(),
                Some(c) => unfilled.range(c + 1..).next(),
            };
            let member = match next {
                Some(&member) => member,
                None if !gave_this_round => break,
                None => {
                    gave_this_round = false;
                    let Some(&first) = unfilled.first() else { break };
                    first
                }
            };
            cursor = Some(member);
            if assigned.contains(&member) {
                continue;
            }
            to_make -= 1;
            gave_this_round = true;
            if give(member, partition) {
                unfilled.remove(&member);
            }
        }
        if unfilled.is_empty() {
            break;
        }
    }
}

#[cfg(test)]
#[path = "simple_tests.rs"]
mod tests;

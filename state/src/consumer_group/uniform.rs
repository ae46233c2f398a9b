//! The `uniform` assignor (Kafka's default, spec §6.2): balanced and sticky. When every member
//! subscribes to the same topics (homogeneous) the partitions are spread so that counts differ
//! by at most one and every member keeps up to its quota of what it already had; otherwise the
//! heterogeneous variant (`uniform_heterogeneous`) balances per topic among its subscribers.
//!
//! Kafka walks members in HashMap order; here members come in member id order and the
//! "+1" quotas go first to members already holding more than the minimum, which moves fewer
//! partitions than Kafka and stays balanced (the spec's suggestion).

use std::collections::{BTreeMap, BTreeSet};

use super::assignor::{partition_range, MemberSpec};
use super::model::{Assignment, TopicId};
use super::uniform_heterogeneous;

pub(crate) fn assign(members: &[MemberSpec<'_>], partitions: &BTreeMap<TopicId, i32>) -> Vec<Assignment> {
    let Some(first) = members.first() else { return Vec::new() };
    if members.iter().all(|m| m.topics == first.topics) {
        assign_homogeneous(members, first.topics, partitions)
    } else {
        uniform_heterogeneous::assign(members, partitions)
    }
}

type Partition = (TopicId, i32);

fn assign_homogeneous(
    members: &[MemberSpec<'_>],
    topics: &BTreeSet<TopicId>,
    partitions: &BTreeMap<TopicId, i32>,
) -> Vec<Assignment> {
    let in_scope = |t: &TopicId, p: i32| topics.contains(t) && partition_range(partitions, t).contains(&p);
    // What each member holds of the scope; a partition two stale targets claim goes to the
    // first claimant, so that nothing is ever assigned twice.
    let mut claimed: BTreeSet<Partition> = BTreeSet::new();
    let held: Vec<Vec<Partition>> = members
        .iter()
        .map(|m| {
            let mine = m.target.iter().flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)));
            mine.filter(|(t, p)| in_scope(t, *p) && claimed.insert((*t, *p))).collect()
        })
        .collect();
    let total: usize = topics.iter().map(|t| partition_range(partitions, t).len()).sum();
    let quotas = quotas(total, &held);
    let mut result = vec![Assignment::new(); members.len()];
    let mut unassigned: Vec<Partition> = topics
        .iter()
        .flat_map(|t| partition_range(partitions, t).map(move |p| (*t, p)))
        .filter(|tp| !claimed.contains(tp))
        .collect();
    for (i, mine) in held.iter().enumerate() {
        let (keep, excess) = mine.split_at(quotas[i].min(mine.len()));
        insert_all(&mut result[i], keep);
        unassigned.extend_from_slice(excess);
    }
    let mut free = unassigned.into_iter();
    for (i, assignment) in result.iter_mut().enumerate() {
        let room = quotas[i].saturating_sub(held[i].len().min(quotas[i]));
        insert_all(assignment, &free.by_ref().take(room).collect::<Vec<_>>());
    }
    result
}

/// Per member: `total / n`, plus one for `total % n` members, preferring those that already
/// hold more than the minimum (they keep one more partition each).
fn quotas(total: usize, held: &[Vec<Partition>]) -> Vec<usize> {
    let n = held.len().max(1);
    let min_quota = total / n;
    let mut extras = total % n;
    let mut quotas = vec![min_quota; held.len()];
    let over: Vec<usize> = (0..held.len()).filter(|i| held[*i].len() > min_quota).collect();
    let rest: Vec<usize> = (0..held.len()).filter(|i| held[*i].len() <= min_quota).collect();
    for i in over.into_iter().chain(rest) {
        if extras == 0 {
            break;
        }
        quotas[i] += 1;
        extras -= 1;
    }
    quotas
}

fn insert_all(assignment: &mut Assignment, partitions: &[Partition]) {
    for (t, p) in partitions {
        assignment.entry(*t).or_default().insert(*p);
    }
}

#[cfg(test)]
#[path = "uniform_tests.rs"]
mod tests;

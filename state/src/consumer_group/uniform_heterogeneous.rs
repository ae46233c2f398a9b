//! The `uniform` assignor when members subscribe to different topics (spec §6.2,
//! heterogeneous): each member keeps what it has of the topics it still subscribes to, free
//! partitions go to the least-loaded subscriber of their topic, and a bounded balancing pass
//! moves partitions from the most- to the least-loaded subscribers of each shared topic until
//! their loads differ by at most one.
//!
//! Loads count partitions across all topics; ties go to the lower member index (member id
//! order), and topics are visited in the spec's order (partitions per subscriber descending,
//! subscriber count ascending, topic id ascending), so the result is deterministic.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use super::assignor::{partition_range, MemberSpec};
use super::model::{Assignment, TopicId};

/// Kafka's bound on balancing passes over all topics.
const BALANCE_PASSES_MAX: usize = 16;

struct Work {
    result: Vec<Assignment>,
    loads: Vec<usize>,
    /// Topic → indices of its subscribers, ascending.
    subscribers: BTreeMap<TopicId, Vec<usize>>,
}

pub(crate) fn assign(members: &[MemberSpec<'_>], partitions: &BTreeMap<TopicId, i32>) -> Vec<Assignment> {
    let mut work = keep_subscribed(members, partitions);
    let order = topic_order(&work.subscribers, partitions);
    let mut claimed: BTreeSet<(TopicId, i32)> = BTreeSet::new();
    for assignment in &work.result {
        claimed.extend(assignment.iter().flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p))));
    }
    for topic in &order {
        for p in partition_range(partitions, topic) {
            if claimed.contains(&(*topic, p)) {
                continue;
            }
            let Some(i) = least_loaded(&work, topic) else { break };
            work.result[i].entry(*topic).or_default().insert(p);
            work.loads[i] += 1;
        }
    }
    balance(&mut work, &order);
    work.result
}

/// Step 2: each member keeps the partitions of its target that still exist and that it
/// still subscribes to; a partition two stale targets claim goes to the first.
fn keep_subscribed(members: &[MemberSpec<'_>], partitions: &BTreeMap<TopicId, i32>) -> Work {
    let mut subscribers: BTreeMap<TopicId, Vec<usize>> = BTreeMap::new();
    for (i, m) in members.iter().enumerate() {
        for t in m.topics.iter().filter(|t| partitions.contains_key(*t)) {
            subscribers.entry(*t).or_default().push(i);
        }
    }
    let mut claimed: BTreeSet<(TopicId, i32)> = BTreeSet::new();
    let mut result = vec![Assignment::new(); members.len()];
    let mut loads = vec![0; members.len()];
    for (i, m) in members.iter().enumerate() {
        for (t, ps) in m.target.iter().filter(|(t, _)| m.topics.contains(*t)) {
            let range = partition_range(partitions, t);
            for p in ps.iter().filter(|p| range.contains(*p) && claimed.insert((*t, **p))) {
                result[i].entry(*t).or_default().insert(*p);
                loads[i] += 1;
            }
        }
    }
    Work { result, loads, subscribers }
}

/// Topics with the most partitions per subscriber first (they are the hardest to balance),
/// then fewer subscribers first, then topic id.
fn topic_order(
    subscribers: &BTreeMap<TopicId, Vec<usize>>,
    partitions: &BTreeMap<TopicId, i32>,
) -> Vec<TopicId> {
    let mut order: Vec<(TopicId, u64, u64)> = subscribers
        .iter()
        .map(|(t, subs)| (*t, partition_range(partitions, t).len() as u64, subs.len() as u64))
        .collect();
    order.sort_by(|(ta, pa, sa), (tb, pb, sb)| {
        // pa/sa > pb/sb without division: pa*sb > pb*sa.
        let per_subscriber = (pb * sa).cmp(&(pa * sb));
        per_subscriber.then(sa.cmp(sb)).then(ta.cmp(tb))
    });
    order.into_iter().map(|(t, _, _)| t).collect()
}

fn least_loaded(work: &Work, topic: &TopicId) -> Option<usize> {
    let subs = work.subscribers.get(topic)?;
    subs.iter().copied().min_by_key(|i| (work.loads[*i], *i))
}

/// Step 6: per shared topic, move its highest partitions from the most-loaded holders to
/// the least-loaded subscriber while their loads differ by two or more. Every move lowers
/// the sum of squared loads, so each topic's loop ends; passes are bounded as in Kafka.
fn balance(work: &mut Work, order: &[TopicId]) {
    for _ in 0..BALANCE_PASSES_MAX {
        let mut moved = false;
        for topic in order.iter().filter(|t| work.subscribers.get(*t).is_some_and(|s| s.len() >= 2)) {
            while let Some((from, to, p)) = next_move(work, topic) {
                if let Some(ps) = work.result[from].get_mut(topic) {
                    ps.remove(&p);
                    if ps.is_empty() {
                        work.result[from].remove(topic);
                    }
                }
                work.result[to].entry(*topic).or_default().insert(p);
                work.loads[from] -= 1;
                work.loads[to] += 1;
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
}

/// The move that balances `topic` next: (from, to, partition), or none when the loads of
/// its subscribers differ by at most one or no overloaded subscriber holds any of it.
fn next_move(work: &Work, topic: &TopicId) -> Option<(usize, usize, i32)> {
    let subs = work.subscribers.get(topic)?;
    let to = least_loaded(work, topic)?;
    let from = subs
        .iter()
        .copied()
        .filter(|i| work.loads[*i] >= work.loads[to] + 2)
        .filter(|i| work.result[*i].get(topic).is_some_and(|ps| !ps.is_empty()))
        .max_by(|a, b| match work.loads[*a].cmp(&work.loads[*b]) {
            Ordering::Equal => b.cmp(a),
            other => other,
        })?;
    let p = *work.result[from].get(topic)?.iter().next_back()?;
    Some((from, to, p))
}

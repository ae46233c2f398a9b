//! The SimpleAssignor when members subscribe to different topics (Kafka's
//! `SimpleHeterogeneousAssignmentBuilder`): the homogeneous steps, once per topic, among the
//! members that subscribe to it. Topics go in id order; each pass rewrites only its own
//! topic's partitions, so the order does not change the outcome.
//!
//! As in Kafka, a previous target's topic that no member subscribes to any more is left as
//! it is (only subscribed topics get a pass); it is harmless, because a member's assignment
//! only ever takes the topics it subscribes to (`heartbeat::reconcile`).

use std::collections::{BTreeMap, BTreeSet};

use super::simple::{desired_count, desired_sharing, fill, Draft, MemberSpec};
use crate::consumer_group::{Assignment, TopicId};

pub(super) fn assign_heterogeneous(
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<TopicId, i32>,
) -> Vec<Assignment> {
    let topics: BTreeSet<TopicId> = members.iter().flat_map(|m| m.topics.iter().copied()).collect();
    if topics.is_empty() {
        return vec![Assignment::new(); members.len()];
    }
    let mut draft = Draft::new(members);
    for topic in topics {
        let subscribers: Vec<usize> =
            (0..members.len()).filter(|&i| members[i].topics.contains(&topic)).collect();
        let count = partitions.get(&topic).copied().unwrap_or(0);
        TopicPass::new(topic, count, &subscribers, members.len()).run(&mut draft);
    }
    draft.finish()
}

/// One topic's pass (Kafka's `TopicAssignmentPartialBuilder`).
struct TopicPass<'s> {
    topic: TopicId,
    partitions: i32,
    subscribers: &'s [usize],
    sharing: usize,
    /// Per member of the group; 0 for members not subscribed to the topic.
    desired: Vec<usize>,
    by_partition: BTreeMap<i32, BTreeSet<usize>>,
    by_member: BTreeMap<usize, BTreeSet<i32>>,
}

impl<'s> TopicPass<'s> {
    fn new(topic: TopicId, partitions: i32, subscribers: &'s [usize], group_size: usize) -> Self {
        let count = usize::try_from(partitions).unwrap_or(0);
        let sharing = desired_sharing(subscribers.len(), count);
        let mut desired = vec![0; group_size];
        for (k, &i) in subscribers.iter().enumerate() {
            desired[i] = desired_count(sharing, count, subscribers.len(), k);
        }
        TopicPass {
            topic,
            partitions,
            subscribers,
            sharing,
            desired,
            by_partition: BTreeMap::new(),
            by_member: BTreeMap::new(),
        }
    }

    fn run(mut self, draft: &mut Draft<'_>) {
        self.keep_previous(draft);
        self.revoke_overfilled(draft);
        self.revoke_overshared(draft);
        for p in 0..self.partitions {
            self.by_partition.entry(p).or_default();
        }
        self.assign_remaining(draft);
    }

    /// What each member's previous target holds of this topic, subscribed or not (a member
    /// that is not has a desired count of 0, so the next step takes it all back).
    fn keep_previous(&mut self, draft: &Draft<'_>) {
        for (i, old) in draft.old.iter().enumerate() {
            for &p in old.get(&self.topic).into_iter().flatten() {
                self.by_partition.entry(p).or_default().insert(i);
                self.by_member.entry(i).or_default().insert(p);
            }
        }
    }

    fn revoke_overfilled(&mut self, draft: &mut Draft<'_>) {
        for (&i, held) in &mut self.by_member {
            while held.len() > self.desired[i] {
                let Some(p) = held.pop_first() else { break };
                self.by_partition.entry(p).or_default().remove(&i);
                if let Some(ps) = draft.edit(i).get_mut(&self.topic) {
                    ps.remove(&p);
                }
            }
        }
    }

    fn revoke_overshared(&mut self, draft: &mut Draft<'_>) {
        for (&p, holders) in &mut self.by_partition {
            if holders.len() <= self.sharing {
                continue;
            }
            for i in holders.clone() {
                if draft.edit(i).get_mut(&self.topic).is_some_and(|ps| ps.remove(&p)) {
                    holders.remove(&i);
                    self.by_member.entry(i).or_default().remove(&p);
                }
                if holders.len() <= self.sharing {
                    break;
                }
            }
        }
    }

    fn assign_remaining(&mut self, draft: &mut Draft<'_>) {
        let held = |i: &usize| self.by_member.get(i).map_or(0, BTreeSet::len);
        let mut unfilled: BTreeSet<usize> =
            self.subscribers.iter().copied().filter(|i| held(i) < self.desired[*i]).collect();
        let TopicPass { topic, desired, by_partition, by_member, sharing, .. } = self;
        fill(by_partition, &mut unfilled, *sharing, |i, p| {
            draft.edit(i).entry(*topic).or_default().insert(p);
            let held = by_member.entry(i).or_default();
            held.insert(p);
            held.len() >= desired[i]
        });
    }
}

//! The SimpleAssignor when every member subscribes to the same topics (Kafka's
//! `SimpleHomogeneousAssignmentBuilder`): one pool of partitions, one desired sharing, one
//! desired count per member; then keep, revoke what overfills a member, revoke what
//! overshares a partition, and hand out the rest round robin.

use std::collections::{BTreeMap, BTreeSet};

use super::simple::{desired_count, desired_sharing, fill, Draft, MemberSpec};
use crate::consumer_group::{Assignment, TopicId};

type Partition = (TopicId, i32);

struct Homogeneous<'a> {
    topics: &'a BTreeSet<TopicId>,
    draft: Draft<'a>,
    sharing: usize,
    desired: Vec<usize>,
    /// Who holds each partition so far (Kafka's `finalAssignmentByPartition`).
    by_partition: BTreeMap<Partition, BTreeSet<usize>>,
    /// What each member holds so far (`finalAssignmentByMember`).
    by_member: BTreeMap<usize, BTreeSet<Partition>>,
    unfilled: BTreeSet<usize>,
    overfilled: BTreeSet<usize>,
}

pub(super) fn assign_homogeneous(
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<TopicId, i32>,
) -> Vec<Assignment> {
    // Every member has the same topics; Kafka takes the first member's.
    let topics = members[0].topics;
    if topics.is_empty() {
        return vec![Assignment::new(); members.len()];
    }
    let pool: Vec<Partition> = topics
        .iter()
        .flat_map(|t| (0..partitions.get(t).copied().unwrap_or(0)).map(move |p| (*t, p)))
        .collect();
    let sharing = desired_sharing(members.len(), pool.len());
    let mut builder = Homogeneous {
        topics,
        draft: Draft::new(members),
        sharing,
        desired: (0..members.len()).map(|k| desired_count(sharing, pool.len(), members.len(), k)).collect(),
        by_partition: BTreeMap::new(),
        by_member: BTreeMap::new(),
        unfilled: BTreeSet::new(),
        overfilled: BTreeSet::new(),
    };
    builder.keep_previous();
    builder.revoke_overfilled();
    builder.revoke_overshared();
    for partition in pool {
        builder.by_partition.entry(partition).or_default();
    }
    builder.assign_remaining();
    builder.draft.finish()
}

impl Homogeneous<'_> {
    /// Kafka's `revokeUnassignablePartitions`: counts what each member's previous target holds
    /// of the subscribed topics and drops the other topics; sorts members into unfilled and
    /// overfilled.
    fn keep_previous(&mut self) {
        for i in 0..self.draft.old.len() {
            let old = self.draft.old[i];
            let mut count = 0;
            for (topic, ps) in old {
                if !self.topics.contains(topic) {
                    self.draft.edit(i).remove(topic);
                    continue;
                }
                for &p in ps {
                    self.by_partition.entry((*topic, p)).or_default().insert(i);
                    self.by_member.entry(i).or_default().insert((*topic, p));
                    count += 1;
                    if count >= self.desired[i] {
                        // Kafka copies here, ready for the overfill revocation.
                        self.draft.edit(i);
                    }
                }
            }
            if count < self.desired[i] {
                self.unfilled.insert(i);
            } else if count > self.desired[i] {
                self.overfilled.insert(i);
            }
        }
    }

    /// Drops partitions from each overfilled member, in order, down to its desired count.
    fn revoke_overfilled(&mut self) {
        for &i in &self.overfilled {
            let held = self.by_member.entry(i).or_default();
            while held.len() > self.desired[i] {
                let Some((topic, p)) = held.pop_first() else { break };
                self.by_partition.entry((topic, p)).or_default().remove(&i);
                if let Some(ps) = self.draft.edit(i).get_mut(&topic) {
                    ps.remove(&p);
                }
            }
        }
    }

    /// Drops members, in order, from each partition held by more than the desired sharing;
    /// each becomes unfilled.
    fn revoke_overshared(&mut self) {
        for (&(topic, p), holders) in &mut self.by_partition {
            if holders.len() <= self.sharing {
                continue;
            }
            for i in holders.clone() {
                let removed = self.draft.edit(i).get_mut(&topic).is_some_and(|ps| ps.remove(&p));
                if removed {
                    holders.remove(&i);
                    self.by_member.entry(i).or_default().remove(&(topic, p));
                    self.unfilled.insert(i);
                }
                if holders.len() <= self.sharing {
                    break;
                }
            }
        }
    }

    fn assign_remaining(&mut self) {
        let Homogeneous { draft, desired, by_partition, by_member, unfilled, sharing, .. } = self;
        fill(by_partition, unfilled, *sharing, |i, (topic, p)| {
            draft.edit(i).entry(topic).or_default().insert(p);
            let held = by_member.entry(i).or_default();
            held.insert((topic, p));
            held.len() >= desired[i]
        });
    }
}

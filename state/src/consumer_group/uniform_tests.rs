//! Properties of the `uniform` assignor over seeded random groups: every subscribed partition
//! assigned exactly once and only to a subscriber, counts within one of each other when all
//! subscribe alike, members keep what they had up to their quota, and the same input always
//! gives the same output. A failing case prints its seed.

use std::collections::BTreeSet;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::assign;
use crate::consumer_group::model::{Assignment, TopicId};
use crate::consumer_group::testkit::{assert_complete, random_group, tid, Group};

fn count(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

#[test]
fn homogeneous_is_complete_balanced_and_sticky() {
    for seed in 0..300 {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut group = random_group(&mut rng, true);
        let first = assign(&group.specs(), &group.partitions);
        assert_complete(&group, &first, seed);
        let counts: Vec<usize> = first.iter().map(count).collect();
        assert!(counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1, "seed {seed}: {counts:?}");
        assert_eq!(assign(&group.specs(), &group.partitions), first, "seed {seed}: not deterministic");

        // Members come and go: survivors keep min(quota, what they had).
        group.targets = first;
        let drop = rng.gen_range(0..group.ids.len());
        if group.ids.len() > 1 {
            group.ids.remove(drop);
            group.instances.remove(drop);
            group.topics.remove(drop);
            group.targets.remove(drop);
        }
        for extra in 0..rng.gen_range(0..3) {
            group.ids.push(format!("new{extra}"));
            group.instances.push(None);
            group.topics.push(group.topics[0].clone());
            group.targets.push(Assignment::new());
        }
        let next = assign(&group.specs(), &group.partitions);
        assert_complete(&group, &next, seed);
        let total: usize = next.iter().map(count).sum();
        let min_quota = total / group.ids.len();
        for (i, had) in group.targets.iter().enumerate() {
            let kept = had
                .iter()
                .map(|(t, ps)| next[i].get(t).map_or(0, |n| ps.intersection(n).count()))
                .sum::<usize>();
            assert!(
                kept >= count(had).min(min_quota),
                "seed {seed}: member {i} kept {kept} of {}",
                count(had)
            );
        }
    }
}

#[test]
fn heterogeneous_is_complete_deterministic_and_sticky_enough() {
    for seed in 0..300 {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut group = random_group(&mut rng, false);
        let first = assign(&group.specs(), &group.partitions);
        assert_complete(&group, &first, seed);
        assert_eq!(assign(&group.specs(), &group.partitions), first, "seed {seed}: not deterministic");
        // Same members again: a balanced assignment is kept as it is.
        group.targets = first.clone();
        assert_eq!(assign(&group.specs(), &group.partitions), first, "seed {seed}: not stable");
    }
}

#[test]
fn heterogeneous_balances_a_shared_topic() {
    // m0 and m1 share t1 (6 partitions); m1 also has t2 (4 partitions).
    let t1: BTreeSet<TopicId> = [tid(1)].into();
    let both: BTreeSet<TopicId> = [tid(1), tid(2)].into();
    let group = Group {
        ids: vec!["m0".into(), "m1".into()],
        instances: vec![None, None],
        topics: vec![t1, both],
        targets: vec![Assignment::new(), Assignment::new()],
        partitions: [(tid(1), 6), (tid(2), 4)].into(),
    };
    let result = assign(&group.specs(), &group.partitions);
    assert_complete(&group, &result, 0);
    assert_eq!((count(&result[0]), count(&result[1])), (5, 5));
}

#[test]
fn stale_targets_never_assign_a_partition_twice() {
    let all: BTreeSet<TopicId> = [tid(1)].into();
    let both_claim: Assignment = [(tid(1), [0, 1, 2, 7, -1].into())].into();
    let group = Group {
        ids: vec!["a".into(), "b".into()],
        instances: vec![None, None],
        topics: vec![all.clone(), all],
        targets: vec![both_claim.clone(), both_claim],
        partitions: [(tid(1), 4)].into(),
    };
    let result = assign(&group.specs(), &group.partitions);
    assert_complete(&group, &result, 0);
    assert_eq!((count(&result[0]), count(&result[1])), (2, 2));
}

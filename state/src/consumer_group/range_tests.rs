//! Properties of the `range` assignor: complete, contiguous ranges in Kafka's member order,
//! and co-partitioned topics split alike.

use std::collections::BTreeSet;

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::assign;
use crate::consumer_group::model::{Assignment, TopicId};
use crate::consumer_group::testkit::{assert_complete, parts, random_group, tid, Group};

#[test]
fn every_partition_once_to_a_subscriber_in_ranges_within_one() {
    for seed in 0..300 {
        let mut rng = StdRng::seed_from_u64(seed);
        let group = random_group(&mut rng, seed % 2 == 0);
        let result = assign(&group.specs(), &group.partitions);
        assert_complete(&group, &result, seed);
        for topic in group.partitions.keys() {
            let sizes: Vec<usize> = (0..group.ids.len())
                .filter(|i| group.topics[*i].contains(topic))
                .map(|i| result[i].get(topic).map_or(0, BTreeSet::len))
                .collect();
            let (Some(max), Some(min)) = (sizes.iter().max(), sizes.iter().min()) else { continue };
            assert!(max - min <= 1, "seed {seed}: {sizes:?}");
            for ps in result.iter().filter_map(|a| a.get(topic)) {
                let (first, last) = (ps.first().copied().unwrap_or(0), ps.last().copied().unwrap_or(0));
                assert_eq!(ps.len() as i32, last - first + 1, "seed {seed}: not a range");
            }
        }
    }
}

#[test]
fn static_members_first_by_instance_id_then_member_ids() {
    let all: BTreeSet<TopicId> = [tid(1), tid(2)].into();
    let group = Group {
        ids: vec!["a".into(), "b".into(), "c".into()],
        instances: vec![None, Some("z".into()), Some("y".into())],
        topics: vec![all.clone(), all.clone(), all],
        targets: vec![Assignment::new(); 3],
        partitions: [(tid(1), 7), (tid(2), 7)].into(),
    };
    let result = assign(&group.specs(), &group.partitions);
    // Order: c (instance y), b (instance z), a. 7 = 3 + 2 + 2, same numbers on both topics.
    assert_eq!(result[2], parts(&[(1, &[0, 1, 2]), (2, &[0, 1, 2])]));
    assert_eq!(result[1], parts(&[(1, &[3, 4]), (2, &[3, 4])]));
    assert_eq!(result[0], parts(&[(1, &[5, 6]), (2, &[5, 6])]));
}

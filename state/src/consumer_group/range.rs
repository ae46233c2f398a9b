//! The `range` assignor (spec §6.4): per topic, its subscribers in a fixed order take
//! contiguous ranges of partitions, the first `count % subscribers` one partition more. So the
//! k-th member gets the same partition numbers of every co-partitioned topic, which is why
//! clients choose it. Not sticky since Kafka 4.0; the targets it is given are ignored.
//!
//! The order is Kafka's: members with an instance id first, by instance id, then the others
//! by member id. The same code serves homogeneous and heterogeneous subscriptions: a topic's
//! ranges are split among its own subscribers only.

use std::collections::BTreeMap;

use super::assignor::{partition_range, MemberSpec};
use super::model::{Assignment, TopicId};

pub(crate) fn assign(members: &[MemberSpec<'_>], partitions: &BTreeMap<TopicId, i32>) -> Vec<Assignment> {
    let mut order: Vec<usize> = (0..members.len()).collect();
    // Static members (Some) sort before dynamic ones (None): the key is (is dynamic, ids).
    order
        .sort_by_key(|i| (members[*i].instance_id.is_none(), members[*i].instance_id, members[*i].member_id));
    let mut result = vec![Assignment::new(); members.len()];
    for topic in partitions.keys() {
        let subs: Vec<usize> = order.iter().copied().filter(|i| members[*i].topics.contains(topic)).collect();
        if subs.is_empty() {
            continue;
        }
        let count = partition_range(partitions, topic).len();
        let min_quota = count / subs.len();
        let mut extra = count % subs.len();
        let mut next = 0;
        for i in subs {
            let mut len = min_quota;
            if extra > 0 {
                len += 1;
                extra -= 1;
            }
            if len > 0 {
                let range = (next..next + len).filter_map(|p| i32::try_from(p).ok());
                result[i].entry(*topic).or_default().extend(range);
            }
            next += len;
        }
    }
    result
}

#[cfg(test)]
#[path = "range_tests.rs"]
mod tests;

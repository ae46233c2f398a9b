//! What a server-side assignor sees of each member (spec §6): its subscribed topic ids, its
//! static instance id and its current target (not its current assignment, so that an
//! assignment converges even while members are still revoking). Assignors are pure, total
//! and deterministic: given the same members in the same order they return the same result,
//! and every subscribed partition goes to exactly one subscriber.

use std::collections::{BTreeMap, BTreeSet};

use super::model::{Assignment, TopicId};
use super::request::Assignor;
use super::{range, uniform};

#[derive(Debug, Clone, Copy)]
pub(crate) struct MemberSpec<'a> {
    pub member_id: &'a str,
    pub instance_id: Option<&'a str>,
    pub topics: &'a BTreeSet<TopicId>,
    pub target: &'a Assignment,
}

/// One assignment per member, in the order of `members` (callers pass member id order).
/// `partitions` holds the partition count of every topic some member subscribes to.
pub(crate) fn assign(
    assignor: Assignor,
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<TopicId, i32>,
) -> Vec<Assignment> {
    match assignor {
        Assignor::Uniform => uniform::assign(members, partitions),
        Assignor::Range => range::assign(members, partitions),
    }
}

/// The partitions of `topic` that exist: `0..count`, nothing for a negative count.
pub(crate) fn partition_range(partitions: &BTreeMap<TopicId, i32>, topic: &TopicId) -> std::ops::Range<i32> {
    0..partitions.get(topic).copied().unwrap_or(0).max(0)
}

//! The target assignment: computed when the group epoch moved past the assignment epoch and
//! the assignment interval (`share.assignment.interval.ms`, KIP-1263, in Kafka 4.4.0) has
//! passed since the last computation. Kafka runs no timer for a delayed computation: it
//! happens on the first heartbeat of any member after the interval, and so it does here.
//!
//! Every existing partition is assignable. Kafka assigns only the partitions whose share
//! state the share coordinator has initialized (`__share_group_state`, asynchronously, with
//! an epoch bump when it completes); onelog keeps share-partition state in the same log and
//! creates it on first use, so there is nothing to wait for.

use std::collections::BTreeMap;

use super::model::ShareGroup;
use super::request::ShareSettings;
use super::simple::{assign, MemberSpec};
use super::subscription::Subscriptions;
use crate::consumer_group::Assignment;

pub(crate) fn maybe_assign(
    group: &mut ShareGroup,
    subs: &Subscriptions,
    settings: &ShareSettings,
    now_ms: i64,
) {
    if group.assignment_epoch >= group.group_epoch || !interval_elapsed(group, settings, now_ms) {
        return;
    }
    group.targets = compute(group, subs);
    group.assignment_epoch = group.group_epoch;
    group.assignment_time_ms = now_ms;
}

/// Kafka's `canComputeNextTargetAssignment`: never computed (time 0, also after the group
/// emptied), an interval of 0, or the interval has passed.
fn interval_elapsed(group: &ShareGroup, settings: &ShareSettings, now_ms: i64) -> bool {
    group.assignment_time_ms == 0
        || settings.assignment_interval_ms <= 0
        || now_ms >= group.assignment_time_ms.saturating_add(settings.assignment_interval_ms)
}

/// Every member's new target from the members' previous targets. Empty targets are not
/// stored.
fn compute(group: &ShareGroup, subs: &Subscriptions) -> BTreeMap<String, Assignment> {
    let empty = Assignment::new();
    let specs: Vec<MemberSpec<'_>> = group
        .members
        .keys()
        .map(|id| MemberSpec { topics: subs.of(id), target: group.targets.get(id).unwrap_or(&empty) })
        .collect();
    let results = assign(&specs, &subs.partitions, subs.homogeneous);
    group.members.keys().cloned().zip(results).filter(|(_, target)| !target.is_empty()).collect()
}

//! The target assignment (spec §3.7): computed when the group epoch moved past the
//! assignment epoch and the assignment interval (KIP-1263) has passed since the last
//! computation. Kafka runs no timer for a delayed computation: it happens on the first
//! heartbeat of any member after the interval, and so it does here. Computed synchronously
//! (Kafka 4.4 may offload it to a thread; the outcome is the same for a replicated log).

use std::collections::BTreeMap;

use super::assignor::{self, MemberSpec};
use super::model::{Assignment, ConsumerGroup};
use super::request::GroupSettings;
use super::subscription::{preferred_assignor, Subscriptions};

pub(crate) fn maybe_assign(
    group: &mut ConsumerGroup,
    subs: &Subscriptions,
    settings: &GroupSettings,
    now_ms: i64,
) {
    if group.assignment_epoch >= group.group_epoch || !interval_elapsed(group, settings, now_ms) {
        return;
    }
    group.targets = compute(group, subs, settings);
    group.assignment_epoch = group.group_epoch;
    group.assignment_time_ms = now_ms;
}

/// Allowed when never computed (time 0, also after the group emptied), when the interval is
/// 0, or once the interval has passed.
fn interval_elapsed(group: &ConsumerGroup, settings: &GroupSettings, now_ms: i64) -> bool {
    group.assignment_time_ms == 0
        || settings.assignment_interval_ms <= 0
        || now_ms >= group.assignment_time_ms.saturating_add(settings.assignment_interval_ms)
}

/// Every member's new target, by the group's preferred assignor, from the members' current
/// targets (a static member that replaced another inherited its target). Empty targets are
/// not stored.
fn compute(
    group: &ConsumerGroup,
    subs: &Subscriptions,
    settings: &GroupSettings,
) -> BTreeMap<String, Assignment> {
    let empty = Assignment::new();
    let specs: Vec<MemberSpec<'_>> = group
        .members
        .iter()
        .map(|(id, m)| MemberSpec {
            member_id: id,
            instance_id: m.instance_id.as_deref(),
            topics: subs.of(id),
            target: group.targets.get(id).unwrap_or(&empty),
        })
        .collect();
    let assignor = preferred_assignor(group.members.values(), settings);
    let results = assignor::assign(assignor, &specs, &subs.partitions);
    specs
        .iter()
        .zip(results)
        .map(|(spec, mut assignment)| {
            assignment.retain(|_, ps| !ps.is_empty());
            (spec.member_id.to_string(), assignment)
        })
        .filter(|(_, assignment)| !assignment.is_empty())
        .collect()
}

//! The stateful ShareGroupHeartbeat (Kafka's `GroupMetadataManager.shareGroupHeartbeat`):
//! find or create the group and the member, apply the request's fields, bump the group epoch
//! when the subscription or the subscribed topics changed, compute a new target when one is
//! owed and the assignment interval allows, bring the member to it and answer.
//!
//! Every check that can refuse runs first, against the state as it is (`check`); only then
//! is anything written, so a refused heartbeat leaves the state unchanged and a heartbeat
//! that changes nothing leaves it equal, which is how the broker knows to write no log entry
//! for a steady heartbeat (DESIGN §9).

use std::collections::{BTreeMap, BTreeSet};

use super::model::{ShareGroup, ShareGroups, ShareMember};
use super::request::{Heartbeat, HeartbeatAnswer, ShareSettings, LEAVE_GROUP_MEMBER_EPOCH};
use super::subscription::resolve;
use super::target::maybe_assign;
use super::validate::validate;
use crate::consumer_group::{Assignment, Refusal, TopicId};
use crate::Topic;

impl ShareGroups {
    /// One heartbeat, with the leader's clock. A leave (-1) is `leave`. The caller refuses a
    /// group id that a group of another type holds, and records liveness (`seen`) itself.
    pub fn heartbeat(
        &mut self,
        topics: &BTreeMap<String, Topic>,
        hb: &Heartbeat,
        settings: &ShareSettings,
        now_ms: i64,
    ) -> Result<HeartbeatAnswer, Refusal> {
        validate(hb)?;
        if hb.member_epoch == LEAVE_GROUP_MEMBER_EPOCH {
            return self.leave(hb);
        }
        let before = self.check(hb, settings)?;
        let group = self.groups.entry(hb.group_id.clone()).or_default();
        Ok(beat(group, topics, hb, settings, now_ms, before))
    }
}

/// Writes a checked heartbeat.
fn beat(
    group: &mut ShareGroup,
    topics: &BTreeMap<String, Topic>,
    hb: &Heartbeat,
    settings: &ShareSettings,
    now_ms: i64,
    before: ShareMember,
) -> HeartbeatAnswer {
    let member = updated(before.clone(), hb);
    let subscription_changed = member.subscribed_topic_names != before.subscribed_topic_names;
    group.members.insert(hb.member_id.clone(), member.clone());
    let subs = resolve(&group.members, topics);
    // A topic created, deleted or grown among the subscribed ones moves the epoch too (the
    // metadata hash of KIP-1101).
    let bumped = subscription_changed || subs.metadata != group.subscribed_topics;
    if bumped {
        group.group_epoch = group.group_epoch.saturating_add(1);
        group.subscribed_topics.clone_from(&subs.metadata);
    }
    maybe_assign(group, &subs, settings, now_ms);
    let target = group.targets.get(&hb.member_id);
    let reconciled = reconcile(member, group.assignment_epoch, target, subs.of(&hb.member_id), bumped);
    let send = hb.member_epoch == 0
        || hb.subscribed_topic_names.is_some()
        || reconciled.assignment != before.assignment;
    let answer = HeartbeatAnswer {
        member_id: hb.member_id.clone(),
        member_epoch: reconciled.member_epoch,
        heartbeat_interval_ms: settings.heartbeat_interval_ms,
        assignment: send.then(|| reconciled.assignment.clone()),
    };
    group.members.insert(hb.member_id.clone(), reconciled);
    answer
}

/// The member with the request's fields applied: a field the request leaves null is kept;
/// client id and host are overwritten, as Kafka does.
fn updated(mut member: ShareMember, hb: &Heartbeat) -> ShareMember {
    if let Some(rack_id) = &hb.rack_id {
        member.rack_id = Some(rack_id.clone());
    }
    if let Some(names) = &hb.subscribed_topic_names {
        member.subscribed_topic_names = names.iter().cloned().collect();
    }
    member.client_id.clone_from(&hb.client_id);
    member.client_host.clone_from(&hb.client_host);
    member
}

/// Kafka's `ShareGroupAssignmentBuilder`: nothing is revoked first in a share group, so a
/// member takes its target at once, limited to the existing topics it subscribes to. It
/// moves to the assignment epoch if it is not there; at the same epoch, it takes its target
/// again only when the group epoch was just bumped (its subscription or topics changed).
fn reconcile(
    mut member: ShareMember,
    target_epoch: i32,
    target: Option<&Assignment>,
    subscribed: &BTreeSet<TopicId>,
    bumped: bool,
) -> ShareMember {
    if member.member_epoch == target_epoch && !bumped {
        return member;
    }
    let mut assignment = target.cloned().unwrap_or_default();
    assignment.retain(|topic, _| subscribed.contains(topic));
    if member.member_epoch != target_epoch {
        member.previous_member_epoch = member.member_epoch;
        member.member_epoch = target_epoch;
    }
    member.assignment = assignment;
    member
}

//! Members leaving: a leave heartbeat (-1) and the fencing the leader's session timer asks
//! for, which Kafka does alike (`shareGroupFenceMember`): the member, its target and its
//! subscription go, the group epoch moves and the metadata is recomputed without it. Plus
//! liveness (`seen`) and the query the leader arms its session timers from.
//!
//! The member's acquired records are not this module's: the caller releases them when
//! `leave` answers (member epoch -1) or `fence` returns true.

use super::lookup::{group_not_found, unknown_member};
use super::model::{ShareGroup, ShareGroups};
use super::request::{Heartbeat, HeartbeatAnswer};
use crate::consumer_group::Refusal;

/// What the leader arms for one member: its session, from when the log last heard from it
/// (the session's length is the group's `share.session.timeout.ms`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberTimers {
    pub group_id: String,
    pub member_id: String,
    /// Leader clock, ms; 0: never recorded.
    pub last_seen_ms: i64,
}

impl ShareGroups {
    /// A heartbeat with epoch -1 (validated already). Kafka checks no epoch on a leave.
    pub(super) fn leave(&mut self, hb: &Heartbeat) -> Result<HeartbeatAnswer, Refusal> {
        let group = self.groups.get_mut(&hb.group_id).ok_or_else(|| group_not_found(&hb.group_id))?;
        if !group.members.contains_key(&hb.member_id) {
            return Err(unknown_member(&hb.group_id, &hb.member_id));
        }
        remove_member(group, &hb.member_id);
        Ok(HeartbeatAnswer {
            member_id: hb.member_id.clone(),
            member_epoch: hb.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        })
    }

    /// Fences a member whose session expired. False if nothing changed (the group or the
    /// member is gone already); true: the caller releases what the member acquired.
    pub fn fence(&mut self, group_id: &str, member_id: &str) -> bool {
        let Some(group) = self.groups.get_mut(group_id) else { return false };
        if !group.members.contains_key(member_id) {
            return false;
        }
        remove_member(group, member_id);
        true
    }

    /// Records that the leader heard from a member at `seen_ms` (after a heartbeat the log
    /// applied, or the leader's liveness op): a time only moves forward, and a member no
    /// longer in its group is skipped.
    pub fn seen(&mut self, group_id: &str, member_id: &str, seen_ms: i64) {
        let member = self.groups.get_mut(group_id).and_then(|g| g.members.get_mut(member_id));
        if let Some(member) = member {
            member.last_seen_ms = member.last_seen_ms.max(seen_ms);
        }
    }

    /// Every member's session timer, for a leader that takes over (or any time it wants them).
    pub fn timers(&self) -> Vec<MemberTimers> {
        let mut timers = Vec::new();
        for (group_id, group) in &self.groups {
            for (member_id, member) in &group.members {
                timers.push(MemberTimers {
                    group_id: group_id.clone(),
                    member_id: member_id.clone(),
                    last_seen_ms: member.last_seen_ms,
                });
            }
        }
        timers
    }
}

/// The member and its target go; the group epoch is bumped and the metadata keeps only the
/// topics someone still subscribes to (their ids and counts as the group last saw them: a
/// fence has no topic map). A group left empty also moves its assignment epoch up with time
/// 0, so that its next join computes at once. The group itself stays (Kafka never expires a
/// share group; DeleteGroups removes an empty one).
fn remove_member(group: &mut ShareGroup, member_id: &str) {
    group.members.remove(member_id);
    group.targets.remove(member_id);
    group.group_epoch = group.group_epoch.saturating_add(1);
    let members = &group.members;
    group
        .subscribed_topics
        .retain(|name, _| members.values().any(|m| m.subscribed_topic_names.contains(name)));
    if group.members.is_empty() {
        group.assignment_epoch = group.group_epoch;
        group.assignment_time_ms = 0;
    }
}

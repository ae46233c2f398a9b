//! Members leaving (spec §3.9, §5): a leave heartbeat (-1), a static member's temporary
//! leave (-2, its partitions stay reserved until it rejoins or its session expires), and the
//! fencing the leader's timers ask for (session expiry; rebalance-timeout expiry, which only
//! fences a member still at the epoch the timer was armed for). Plus the query the leader
//! arms its timers from after a takeover.

use std::collections::BTreeMap;

use super::lookup::{fenced_instance, group_not_found, unknown_instance, unknown_member};
use super::model::{ConsumerGroup, ConsumerGroups, MemberState};
use super::request::{
    Heartbeat, HeartbeatAnswer, Refusal, RevocationDeadline, RevocationTimer, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};
use super::subscription::resolve;
use crate::Topic;

/// What the leader arms for one member: its session timer always, and its rebalance timer
/// while it is revoking (Kafka re-arms both with full durations when it loads a group).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberTimers {
    pub group_id: String,
    pub member_id: String,
    pub session_timeout_ms: i32,
    pub revocation: Option<RevocationDeadline>,
    /// When the log last heard from the member (leader clock, ms; 0: never recorded).
    pub last_seen_ms: i64,
}

impl ConsumerGroups {
    /// Records when the leader heard from each member (`Op::RecordConsumerLiveness`): a time
    /// only moves forward, and a member no longer in its group is skipped.
    pub fn record_liveness(&mut self, members: &[crate::command::SeenMember]) {
        for seen in members {
            let member = self.groups.get_mut(&seen.group_id).and_then(|g| g.members.get_mut(&seen.member_id));
            if let Some(member) = member {
                member.last_seen_ms = member.last_seen_ms.max(seen.seen_ms);
            }
        }
    }

    /// A heartbeat with epoch -1 or -2 (validated already).
    pub(super) fn leave(
        &mut self,
        topics: &BTreeMap<String, Topic>,
        hb: &Heartbeat,
    ) -> Result<HeartbeatAnswer, Refusal> {
        let group = self.groups.get(&hb.group_id).ok_or_else(|| group_not_found(&hb.group_id))?;
        let member_id = match &hb.instance_id {
            None if group.members.contains_key(&hb.member_id) => hb.member_id.clone(),
            None => return Err(unknown_member(&hb.group_id, &hb.member_id)),
            Some(instance_id) => {
                let Some((holder, _)) = group.member_by_instance(instance_id) else {
                    return Err(unknown_instance(instance_id));
                };
                if *holder != hb.member_id {
                    return Err(fenced_instance(&hb.member_id, instance_id, holder));
                }
                holder.clone()
            }
        };
        let temporary = hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH;
        if let Some(group) = self.groups.get_mut(&hb.group_id) {
            if temporary {
                leave_temporarily(group, &member_id);
            } else {
                remove_member(group, topics, &member_id);
            }
        }
        Ok(HeartbeatAnswer {
            member_id: hb.member_id.clone(),
            member_epoch: hb.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
            // A -2 member's timers keep running (its session timer fences it if it stays away).
            revocation_timer: if temporary { RevocationTimer::Keep } else { RevocationTimer::Cancel },
        })
    }

    /// Fences a member for a timer: session expiry (`expected_epoch` None) or rebalance
    /// timeout (only if the member is still at `expected_epoch`). False if nothing changed:
    /// the group or member is gone, or the member moved on.
    pub fn fence(
        &mut self,
        topics: &BTreeMap<String, Topic>,
        group_id: &str,
        member_id: &str,
        expected_epoch: Option<i32>,
    ) -> bool {
        let Some(group) = self.groups.get_mut(group_id) else { return false };
        let Some(member) = group.members.get(member_id) else { return false };
        if expected_epoch.is_some_and(|epoch| epoch != member.member_epoch) {
            return false;
        }
        remove_member(group, topics, member_id);
        true
    }

    /// Every member's timers, for a leader that takes over (or any time it wants them).
    /// `session_timeout_ms` names each group's: the broker's, or the group's own override
    /// (`group_config::consumer_settings`).
    pub fn timers(&self, session_timeout_ms: impl Fn(&str) -> i32) -> Vec<MemberTimers> {
        let mut timers = Vec::new();
        for (group_id, group) in &self.groups {
            let session_timeout_ms = session_timeout_ms(group_id);
            for (member_id, member) in &group.members {
                let revocation =
                    (member.state == MemberState::UnrevokedPartitions).then_some(RevocationDeadline {
                        rebalance_timeout_ms: member.rebalance_timeout_ms,
                        member_epoch: member.member_epoch,
                    });
                timers.push(MemberTimers {
                    group_id: group_id.clone(),
                    member_id: member_id.clone(),
                    // A classic member's session is the one its JoinGroup asked for.
                    session_timeout_ms: member
                        .classic
                        .as_ref()
                        .map_or(session_timeout_ms, |c| c.session_timeout_ms),
                    revocation,
                    last_seen_ms: member.last_seen_ms,
                });
            }
        }
        timers
    }
}

/// Epoch -2: no epoch bump; pending revocations are dropped (free for others), assigned
/// partitions are kept with their assignment epochs reset to 0 (KIP-1251). The state and
/// previous epoch are kept, as Kafka's record does.
fn leave_temporarily(group: &mut ConsumerGroup, member_id: &str) {
    let Some(member) = group.members.get_mut(member_id) else { return };
    member.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
    member.pending_revocation.clear();
    for epoch in member.assigned.values_mut().flat_map(|ps| ps.values_mut()) {
        *epoch = 0;
    }
}

/// The member, its target and its subscription go; the group epoch is bumped and the
/// fingerprint recomputed without it. A group left empty also moves its assignment epoch up
/// with time 0 (KAFKA-20442), so that it is not ASSIGNING and its next join computes at once.
fn remove_member(group: &mut ConsumerGroup, topics: &BTreeMap<String, Topic>, member_id: &str) {
    remove_members(group, topics, &[member_id.to_string()]);
}

/// As `remove_member`, for several members with one epoch bump (a classic LeaveGroup).
pub(super) fn remove_members(
    group: &mut ConsumerGroup,
    topics: &BTreeMap<String, Topic>,
    member_ids: &[String],
) {
    for member_id in member_ids {
        group.members.remove(member_id);
        group.targets.remove(member_id);
    }
    group.group_epoch = group.group_epoch.saturating_add(1);
    group.subscription_fingerprint = resolve(&group.members, topics).fingerprint;
    if group.members.is_empty() {
        group.assignment_epoch = group.group_epoch;
        group.assignment_time_ms = 0;
    }
}

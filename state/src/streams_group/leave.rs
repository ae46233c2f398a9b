//! Members leaving a Streams group: a leave heartbeat (-1), a static member's temporary
//! leave (-2, its tasks stay reserved for its return), and the leader's fencing when a
//! session or a revocation deadline expires. Removing a member bumps the group epoch so the
//! others are re-assigned its tasks; the last one out resets the assignment time and any
//! shutdown request.

use super::lookup::{fenced_instance, group_not_found, unknown_instance, unknown_member};
use super::model::{AssignedTasks, StreamsGroup, StreamsGroups};
use super::request::{Heartbeat, HeartbeatAnswer, Refusal, RevocationTimer, LEAVE_GROUP_STATIC_MEMBER_EPOCH};

/// What the leader arms per member: its session from when the log last heard from it, and
/// its revocation deadline when it is revoking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberTimers {
    pub group_id: String,
    pub member_id: String,
    pub last_seen_ms: i64,
    /// `Some((rebalance_timeout_ms, member_epoch))` while the member is revoking.
    pub revoking: Option<(i32, i32)>,
}

impl StreamsGroups {
    pub(super) fn leave(&mut self, hb: &Heartbeat) -> Result<HeartbeatAnswer, Refusal> {
        let group = self.groups.get_mut(&hb.group_id).ok_or_else(|| group_not_found(&hb.group_id))?;
        if hb.shutdown_application {
            group.shutdown_requested_by = Some(hb.member_id.clone());
        }
        let leaving = match &hb.instance_id {
            None if group.members.contains_key(&hb.member_id) => hb.member_id.clone(),
            None => return Err(unknown_member(&hb.group_id, &hb.member_id)),
            Some(instance_id) => {
                let (holder, _) =
                    group.member_by_instance(instance_id).ok_or_else(|| unknown_instance(instance_id))?;
                if holder != &hb.member_id {
                    return Err(fenced_instance(&hb.member_id, instance_id, holder));
                }
                holder.clone()
            }
        };
        if hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            step_away(group, &leaving);
        } else {
            remove_member(group, &leaving);
        }
        Ok(left(hb))
    }

    /// The leader's fencing: on session expiry (`expected_epoch` None) or when a revocation
    /// deadline passed while the member was still at `expected_epoch`. Whether it fenced.
    pub fn fence(&mut self, group_id: &str, member_id: &str, expected_epoch: Option<i32>) -> bool {
        let Some(group) = self.groups.get_mut(group_id) else { return false };
        let Some(member) = group.members.get(member_id) else { return false };
        if expected_epoch.is_some_and(|e| e != member.member_epoch) {
            return false;
        }
        remove_member(group, member_id);
        true
    }

    /// Records that the leader heard from a member (a heartbeat that changed nothing else).
    pub fn seen(&mut self, group_id: &str, member_id: &str, now_ms: i64) {
        if let Some(m) = self.groups.get_mut(group_id).and_then(|g| g.members.get_mut(member_id)) {
            m.last_seen_ms = now_ms;
        }
    }

    /// Every member's timers, for a leader arming them after a leader change.
    pub fn timers(&self) -> Vec<MemberTimers> {
        let mut out = Vec::new();
        for (group_id, group) in &self.groups {
            for (member_id, m) in &group.members {
                let revoking = (m.state == super::model::MemberState::UnrevokedTasks)
                    .then_some((m.rebalance_timeout_ms, m.member_epoch));
                out.push(MemberTimers {
                    group_id: group_id.clone(),
                    member_id: member_id.clone(),
                    last_seen_ms: m.last_seen_ms,
                    revoking,
                });
            }
        }
        out
    }
}

/// -2: the member stays, its tasks reserved at epoch 0 until it returns or its session ends.
fn step_away(group: &mut StreamsGroup, member_id: &str) {
    if let Some(m) = group.members.get_mut(member_id) {
        m.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
        m.pending_revocation = AssignedTasks::default();
        for ps in m.assigned.active.values_mut() {
            ps.values_mut().for_each(|e| *e = 0);
        }
    }
}

pub(super) fn remove_member(group: &mut StreamsGroup, member_id: &str) {
    group.members.remove(member_id);
    group.targets.remove(member_id);
    group.group_epoch = group.group_epoch.saturating_add(1);
    if group.members.is_empty() {
        // Kafka writes the empty target at the new epoch: nothing is owed.
        group.assignment_epoch = group.group_epoch;
        group.assignment_time_ms = 0;
        group.shutdown_requested_by = None;
    }
}

fn left(hb: &Heartbeat) -> HeartbeatAnswer {
    HeartbeatAnswer {
        member_id: hb.member_id.clone(),
        member_epoch: hb.member_epoch,
        heartbeat_interval_ms: 0,
        acceptable_recovery_lag: 0,
        task_offset_interval_ms: 0,
        status: Vec::new(),
        tasks: None,
        endpoint_information_epoch: 0,
        endpoints: None,
        revocation_timer: RevocationTimer::Cancel,
    }
}

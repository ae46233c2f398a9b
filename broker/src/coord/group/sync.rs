//! SyncGroup and Heartbeat as pure transitions: the leader member's SyncGroup carries the
//! assignments, stores them, answers every waiting follower and makes the group Stable (the
//! completed generation goes to the log, `Op::CompleteGeneration`); a follower's SyncGroup
//! before that is parked. Heartbeats refresh the session and tell a member out of step with
//! its group what Kafka would.
//!
//! A parked follower is only `awaiting_sync` here; the shell keeps its sender, and the
//! leader's completion returns the followers' answers as `Reply::Sync`.

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::Bytes;
use kafka_compat::error_code;
use onelog_state::command::{GenerationMember, GenerationOp};

use super::effects::{Effects, Out};
use super::messages::SyncResult;
use super::state::{Group, GroupState, Groups};

/// What a SyncGroup comes to.
#[derive(Debug)]
pub(super) enum SyncStep {
    /// Answered at once: an error, or the assignment of a Stable group.
    Answer(SyncResult),
    /// The leader's assignments completed the generation: the leader's answer, the
    /// generation for the log, and the waiting followers' answers.
    Completed(SyncResult, GenerationOp, Effects),
    /// A follower waits for the leader's assignments: the shell parks its request.
    Park,
}

impl Groups {
    /// SyncGroup of `member` (member id, instance id) in `generation_id`, at `now`.
    pub(super) fn sync(
        &mut self,
        group_id: &str,
        generation_id: i32,
        member: (&str, Option<&str>),
        assignments: Vec<(String, Bytes)>,
        now: Instant,
    ) -> SyncStep {
        let (member_id, instance_id) = member;
        let answer = |code| SyncStep::Answer(SyncResult::error(code));
        let Some(group) = self.groups.get_mut(group_id) else { return answer(error_code::UNKNOWN_MEMBER_ID) };
        if group.fenced(instance_id, member_id) {
            return answer(error_code::FENCED_INSTANCE_ID);
        }
        let Some(m) = group.members.get_mut(member_id) else { return answer(error_code::UNKNOWN_MEMBER_ID) };
        m.last_heartbeat = now;
        if generation_id != group.generation_id {
            return answer(error_code::ILLEGAL_GENERATION);
        }
        match group.state {
            GroupState::Empty => return answer(error_code::UNKNOWN_MEMBER_ID),
            GroupState::Dead => return answer(error_code::COORDINATOR_NOT_AVAILABLE),
            GroupState::PreparingRebalance => return answer(error_code::REBALANCE_IN_PROGRESS),
            GroupState::Stable => return SyncStep::Answer(group.stable_sync(member_id)),
            GroupState::CompletingRebalance => {}
        }
        if group.leader.as_deref() != Some(member_id) {
            if let Some(m) = group.members.get_mut(member_id) {
                m.awaiting_sync = true;
            }
            return SyncStep::Park;
        }
        let mut effects = Effects::default();
        let completed = group.complete_sync(group_id, assignments, &mut Out::new(group_id, &mut effects));
        SyncStep::Completed(group.stable_sync(member_id), completed, effects)
    }

    /// Heartbeat at `now`: Kafka's codes for a member out of step with its group.
    pub(super) fn heartbeat(
        &mut self,
        group_id: &str,
        generation_id: i32,
        member: (&str, Option<&str>),
        now: Instant,
    ) -> i16 {
        let (member_id, instance_id) = member;
        let Some(group) = self.groups.get_mut(group_id) else { return error_code::UNKNOWN_MEMBER_ID };
        if group.fenced(instance_id, member_id) {
            return error_code::FENCED_INSTANCE_ID;
        }
        let Some(member) = group.members.get_mut(member_id) else { return error_code::UNKNOWN_MEMBER_ID };
        member.last_heartbeat = now;
        match group.state {
            GroupState::Empty => error_code::UNKNOWN_MEMBER_ID,
            GroupState::Dead => error_code::COORDINATOR_NOT_AVAILABLE,
            _ if generation_id != group.generation_id => error_code::ILLEGAL_GENERATION,
            GroupState::PreparingRebalance => error_code::REBALANCE_IN_PROGRESS,
            GroupState::CompletingRebalance | GroupState::Stable => error_code::NONE,
        }
    }
}

impl Group {
    /// The leader's assignments: stored, every waiting follower answered, the group Stable.
    /// Returns the completed generation for the log.
    fn complete_sync(
        &mut self,
        group_id: &str,
        assignments: Vec<(String, Bytes)>,
        out: &mut Out,
    ) -> GenerationOp {
        let mut assignments: BTreeMap<String, Bytes> = assignments.into_iter().collect();
        let protocol_type = self.protocol_type.clone();
        let protocol_name = self.protocol_name.clone();
        for (id, m) in self.members.iter_mut() {
            m.assignment = assignments.remove(id).unwrap_or_default();
            if std::mem::take(&mut m.awaiting_sync) {
                let result = SyncResult {
                    error_code: error_code::NONE,
                    protocol_type: protocol_type.clone(),
                    protocol_name: protocol_name.clone(),
                    assignment: m.assignment.clone(),
                };
                out.sync(id, result);
            }
        }
        self.state = GroupState::Stable;
        GenerationOp {
            group_id: group_id.to_string(),
            generation_id: self.generation_id,
            protocol_type: protocol_type.unwrap_or_default(),
            protocol_name: protocol_name.unwrap_or_default(),
            members: self
                .members
                .iter()
                .map(|(id, m)| GenerationMember {
                    member_id: id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                })
                .collect(),
        }
    }

    /// A Stable group's answer to SyncGroup: the member's stored assignment.
    fn stable_sync(&self, member_id: &str) -> SyncResult {
        SyncResult {
            error_code: error_code::NONE,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            assignment: self.members.get(member_id).map(|m| m.assignment.clone()).unwrap_or_default(),
        }
    }
}

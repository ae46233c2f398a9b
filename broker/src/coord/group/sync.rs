//! SyncGroup and Heartbeat as pure transitions: the leader member's SyncGroup carries the
//! assignments and stores them; the completed generation then goes to the log
//! (`Op::CompleteGeneration`), and only once it is committed (`recorded`) are the waiting
//! followers answered and the group Stable, as Kafka answers SyncGroup from its store
//! callback. A follower's SyncGroup before that is parked. Heartbeats refresh the session and
//! tell a member out of step with its group what Kafka would.
//!
//! Why not answer the followers at once: a follower that has its assignment commits offsets
//! with the new generation, and apply fences commits against the generation the log holds. Had
//! a follower's commit reached the log before the generation's entry, it would have been
//! refused ILLEGAL_GENERATION (franz-go's TestGroupETL saw that under load).
//!
//! A parked follower is only `awaiting_sync` here; the shell keeps its sender, and
//! `recorded` returns the followers' answers as `Reply::Sync`.

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::Bytes;
use kafka_compat::error_code;
use onelog_state::command::{GenerationMember, GenerationOp};

use super::effects::{Effects, Out};
use super::messages::SyncResult;
use super::state::{Group, GroupState, Groups, Member};

/// What a SyncGroup comes to.
#[derive(Debug)]
pub(super) enum SyncStep {
    /// Answered at once: an error, or the assignment of a Stable group.
    Answer(SyncResult),
    /// The leader's assignments completed the generation: the shell puts it in the log, then
    /// calls `recorded`, which answers the leader and the waiting followers.
    Completed(GenerationOp),
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
        // A follower waits for the leader's assignments, and everyone (the leader too, if it
        // asks again) for the generation's log entry once they are in.
        if group.recording || group.leader.as_deref() != Some(member_id) {
            if let Some(m) = group.members.get_mut(member_id) {
                m.awaiting_sync = true;
            }
            return SyncStep::Park;
        }
        SyncStep::Completed(group.complete_sync(group_id, assignments))
    }

    /// The generation `generation_id` the leader member of `group_id` (`leader`) completed is
    /// in the log (`committed`) or could not be put there. Committed: the group is Stable and
    /// every waiting member gets its assignment. Not: they get NOT_COORDINATOR (leadership
    /// was lost; the clients find the new coordinator, which adopts the group from the log)
    /// and the group rebalances, as Kafka's `resetAndPropagateAssignmentError`. A group that
    /// moved on meanwhile (a member joined or left) answers the leader REBALANCE_IN_PROGRESS.
    pub(super) fn recorded(
        &mut self,
        group_id: &str,
        generation_id: i32,
        leader: &str,
        committed: bool,
    ) -> (SyncResult, Effects) {
        let mut effects = Effects::default();
        let config = self.config;
        let Some(group) = self.groups.get_mut(group_id) else {
            return (SyncResult::error(error_code::NOT_COORDINATOR), effects);
        };
        let current = group.state == GroupState::CompletingRebalance
            && group.generation_id == generation_id
            && group.recording;
        if !current {
            return (SyncResult::error(error_code::REBALANCE_IN_PROGRESS), effects);
        }
        group.recording = false;
        let mut out = Out::new(group_id, &mut effects);
        if !committed {
            for (id, m) in group.members.iter_mut() {
                m.assignment = Bytes::new();
                if std::mem::take(&mut m.awaiting_sync) {
                    out.sync(id, SyncResult::error(error_code::NOT_COORDINATOR));
                }
            }
            group.prepare_rebalance(&config, &mut out);
            return (SyncResult::error(error_code::NOT_COORDINATOR), effects);
        }
        group.state = GroupState::Stable;
        for (id, m) in group.members.iter_mut() {
            if std::mem::take(&mut m.awaiting_sync) {
                out.sync(id, stable_answer(group.protocol_type.clone(), group.protocol_name.clone(), m));
            }
        }
        (group.stable_sync(leader), effects)
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
    /// The leader's assignments: stored, and the group waits for the generation's log entry
    /// (`recording`). Returns the completed generation for the log.
    fn complete_sync(&mut self, group_id: &str, assignments: Vec<(String, Bytes)>) -> GenerationOp {
        let mut assignments: BTreeMap<String, Bytes> = assignments.into_iter().collect();
        let protocol_type = self.protocol_type.clone();
        let protocol_name = self.protocol_name.clone();
        for (id, m) in self.members.iter_mut() {
            m.assignment = assignments.remove(id).unwrap_or_default();
        }
        self.recording = true;
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

fn stable_answer(protocol_type: Option<String>, protocol_name: Option<String>, m: &Member) -> SyncResult {
    SyncResult {
        error_code: error_code::NONE,
        protocol_type,
        protocol_name,
        assignment: m.assignment.clone(),
    }
}

//! The rebalance as pure transitions (Kafka's classic `ClassicGroup` and
//! `GroupMetadataManager`): a group moves to PreparingRebalance, and the join phase completes
//! when every known member rejoined or the rebalance timeout passed (members that did not
//! rejoin are removed); the first rebalance of an empty group waits
//! `group.initial.rebalance.delay.ms` first (KIP-134). Members leaving (LeaveGroup) or whose
//! session passed start a rebalance of the rest.
//!
//! Timers are requested, not run: `prepare_rebalance` returns a `Timer` and the shell calls
//! `rebalance_timer_fired` when it passes; `now` is the shell's clock reading.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_compat::error_code;

use super::effects::{Effects, Out};
use super::messages::{CoordinatorConfig, JoinResult, SyncResult};
use super::state::{Group, GroupState, Groups};

impl Groups {
    /// The rebalance (or initial) delay of `seq` passed: complete with the members that
    /// rejoined. Kafka's `InitialDelayedJoin`: if a new member joined during the initial delay
    /// and some of the rebalance timeout is left, wait another delay (at most what is left).
    pub(super) fn rebalance_timer_fired(&mut self, group_id: &str, seq: u64, now: Instant) -> Effects {
        let mut effects = Effects::default();
        let configured = Duration::from_millis(self.config.initial_rebalance_delay_ms);
        let Some(group) = self.groups.get_mut(group_id) else { return effects };
        if group.rebalance_seq != seq || group.state != GroupState::PreparingRebalance {
            return effects;
        }
        let mut out = Out::new(group_id, &mut effects);
        if group.initial_delay && group.new_member_added && !group.initial_delay_remaining.is_zero() {
            group.new_member_added = false;
            let delay = configured.min(group.initial_delay_remaining);
            group.initial_delay_remaining -= delay;
            out.timer(seq, delay);
        } else {
            group.initial_delay = false;
            group.try_complete_join(true, now, &mut out);
        }
        effects
    }

    /// LeaveGroup of one member: removed at once, and the others rebalance.
    /// KIP-345: a static member may leave by instance id alone (empty member id).
    pub(super) fn leave(
        &mut self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        now: Instant,
    ) -> (i16, Effects) {
        let mut effects = Effects::default();
        let config = self.config;
        let Some(group) = self.groups.get_mut(group_id) else {
            return (error_code::UNKNOWN_MEMBER_ID, effects);
        };
        let owner = instance_id.and_then(|i| group.static_owner(i));
        let member_id = match owner {
            Some(owner) if member_id.is_empty() || owner == member_id => owner,
            Some(_) => return (error_code::FENCED_INSTANCE_ID, effects),
            None => member_id.to_string(),
        };
        if !group.members.contains_key(&member_id) {
            return (error_code::UNKNOWN_MEMBER_ID, effects);
        }
        group.remove_member(&member_id, &config, now, &mut Out::new(group_id, &mut effects));
        (error_code::NONE, effects)
    }

    /// Removes members whose session passed without a heartbeat by `now` (members waiting in a
    /// join or sync are kept alive, as Kafka's `shouldKeepAlive`). Returns the (group id,
    /// member id) of each removed member.
    pub(super) fn expire_sessions(&mut self, now: Instant) -> (Vec<(String, String)>, Effects) {
        let mut effects = Effects::default();
        let mut removed = Vec::new();
        let config = self.config;
        for (group_id, group) in self.groups.iter_mut() {
            let expired: Vec<String> = group
                .members
                .iter()
                .filter(|(_, m)| !m.awaiting_join && !m.awaiting_sync)
                .filter(|(_, m)| {
                    now.duration_since(m.last_heartbeat) > Duration::from_millis(m.session_timeout_ms as u64)
                })
                .map(|(id, _)| id.clone())
                .collect();
            for id in expired {
                group.remove_member(&id, &config, now, &mut Out::new(group_id, &mut effects));
                removed.push((group_id.clone(), id));
            }
        }
        (removed, effects)
    }
}

impl Group {
    /// Moves the group to PreparingRebalance: followers waiting for an assignment are told to
    /// rejoin, and a timer bounds how long the rebalance waits for members.
    pub(super) fn prepare_rebalance(&mut self, config: &CoordinatorConfig, out: &mut Out) {
        let was_empty = self.state == GroupState::Empty;
        if self.state == GroupState::CompletingRebalance {
            for (id, m) in self.members.iter_mut() {
                if std::mem::take(&mut m.awaiting_sync) {
                    out.sync(id, SyncResult::error(error_code::REBALANCE_IN_PROGRESS));
                }
            }
        }
        self.state = GroupState::PreparingRebalance;
        // A generation whose log entry is still on its way is abandoned: `recorded` will
        // find the group moved on.
        self.recording = false;
        self.rebalance_seq += 1;
        let delay = if was_empty {
            self.initial_delay = config.initial_rebalance_delay_ms > 0;
            self.new_member_added = false;
            let delay =
                Duration::from_millis(config.initial_rebalance_delay_ms).min(self.rebalance_timeout());
            self.initial_delay_remaining = self.rebalance_timeout().saturating_sub(delay);
            delay
        } else {
            self.rebalance_timeout()
        };
        out.timer(self.rebalance_seq, delay);
    }

    /// Completes the join phase when every member rejoined, or on `timed_out` with those that
    /// did (the rest are removed). The leader gets every member's metadata.
    pub(super) fn try_complete_join(&mut self, timed_out: bool, now: Instant, out: &mut Out) {
        if self.state != GroupState::PreparingRebalance || (self.initial_delay && !timed_out) {
            return;
        }
        let all_joined = self.members.values().all(|m| m.awaiting_join);
        if !all_joined && !timed_out {
            return;
        }
        // Nobody parks a SyncGroup while the group prepares a rebalance (it is answered
        // REBALANCE_IN_PROGRESS), so the members dropped here have nothing parked.
        debug_assert!(self.members.values().all(|m| !m.awaiting_sync));
        self.members.retain(|_, m| m.awaiting_join);
        self.generation_id += 1;
        if self.members.is_empty() {
            self.empty_unrecorded = true;
            self.state = GroupState::Empty;
            self.protocol_name = None;
            self.protocol_type = None;
            self.leader = None;
            return;
        }
        self.state = GroupState::CompletingRebalance;
        self.protocol_type = self.members.values().next().map(|m| m.protocol_type.clone());
        self.protocol_name = self.select_protocol();
        if !self.leader.as_ref().is_some_and(|l| self.members.contains_key(l)) {
            self.leader = self.members.keys().next().cloned();
        }
        self.answer_joins(now, out);
    }

    /// Every member's JoinGroup of the new generation is answered (and its session timer
    /// restarted); only the leader's carries the members and their metadata.
    fn answer_joins(&mut self, now: Instant, out: &mut Out) {
        let leader = self.leader.clone().unwrap_or_default();
        let all = self.member_metadata();
        for (id, m) in self.members.iter_mut() {
            m.last_heartbeat = now;
            if !std::mem::take(&mut m.awaiting_join) {
                continue;
            }
            let result = JoinResult {
                error_code: error_code::NONE,
                generation_id: self.generation_id,
                protocol_type: self.protocol_type.clone(),
                protocol_name: self.protocol_name.clone(),
                leader: leader.clone(),
                member_id: id.clone(),
                members: if *id == leader { all.clone() } else { Vec::new() },
            };
            out.join(id, result);
        }
    }

    /// What the leader's JoinGroup answer lists: each member with its metadata of the chosen
    /// protocol.
    pub(super) fn member_metadata(&self) -> Vec<(String, Option<String>, Bytes)> {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let members = self.members.iter();
        members.map(|(id, m)| (id.clone(), m.group_instance_id.clone(), m.metadata(&protocol))).collect()
    }

    /// A member leaves (LeaveGroup, session expiry): its parked requests are answered
    /// UNKNOWN_MEMBER_ID, and the rest rebalance.
    pub(super) fn remove_member(
        &mut self,
        member_id: &str,
        config: &CoordinatorConfig,
        now: Instant,
        out: &mut Out,
    ) {
        if let Some(m) = self.members.remove(member_id) {
            if m.awaiting_join {
                out.join(member_id, JoinResult::error(error_code::UNKNOWN_MEMBER_ID, member_id));
            }
            if m.awaiting_sync {
                out.sync(member_id, SyncResult::error(error_code::UNKNOWN_MEMBER_ID));
            }
        }
        if self.leader.as_deref() == Some(member_id) {
            self.leader = self.members.keys().next().cloned();
        }
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(config, out);
                // Kafka's `DelayedJoin.tryComplete`: with the last member gone every remaining
                // member has joined, so the group is Empty now, not after the rebalance timeout.
                self.try_complete_join(false, now, out);
            }
            GroupState::PreparingRebalance => self.try_complete_join(false, now, out),
            GroupState::Empty | GroupState::Dead => {}
        }
    }
}

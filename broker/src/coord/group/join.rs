//! JoinGroup as a pure transition: which member id a join counts under (KIP-394 ids handed
//! out with MEMBER_ID_REQUIRED, KIP-345 static members taking over their instance id), the
//! member record it leaves, and the rebalance it starts or completes.
//!
//! The caller's request is not held here: a join the group takes returns the member id, and
//! the shell parks the request's sender under it; the rebalance (`rebalance`) answers it later
//! with a `Reply::Join`, possibly within this very transition.

use std::time::Instant;

use kafka_compat::error_code;

use super::effects::{Effects, Out};
use super::messages::{JoinRequest, JoinResult, SyncResult};
use super::state::{Group, GroupState, Groups, Member};

/// A join the group took: the member id it counts under (the shell parks the request under
/// it, and the replies in `effects` may already answer it) and what else to deliver or arm.
#[derive(Debug)]
pub(super) struct Joined {
    pub member_id: String,
    pub effects: Effects,
}

/// A join answered at once: the error code and the member id to answer with. Nothing else
/// happened but what the answer implies (a KIP-394 id handed out, the group entry created).
pub(super) type Refused = (i16, String);

impl Groups {
    /// JoinGroup: refused at once, or taken, the member then waiting for the rebalance.
    pub(super) fn join(&mut self, req: &JoinRequest, now: Instant) -> Result<Joined, Refused> {
        let config = self.config;
        let timeout_ok =
            (config.min_session_timeout_ms..=config.max_session_timeout_ms).contains(&req.session_timeout_ms);
        if !timeout_ok {
            return Err((error_code::INVALID_SESSION_TIMEOUT, req.member_id.to_string()));
        }
        let group = self.groups.entry(req.group_id.clone()).or_insert_with(Group::new);
        if group.state == GroupState::Dead {
            return Err((error_code::COORDINATOR_NOT_AVAILABLE, req.member_id.to_string()));
        }
        if !group.supports(req) {
            return Err((error_code::INCONSISTENT_GROUP_PROTOCOL, req.member_id.to_string()));
        }
        let mut effects = Effects::default();
        let mut out = Out::new(&req.group_id, &mut effects);
        let member_id = group.join_member_id(req, &mut out)?;
        if !group.members.contains_key(&member_id) && group.members.len() >= config.max_size {
            return Err((error_code::GROUP_MAX_SIZE_REACHED, member_id.to_string()));
        }
        if let Some(current) = group.current_generation_answer(&member_id, req) {
            out.join(&member_id, current);
            return Ok(Joined { member_id, effects });
        }
        group.put_joining_member(&member_id, req, now, &mut out);
        if group.state != GroupState::PreparingRebalance {
            group.prepare_rebalance(&config, &mut out);
        }
        group.try_complete_join(false, now, &mut out);
        Ok(Joined { member_id, effects })
    }
}

impl Group {
    /// The member id a join counts under, or its refusal. Only the KIP-345 takeover emits
    /// anything (the old id's parked requests are fenced), and no refusal follows it.
    fn join_member_id(&mut self, req: &JoinRequest, out: &mut Out) -> Result<String, Refused> {
        let owner = req.group_instance_id.as_deref().and_then(|i| self.static_owner(i));
        if let (Some(old), true) = (&owner, req.member_id.is_empty()) {
            // KIP-345: a static member restarted; its new member id takes over the instance
            // id (and the assignment), and the old one is fenced.
            let id = new_member_id(req);
            self.replace_static_member(old, &id, out);
            return Ok(id);
        }
        if owner.as_ref().is_some_and(|o| *o != req.member_id) {
            return Err((error_code::FENCED_INSTANCE_ID, req.member_id.to_string()));
        }
        if req.member_id.is_empty() {
            let id = new_member_id(req);
            // KIP-394 asks only dynamic members to learn their id first.
            if req.require_known_member_id && req.group_instance_id.is_none() {
                // KIP-394: the member retries with this id; only then does it count.
                if self.pending_member_ids.len() >= crate::limits::GROUP_PENDING_MEMBERS_MAX {
                    return Err((error_code::GROUP_MAX_SIZE_REACHED, "".to_string()));
                }
                self.pending_member_ids.insert(id.clone());
                return Err((error_code::MEMBER_ID_REQUIRED, id.to_string()));
            }
            return Ok(id);
        }
        let known = self.members.contains_key(&req.member_id);
        if !known && !self.pending_member_ids.remove(&req.member_id) {
            return Err((error_code::UNKNOWN_MEMBER_ID, req.member_id.to_string()));
        }
        Ok(req.member_id.clone())
    }

    /// Kafka's `GroupCoordinator.doCurrentMemberJoinGroup` (classic protocol): a known member
    /// that rejoins with the protocols it has (same names, metadata and order), while the
    /// group is CompletingRebalance, or Stable and the member is not the leader, gets the
    /// current generation at once and no rebalance starts. Such a rejoin is a client retrying
    /// after a lost JoinGroup response (kafka-python 3.0 does it on every poll timeout); a
    /// rebalance for it would never let the group settle. In CompletingRebalance the leader
    /// gets the members again so it can still send its assignments; a Stable leader's rejoin
    /// is its way to ask for a rebalance (topic metadata changed), so it rebalances, as does
    /// any change of protocols.
    fn current_generation_answer(&self, member_id: &str, req: &JoinRequest) -> Option<JoinResult> {
        // A KIP-345 takeover (empty member id) is not this path: the log's generation names
        // the old id, so the new one needs a generation of its own.
        let member = self.members.get(member_id).filter(|_| req.member_id == member_id)?;
        if member.protocols != req.protocols {
            return None;
        }
        let is_leader = self.leader.as_deref() == Some(member_id);
        let members = match self.state {
            GroupState::CompletingRebalance if is_leader => self.member_metadata(),
            GroupState::CompletingRebalance => Vec::new(),
            GroupState::Stable if !is_leader => Vec::new(),
            _ => return None,
        };
        Some(JoinResult {
            error_code: error_code::NONE,
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            members,
        })
    }

    /// The joining member's record, from its request; a known member keeps its assignment.
    /// A rejoin supersedes what the member had parked: the shell drops its parked JoinGroup
    /// when it parks this one, and a parked SyncGroup is answered NOT_COORDINATOR here, which
    /// is what its dropped sender always answered.
    fn put_joining_member(&mut self, member_id: &str, req: &JoinRequest, now: Instant, out: &mut Out) {
        let old = self.members.remove(member_id);
        if old.as_ref().is_some_and(|m| m.awaiting_sync) {
            out.sync(member_id, SyncResult::error(error_code::NOT_COORDINATOR));
        }
        let is_new = old.is_none();
        let member = Member {
            group_instance_id: req.group_instance_id.clone(),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            session_timeout_ms: req.session_timeout_ms,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            protocol_type: req.protocol_type.clone(),
            protocols: req.protocols.clone(),
            assignment: old.map(|m| m.assignment).unwrap_or_default(),
            awaiting_join: true,
            awaiting_sync: false,
            last_heartbeat: now,
        };
        self.members.insert(member_id.to_string(), member);
        // Kafka's `addMemberThenRebalanceOrCompleteJoin`: a new member of a new group extends
        // the initial delay.
        if is_new && self.state == GroupState::PreparingRebalance && self.generation_id == 0 {
            self.new_member_added = true;
        }
    }

    /// KIP-345: `new_id` takes over the static member `old_id` (its assignment and leadership);
    /// requests the old id still has parked are answered FENCED_INSTANCE_ID.
    fn replace_static_member(&mut self, old_id: &str, new_id: &str, out: &mut Out) {
        let Some(mut old) = self.members.remove(old_id) else { return };
        if std::mem::take(&mut old.awaiting_join) {
            out.join(old_id, JoinResult::error(error_code::FENCED_INSTANCE_ID, old_id));
        }
        if std::mem::take(&mut old.awaiting_sync) {
            out.sync(old_id, SyncResult::error(error_code::FENCED_INSTANCE_ID));
        }
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.to_string());
        }
        // The join that follows replaces this entry and keeps its assignment.
        self.members.insert(new_id.to_string(), old);
    }
}

/// A fresh member id: the client id and a random uuid, unique without asking anyone.
fn new_member_id(req: &JoinRequest) -> String {
    format!("{}-{}", req.client_id, uuid::Uuid::new_v4())
}

//! Classic members inside a consumer group (around-spec §4.4): during an online migration the
//! members that still speak the classic protocol send JoinGroup, SyncGroup, Heartbeat and
//! LeaveGroup to a consumer group, and the consumer group serves them with its own machinery.
//!
//! - A JoinGroup is a heartbeat in disguise: its embedded subscription becomes the member's
//!   subscription, its owned partitions drive the reconciliation, and the answer's generation
//!   is the member epoch. The classic client is never the leader and runs no assignor.
//! - SyncGroup and Heartbeat write nothing: SyncGroup hands the member its current
//!   partitions in the embedded assignment format; a Heartbeat answers REBALANCE_IN_PROGRESS
//!   when the member has to rejoin to move on (a newer group epoch, partitions to revoke, or
//!   partitions that are free for it now). The leader arms the timers these ask for.
//! - LeaveGroup removes the members named, with one group epoch bump.

use std::collections::BTreeMap;

use kafka_compat::error_code;

use super::embedded::{parse_subscription, subscription_version, write_assignment};
use super::lookup::{fenced_instance, Found};
use super::migration::CONSUMER_PROTOCOL_TYPE;
use super::model::{
    Assignment, ClassicMember, ClassicProtocol, ConsumerGroup, ConsumerGroups, Member, MemberState,
};
use super::request::{GroupSettings, Heartbeat, Refusal, RevocationTimer, TopicPartitions};
use crate::Topic;

/// A classic JoinGroup that reached a consumer group with members.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct ClassicJoin {
    pub group_id: String,
    /// Never empty: the leader generated one for a request that came without (before the op,
    /// apply must not draw randomness).
    pub member_id: String,
    /// The request came without a member id.
    pub unknown_member: bool,
    /// KIP-394: a dynamic member's v4+ first join, answered MEMBER_ID_REQUIRED.
    pub requires_known_member_id: bool,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<ClassicProtocol>,
}

/// A classic join's JoinGroup answer, and what the leader does with the member's timers.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct ClassicJoinAnswer {
    pub member_id: String,
    /// The member epoch (may lag the group epoch while the member still has to revoke).
    pub generation_id: i32,
    pub protocol_name: String,
    pub revocation_timer: RevocationTimer,
    /// The join replaced a static member that was the group's last consumer-protocol member:
    /// apply decides whether that downgrades the group.
    pub replaced_last_consumer_member: bool,
}

/// A SyncGroup's answer for a classic member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicSync {
    pub member_id: String,
    pub protocol_name: String,
    /// The member's current partitions as a `ConsumerProtocolAssignment`.
    pub assignment: Vec<u8>,
    pub session_timeout_ms: i32,
}

/// A Heartbeat's answer for a classic member: 0, or REBALANCE_IN_PROGRESS when it must rejoin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicBeat {
    pub member_id: String,
    pub error_code: i16,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
}

/// One member of a LeaveGroup and its code.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct ClassicLeft {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub error_code: i16,
}

fn refusal(code: i16, message: String) -> Refusal {
    Refusal::new(code, message)
}

impl ConsumerGroups {
    /// JoinGroup (Kafka's `classicGroupJoinToConsumerGroup`). Checks first, then the same
    /// update, epoch bump, target computation and reconciliation as a heartbeat.
    pub fn classic_join(
        &mut self,
        topics: &BTreeMap<String, Topic>,
        join: &ClassicJoin,
        settings: &GroupSettings,
        now_ms: i64,
    ) -> Result<ClassicJoinAnswer, Refusal> {
        let group = self.groups.get(&join.group_id).filter(|g| !g.members.is_empty()).ok_or_else(|| {
            // It emptied or converted since the leader routed the join here: the client looks
            // the coordinator up again and rejoins whatever the group is now.
            Refusal::new(
                error_code::COORDINATOR_NOT_AVAILABLE,
                format!("Group {} changed type.", join.group_id),
            )
        })?;
        check_join(group, join, settings)?;
        let first = join.protocols.first().map(|p| p.metadata.as_slice()).unwrap_or_default();
        let subscription = parse_subscription(first, topics).map_err(|e| {
            let message =
                format!("Member {}'s embedded consumer protocol is malformed: {}.", join.member_id, e.0);
            refusal(error_code::INCONSISTENT_GROUP_PROTOCOL, message)
        })?;
        let mut found = find_joining(group, join);
        let replaced_last_consumer_member =
            found.replaced.as_ref().is_some_and(|old| last_consumer_member(group, old));
        found.member.classic = Some(ClassicMember {
            session_timeout_ms: join.session_timeout_ms,
            protocols: join.protocols.clone(),
        });
        let hb = Heartbeat {
            version: 1,
            group_id: join.group_id.clone(),
            member_id: join.member_id.clone(),
            member_epoch: 0,
            instance_id: join.instance_id.clone(),
            rack_id: subscription.rack_id.clone(),
            rebalance_timeout_ms: join.rebalance_timeout_ms,
            subscribed_topic_names: Some(subscription.topics.clone()),
            subscribed_topic_regex: None,
            server_assignor: None,
            topic_partitions: Some(owned(&subscription.owned)),
            client_id: join.client_id.clone(),
            client_host: join.client_host.clone(),
        };
        let answer = self.apply(topics, &hb, settings, now_ms, found);
        Ok(ClassicJoinAnswer {
            member_id: join.member_id.clone(),
            generation_id: answer.member_epoch,
            protocol_name: join.protocols.first().map(|p| p.name.clone()).unwrap_or_default(),
            revocation_timer: answer.revocation_timer,
            replaced_last_consumer_member,
        })
    }

    /// SyncGroup (Kafka's `classicGroupSyncToConsumerGroup`): read-only.
    pub fn classic_sync(
        &self,
        topics: &BTreeMap<String, Topic>,
        group_id: &str,
        member: (&str, Option<&str>),
        generation_id: i32,
        protocol: (Option<&str>, Option<&str>),
    ) -> Result<ClassicSync, Refusal> {
        let (group, member_id, m, classic) = self.classic_member(group_id, member)?;
        check_generation(member_id, m, generation_id)?;
        let (protocol_type, protocol_name) = protocol;
        if protocol_type.is_some_and(|t| t != CONSUMER_PROTOCOL_TYPE)
            || protocol_name.is_some_and(|n| n != classic.protocol_name())
        {
            let message = format!("The protocol of member {member_id} does not match.");
            return Err(refusal(error_code::INCONSISTENT_GROUP_PROTOCOL, message));
        }
        // A member still revoking has rejoined already: it gets what it may keep now.
        if group.group_epoch > m.member_epoch && m.state != MemberState::UnrevokedPartitions {
            let message = format!(
                "A new rebalance is triggered in group {group_id} and member {member_id} should rejoin to catch up."
            );
            return Err(refusal(error_code::REBALANCE_IN_PROGRESS, message));
        }
        let version = classic.protocols.first().map_or(0, |p| subscription_version(&p.metadata));
        Ok(ClassicSync {
            member_id: member_id.to_string(),
            protocol_name: classic.protocol_name().to_string(),
            assignment: write_assignment(&m.assigned_partitions(), version, topics),
            session_timeout_ms: classic.session_timeout_ms,
        })
    }

    /// Heartbeat (Kafka's `classicGroupHeartbeatToConsumerGroup`): read-only.
    pub fn classic_heartbeat(
        &self,
        group_id: &str,
        member: (&str, Option<&str>),
        generation_id: i32,
    ) -> Result<ClassicBeat, Refusal> {
        let (group, member_id, m, classic) = self.classic_member(group_id, member)?;
        check_generation(member_id, m, generation_id)?;
        let rejoin = m.member_epoch < group.group_epoch
            || m.state == MemberState::UnrevokedPartitions
            || (m.state == MemberState::UnreleasedPartitions && !waiting_on_unreleased(group, member_id, m));
        Ok(ClassicBeat {
            member_id: member_id.to_string(),
            error_code: if rejoin { error_code::REBALANCE_IN_PROGRESS } else { error_code::NONE },
            session_timeout_ms: classic.session_timeout_ms,
            rebalance_timeout_ms: m.rebalance_timeout_ms,
        })
    }

    /// LeaveGroup (Kafka's `classicGroupLeaveToConsumerGroup`): each named classic member
    /// leaves; the group epoch goes up once if any did.
    pub fn classic_leave(
        &mut self,
        topics: &BTreeMap<String, Topic>,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Vec<ClassicLeft> {
        let mut results = Vec::new();
        let mut leaving = Vec::new();
        for (member_id, instance_id) in members {
            let left = self.classic_leaver(group_id, member_id, instance_id.as_deref());
            let code = left.as_ref().map_or_else(|r| r.code, |_| error_code::NONE);
            if let Ok(id) = left {
                leaving.push(id);
            }
            results.push(ClassicLeft {
                member_id: member_id.clone(),
                instance_id: instance_id.clone(),
                error_code: code,
            });
        }
        if let Some(group) = self.groups.get_mut(group_id).filter(|_| !leaving.is_empty()) {
            super::leave::remove_members(group, topics, &leaving);
        }
        results
    }

    /// The member id a LeaveGroup identity names, if it may leave. An admin may remove a
    /// static member by instance id alone.
    fn classic_leaver(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<String, Refusal> {
        let group = self.live_group(group_id)?;
        let by_instance_alone = member_id.is_empty() && instance_id.is_some();
        let (id, m) = named(
            group,
            group_id,
            (member_id, instance_id),
            by_instance_alone,
            super::lookup::unknown_instance,
        )?;
        not_classic(id, m)?;
        Ok(id.clone())
    }

    fn live_group(&self, group_id: &str) -> Result<&ConsumerGroup, Refusal> {
        self.groups
            .get(group_id)
            .filter(|g| !g.members.is_empty())
            .ok_or_else(|| refusal(error_code::UNKNOWN_MEMBER_ID, format!("Group {group_id} not found.")))
    }

    /// Kafka's `validateConsumerGroupMember` and `throwIfMemberDoesNotUseClassicProtocol`.
    fn classic_member<'a>(
        &'a self,
        group_id: &str,
        member: (&str, Option<&str>),
    ) -> Result<(&'a ConsumerGroup, &'a String, &'a Member, &'a ClassicMember), Refusal> {
        let group = self.live_group(group_id)?;
        let unknown_instance = |instance: &str| {
            let message = format!("Member with instance id {instance} is not a member of group {group_id}.");
            refusal(error_code::UNKNOWN_MEMBER_ID, message)
        };
        let (id, m) = named(group, group_id, member, false, unknown_instance)?;
        let classic = not_classic(id, m)?;
        Ok((group, id, m, classic))
    }
}

/// The member a classic request names: by instance id, whose holder must be `member_id`
/// (unless `any_holder`), or else by member id.
fn named<'a>(
    group: &'a ConsumerGroup,
    group_id: &str,
    (member_id, instance_id): (&str, Option<&str>),
    any_holder: bool,
    unknown_instance: impl FnOnce(&str) -> Refusal,
) -> Result<(&'a String, &'a Member), Refusal> {
    let Some(instance) = instance_id else {
        return group
            .members
            .get_key_value(member_id)
            .ok_or_else(|| super::lookup::unknown_member(group_id, member_id));
    };
    let (holder, m) = group.member_by_instance(instance).ok_or_else(|| unknown_instance(instance))?;
    if !any_holder && holder != member_id {
        return Err(fenced_instance(member_id, instance, holder));
    }
    Ok((holder, m))
}

fn not_classic<'a>(member_id: &str, member: &'a Member) -> Result<&'a ClassicMember, Refusal> {
    member.classic.as_ref().ok_or_else(|| {
        let message = format!("Member {member_id} does not use the classic protocol.");
        refusal(error_code::UNKNOWN_MEMBER_ID, message)
    })
}

fn check_generation(member_id: &str, member: &Member, generation_id: i32) -> Result<(), Refusal> {
    if generation_id == member.member_epoch {
        return Ok(());
    }
    let message = format!(
        "The request generation id {generation_id} is not equal to the member epoch {} of member {member_id}.",
        member.member_epoch
    );
    Err(refusal(error_code::ILLEGAL_GENERATION, message))
}

/// The group-size limit, the protocol check and KIP-394, in Kafka's order.
fn check_join(group: &ConsumerGroup, join: &ClassicJoin, settings: &GroupSettings) -> Result<(), Refusal> {
    let full = i64::try_from(group.members.len()).unwrap_or(i64::MAX) >= i64::from(settings.max_size);
    if full && !group.members.contains_key(&join.member_id) {
        let message =
            format!("The consumer group has reached its maximum capacity of {} members.", settings.max_size);
        return Err(refusal(error_code::GROUP_MAX_SIZE_REACHED, message));
    }
    if !supports(group, join) {
        let message = format!("Member {}'s protocols are not supported.", join.member_id);
        return Err(refusal(error_code::INCONSISTENT_GROUP_PROTOCOL, message));
    }
    if join.requires_known_member_id {
        return Err(Refusal { code: error_code::MEMBER_ID_REQUIRED, message: None });
    }
    if protocols_bytes(&join.protocols) > crate::limits::CLASSIC_MEMBER_PROTOCOLS_BYTES_MAX {
        let message = format!("Member {}'s protocols exceed the bytes a member may keep.", join.member_id);
        return Err(refusal(error_code::INVALID_REQUEST, message));
    }
    Ok(())
}

/// What a member's protocols take in the state (names and metadata).
pub(super) fn protocols_bytes(protocols: &[ClassicProtocol]) -> usize {
    protocols.iter().map(|p| p.name.len().saturating_add(p.metadata.len())).fold(0, usize::saturating_add)
}

/// Kafka's `supportsClassicProtocols`: type "consumer", and one offered protocol that every
/// classic member of the group supports (any, when it has none).
fn supports(group: &ConsumerGroup, join: &ClassicJoin) -> bool {
    if join.protocol_type != CONSUMER_PROTOCOL_TYPE || join.protocols.is_empty() {
        return false;
    }
    let classics: Vec<&ClassicMember> = group.members.values().filter_map(|m| m.classic.as_ref()).collect();
    join.protocols
        .iter()
        .any(|offered| classics.iter().all(|c| c.protocols.iter().any(|p| p.name == offered.name)))
}

/// The member a classic join updates: a static member's join always takes the instance over
/// under its member id, epochs reset (Kafka copies the holder even when the id is the same);
/// a dynamic one is found or created.
fn find_joining(group: &ConsumerGroup, join: &ClassicJoin) -> Found {
    if let Some((holder, member)) = join.instance_id.as_deref().and_then(|i| group.member_by_instance(i)) {
        let mut copy = member.clone();
        copy.member_epoch = 0;
        copy.previous_member_epoch = 0;
        let replaced = (*holder != join.member_id).then(|| holder.clone());
        return Found { member: copy, replaced };
    }
    let member = group.members.get(&join.member_id).cloned().unwrap_or_default();
    Found { member, replaced: None }
}

/// Whether `member_id` is the group's only consumer-protocol member.
fn last_consumer_member(group: &ConsumerGroup, member_id: &str) -> bool {
    group.members.get(member_id).is_some_and(|m| m.classic.is_none())
        && group.members.iter().filter(|(id, _)| id.as_str() != member_id).all(|(_, m)| m.classic.is_some())
}

fn owned(owned: &Assignment) -> Vec<TopicPartitions> {
    owned
        .iter()
        .map(|(t, ps)| TopicPartitions { topic_id: *t, partitions: ps.iter().copied().collect() })
        .collect()
}

/// Kafka's `waitingOnUnreleasedPartition`: a target partition the member lacks is still held
/// by another member.
fn waiting_on_unreleased(group: &ConsumerGroup, member_id: &str, member: &Member) -> bool {
    let Some(target) = group.targets.get(member_id) else { return false };
    let held_by_other = |topic: &super::model::TopicId, partition: i32| {
        group
            .members
            .iter()
            .filter(|(id, _)| id.as_str() != member_id)
            .any(|(_, o)| o.partition_epoch(topic, partition).is_some())
    };
    target.iter().any(|(topic, ps)| {
        ps.iter().any(|p| {
            let assigned = member.assigned.get(topic).is_some_and(|a| a.contains_key(p));
            !assigned && held_by_other(topic, *p)
        })
    })
}

#[cfg(test)]
#[path = "classic_tests.rs"]
mod tests;

//! Online migration between classic and consumer groups (around-spec §4), the conversions:
//! a classic group with members becomes a consumer group when a consumer-protocol member
//! joins (upgrade), and a consumer group becomes a classic group again when its last
//! consumer-protocol member leaves and classic members remain (downgrade). Serving classic
//! members inside a consumer group in between is `classic`.
//!
//! A classic group's live membership is the leader's memory (the broker's `coord::group`),
//! so the leader hands the upgrade a snapshot of it, carried in the heartbeat's op; apply
//! converts from the snapshot, deterministically. A downgrade needs nothing the log does not
//! hold: it yields the classic generation to record, and the group id is marked so that the
//! leader's classic coordinator adopts the group rebalancing.

use std::collections::BTreeMap;

use kafka_compat::error_code;
use serde::{Deserialize, Serialize};

use super::embedded::{parse_assignment, parse_subscription};
use super::model::{
    ClassicMember, ClassicProtocol, ConsumerGroup, ConsumerGroups, EpochAssignment, Member, MemberState,
};
use super::request::{GroupSettings, Heartbeat, HeartbeatAnswer, Migration, Refusal};
use super::subscription::resolve;
use crate::command::{GenerationMember, GenerationOp};
use crate::Topic;

/// Kafka's protocol type for consumers: the only classic groups that convert.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// A live classic group as the leader's coordinator holds it, for an upgrade.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClassicGroupSnapshot {
    pub generation_id: i32,
    pub protocol_type: String,
    /// The protocol of the current generation (the one each member's metadata is read in).
    pub protocol_name: String,
    pub members: Vec<ClassicSnapshotMember>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClassicSnapshotMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocols: Vec<ClassicProtocol>,
    /// Its last SyncGroup assignment (empty: none yet).
    pub assignment: Vec<u8>,
}

fn cannot_upgrade(group_id: &str, why: &str) -> Refusal {
    let message = format!("Cannot upgrade classic group {group_id} to consumer group because {why}.");
    Refusal::new(error_code::GROUP_ID_NOT_FOUND, message)
}

/// The consumer group a classic group becomes (Kafka's `validateOnlineUpgrade` and
/// `ConsumerGroup.fromClassicGroup`): group epoch and target epoch are the generation, and
/// every classic member is a STABLE classic member at that epoch whose target is its last
/// assignment. Refused with GROUP_ID_NOT_FOUND and Kafka's message, nothing changed.
pub fn upgrade(
    group_id: &str,
    snapshot: &ClassicGroupSnapshot,
    topics: &BTreeMap<String, Topic>,
    max_size: i32,
    migration: Migration,
    now_ms: i64,
) -> Result<ConsumerGroup, Refusal> {
    if !migration.policy.upgrades() {
        return Err(cannot_upgrade(group_id, "online upgrade is disabled"));
    }
    if snapshot.protocol_type != CONSUMER_PROTOCOL_TYPE {
        return Err(cannot_upgrade(group_id, "the group does not use the consumer embedded protocol"));
    }
    if i64::try_from(snapshot.members.len()).unwrap_or(i64::MAX) > i64::from(max_size) {
        return Err(cannot_upgrade(group_id, "the group size exceeds the consumer group maximum size"));
    }
    let generation = snapshot.generation_id;
    let mut group =
        ConsumerGroup { group_epoch: generation, assignment_epoch: generation, ..ConsumerGroup::new() };
    for classic in &snapshot.members {
        let (member, target) =
            upgraded_member(group_id, classic, &snapshot.protocol_name, generation, topics)?;
        group.targets.insert(classic.member_id.clone(), target);
        group.members.insert(classic.member_id.clone(), Member { last_seen_ms: now_ms, ..member });
    }
    group.targets.retain(|_, t| !t.is_empty());
    group.subscription_fingerprint = resolve(&group.members, topics).fingerprint;
    Ok(group)
}

fn upgraded_member(
    group_id: &str,
    classic: &ClassicSnapshotMember,
    protocol_name: &str,
    generation: i32,
    topics: &BTreeMap<String, Topic>,
) -> Result<(Member, super::model::Assignment), Refusal> {
    let malformed = || cannot_upgrade(group_id, "the embedded consumer protocol is malformed");
    if super::classic::protocols_bytes(&classic.protocols) > crate::limits::CLASSIC_MEMBER_PROTOCOLS_BYTES_MAX
    {
        return Err(cannot_upgrade(group_id, "a member's protocols exceed the bytes a member may keep"));
    }
    let metadata = classic.protocols.iter().find(|p| p.name == protocol_name).ok_or_else(malformed)?;
    let subscription = parse_subscription(&metadata.metadata, topics).map_err(|_| malformed())?;
    let (assigned, user_data) = parse_assignment(&classic.assignment, topics).map_err(|_| malformed())?;
    if user_data {
        return Err(cannot_upgrade(
            group_id,
            "an unsupported custom assignor is in use. Please refer to the documentation or switch to a default \
             assignor before re-attempting the upgrade",
        ));
    }
    let with_epochs: EpochAssignment =
        assigned.iter().map(|(t, ps)| (*t, ps.iter().map(|p| (*p, generation)).collect())).collect();
    let member = Member {
        instance_id: classic.instance_id.clone(),
        rack_id: subscription.rack_id,
        client_id: classic.client_id.clone(),
        client_host: classic.client_host.clone(),
        rebalance_timeout_ms: classic.rebalance_timeout_ms,
        subscribed_topic_names: subscription.topics.into_iter().collect(),
        member_epoch: generation,
        previous_member_epoch: generation,
        state: MemberState::Stable,
        assigned: with_epochs,
        classic: Some(ClassicMember {
            session_timeout_ms: classic.session_timeout_ms,
            protocols: classic.protocols.clone(),
        }),
        ..Member::new()
    };
    Ok((member, assigned))
}

/// A consumer-protocol member's join (`hb`, epoch 0) onto the classic group `snapshot`: the
/// group converted and the join served in it, as one step that changes nothing when either
/// refuses. Apply stores the returned group; the leader's dry run only answers from it.
pub fn upgrade_and_join(
    snapshot: &ClassicGroupSnapshot,
    topics: &BTreeMap<String, Topic>,
    hb: &Heartbeat,
    settings: &GroupSettings,
    now_ms: i64,
) -> Result<(ConsumerGroups, HeartbeatAnswer), Refusal> {
    let group = upgrade(&hb.group_id, snapshot, topics, settings.max_size, settings.migration, now_ms)?;
    let mut converted = ConsumerGroups::default();
    converted.groups.insert(hb.group_id.clone(), group);
    let answer = converted.heartbeat(topics, hb, settings, now_ms)?;
    Ok((converted, answer))
}

/// Whether removing `leaving` from `group` downgrades it (Kafka's
/// `validateOnlineDowngradeWithFencedMember`): it is the last consumer-protocol member, some
/// classic member remains, the policy allows it and the rest fit in a classic group.
pub fn downgrades_without(group: &ConsumerGroup, leaving: &str, migration: Migration) -> bool {
    let Some(member) = group.members.get(leaving) else { return false };
    let others = || group.members.iter().filter(|(id, _)| id.as_str() != leaving);
    member.classic.is_none()
        && others().next().is_some()
        && others().all(|(_, m)| m.classic.is_some())
        && migration.policy.downgrades()
        && i64::try_from(group.members.len() - 1).unwrap_or(i64::MAX) <= i64::from(migration.classic_max_size)
}

/// The classic generation a downgraded group starts from (Kafka's
/// `ClassicGroup.fromConsumerGroup`): the group epoch as its generation, every member but
/// `leaving` with its classic timeouts, and the protocol the members vote for.
pub fn downgraded_generation(group_id: &str, group: &ConsumerGroup, leaving: &str) -> GenerationOp {
    let remaining: Vec<(&String, &Member)> =
        group.members.iter().filter(|(id, _)| id.as_str() != leaving).collect();
    let members = remaining
        .iter()
        .map(|(id, m)| GenerationMember {
            member_id: (*id).clone(),
            group_instance_id: m.instance_id.clone(),
            session_timeout_ms: m.classic.as_ref().map_or(0, |c| c.session_timeout_ms),
            rebalance_timeout_ms: m.rebalance_timeout_ms,
        })
        .collect();
    let protocols: Vec<&[ClassicProtocol]> =
        remaining.iter().filter_map(|(_, m)| m.classic.as_ref()).map(|c| c.protocols.as_slice()).collect();
    GenerationOp {
        group_id: group_id.to_string(),
        generation_id: group.group_epoch,
        protocol_type: CONSUMER_PROTOCOL_TYPE.to_string(),
        protocol_name: select_protocol(&protocols),
        members,
    }
}

/// Kafka's `ClassicGroup.selectProtocol`: among the protocols every member supports, the one
/// most members prefer (each votes for its first supported candidate); ties by name.
fn select_protocol(members: &[&[ClassicProtocol]]) -> String {
    let supported_by_all = |name: &str| members.iter().all(|ps| ps.iter().any(|p| p.name == name));
    let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
    for protocols in members {
        if let Some(p) = protocols.iter().find(|p| supported_by_all(&p.name)) {
            *votes.entry(p.name.as_str()).or_default() += 1;
        }
    }
    let best = votes.values().copied().max().unwrap_or(0);
    votes.into_iter().find(|(_, v)| *v == best).map(|(n, _)| n.to_string()).unwrap_or_default()
}

#[cfg(test)]
#[path = "migration_tests.rs"]
mod tests;

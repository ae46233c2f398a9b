//! Finding the member a heartbeat speaks for (spec §3.2, §3.3, §5.3): the group-size limit,
//! dynamic and static members, the replacement of a static member that left temporarily,
//! and the member-epoch check that fences zombies while accepting a retry whose response
//! was lost. Read-only: it answers what to update, or why not.

use kafka_compat::error_code;

use super::model::{Assignment, ConsumerGroup, Member};
use super::request::{GroupSettings, Heartbeat, Refusal, LEAVE_GROUP_STATIC_MEMBER_EPOCH};

/// The member a heartbeat updates, before its fields are applied.
pub(crate) struct Found {
    pub member: Member,
    /// A static member replaced by this one (it left with -2 and rejoined under a new id).
    pub replaced: Option<String>,
}

pub(crate) fn group_not_found(group_id: &str) -> Refusal {
    Refusal::new(error_code::GROUP_ID_NOT_FOUND, format!("Consumer group {group_id} not found."))
}

pub(crate) fn unknown_member(group_id: &str, member_id: &str) -> Refusal {
    let message = format!("Member {member_id} is not a member of group {group_id}.");
    Refusal::new(error_code::UNKNOWN_MEMBER_ID, message)
}

pub(crate) fn unknown_instance(instance_id: &str) -> Refusal {
    Refusal::new(error_code::UNKNOWN_MEMBER_ID, format!("Instance id {instance_id} is unknown."))
}

pub(crate) fn fenced_instance(member_id: &str, instance_id: &str, holder: &str) -> Refusal {
    let message =
        format!("Static member {member_id} with instance id {instance_id} was fenced by member {holder}.");
    Refusal::new(error_code::FENCED_INSTANCE_ID, message)
}

/// Checked before the member lookup, so a stranger heartbeating a full group gets 81, not 25.
/// Lowering the limit evicts nobody: only newcomers are refused.
pub(crate) fn check_size(
    group: &ConsumerGroup,
    hb: &Heartbeat,
    settings: &GroupSettings,
) -> Result<(), Refusal> {
    if hb.instance_id.as_deref().is_some_and(|i| group.member_by_instance(i).is_some()) {
        return Ok(());
    }
    let full = i64::try_from(group.members.len()).unwrap_or(i64::MAX) >= i64::from(settings.max_size);
    if full && (hb.member_id.is_empty() || !group.members.contains_key(&hb.member_id)) {
        let message =
            format!("The consumer group has reached its maximum capacity of {} members.", settings.max_size);
        return Err(Refusal::new(error_code::GROUP_MAX_SIZE_REACHED, message));
    }
    Ok(())
}

pub(crate) fn find(group_id: &str, group: &ConsumerGroup, hb: &Heartbeat) -> Result<Found, Refusal> {
    match &hb.instance_id {
        None => find_dynamic(group_id, group, hb),
        Some(instance_id) => find_static(group_id, group, hb, instance_id),
    }
}

fn find_dynamic(group_id: &str, group: &ConsumerGroup, hb: &Heartbeat) -> Result<Found, Refusal> {
    match group.members.get(&hb.member_id) {
        // KAFKA-19233 (4.3+): a known member may rejoin at epoch 0 without an epoch check.
        Some(member) if hb.member_epoch == 0 => Ok(Found { member: member.clone(), replaced: None }),
        Some(member) => {
            check_epoch(member, hb)?;
            Ok(Found { member: member.clone(), replaced: None })
        }
        None if hb.member_epoch == 0 => Ok(Found { member: Member::new(), replaced: None }),
        None => Err(unknown_member(group_id, &hb.member_id)),
    }
}

fn find_static(
    group_id: &str,
    group: &ConsumerGroup,
    hb: &Heartbeat,
    instance_id: &str,
) -> Result<Found, Refusal> {
    let holder = group.member_by_instance(instance_id);
    if hb.member_epoch != 0 {
        let Some((holder_id, member)) = holder else { return Err(unknown_instance(instance_id)) };
        if *holder_id != hb.member_id {
            return Err(fenced_instance(&hb.member_id, instance_id, holder_id));
        }
        check_epoch(member, hb)?;
        return Ok(Found { member: member.clone(), replaced: None });
    }
    let Some((holder_id, member)) = holder else { return find_dynamic(group_id, group, hb) };
    // Kafka 4.4: only a holder that left with -2 can be replaced, even by its own member id
    // (apache/kafka#23542, still open, would let the same id rejoin in place).
    if member.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        let message = format!(
            "Static member {} with instance id {instance_id} cannot join the group because the instance id is \
             owned by {holder_id} member.",
            hb.member_id
        );
        return Err(Refusal::new(error_code::UNRELEASED_INSTANCE_ID, message));
    }
    // A copy under the new id: subscription, assignor and partitions kept, epochs reset.
    let mut copy = member.clone();
    copy.member_epoch = 0;
    copy.previous_member_epoch = 0;
    let replaced = (*holder_id != hb.member_id).then(|| holder_id.clone());
    Ok(Found { member: copy, replaced })
}

/// Spec §5.3, for a heartbeat with epoch > 0 from a known member.
fn check_epoch(member: &Member, hb: &Heartbeat) -> Result<(), Refusal> {
    let (received, known) = (hb.member_epoch, member.member_epoch);
    let fenced = |relation: &str| {
        let message = format!(
            "The consumer group member has a {relation} member epoch ({received}) than the one known by the \
             group coordinator ({known}). The member must abandon all its partitions and rejoin."
        );
        Err(Refusal::new(error_code::FENCED_MEMBER_EPOCH, message))
    };
    if received > known {
        return fenced("greater");
    }
    // The response carrying the bump may have been lost: the previous epoch is accepted if
    // the member owns nothing it was not assigned.
    if received < known && (received != member.previous_member_epoch || !owns_subset(hb, member)) {
        return fenced("smaller");
    }
    Ok(())
}

fn owns_subset(hb: &Heartbeat, member: &Member) -> bool {
    let Some(owned) = hb.owned() else { return false };
    let assigned: Assignment = member.assigned_partitions();
    owned.iter().all(|(t, ps)| assigned.get(t).is_some_and(|a| ps.is_subset(a)))
}

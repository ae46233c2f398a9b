//! Finding the member a StreamsGroupHeartbeat speaks for: the group-size limit, dynamic and
//! static members, a static member replacing itself after a temporary leave, and the
//! member-epoch check that fences zombies while accepting a retry whose response was lost.
//! Read-only, with Kafka 4.4's codes and messages.

use kafka_compat::error_code::{
    FENCED_INSTANCE_ID, FENCED_MEMBER_EPOCH, GROUP_ID_NOT_FOUND, GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID,
    UNRELEASED_INSTANCE_ID,
};

use super::model::{Member, StreamsGroup};
use super::request::{Heartbeat, Refusal, StreamsSettings, LEAVE_GROUP_STATIC_MEMBER_EPOCH};
use super::tasks::Tasks;

/// The member a heartbeat updates, before its fields are applied.
pub(super) struct Found {
    pub member: Member,
    /// A static member replaced by this one (it left with -2 and rejoined under a new id).
    pub replaced: Option<String>,
}

pub(super) fn group_not_found(group_id: &str) -> Refusal {
    Refusal::new(GROUP_ID_NOT_FOUND, format!("Streams group {group_id} not found."))
}

pub(super) fn unknown_member(group_id: &str, member_id: &str) -> Refusal {
    Refusal::new(UNKNOWN_MEMBER_ID, format!("Member {member_id} is not a member of group {group_id}."))
}

pub(super) fn unknown_instance(instance_id: &str) -> Refusal {
    Refusal::new(UNKNOWN_MEMBER_ID, format!("Instance id {instance_id} is unknown."))
}

pub(super) fn fenced_instance(member_id: &str, instance_id: &str, holder: &str) -> Refusal {
    let message =
        format!("Static member {member_id} with instance id {instance_id} was fenced by member {holder}.");
    Refusal::new(FENCED_INSTANCE_ID, message)
}

/// GROUP_MAX_SIZE_REACHED for a newcomer to a full group; a known member or instance passes.
pub(super) fn check_size(
    group: &StreamsGroup,
    hb: &Heartbeat,
    settings: &StreamsSettings,
) -> Result<(), Refusal> {
    if hb.instance_id.as_deref().is_some_and(|i| group.member_by_instance(i).is_some()) {
        return Ok(());
    }
    let full = i64::try_from(group.members.len()).unwrap_or(i64::MAX) >= i64::from(settings.max_size);
    if full && !group.members.contains_key(&hb.member_id) {
        let message =
            format!("The streams group has reached its maximum capacity of {} members.", settings.max_size);
        return Err(Refusal::new(GROUP_MAX_SIZE_REACHED, message));
    }
    Ok(())
}

pub(super) fn find(group_id: &str, group: &StreamsGroup, hb: &Heartbeat) -> Result<Found, Refusal> {
    match &hb.instance_id {
        None => find_dynamic(group_id, group, hb),
        Some(instance_id) => find_static(group_id, group, hb, instance_id),
    }
}

fn find_dynamic(group_id: &str, group: &StreamsGroup, hb: &Heartbeat) -> Result<Found, Refusal> {
    let member = match group.members.get(&hb.member_id) {
        Some(member) => member.clone(),
        None if hb.member_epoch == 0 => Member::new(),
        None => return Err(unknown_member(group_id, &hb.member_id)),
    };
    check_epoch(&member, hb)?;
    Ok(Found { member, replaced: None })
}

fn find_static(
    group_id: &str,
    group: &StreamsGroup,
    hb: &Heartbeat,
    instance_id: &str,
) -> Result<Found, Refusal> {
    let holder = group.member_by_instance(instance_id);
    if hb.member_epoch == 0 {
        let Some((holder_id, holder)) = holder else {
            let member = group.members.get(&hb.member_id).cloned().unwrap_or_else(Member::new);
            return Ok(Found { member, replaced: None });
        };
        if holder.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            let message = format!(
                "Static member {} with instance id {instance_id} cannot join the group because the instance id is owned by {holder_id} member.",
                hb.member_id
            );
            return Err(Refusal::new(UNRELEASED_INSTANCE_ID, message));
        }
        let mut member = holder.clone();
        member.member_epoch = 0;
        member.previous_member_epoch = 0;
        let replaced = (holder_id != &hb.member_id).then(|| holder_id.clone());
        return Ok(Found { member, replaced });
    }
    let Some((holder_id, holder)) = holder else { return Err(unknown_instance(instance_id)) };
    if holder_id != &hb.member_id {
        return Err(fenced_instance(&hb.member_id, instance_id, holder_id));
    }
    let _ = group_id;
    check_epoch(holder, hb)?;
    Ok(Found { member: holder.clone(), replaced: None })
}

/// A join (0) always passes; a greater epoch is a zombie from the future; a smaller one
/// passes only as a retry at the previous epoch that owns nothing it was not given.
fn check_epoch(member: &Member, hb: &Heartbeat) -> Result<(), Refusal> {
    let received = hb.member_epoch;
    if received == 0 {
        return Ok(());
    }
    if received > member.member_epoch {
        return Err(Refusal::new(FENCED_MEMBER_EPOCH, format!(
            "The streams group member has a greater member epoch ({received}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.",
            member.member_epoch
        )));
    }
    let retry = received == member.previous_member_epoch && owns_only_assigned(member, hb);
    if received < member.member_epoch && !retry {
        return Err(Refusal::new(FENCED_MEMBER_EPOCH, format!(
            "The streams group member has a smaller member epoch ({received}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.",
            member.member_epoch
        )));
    }
    Ok(())
}

/// Kafka's `areOwnedTasksContainedInAssignedTasks` for all three kinds; a request without
/// its task lists does not qualify.
fn owns_only_assigned(member: &Member, hb: &Heartbeat) -> bool {
    let Some(owned) = hb.owned() else { return false };
    let assigned = member.assigned.tuple();
    let within = |mine: &Tasks, given: &Tasks| {
        mine.iter().all(|(s, ps)| given.get(s).is_some_and(|g| ps.is_subset(g)))
    };
    within(&owned.active, &assigned.active)
        && within(&owned.standby, &assigned.standby)
        && within(&owned.warmup, &assigned.warmup)
}

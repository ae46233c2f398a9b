//! Finding the group and the member a heartbeat speaks for, with Kafka's refusals in Kafka's
//! order: the group (a join creates it), the group-size limit, the member (a join creates
//! it), then the member-epoch check that fences zombies while accepting a retry whose
//! response was lost. Read-only: it answers what to update, or why not.

use kafka_compat::error_code;

use super::model::{ShareGroup, ShareGroups, ShareMember};
use super::request::{Heartbeat, ShareSettings};
use crate::consumer_group::Refusal;

/// What a heartbeat (epoch >= 0) to an absent group is told.
fn share_group_not_found(group_id: &str) -> Refusal {
    Refusal::new(error_code::GROUP_ID_NOT_FOUND, format!("Share group {group_id} not found."))
}

/// What a leave or a describe of an absent group is told (Kafka's generic group lookup).
pub(crate) fn group_not_found(group_id: &str) -> Refusal {
    Refusal::new(error_code::GROUP_ID_NOT_FOUND, format!("Group {group_id} not found."))
}

pub(crate) fn unknown_member(group_id: &str, member_id: &str) -> Refusal {
    let message = format!("Member {member_id} is not a member of group {group_id}.");
    Refusal::new(error_code::UNKNOWN_MEMBER_ID, message)
}

impl ShareGroups {
    /// Everything that can refuse a join or heartbeat, without writing. Returns the member
    /// as it is now (a new one for a join of an unknown member id).
    pub(super) fn check(&self, hb: &Heartbeat, settings: &ShareSettings) -> Result<ShareMember, Refusal> {
        let fresh = ShareGroup::new();
        let group = match self.groups.get(&hb.group_id) {
            Some(group) => group,
            // A join creates the group; it is stored only if the heartbeat succeeds.
            None if hb.member_epoch == 0 => &fresh,
            None => return Err(share_group_not_found(&hb.group_id)),
        };
        check_size(group, hb, settings)?;
        match group.members.get(&hb.member_id) {
            Some(member) => check_epoch(member, hb.member_epoch).map(|()| member.clone()),
            None if hb.member_epoch == 0 => Ok(ShareMember::new()),
            None => Err(unknown_member(&hb.group_id, &hb.member_id)),
        }
    }
}

/// Checked before the member lookup, so a stranger heartbeating a full group gets 81, not 25.
/// Lowering the limit evicts nobody: only newcomers are refused.
fn check_size(group: &ShareGroup, hb: &Heartbeat, settings: &ShareSettings) -> Result<(), Refusal> {
    let full = i64::try_from(group.members.len()).unwrap_or(i64::MAX) >= i64::from(settings.max_size);
    if full && !group.members.contains_key(&hb.member_id) {
        let message =
            format!("The share group has reached its maximum capacity of {} members.", settings.max_size);
        return Err(Refusal::new(error_code::GROUP_MAX_SIZE_REACHED, message));
    }
    Ok(())
}

/// A known member may always rejoin with 0. Otherwise its epoch, or the one before (the
/// response that moved it may have been lost), is accepted.
fn check_epoch(member: &ShareMember, received: i32) -> Result<(), Refusal> {
    let (known, previous) = (member.member_epoch, member.previous_member_epoch);
    if received == 0 || received == known || (received < known && received == previous) {
        return Ok(());
    }
    let message = if received > known {
        format!(
            "The share group member has a greater member epoch ({received}) than the one known by the group \
             coordinator ({known}). The member must abandon all its partitions and rejoin."
        )
    } else {
        format!(
            "The share group member has a smaller member epoch ({received}) than the one known by the group \
             coordinator ({known}), and it does not match the previous member epoch ({previous}). The member \
             must abandon all its partitions and rejoin."
        )
    };
    Err(Refusal::new(error_code::FENCED_MEMBER_EPOCH, message))
}

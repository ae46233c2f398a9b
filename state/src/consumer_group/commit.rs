//! The OffsetCommit, TxnOffsetCommit and OffsetFetch checks for a consumer-protocol group
//! (around-spec §1.3-1.5; Kafka's `ConsumerGroup.validateOffsetCommit` with KIP-1251's
//! per-partition assignment epochs, 4.3+).
//!
//! One code for the whole request, as Kafka answers: its per-partition validator throws out
//! of the commit loop, failing every partition with the same error. Storing the offsets stays
//! with `groups::Groups`; this only says whether the member may commit or fetch.

use kafka_compat::error_code;

use super::model::{ConsumerGroups, TopicId};

/// Which API asks, and its version: the rules differ (around-spec §1.3, §1.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitApi {
    OffsetCommit { version: i16 },
    TxnOffsetCommit { version: i16 },
}

/// One commit request's member fields and partitions.
#[derive(Debug, Clone, Copy)]
pub struct CommitRequest<'a> {
    pub group_id: &'a str,
    pub member_id: &'a str,
    pub instance_id: Option<&'a str>,
    /// `GenerationIdOrMemberEpoch`.
    pub member_epoch: i32,
    pub api: CommitApi,
    /// Topic ids the caller mapped from the request's names (an unknown topic may be passed
    /// as any id no member holds: it fails an older epoch's check, as in Kafka).
    pub partitions: &'a [(TopicId, i32)],
}

impl ConsumerGroups {
    /// 0 if the commit may be stored, else Kafka's code for the whole request. A group id not
    /// held here answers GROUP_ID_NOT_FOUND: the caller routes classic and unknown groups
    /// (a simple group on a negative epoch; ILLEGAL_GENERATION before OffsetCommit v9 and
    /// TxnOffsetCommit v6).
    pub fn check_commit(&self, request: &CommitRequest<'_>) -> i16 {
        let Some(group) = self.groups.get(request.group_id) else { return error_code::GROUP_ID_NOT_FOUND };
        let epoch = request.member_epoch;
        if epoch < 0 && group.members.is_empty() {
            return error_code::NONE; // rule 1: the admin client, assign() consumers
        }
        let transactional = matches!(request.api, CommitApi::TxnOffsetCommit { .. });
        if transactional && epoch == -1 && request.member_id.is_empty() && request.instance_id.is_none() {
            return error_code::NONE; // rule 2: a producer that sent no group metadata
        }
        let Some(member) = group.members.get(request.member_id) else { return error_code::UNKNOWN_MEMBER_ID };
        if member.classic.is_some() {
            // A classic member (online migration) commits with its generation, which is its
            // member epoch, at any version: a mismatch is ILLEGAL_GENERATION, as for classic
            // groups (around-spec §4.4, "Offsets").
            return if epoch == member.member_epoch {
                error_code::NONE
            } else {
                error_code::ILLEGAL_GENERATION
            };
        }
        let stale = match request.api {
            CommitApi::OffsetCommit { version } if version < 9 => return error_code::UNSUPPORTED_VERSION,
            CommitApi::OffsetCommit { .. } => error_code::STALE_MEMBER_EPOCH,
            CommitApi::TxnOffsetCommit { version } if version < 6 => error_code::ILLEGAL_GENERATION,
            CommitApi::TxnOffsetCommit { .. } => error_code::STALE_MEMBER_EPOCH,
        };
        if epoch == member.member_epoch {
            return error_code::NONE;
        }
        if epoch > member.member_epoch {
            return stale;
        }
        // KIP-1251: an older epoch may commit a partition the member still holds (assigned or
        // pending revocation) since that epoch or before.
        let held_since = |(topic, partition): &(TopicId, i32)| member.partition_epoch(topic, *partition);
        if request.partitions.iter().all(|tp| held_since(tp).is_some_and(|assigned_at| assigned_at <= epoch))
        {
            error_code::NONE
        } else {
            stale
        }
    }

    /// OffsetFetch v9+ (around-spec §1.5): a null member id with a negative epoch, or a group
    /// not held here, fetches freely; otherwise the member must exist at exactly that epoch
    /// (KIP-1251 does not relax fetches).
    pub fn check_fetch(&self, group_id: &str, member_id: Option<&str>, member_epoch: i32) -> i16 {
        let Some(group) = self.groups.get(group_id) else { return error_code::NONE };
        let epoch_of = |id: &str| group.members.get(id).map(|m| m.member_epoch);
        fetch_check(member_id, member_epoch, epoch_of)
    }
}

/// OffsetFetch v9+'s member check of a consumer or Streams group: a null member id with a
/// negative epoch fetches freely; otherwise the member must exist at exactly that epoch.
pub(crate) fn fetch_check(
    member_id: Option<&str>,
    member_epoch: i32,
    epoch_of: impl Fn(&str) -> Option<i32>,
) -> i16 {
    if member_id.is_none() && member_epoch < 0 {
        return error_code::NONE;
    }
    match member_id.and_then(epoch_of) {
        None => error_code::UNKNOWN_MEMBER_ID,
        Some(epoch) if epoch != member_epoch => error_code::STALE_MEMBER_EPOCH,
        Some(_) => error_code::NONE,
    }
}

#[cfg(test)]
#[path = "commit_tests.rs"]
mod tests;

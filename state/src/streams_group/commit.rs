//! The OffsetCommit, TxnOffsetCommit and OffsetFetch checks for a Streams group (Kafka
//! 4.4.0's `StreamsGroup.validateOffsetCommit` / `validateOffsetFetch`): Streams commits
//! inside its transactions with the member id and epoch the heartbeat gave it; an older epoch
//! may commit a partition whose task the member has held since that epoch or before.

use kafka_compat::error_code;

use super::model::StreamsGroups;
use crate::consumer_group::{fetch_check, CommitApi, CommitRequest};

/// One committed partition, by topic name.
pub type NamedPartition<'a> = (&'a str, i32);

impl StreamsGroups {
    /// 0 if the commit may be stored, else Kafka's code for the whole request; GROUP_ID_NOT_FOUND
    /// for a group id not held here (the caller routes other groups).
    pub fn check_commit(&self, request: &CommitRequest<'_>, partitions: &[NamedPartition<'_>]) -> i16 {
        let Some(group) = self.groups.get(request.group_id) else { return error_code::GROUP_ID_NOT_FOUND };
        let epoch = request.member_epoch;
        if epoch < 0 && group.members.is_empty() {
            return error_code::NONE;
        }
        let transactional = matches!(request.api, CommitApi::TxnOffsetCommit { .. });
        if transactional && epoch == -1 && request.member_id.is_empty() && request.instance_id.is_none() {
            return error_code::NONE;
        }
        let Some(member) = group.members.get(request.member_id) else { return error_code::UNKNOWN_MEMBER_ID };
        let stale = match request.api {
            CommitApi::OffsetCommit { version } if version < 9 => return error_code::UNSUPPORTED_VERSION,
            CommitApi::TxnOffsetCommit { version } if version < 6 => error_code::ILLEGAL_GENERATION,
            _ => error_code::STALE_MEMBER_EPOCH,
        };
        if epoch == member.member_epoch {
            return error_code::NONE;
        }
        let Some(topology) = group.topology.as_ref().filter(|_| epoch < member.member_epoch) else {
            return stale;
        };
        let held_since = |(topic, partition): &NamedPartition<'_>| {
            let (id, _) = topology.subtopologies.iter().find(|(_, s)| {
                s.source_topics.iter().any(|t| t == topic)
                    || s.repartition_source_topics.iter().any(|t| t.name == *topic)
            })?;
            let epoch_in =
                |tasks: &super::model::EpochTasks| tasks.get(id).and_then(|ps| ps.get(partition)).copied();
            epoch_in(&member.assigned.active).or_else(|| epoch_in(&member.pending_revocation.active))
        };
        if partitions.iter().all(|tp| held_since(tp).is_some_and(|at| at <= epoch)) {
            error_code::NONE
        } else {
            stale
        }
    }

    /// OffsetFetch v9+: a null member id with a negative epoch, or a group not held here,
    /// fetches freely; otherwise the member must exist at exactly that epoch.
    pub fn check_fetch(&self, group_id: &str, member_id: Option<&str>, member_epoch: i32) -> i16 {
        let Some(group) = self.groups.get(group_id) else { return error_code::NONE };
        fetch_check(member_id, member_epoch, |id| group.members.get(id).map(|m| m.member_epoch))
    }
}

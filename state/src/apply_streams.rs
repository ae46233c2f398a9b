//! Applying the KIP-1071 Streams-group ops: the heartbeat, the leader's fencing, a target
//! assignment that came due on the leader's timer, and liveness; and the Streams side of the
//! group ops every type shares (DeleteGroups, a classic generation, the commit checks). The
//! group logic is `streams_group`'s; what lives here is where it meets the rest of the state:
//! one group id is one group of one type, so a Streams group never takes an id a consumer
//! group or a classic group with members holds (an emptied classic group's id it takes,
//! keeping the committed offsets: the offline migration from `classic` to `streams`), a
//! consumer group never takes a Streams group's id, and a classic generation takes only an
//! empty Streams group's. Neither a Streams nor a consumer group takes a KIP-932 share group's
//! id (`other_type`, `not_consumer`).

use kafka_compat::error_code;

use crate::apply_consumer::classic_group_has_members;
use crate::apply_share::is_share_group;
use crate::command::{
    FenceStreamsMemberOp, GenerationOp, GroupDeletion, OffsetCommitEntry, OpResult, StreamsAssignOp,
    StreamsGroupHeartbeatOp, StreamsLivenessOp,
};
use crate::consumer_group::{CommitApi, CommitRequest, Refusal};
use crate::groups::CommitResult;
use crate::streams_group::configure;
use crate::BrokerState;

pub(crate) fn heartbeat(state: &mut BrokerState, op: &StreamsGroupHeartbeatOp) -> OpResult {
    let group_id = &op.heartbeat.group_id;
    if let Some(refusal) = other_type(state, group_id) {
        return OpResult::StreamsHeartbeat(Box::new(Err(refusal)));
    }
    let answer = state.streams_groups.heartbeat(&state.topics, &op.heartbeat, &op.settings, op.now_ms);
    if let Ok(answer) = &answer {
        // Outside the state machine's heartbeat: the leader's dry run of a steady heartbeat
        // must still find the group unchanged.
        state.streams_groups.seen(group_id, &answer.member_id, op.now_ms);
        // An emptied classic group's id is the Streams group's now (offline migration).
        crate::apply_consumer::retire_emptied_classic(state, group_id);
    }
    OpResult::StreamsHeartbeat(Box::new(answer))
}

/// GROUP_ID_NOT_FOUND when a group of another type holds the id (Kafka's "Group X is not a
/// streams group."): a consumer group, a classic group with members, or a KIP-932 share group,
/// empty or not (`getOrCreateStreamsGroup` converts only an empty classic group).
pub fn other_type(state: &BrokerState, group_id: &str) -> Option<Refusal> {
    let taken = state.consumer_groups.groups.contains_key(group_id)
        || classic_group_has_members(state, group_id)
        || is_share_group(state, group_id);
    let streams = state.streams_groups.groups.contains_key(group_id);
    (taken && !streams).then(|| {
        Refusal::new(error_code::GROUP_ID_NOT_FOUND, format!("Group {group_id} is not a streams group."))
    })
}

/// GROUP_ID_NOT_FOUND "Group X is not a consumer group." for a ConsumerGroupHeartbeat when a
/// Streams or share group holds the id, empty or not: Kafka's `getOrMaybeCreateConsumerGroup`
/// takes over only an empty classic group.
pub fn not_consumer(state: &BrokerState, group_id: &str) -> Option<Refusal> {
    let taken = state.streams_groups.groups.contains_key(group_id) || is_share_group(state, group_id);
    taken.then(|| {
        Refusal::new(error_code::GROUP_ID_NOT_FOUND, format!("Group {group_id} is not a consumer group."))
    })
}

/// A classic generation completed for an id a Streams group holds; whether it may be
/// recorded. Kafka's JoinGroup converts an empty Streams group to a classic one
/// (`maybeDeleteEmptyStreamsGroup`: the Streams group goes, the committed offsets stay) and
/// refuses one with members (INCONSISTENT_GROUP_PROTOCOL), so a generation that raced a
/// Streams join into the log is not recorded; nor is an emptied one, which converts nothing.
pub(crate) fn yield_to_classic(state: &mut BrokerState, op: &GenerationOp) -> bool {
    match state.streams_groups.groups.get(&op.group_id) {
        None => true,
        Some(group) if !group.members.is_empty() || op.members.is_empty() => false,
        Some(_) => {
            state.streams_groups.groups.remove(&op.group_id);
            true
        }
    }
}

/// DeleteGroups of a Streams group, None when the id is not one: only an Empty group goes
/// (Kafka's `StreamsGroup.validateDeleteGroup`: NON_EMPTY_GROUP otherwise, a static member
/// away at epoch -2 included), with its committed offsets and any classic record it took over.
pub(crate) fn delete_group(state: &mut BrokerState, deletion: &GroupDeletion) -> Option<CommitResult> {
    let group = state.streams_groups.groups.get(&deletion.group_id)?;
    if !group.members.is_empty() {
        let message = format!("group '{}' has members", deletion.group_id);
        return Some((error_code::NON_EMPTY_GROUP, Some(message)));
    }
    state.streams_groups.groups.remove(&deletion.group_id);
    state.groups.groups.remove(&deletion.group_id);
    Some((error_code::NONE, None))
}

pub(crate) fn fence(state: &mut BrokerState, op: &FenceStreamsMemberOp) -> OpResult {
    OpResult::MemberFenced(state.streams_groups.fence(&op.group_id, &op.member_id, op.expected_epoch))
}

/// A target owed and no longer held back: computed at the leader's clock.
pub(crate) fn assign(state: &mut BrokerState, op: &StreamsAssignOp) -> OpResult {
    let topics = &state.topics;
    if let Some(group) = state.streams_groups.groups.get_mut(&op.group_id) {
        if let Some(topology) = group.topology.clone() {
            let configured = configure(&topology, topics);
            // A refusal (the assignor failed) leaves the group as it was, owing the target.
            let _ = group.assign_due(&configured, &op.settings, op.now_ms);
        }
    }
    OpResult::Done
}

pub(crate) fn record_liveness(state: &mut BrokerState, op: &StreamsLivenessOp) -> OpResult {
    for seen in &op.members {
        state.streams_groups.seen(&seen.group_id, &seen.member_id, seen.seen_ms);
    }
    OpResult::Done
}

/// An OffsetCommit or TxnOffsetCommit against a Streams group: None when the group is not
/// one, else 0 or the code for the whole request.
pub fn check_commit(
    state: &BrokerState,
    request: &CommitRequest<'_>,
    commits: &[OffsetCommitEntry],
) -> Option<i16> {
    if !state.streams_groups.groups.contains_key(request.group_id) {
        return None;
    }
    let partitions: Vec<(&str, i32)> = commits.iter().map(|c| (c.topic.as_str(), c.partition)).collect();
    Some(state.streams_groups.check_commit(request, &partitions))
}

/// The OffsetCommit version apply checks a Streams group's commit as (the handler refused
/// older ones for members).
pub const OFFSET_COMMIT_VERSION_CHECKED: i16 = 9;
/// The TxnOffsetCommit version onelog serves.
pub const TXN_OFFSET_COMMIT_VERSION_SERVED: i16 = 5;

/// The commit API a check runs as.
pub fn offset_commit_api() -> CommitApi {
    CommitApi::OffsetCommit { version: OFFSET_COMMIT_VERSION_CHECKED }
}

pub fn txn_offset_commit_api() -> CommitApi {
    CommitApi::TxnOffsetCommit { version: TXN_OFFSET_COMMIT_VERSION_SERVED }
}

#[cfg(test)]
#[path = "apply_streams_tests.rs"]
mod tests;

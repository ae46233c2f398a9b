//! Applying the KIP-848 consumer-group ops: the heartbeat, the leader's fencing and classic
//! members' joins and leaves. The group logic is `consumer_group`'s; what lives here is where
//! it meets the rest of the state: a group id that a classic group with members holds is a
//! consumer group's only through an upgrade, and a downgrade hands it back to the classic
//! groups' record (online migration, around-spec §4). A KIP-932 share group's id is never a
//! consumer or classic group's: its heartbeats, generations and commits are refused.

use kafka_compat::error_code;

use crate::apply_share::is_share_group;
use crate::command::{
    ClassicJoinOp, ClassicLeaveOp, ConsumerGroupHeartbeatOp, DeleteGroupsOp, FenceMemberOp, GenerationOp,
    GroupDeletion, LivenessOp, OffsetCommitEntry, OffsetCommitOp, OpResult, SeenMember,
};
use crate::consumer_group::{self as cg, CommitApi, CommitRequest, HeartbeatAnswer, Refusal, TopicId};
use crate::groups::CommitResult;
use crate::{internal_topic, BrokerState};

/// The OffsetCommit version apply checks a consumer group's commit as: the handler answered
/// the older ones (no member epoch: UNSUPPORTED_VERSION for a member) before proposing.
const OFFSET_COMMIT_VERSION_CHECKED: i16 = 9;

pub(crate) fn heartbeat(state: &mut BrokerState, op: &ConsumerGroupHeartbeatOp) -> OpResult {
    let group_id = &op.heartbeat.group_id;
    if let Some(refusal) = crate::apply_streams::not_consumer(state, group_id) {
        return OpResult::Heartbeat(Err(refusal));
    }
    let is_consumer = state.consumer_groups.groups.contains_key(group_id);
    if !is_consumer && (classic_group_has_members(state, group_id) || op.upgrade.is_some()) {
        return OpResult::Heartbeat(upgrade_then_heartbeat(state, op));
    }
    let downgrade = leave_downgrade(state, op);
    let answer = state.consumer_groups.heartbeat(&state.topics, &op.heartbeat, &op.settings, op.now_ms);
    if let Ok(answer) = &answer {
        retire_classic_generation(state, group_id);
        if let Some(generation) = downgrade {
            convert_to_classic(state, &generation);
        }
        // Not in the state machine's own heartbeat: the leader's dry run of a steady heartbeat
        // must still find the group unchanged.
        seen(state, group_id, &answer.member_id, op.now_ms);
    }
    OpResult::Heartbeat(answer)
}

/// A consumer-protocol member joining a classic group with members (around-spec §4.3): the
/// leader's snapshot becomes a consumer group, then the join is served in it; a refusal of
/// either leaves everything as it was. Without a snapshot (or at another epoch than a join)
/// the classic group keeps the id.
fn upgrade_then_heartbeat(
    state: &mut BrokerState,
    op: &ConsumerGroupHeartbeatOp,
) -> Result<HeartbeatAnswer, Refusal> {
    let (hb, settings) = (&op.heartbeat, &op.settings);
    let not_consumer = || {
        Refusal::new(
            error_code::GROUP_ID_NOT_FOUND,
            format!("Group {} is not a consumer group.", hb.group_id),
        )
    };
    let snapshot = op.upgrade.as_ref().filter(|_| hb.member_epoch == 0).ok_or_else(not_consumer)?;
    let (mut converted, answer) = cg::upgrade_and_join(snapshot, &state.topics, hb, settings, op.now_ms)?;
    state.consumer_groups.groups.append(&mut converted.groups);
    state.consumer_groups.downgraded.remove(&hb.group_id);
    if let Some(classic) = state.groups.groups.get_mut(&hb.group_id) {
        classic.generation = None;
    }
    state.groups.retain_live();
    seen(state, &hb.group_id, &answer.member_id, op.now_ms);
    Ok(answer)
}

/// The classic generation a leave heartbeat (-1) downgrades the group to, if it does: worked
/// out before the member goes, from the group as it is (Kafka converts instead of removing).
fn leave_downgrade(state: &BrokerState, op: &ConsumerGroupHeartbeatOp) -> Option<GenerationOp> {
    let hb = &op.heartbeat;
    if hb.member_epoch != cg::LEAVE_GROUP_MEMBER_EPOCH {
        return None;
    }
    let group = state.consumer_groups.groups.get(&hb.group_id)?;
    let by_instance =
        || hb.instance_id.as_deref().and_then(|i| group.member_by_instance(i)).map(|(id, _)| id);
    let leaving =
        if group.members.contains_key(&hb.member_id) { Some(&hb.member_id) } else { by_instance() }?;
    cg::downgrades_without(group, leaving, op.settings.migration)
        .then(|| cg::downgraded_generation(&hb.group_id, group, leaving))
}

/// A downgrade (around-spec §4.5): the consumer group goes, its committed offsets stay, and
/// its remaining classic members are the classic group's generation; the id is marked so the
/// leader's classic coordinator adopts the group rebalancing.
fn convert_to_classic(state: &mut BrokerState, generation: &GenerationOp) {
    state.consumer_groups.groups.remove(&generation.group_id);
    state.consumer_groups.downgraded.insert(generation.group_id.clone());
    state.groups.complete_generation(generation);
}

fn seen(state: &mut BrokerState, group_id: &str, member_id: &str, now_ms: i64) {
    let seen =
        SeenMember { group_id: group_id.to_string(), member_id: member_id.to_string(), seen_ms: now_ms };
    state.consumer_groups.record_liveness(&[seen]);
}

/// A classic member's JoinGroup into a consumer group (`Op::ConsumerGroupClassicJoin`). A
/// classic static member that replaced the last consumer-protocol member downgrades the group.
pub(crate) fn classic_join(state: &mut BrokerState, op: &ClassicJoinOp) -> OpResult {
    let answer = state.consumer_groups.classic_join(&state.topics, &op.join, &op.settings, op.now_ms);
    if let Ok(answer) = &answer {
        let group_id = &op.join.group_id;
        seen(state, group_id, &answer.member_id, op.now_ms);
        let migration = op.settings.migration;
        let downgrade = state.consumer_groups.groups.get(group_id).filter(|group| {
            answer.replaced_last_consumer_member
                && migration.policy.downgrades()
                && i64::try_from(group.members.len()).unwrap_or(i64::MAX)
                    <= i64::from(migration.classic_max_size)
        });
        if let Some(generation) = downgrade.map(|group| cg::downgraded_generation(group_id, group, "")) {
            convert_to_classic(state, &generation);
        }
    }
    OpResult::ClassicJoin(answer)
}

/// A classic LeaveGroup from a consumer group (`Op::ConsumerGroupClassicLeave`).
pub(crate) fn classic_leave(state: &mut BrokerState, op: &ClassicLeaveOp) -> OpResult {
    OpResult::ClassicLeave(state.consumer_groups.classic_leave(&state.topics, &op.group_id, &op.members))
}

/// A consumer group took over an emptied classic group (Kafka's empty-group conversion): the
/// classic group's record goes, its committed offsets stay, so the member resumes from them.
fn retire_classic_generation(state: &mut BrokerState, group_id: &str) {
    if !state.consumer_groups.groups.contains_key(group_id) {
        return;
    }
    state.consumer_groups.downgraded.remove(group_id);
    retire_emptied_classic(state, group_id);
}

/// A group of another type took over an emptied classic group's id: the classic record goes,
/// its committed offsets stay (consumer and Streams groups both).
pub(crate) fn retire_emptied_classic(state: &mut BrokerState, group_id: &str) {
    if let Some(group) = state.groups.groups.get_mut(group_id) {
        if group.generation.as_ref().is_some_and(|g| g.members.is_empty()) {
            group.generation = None;
        }
    }
    state.groups.retain_live();
}

/// The leader's record of when it heard from members (`Op::RecordConsumerLiveness`).
pub(crate) fn record_liveness(state: &mut BrokerState, op: &LivenessOp) -> OpResult {
    state.consumer_groups.record_liveness(&op.members);
    OpResult::Done
}

/// A classic generation completed (`Op::CompleteGeneration`). A JoinGroup onto an empty
/// consumer group converts it to a classic group, as Kafka's does: the consumer group goes,
/// committed offsets stay. A consumer group with members keeps the id: its classic members
/// join through `ConsumerGroupClassicJoin`, and should a classic generation have raced a
/// heartbeat into the log, it is not recorded, so its commits are refused as from unknown
/// members. A downgraded group's first generation ends its rebalance (`downgraded`). A
/// Streams group yields its id alike (`apply_streams::yield_to_classic`). A share group never
/// does: Kafka's `classicGroupJoin` refuses every join onto one, empty or not
/// (INCONSISTENT_GROUP_PROTOCOL), so a generation that raced a share heartbeat into the log
/// is not recorded.
pub(crate) fn complete_generation(state: &mut BrokerState, op: &GenerationOp) -> OpResult {
    if is_share_group(state, &op.group_id) || !crate::apply_streams::yield_to_classic(state, op) {
        return OpResult::Done;
    }
    match state.consumer_groups.groups.get(&op.group_id) {
        // An emptied classic generation has nothing to convert.
        Some(group) if !group.members.is_empty() || op.members.is_empty() => return OpResult::Done,
        Some(_) => {
            state.consumer_groups.groups.remove(&op.group_id);
        }
        None => {}
    }
    state.consumer_groups.downgraded.remove(&op.group_id);
    state.groups.complete_generation(op);
    OpResult::Done
}

/// DeleteGroups: one result per group, in request order.
pub(crate) fn delete_groups(state: &mut BrokerState, op: &DeleteGroupsOp) -> OpResult {
    OpResult::Items(op.groups.iter().map(|d| delete_group(state, d)).collect())
}

/// DeleteGroups of one group: a consumer group is deleted only when it has no member
/// (NON_EMPTY_GROUP otherwise, whatever the leader saw), with its committed offsets; a
/// Streams group as `apply_streams::delete_group` decides, a share group as
/// `apply_share::delete_group`; any other group as
/// `Groups::delete_group` does.
fn delete_group(state: &mut BrokerState, deletion: &GroupDeletion) -> CommitResult {
    if let Some(result) = crate::apply_streams::delete_group(state, deletion) {
        return result;
    }
    if let Some(result) = crate::apply_share::delete_group(state, &deletion.group_id) {
        return result;
    }
    let Some(group) = state.consumer_groups.groups.get(&deletion.group_id) else {
        return state.groups.delete_group(deletion);
    };
    if !group.members.is_empty() {
        let message = format!("group '{}' has members", deletion.group_id);
        return (error_code::NON_EMPTY_GROUP, Some(message));
    }
    state.consumer_groups.groups.remove(&deletion.group_id);
    state.consumer_groups.downgraded.remove(&deletion.group_id);
    state.groups.groups.remove(&deletion.group_id);
    (error_code::NONE, None)
}

/// A leader's timer fenced a member; fencing the last consumer-protocol member of a group
/// whose other members are classic downgrades it (Kafka's `consumerGroupFenceMember`).
pub(crate) fn fence(state: &mut BrokerState, op: &FenceMemberOp) -> OpResult {
    let downgrade = state.consumer_groups.groups.get(&op.group_id).and_then(|group| {
        let at_epoch = group
            .members
            .get(&op.member_id)
            .is_some_and(|m| op.expected_epoch.is_none_or(|e| e == m.member_epoch));
        (at_epoch && cg::downgrades_without(group, &op.member_id, op.migration))
            .then(|| cg::downgraded_generation(&op.group_id, group, &op.member_id))
    });
    let fenced = state.consumer_groups.fence(&state.topics, &op.group_id, &op.member_id, op.expected_epoch);
    if let Some(generation) = downgrade.filter(|_| fenced) {
        convert_to_classic(state, &generation);
    }
    OpResult::MemberFenced(fenced)
}

/// Whether the classic group `group_id` completed a generation that still has members: the
/// log's view of a live classic group (an emptied one records a generation without members).
pub fn classic_group_has_members(state: &BrokerState, group_id: &str) -> bool {
    state
        .groups
        .groups
        .get(group_id)
        .and_then(|g| g.generation.as_ref())
        .is_some_and(|g| !g.members.is_empty())
}

/// An OffsetCommit against a consumer-protocol group: None when the group is not one (the
/// classic rules of `Groups::check_commit` decide), else 0 or the code for every partition
/// (Kafka fails the whole request). `GenerationIdOrMemberEpoch` is the member epoch here.
pub fn check_offset_commit(state: &BrokerState, op: &OffsetCommitOp, version: i16) -> Option<i16> {
    let api = CommitApi::OffsetCommit { version };
    check_commit_as(state, &op.group_id, &op.member_id, op.generation_id, &op.commits, api)
}

/// The TxnOffsetCommit version apply checks a consumer group's commit as: onelog serves v0–v5,
/// where Kafka answers a stale epoch ILLEGAL_GENERATION (v6, KIP-1319, says STALE_MEMBER_EPOCH).
const TXN_OFFSET_COMMIT_VERSION_SERVED: i16 = 5;

/// A TxnOffsetCommit against a consumer-protocol group (exactly-once consume-process-produce
/// with `group.protocol=consumer`): as `check_offset_commit`, with the transactional rules
/// (a producer that sent no group metadata passes; the member epoch in `GenerationId`).
pub fn check_txn_offset_commit(state: &BrokerState, op: &crate::command::TxnOffsetCommitOp) -> Option<i16> {
    let api = CommitApi::TxnOffsetCommit { version: TXN_OFFSET_COMMIT_VERSION_SERVED };
    check_commit_as(state, &op.group_id, &op.member_id, op.generation_id, &op.commits, api)
}

/// One commit of either API against the consumer or Streams group `group_id`, if there is one.
/// A share group commits no offsets: every commit to its id is GROUP_ID_NOT_FOUND, whatever
/// the generation or version (Kafka's `ShareGroup.validateOffsetCommit`: "Group X is not a
/// consumer group.").
fn check_commit_as(
    state: &BrokerState,
    group_id: &str,
    member_id: &str,
    member_epoch: i32,
    commits: &[OffsetCommitEntry],
    api: CommitApi,
) -> Option<i16> {
    if is_share_group(state, group_id) {
        return Some(error_code::GROUP_ID_NOT_FOUND);
    }
    if state.streams_groups.groups.contains_key(group_id) {
        let request =
            CommitRequest { group_id, member_id, instance_id: None, member_epoch, api, partitions: &[] };
        return crate::apply_streams::check_commit(state, &request, commits);
    }
    if !state.consumer_groups.groups.contains_key(group_id) {
        return None;
    }
    // An unknown topic gets an id no member holds: it fails an older epoch's check, as in Kafka.
    let topic_id =
        |name: &str| -> TopicId { internal_topic::lookup(&state.topics, name).map_or([0; 16], |(id, _)| id) };
    let partitions: Vec<(TopicId, i32)> = commits.iter().map(|c| (topic_id(&c.topic), c.partition)).collect();
    let request =
        CommitRequest { group_id, member_id, instance_id: None, member_epoch, api, partitions: &partitions };
    Some(state.consumer_groups.check_commit(&request))
}

/// The commit `Groups` stores once the consumer group admitted it: its membership was the
/// consumer group's to decide, so the classic generation check is skipped (-1).
pub fn admitted(op: &OffsetCommitOp) -> OffsetCommitOp {
    OffsetCommitOp { generation_id: -1, ..op.clone() }
}

pub(crate) fn offset_commit(state: &mut BrokerState, op: &OffsetCommitOp, now_ms: i64) -> Vec<CommitResult> {
    let rules = state.commit_rules();
    let admitted_op;
    let op = match check_offset_commit(state, op, OFFSET_COMMIT_VERSION_CHECKED) {
        Some(code) if code != error_code::NONE => return vec![(code, None); op.commits.len()],
        Some(_) => {
            admitted_op = admitted(op);
            &admitted_op
        }
        None => op,
    };
    state.groups.store_offset_commit(&state.topics, op, now_ms, rules)
}

#[cfg(test)]
#[path = "apply_consumer_tests.rs"]
mod tests;

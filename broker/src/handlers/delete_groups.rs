//! DeleteGroups (key 42), v0–v2: deletes empty groups with their committed offsets, through
//! one log entry for the whole request.
//!
//! As Kafka's coordinator (`ClassicGroup.validateDeleteGroup`), each group gets its own code:
//! an empty or over-long id INVALID_GROUP_ID, an unknown or already deleted group
//! GROUP_ID_NOT_FOUND, a group with members (or a rebalance under way) NON_EMPTY_GROUP. The
//! leader's coordinator decides emptiness and marks the group Dead (see `groups::admin`); the
//! `DeleteGroups` op then drops offsets and recorded generation on every replica, and apply
//! refuses a group whose recorded generation has members the coordinator did not see. A group
//! that lives only in the coordinator's memory (no offsets, no recorded generation) is simply
//! forgotten. A KIP-848 consumer group is deleted only without members (NON_EMPTY_GROUP
//! otherwise, a static member parked with epoch -2 included), with its committed offsets, as
//! the log decides (`apply_consumer::delete_group`). A KIP-1071 Streams group alike: only an
//! Empty one goes (Kafka's `StreamsGroup.validateDeleteGroup`), with its committed offsets
//! (`apply_streams::delete_group`). A follower answers NOT_COORDINATOR per group, as every
//! group API does here.

use std::collections::BTreeMap;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{ApiKey, DeleteGroupsResponse, RequestKind, ResponseKind};

use super::group_kind::{self, GroupKind};
use super::util::{adopt_group, group_id_invalid, group_op_failed};
use super::HandlerResult;
use crate::ctx::{Ctx, Lane, SharedCtx};
use crate::security::authz::{self, code, op, rt, Subject};
use onelog_state::command::{DeleteGroupsOp, GroupDeletion};

pub const KEY: ApiKey = ApiKey::DeleteGroups;
pub const VERSIONS: (i16, i16) = (0, 2);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::DeleteGroups(body) = req.body else { anyhow::bail!("not a DeleteGroups body") };
    let ids: Vec<String> = body.groups_names.iter().map(|g| g.0.to_string()).collect();
    // KafkaApis: DELETE on each group, else GROUP_AUTHORIZATION_FAILED for it.
    let deletable = ctx.authorizer.allowed_each(&who, rt::GROUP, ids.iter().map(String::as_str), op::DELETE);
    let allowed: Vec<String> =
        ids.iter().zip(&deletable).filter(|(_, d)| **d).map(|(id, _)| id.clone()).collect();
    let codes =
        authz::merge_refused(&deletable, delete(&ctx, &allowed).await, code::GROUP_AUTHORIZATION_FAILED);
    let results = body
        .groups_names
        .into_iter()
        .zip(codes)
        .map(|(id, code)| DeletableGroupResult::default().with_group_id(id).with_error_code(code))
        .collect();
    Ok(Some(ResponseKind::DeleteGroups(DeleteGroupsResponse::default().with_results(results))))
}

/// One code per group id, in request order: each Raft group's ids deleted where that group's
/// state lives, NOT_COORDINATOR where this node does not lead it.
async fn delete(ctx: &Ctx, ids: &[String]) -> Vec<i16> {
    let mut codes = vec![error_code::NOT_COORDINATOR; ids.len()];
    let mut by_group: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (index, id) in ids.iter().enumerate() {
        if group_id_invalid(id) {
            codes[index] = error_code::INVALID_GROUP_ID;
        } else {
            by_group.entry(ctx.group_id_group(id)).or_default().push(index);
        }
    }
    for (group, indexes) in by_group {
        let Some(lane) = ctx.lane(group).filter(|lane| lane.is_leader()) else { continue };
        let named: Vec<&str> = indexes.iter().map(|i| ids[*i].as_str()).collect();
        for (index, code) in indexes.into_iter().zip(delete_in(ctx, lane, &named).await) {
            codes[index] = code;
        }
    }
    codes
}

/// One code per id of `ids`, all placed in `lane`'s group, which this node leads. A share
/// group deleted there forgets its share partitions in the other Raft groups too.
async fn delete_in(ctx: &Ctx, lane: Lane<'_>, ids: &[&str]) -> Vec<i16> {
    let classic = &lane.coordinators.classic;
    let mut codes = Vec::with_capacity(ids.len());
    // (index in `ids`, what the log op deletes)
    let mut deletions: Vec<(usize, GroupDeletion)> = Vec::new();
    for (index, id) in ids.iter().copied().enumerate() {
        let code = if let Some(members) = members_in_log(lane, id) {
            // Apply decides emptiness again, in log order (see `apply_consumer::delete_group`);
            // the classic coordinator has no part in these groups.
            if members > 0 {
                error_code::NON_EMPTY_GROUP
            } else {
                deletions.push((index, GroupDeletion { group_id: id.to_string(), generation_id: 0 }));
                error_code::NONE
            }
        } else {
            adopt_group(lane, id);
            let in_log = lane.applied.state(|s| s.groups.groups.contains_key(id));
            match classic.begin_delete(id, in_log) {
                Err(code) => code,
                Ok(generation_id) if in_log => {
                    deletions.push((index, GroupDeletion { group_id: id.to_string(), generation_id }));
                    error_code::NONE
                }
                // Only in the coordinator's memory: nothing in the log to delete.
                Ok(_) => {
                    classic.finish_delete(id, true);
                    error_code::NONE
                }
            }
        };
        codes.push(code);
    }
    if deletions.is_empty() {
        return codes;
    }
    let shares: Vec<&str> = ids
        .iter()
        .copied()
        .filter(|id| lane.applied.state(|s| s.share_groups.groups.contains_key(*id)))
        .collect();
    let op = DeleteGroupsOp { groups: deletions.iter().map(|(_, d)| d.clone()).collect() };
    let applied: Vec<i16> = match lane.proposer.propose(op).await {
        Ok(items) => items.into_iter().map(|(code, _)| code).collect(),
        Err(e) => vec![group_op_failed(&e); deletions.len()],
    };
    for ((index, deletion), code) in deletions.iter().zip(applied) {
        classic.finish_delete(&deletion.group_id, code == error_code::NONE);
        codes[*index] = code;
        let share = shares.contains(&deletion.group_id.as_str());
        if code == error_code::NONE && share && !ctx.single_group() {
            crate::coord::share::remote::forget_elsewhere(ctx, lane.group, &deletion.group_id).await;
        }
    }
    codes
}

/// The member count of the consumer, Streams or share group `id` (whose membership the log
/// holds; a share group goes with its share-partition states, `apply_share::delete_group`),
/// None if the id is a classic group's or unknown.
fn members_in_log(lane: Lane, id: &str) -> Option<usize> {
    lane.applied.state(|s| match group_kind::kind(lane, s, id)? {
        GroupKind::Consumer(group) => Some(group.members.len()),
        GroupKind::Streams(group) => Some(group.members.len()),
        GroupKind::Share => s.share_groups.groups.get(id).map(|g| g.members.len()),
        GroupKind::Classic => None,
    })
}

//! Membership changes and elections through openraft 0.9's own API: `add_learner`,
//! `change_membership` (joint consensus, Raft §6) and `trigger().elect()`.
//!
//! Membership changes run on the leader only; elsewhere they get 421 with the leader's id so
//! the caller can retry there (the admin address of the leader is not in the membership, only
//! its Raft and Kafka addresses). openraft refuses a change while the previous one is
//! uncommitted; that is a 409 and the caller retries.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::Duration;

use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::{ChangeMembers, ServerState};
use serde_json::{json, Value};

use super::query::{HttpError, Query};
use super::routes::Response;
use super::status::membership_json;
use super::AdminCtx;
use crate::limits;
use crate::raft::transport::removal;
use crate::raft::{NodeAddr, Raft, TypeConfig};

type WriteResult =
    Result<openraft::raft::ClientWriteResponse<TypeConfig>, RaftError<u64, ClientWriteError<u64, NodeAddr>>>;

fn node_id(query: &Query) -> Result<u64, HttpError> {
    let id = query.required("id")?;
    id.parse().map_err(|_| HttpError::new(400, format!("id {id:?} is not a node id (u64)")))
}

/// `host:port` with a numeric port: what the Raft transport dials and Metadata advertises.
fn host_port(query: &Query, name: &str) -> Result<String, HttpError> {
    let value = query.required(name)?;
    match value.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(value.to_string()),
        _ => Err(HttpError::new(400, format!("{name} {value:?} is not host:port"))),
    }
}

fn not_leader(leader: Option<u64>) -> Response {
    Response::json(421, json!({ "error": "not the leader", "leader": leader }))
}

/// 421 unless this node is the leader in its own view; openraft has the last word (a stale
/// view still ends in `ForwardToLeader`).
fn require_leader(ctx: &AdminCtx) -> Result<(), Response> {
    let leader = ctx.raft.metrics().borrow().current_leader;
    if leader == Some(ctx.node_id) {
        Ok(())
    } else {
        Err(not_leader(leader))
    }
}

fn current_nodes(raft: &Raft) -> BTreeMap<u64, NodeAddr> {
    let metrics = raft.metrics();
    let m = metrics.borrow();
    m.membership_config.membership().nodes().map(|(id, addr)| (*id, addr.clone())).collect()
}

fn is_voter(raft: &Raft, id: u64) -> bool {
    raft.metrics().borrow().membership_config.membership().voter_ids().any(|v| v == id)
}

/// Runs one membership write within the admin timeout and maps its outcome.
async fn write(call: impl Future<Output = WriteResult>) -> Result<Value, Response> {
    let timeout = Duration::from_millis(limits::ADMIN_MEMBERSHIP_CHANGE_TIMEOUT_MS);
    match tokio::time::timeout(timeout, call).await {
        Err(_) => Err(Response::error(
            504,
            format!(
                "no outcome within {} ms; the change may still complete",
                limits::ADMIN_MEMBERSHIP_CHANGE_TIMEOUT_MS
            ),
        )),
        Ok(Ok(resp)) => Ok(resp
            .membership
            .map(|m| membership_json(&openraft::StoredMembership::new(Some(resp.log_id), m)))
            .unwrap_or(Value::Null)),
        Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => Err(not_leader(f.leader_id)),
        Ok(Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e)))) => {
            // No catch-all: a variant a later openraft adds must get its status chosen here.
            let status = match e {
                ChangeMembershipError::InProgress(_)
                | ChangeMembershipError::EmptyMembership(_)
                | ChangeMembershipError::LearnerNotFound(_) => 409,
            };
            Err(Response::error(status, e.to_string()))
        }
        Ok(Err(RaftError::Fatal(e))) => Err(Response::error(503, format!("Raft node stopped: {e}"))),
    }
}

fn finish(result: Result<Value, Response>) -> Response {
    match result {
        Ok(membership) => Response::json(200, membership),
        Err(response) => response,
    }
}

/// `POST /members/add-learner?id=N&raft=HOST:PORT&kafka=HOST:PORT`: adds a learner and
/// waits until openraft considers it caught up (blocking `add_learner`).
pub async fn add_learner(ctx: &AdminCtx, query: &Query) -> Result<Response, HttpError> {
    query.allow_only(&["id", "raft", "kafka"])?;
    let id = node_id(query)?;
    let addr = NodeAddr { raft: host_port(query, "raft")?, kafka: host_port(query, "kafka")? };
    if let Err(r) = require_leader(ctx) {
        return Ok(r);
    }
    // openraft's AddNodes keeps an existing node's address silently; say so instead.
    if let Some(existing) = current_nodes(&ctx.raft).get(&id).filter(|a| **a != addr) {
        let message = format!("node {id} is already a member at {existing}; remove it first");
        return Ok(Response::error(409, message));
    }
    Ok(finish(write(ctx.raft.add_learner(id, addr, true)).await))
}

/// `POST /members/promote?id=N`: makes a learner a voter (joint consensus, two entries).
pub async fn promote(ctx: &AdminCtx, query: &Query) -> Result<Response, HttpError> {
    query.allow_only(&["id"])?;
    let id = node_id(query)?;
    if let Err(r) = require_leader(ctx) {
        return Ok(r);
    }
    let change = ChangeMembers::AddVoterIds(BTreeSet::from([id]));
    Ok(finish(write(ctx.raft.change_membership(change, false)).await))
}

/// `POST /members/remove?id=N`: removes a voter or a learner from the membership entirely,
/// so it is no longer replicated to nor listed as a broker. A voter goes through
/// `RemoveVoters` without `retain` (openraft then drops its node in the same change); a node
/// left as a learner is dropped with `RemoveNodes`.
pub async fn remove(ctx: &AdminCtx, query: &Query) -> Result<Response, HttpError> {
    query.allow_only(&["id"])?;
    let id = node_id(query)?;
    if let Err(r) = require_leader(ctx) {
        return Ok(r);
    }
    let Some(removed) = current_nodes(&ctx.raft).get(&id).cloned() else {
        return Ok(Response::error(404, format!("node {id} is not a member")));
    };
    let mut membership = Value::Null;
    if is_voter(&ctx.raft, id) {
        let change = ChangeMembers::RemoveVoters(BTreeSet::from([id]));
        match write(ctx.raft.change_membership(change, false)).await {
            Ok(m) => membership = m,
            Err(response) => return Ok(response),
        }
    }
    if current_nodes(&ctx.raft).contains_key(&id) {
        let change = ChangeMembers::RemoveNodes(BTreeSet::from([id]));
        match write(ctx.raft.change_membership(change, false)).await {
            Ok(m) => membership = m,
            Err(response) => return Ok(response),
        }
    }
    // The removed node is no longer replicated to and may never see this membership: tell
    // it (a leader that removed itself sees it committed and stops by itself).
    if id != ctx.node_id {
        let index = ctx.raft.metrics().borrow().membership_config.log_id().map_or(0, |l| l.index);
        tokio::spawn(removal::notify_removed(ctx.identity.clone(), id, removed.raft, index));
    }
    Ok(Response::json(200, membership))
}

/// `POST /leader/transfer?to=N[&group=G]`: moves leadership of Raft group G (default 0) from
/// this node, its leader, to voter N (`raft::transport::transfer`); answers once a new leader
/// is elected, naming it (another up-to-date voter may win instead of N). 404 for a group this
/// node does not run.
pub async fn transfer(ctx: &AdminCtx, query: &Query) -> Result<Response, HttpError> {
    query.allow_only(&["to", "group"])?;
    let to: u64 = query
        .required("to")?
        .parse()
        .map_err(|_| HttpError::new(400, format!("to {:?} is not a node id (u64)", query.get("to"))))?;
    let group = query.group()?;
    let Some(handle) = ctx.groups.get(group) else {
        return Ok(Response::error(404, format!("node {} does not run Raft group {group}", ctx.node_id)));
    };
    use crate::raft::transport::transfer::{self, TransferError};
    Ok(match transfer::transfer((&handle.raft, &handle.transfer, group), &ctx.identity, to).await {
        Ok((leader, term)) => {
            Response::json(200, json!({ "node_id": ctx.node_id, "leader": leader, "term": term }))
        }
        Err(TransferError::NotLeader(leader)) => Response::json(
            421,
            json!({ "error": format!("node {} is not the leader", ctx.node_id), "leader": leader }),
        ),
        Err(e @ TransferError::TimedOut(_)) => Response::error(504, e.to_string()),
        Err(e @ TransferError::Failed(_)) => Response::error(503, e.to_string()),
        Err(e) => Response::error(409, e.to_string()),
    })
}

/// `POST /leader/elect`: this node stands for election at once (openraft's
/// `trigger().elect()`); returns without waiting for the outcome.
pub async fn elect(ctx: &AdminCtx, query: &Query) -> Result<Response, HttpError> {
    query.allow_only(&[])?;
    let (state, leader) = {
        let metrics = ctx.raft.metrics();
        let m = metrics.borrow();
        (m.state, m.current_leader)
    };
    if state == ServerState::Leader {
        return Ok(Response::json(
            200,
            json!({ "node_id": ctx.node_id, "triggered": false, "leader": leader }),
        ));
    }
    if !is_voter(&ctx.raft, ctx.node_id) {
        return Ok(Response::error(409, format!("node {} is not a voter; it cannot stand", ctx.node_id)));
    }
    match ctx.raft.trigger().elect().await {
        Ok(()) => {
            Ok(Response::json(200, json!({ "node_id": ctx.node_id, "triggered": true, "leader": leader })))
        }
        Err(e) => Ok(Response::error(503, format!("Raft node stopped: {e}"))),
    }
}

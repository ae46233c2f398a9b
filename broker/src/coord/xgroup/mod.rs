//! Transactions across Raft groups at run time (docs/SCALING.md §3, issue 32): the leaders'
//! side of the protocol whose state and steps are in `onelog_state::xgroup`.
//!
//! - A transactional write (Produce, TxnOffsetCommit) reaching the leader of a group other
//!   than the one coordinating its producer id (the participant P) asks the coordinator's
//!   leader C to join the transaction, then writes the batches tagged with the instance in
//!   P's log while C registers P in its own, in parallel; the client is answered once both
//!   applied (`participant`).
//! - EndTxn in C is the commit point, as in one group; C's leader then delivers the decision
//!   to every participant it lists, which applies it in its own log and confirms
//!   (`duties::deliver`); a participant asks C about an instance it has held open too long
//!   (`duties::pull`).
//!
//! Messages travel between the groups' leaders over the Raft transport
//! (`raft::transport::xgroup`), or stay in the process when one node leads both groups.
//! [`serve`] answers them; [`ask`] finds the group's leader and asks until it answers.

pub mod duties;
mod forget;
pub mod participant;
pub mod share_state;

use std::sync::Arc;
use std::time::Duration;

use onelog_state::xgroup::coordinator::gone;
use onelog_state::xgroup::GroupId;

use crate::coord::txn::TxnCoordinator;
use crate::ctx::Ctx;
use crate::limits;
use crate::raft::transport::xgroup::{self, XAnswer, XMessage, XRefusal, XResponse};

/// Answers a message from another group's leader, where this node leads the group it names.
pub async fn serve(ctx: &Ctx, message: XMessage) -> XResponse {
    match message {
        XMessage::Join(join) => coordinator(ctx, join.coordinator)?.join(&join),
        XMessage::Register { coordinator: c, participant, instance } => {
            coordinator(ctx, c)?.register(instance, participant).await
        }
        XMessage::Resolve { coordinator: c, participant, instance } => {
            coordinator(ctx, c)?.resolve(instance, participant).await
        }
        XMessage::Decisions { participant: p, coordinator, decisions } => {
            participant::apply_decisions(ctx, p, coordinator, decisions).await
        }
        XMessage::ShareState { group, group_id, change } => {
            share_state::serve(ctx, group, &group_id, change).await
        }
        XMessage::AdminAbort { coordinator: c, producer } => coordinator(ctx, c)?.admin_abort(producer).await,
        XMessage::Gone { coordinator: c, participant, producer_ids } => {
            let lane = ctx.lane(c).filter(|lane| lane.is_leader()).ok_or(XRefusal::NotLeader)?;
            let gone = lane.applied.state(|s| gone(s, participant, &producer_ids));
            Ok(XAnswer::Gone(gone))
        }
    }
}

/// The transaction coordinator of `group` on this node, if it runs the group.
fn coordinator(ctx: &Ctx, group: GroupId) -> Result<&Arc<TxnCoordinator>, XRefusal> {
    ctx.lane(group).map(|lane| lane.txns).ok_or(XRefusal::NotLeader)
}

/// Asks the leader of `group`, across its leader changes, until it answers or
/// `XGROUP_ASK_PATIENCE_MS` passed: a refusal other than "not the leader" or "unavailable" is
/// an answer.
pub async fn ask(ctx: &Ctx, group: GroupId, message: XMessage) -> XResponse {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(limits::XGROUP_ASK_PATIENCE_MS);
    let backoff = Duration::from_millis(limits::XGROUP_RETRY_BACKOFF_MS);
    loop {
        let answer = ask_once(ctx, group, message.clone()).await;
        let retriable = matches!(answer, Err(XRefusal::NotLeader | XRefusal::Unavailable(_)));
        if !retriable || tokio::time::Instant::now() + backoff >= deadline {
            return answer;
        }
        tokio::time::sleep(backoff).await;
    }
}

async fn ask_once(ctx: &Ctx, group: GroupId, message: XMessage) -> XResponse {
    let Some(leader) = ctx.group_leader_id(group) else {
        return Err(XRefusal::Unavailable(format!("Raft group {group} has no leader")));
    };
    if leader == ctx.node_id {
        return Box::pin(serve(ctx, message)).await;
    }
    let Some(addr) = ctx.raft_address(leader) else {
        return Err(XRefusal::Unavailable(format!("node {leader}'s Raft address is unknown")));
    };
    let ttl = Duration::from_millis(limits::XGROUP_CALL_TTL_MS);
    xgroup::send(&ctx.peers, (leader, &addr), message, ttl).await
}

//! AddOffsetsToTxn (key 25), v0–v4: the transaction will commit offsets for a group.
//!
//! No log entry (DESIGN §1): checked against the applied state and recorded in the leader's
//! memory. The offsets themselves come with TxnOffsetCommit, sent to the group coordinator.
//! With several Raft groups that is group 0's leader, which joins a transaction another group
//! coordinates through the cross-group protocol (docs/SCALING.md §3.1, `coord::xgroup`).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::{AddOffsetsToTxnResponse, ApiKey, RequestKind, ResponseKind};

use super::util::producer;
use super::HandlerResult;
use crate::ctx::SharedCtx;
use crate::errors::txn_failure_code;
use crate::security::authz::{code, op, rt, Subject};

pub const KEY: ApiKey = ApiKey::AddOffsetsToTxn;
pub const VERSIONS: (i16, i16) = (0, 4);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::AddOffsetsToTxn(body) = req.body else { anyhow::bail!("not an AddOffsetsToTxn body") };
    let id = producer(body.producer_id, body.producer_epoch);
    // KafkaApis: WRITE on the transactional id, then READ on the group.
    let code = if !ctx.authorizer.allowed(&who, rt::TRANSACTIONAL_ID, &body.transactional_id.0, op::WRITE) {
        code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    } else if !ctx.authorizer.allowed(&who, rt::GROUP, &body.group_id.0, op::READ) {
        code::GROUP_AUTHORIZATION_FAILED
    } else {
        added(&ctx, &body, id, req.api_version)
    };
    Ok(Some(ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(code))))
}

fn added(
    ctx: &crate::ctx::Ctx,
    body: &kafka_protocol::messages::AddOffsetsToTxnRequest,
    id: onelog_state::txns::ProducerIdEpoch,
    version: i16,
) -> i16 {
    let tid = body.transactional_id.0.as_str();
    match ctx.txn_coordinator(tid).and_then(|txns| txns.add_offsets(tid, id, &body.group_id.0)) {
        Ok(()) => error_code::NONE,
        Err(failure) => txn_failure_code(&failure, KEY, version),
    }
}

//! AddOffsetsToTxn (key 25), v0–v4: the transaction will commit offsets for a group.
//!
//! No log entry (DESIGN §1): checked against the applied state and recorded in the leader's
//! memory. The offsets themselves come with TxnOffsetCommit, sent to the group coordinator —
//! the same leader.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::{AddOffsetsToTxnResponse, ApiKey, RequestKind, ResponseKind};

use super::txn_util::{check_producer, now_ms, producer};
use super::{txn_errors, HandlerResult};
use crate::ctx::SharedCtx;
use crate::limits;

pub const KEY: ApiKey = ApiKey::AddOffsetsToTxn;
pub const VERSIONS: (i16, i16) = (0, 4);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::AddOffsetsToTxn(body) = req.body else { anyhow::bail!("not an AddOffsetsToTxn body") };
    let tid = body.transactional_id.0.as_str();
    let id = producer(body.producer_id, body.producer_epoch);
    let code = if !ctx.is_leader() {
        error_code::NOT_COORDINATOR
    } else if body.group_id.0.len() > limits::GROUP_ID_BYTES_MAX {
        error_code::INVALID_GROUP_ID
    } else {
        match check_producer(&ctx, tid, id) {
            Ok(()) => {
                ctx.txns.add_group(ctx.term(), tid, id, &body.group_id.0, now_ms());
                error_code::NONE
            }
            Err(e) => txn_errors::code(&e, KEY, req.api_version),
        }
    };
    Ok(Some(ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(code))))
}

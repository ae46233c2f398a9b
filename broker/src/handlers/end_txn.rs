//! EndTxn (key 26), v0–v5: commit or abort — the one durable round of a transaction.
//!
//! One `EndTxn` op (DESIGN §1). Its apply writes the markers, moves the last stable offsets
//! and decides the pending offsets; the reply comes after it is committed and applied, so
//! the transaction is complete when the client hears of it and there is no
//! CONCURRENT_TRANSACTIONS window. A retry of an applied decision succeeds.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::{ApiKey, EndTxnResponse, ProducerId, RequestKind, ResponseKind};

use super::txn_util::{producer, propose_error_code, stamp};
use super::{txn_errors, HandlerResult};
use crate::ctx::SharedCtx;
use crate::limits;
use crate::state::command::{EndTxnOp, Op, OpResult};

pub const KEY: ApiKey = ApiKey::EndTxn;
pub const VERSIONS: (i16, i16) = (0, 5);
/// KIP-890 part 2: from v5 every EndTxn bumps the epoch and returns it.
const BUMPS_EPOCH_FROM_VERSION: i16 = 5;
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::EndTxn(body) = req.body else { anyhow::bail!("not an EndTxn body") };
    let tid = body.transactional_id.0.to_string();
    let id = producer(body.producer_id, body.producer_epoch);
    let reply = |code: i16| {
        EndTxnResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    if !ctx.is_leader() {
        return Ok(Some(ResponseKind::EndTxn(reply(error_code::NOT_COORDINATOR))));
    }
    let op = EndTxnOp {
        transactional_id: tid.clone(),
        producer: id,
        commit: body.committed,
        bump_epoch: req.api_version >= BUMPS_EPOCH_FROM_VERSION,
        stamp: stamp(&ctx),
        producer_ids_live_max: limits::PRODUCER_IDS_LIVE_MAX,
        eviction_idle_ms_min: limits::PRODUCER_ID_EVICTION_IDLE_MS_MIN,
    };
    let response = match ctx.proposer.propose_op(Op::EndTxn(op)).await {
        Ok(OpResult::Txn(Ok(next))) => {
            ctx.txns.clear(ctx.term(), &tid);
            EndTxnResponse::default()
                .with_error_code(error_code::NONE)
                .with_producer_id(ProducerId(next.producer_id))
                .with_producer_epoch(next.producer_epoch)
        }
        Ok(OpResult::Txn(Err(e))) => {
            tracing::info!(transactional_id = %tid, commit = body.committed, error = ?e, "EndTxn refused");
            reply(txn_errors::code(&e, KEY, req.api_version))
        }
        Ok(other) => {
            tracing::error!(result = ?other, "EndTxn: unexpected op result");
            reply(error_code::UNKNOWN_SERVER_ERROR)
        }
        Err(e) => reply(propose_error_code(&e)),
    };
    Ok(Some(ResponseKind::EndTxn(response)))
}

//! EndTxn (key 26), v0–v5: commit or abort — the one durable round of a transaction.
//!
//! One `EndTxn` op (DESIGN §1). Its apply writes the markers, moves the last stable offsets
//! and decides the pending offsets; the reply comes after it is committed and applied, so
//! the transaction is complete when the client hears of it and there is no
//! CONCURRENT_TRANSACTIONS window. A retry of an applied decision succeeds.
//!
//! Access: TRANSACTIONAL_ID WRITE, checked by the pipeline (`handlers::HANDLERS`).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::{ApiKey, EndTxnResponse, ProducerId, RequestKind, ResponseKind};

use super::util::producer;
use super::HandlerResult;
use crate::ctx::SharedCtx;
use crate::errors::txn_failure_code;

pub const KEY: ApiKey = ApiKey::EndTxn;
pub const VERSIONS: (i16, i16) = (0, 5);
/// KIP-890 part 2: from v5 every EndTxn bumps the epoch and returns it.
const BUMPS_EPOCH_FROM_VERSION: i16 = 5;
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::EndTxn(body) = req.body else { anyhow::bail!("not an EndTxn body") };
    let tid = body.transactional_id.0.as_str();
    let id = producer(body.producer_id, body.producer_epoch);
    let bump_epoch = req.api_version >= BUMPS_EPOCH_FROM_VERSION;
    let ended = match ctx.txn_coordinator(tid) {
        Ok(txns) => txns.end_txn(tid, id, body.committed, bump_epoch).await,
        Err(failure) => Err(failure),
    };
    let response = match ended {
        Ok(next) => EndTxnResponse::default()
            .with_error_code(error_code::NONE)
            .with_producer_id(ProducerId(next.producer_id))
            .with_producer_epoch(next.producer_epoch),
        Err(failure) => {
            tracing::info!(transactional_id = %tid, commit = body.committed, ?failure, "EndTxn refused");
            EndTxnResponse::default()
                .with_error_code(txn_failure_code(&failure, KEY, req.api_version))
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
        }
    };
    Ok(Some(ResponseKind::EndTxn(response)))
}

/// The transactional id whose transaction the request ends.
pub fn checked_name(body: &RequestKind) -> Option<&str> {
    let RequestKind::EndTxn(body) = body else { return None };
    Some(&body.transactional_id.0)
}

/// The request refused with `code`, no producer id or epoch (`KafkaApis.handleEndTxnRequest`).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::EndTxn(_) = body else { return ResponseKind::EndTxn(Default::default()) };
    ResponseKind::EndTxn(
        EndTxnResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    )
}

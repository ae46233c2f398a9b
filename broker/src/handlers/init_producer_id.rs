//! InitProducerId (key 22), every version (v0–v5): producer ids for idempotent producers.
//!
//! Without a transactional id, Kafka's coordinator "always blindly accepts the request and
//! returns a new producerId", epoch 0 — also when a KIP-360 client (v3+) sends its current id
//! and epoch: idempotent producers bump their epoch themselves and come back here only for a
//! fresh id. Here that is one log op whose apply takes the next id from a counter in the
//! replicated state, so ids are unique across failovers and nothing is random.
//!
//! With a transactional id (KIP-98) the op is `InitTxnProducer`: the first call allocates an
//! id, later ones bump the epoch, fencing the previous instance — whose open transaction is
//! aborted in the same entry, so the new instance starts clean with no
//! CONCURRENT_TRANSACTIONS round. KIP-360 (v3+): a producer that sends its current id and
//! epoch bumps its own epoch; a stale one is fenced.
//!
//! Any broker may be asked (librdkafka and Java ask the least loaded one), so a follower
//! forwards a request without a transactional id to the leader at dispatch (`Route::Leader` on
//! its registry row), as Metadata forwards topic auto-creation. When no leader can answer the
//! reply is COORDINATOR_LOAD_IN_PROGRESS, which every client retries as it is. Not
//! NOT_COORDINATOR: on that Java's idempotent producer looks up a *transaction* coordinator
//! (FindCoordinator with a null key), which is meaningless without transactions.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::{
    ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId, RequestKind, ResponseKind,
};

use onelog_state::command::InitProducerIdOp;
use onelog_state::txns::ProducerIdEpoch;

use super::{Forwarded, HandlerResult};
use crate::ctx::{Ctx, SharedCtx};
use crate::errors::{propose_error_code, txn_failure_code, Addressed};
use crate::security::authz::{code, op, rt, Subject};

pub const KEY: ApiKey = ApiKey::InitProducerId;
pub const VERSIONS: (i16, i16) = (0, 5);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

/// An idempotent producer's request (no transactional id), whose id comes from group 0's
/// range; a transactional one is answered here by the coordinator of its id's Raft group
/// (FindCoordinator sends clients to that group's leader).
pub const FORWARDED: Forwarded = Forwarded {
    when: |body| matches!(body, RequestKind::InitProducerId(b) if b.transactional_id.is_none()),
    settled: |_, _, _| true,
};

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::InitProducerId(body) = req.body else { anyhow::bail!("not an InitProducerId body") };
    if let Some(refused) = authorization(&ctx, &who, &body) {
        return Ok(Some(ResponseKind::InitProducerId(error(refused))));
    }
    let response = match body.transactional_id.as_ref().map(|t| t.0.as_str()) {
        // The transaction coordinator is the leader (FindCoordinator); clients look again.
        Some(tid) => init_transactional(&ctx, tid, &body, req.api_version).await,
        None if ctx.may_propose() => allocate(&ctx).await,
        // A follower the leader could not answer for, or a forwarded request that reached a
        // node no longer leading.
        None => error(error_code::COORDINATOR_LOAD_IN_PROGRESS),
    };
    Ok(Some(ResponseKind::InitProducerId(response)))
}

/// KafkaApis: WRITE on the transactional id, or for an idempotent producer IDEMPOTENT_WRITE
/// on the cluster or WRITE on some topic; checked before anything is proposed.
fn authorization(ctx: &Ctx, who: &Subject, body: &InitProducerIdRequest) -> Option<i16> {
    match body.transactional_id.as_ref().map(|t| t.0.as_str()) {
        Some(tid) if !ctx.authorizer.allowed(who, rt::TRANSACTIONAL_ID, tid, op::WRITE) => {
            Some(code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        }
        Some(_) => None,
        None if ctx.authorizer.cluster_allowed(who, op::IDEMPOTENT_WRITE)
            || ctx.authorizer.allowed_on_any(who, rt::TOPIC, op::WRITE) =>
        {
            None
        }
        None => Some(code::CLUSTER_AUTHORIZATION_FAILED),
    }
}

fn error(code: i16) -> InitProducerIdResponse {
    InitProducerIdResponse::default()
        .with_error_code(code)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}

async fn init_transactional(
    ctx: &Ctx,
    transactional_id: &str,
    body: &InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    let expected = (body.producer_id.0 >= 0)
        .then_some(ProducerIdEpoch { producer_id: body.producer_id.0, producer_epoch: body.producer_epoch });
    let coordinator = ctx.txn_coordinator(transactional_id);
    let initialized = match coordinator {
        Ok(txns) => txns.init_producer(transactional_id, body.transaction_timeout_ms, expected).await,
        Err(failure) => Err(failure),
    };
    match initialized {
        Ok(id) => InitProducerIdResponse::default()
            .with_error_code(error_code::NONE)
            .with_producer_id(ProducerId(id.producer_id))
            .with_producer_epoch(id.producer_epoch),
        Err(failure) => {
            tracing::info!(transactional_id, ?failure, "InitProducerId refused");
            error(txn_failure_code(&failure, KEY, version))
        }
    }
}

/// One InitProducerId op in the log; the leader's clock and limits are the entry's.
async fn allocate(ctx: &Ctx) -> InitProducerIdResponse {
    match ctx.proposer.propose(InitProducerIdOp {}).await {
        Ok(Ok(id)) => InitProducerIdResponse::default()
            .with_error_code(error_code::NONE)
            .with_producer_id(ProducerId(id.producer_id))
            .with_producer_epoch(id.producer_epoch),
        Ok(Err(refusal)) => {
            tracing::warn!(error_code = refusal.error_code, message = %refusal.message, "InitProducerId refused");
            error(refusal.error_code)
        }
        Err(e) => {
            tracing::debug!(error = %e, "InitProducerId not committed; the client retries");
            error(propose_error_code(&e, Addressed::AnyBroker))
        }
    }
}

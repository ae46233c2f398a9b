//! AlterClientQuotas (key 49, KIP-546): sets and removes client quotas through one log entry.
//!
//! Each entity is validated on its own with Kafka's rules and messages
//! (`onelog_state::quotas`); the valid ones go into one `AlterClientQuotas` op, so they apply
//! together and every node throttles by the same table. `validate_only` proposes nothing.
//! Any node accepts the request, as any Kafka broker does (the admin client sends it to the
//! least-loaded node): a follower forwards it to the leader at dispatch (`Route::Leader` on
//! its registry row).
//!
//! Access: CLUSTER ALTER_CONFIGS, checked by the pipeline (`handlers::HANDLERS`).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::alter_client_quotas_request::EntryData;
use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData as ResultEntry};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, ApiKey, RequestKind, ResponseKind,
};

use super::util::str_bytes;
use super::{Forwarded, HandlerResult};
use crate::ctx::{Ctx, SharedCtx};
use crate::errors::{propose_error_code, Addressed};
use onelog_state::command::AlterClientQuotasOp;
use onelog_state::quotas::{validate_alteration, validate_entity, QuotaAlteration};
use onelog_state::BrokerState;

pub const KEY: ApiKey = ApiKey::AlterClientQuotas;
pub const VERSIONS: (i16, i16) = (0, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub const FORWARDED: Forwarded = Forwarded { when: |_| true, settled: shown };

/// Answered once every alteration the leader accepted shows here, so a Describe sent here
/// next sees it.
fn shown(request: &RequestKind, response: &ResponseKind, state: &BrokerState) -> bool {
    let (RequestKind::AlterClientQuotas(body), ResponseKind::AlterClientQuotas(r)) = (request, response)
    else {
        return true;
    };
    body.validate_only
        || r.entries.iter().zip(&body.entries).all(|(result, entry)| {
            result.error_code != error_code::NONE
                || check(entry).ok().is_none_or(|a| state.client_quotas.shows(&a))
        })
}

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::AlterClientQuotas(body) = req.body else {
        anyhow::bail!("not an AlterClientQuotas body")
    };
    // A follower the leader could not answer for at dispatch.
    if !ctx.may_propose() && !req.forwarded {
        return Ok(Some(ResponseKind::AlterClientQuotas(all_failed(&body, error_code::NOT_CONTROLLER))));
    }
    Ok(Some(ResponseKind::AlterClientQuotas(alter(&ctx, &body).await)))
}

async fn alter(ctx: &Ctx, body: &AlterClientQuotasRequest) -> AlterClientQuotasResponse {
    let mut results: Vec<(i16, Option<String>)> = Vec::with_capacity(body.entries.len());
    let mut valid = Vec::new();
    let mut seen = Vec::new();
    for entry in &body.entries {
        let checked = check(entry).and_then(|alteration| {
            if seen.contains(&alteration.entity) {
                return Err((
                    error_code::INVALID_REQUEST,
                    format!("Ignoring duplicate entity {:?}", alteration.entity),
                ));
            }
            seen.push(alteration.entity.clone());
            Ok(alteration)
        });
        match checked {
            Ok(alteration) => {
                valid.push((results.len(), alteration));
                results.push((error_code::NONE, None));
            }
            Err((code, message)) => results.push((code, Some(message))),
        }
    }
    if !body.validate_only && !valid.is_empty() {
        let alterations = valid.iter().map(|(_, a)| a.clone()).collect();
        if let Err(e) = ctx.proposer.propose(AlterClientQuotasOp { alterations }).await {
            let code = propose_error_code(&e, Addressed::Controller);
            for (index, _) in &valid {
                results[*index] = (code, Some(format!("the quota change did not commit: {e}")));
            }
        }
    }
    response(body, results)
}

/// One entry as a validated alteration, or its error code and Kafka's message.
fn check(entry: &EntryData) -> Result<QuotaAlteration, (i16, String)> {
    let pairs: Vec<(String, Option<String>)> = entry
        .entity
        .iter()
        .map(|e| (e.entity_type.to_string(), e.entity_name.as_ref().map(|n| n.to_string())))
        .collect();
    let refused = |e: onelog_state::quotas::QuotaError| (e.error_code, e.message);
    let entity = validate_entity(&pairs).map_err(refused)?;
    let changes = entry.ops.iter().map(|op| (op.key.to_string(), (!op.remove).then_some(op.value))).collect();
    let alteration = QuotaAlteration { entity, changes };
    validate_alteration(&alteration).map_err(refused)?;
    Ok(alteration)
}

fn response(
    body: &AlterClientQuotasRequest,
    results: Vec<(i16, Option<String>)>,
) -> AlterClientQuotasResponse {
    let entries = body
        .entries
        .iter()
        .zip(results)
        .map(|(entry, (code, message))| {
            let entity = entry
                .entity
                .iter()
                .map(|e| {
                    EntityData::default()
                        .with_entity_type(e.entity_type.clone())
                        .with_entity_name(e.entity_name.clone())
                })
                .collect();
            ResultEntry::default()
                .with_error_code(code)
                .with_error_message(message.map(str_bytes))
                .with_entity(entity)
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}

fn all_failed(body: &AlterClientQuotasRequest, code: i16) -> AlterClientQuotasResponse {
    response(body, body.entries.iter().map(|_| (code, None)).collect())
}

/// The whole request refused with `code` on every entry, its entity echoed
/// (`AlterClientQuotasRequest.getErrorResponse`).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::AlterClientQuotas(body) = body else {
        return ResponseKind::AlterClientQuotas(Default::default());
    };
    ResponseKind::AlterClientQuotas(all_failed(body, code))
}

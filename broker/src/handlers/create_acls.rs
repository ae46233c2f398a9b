//! CreateAcls (key 30), v1–v3, as Kafka's `AclApis.handleCreateAcls`. Access: CLUSTER ALTER,
//! checked by the pipeline (`handlers::HANDLERS`); then SECURITY_DISABLED without an
//! authorizer; each binding validated with Kafka's messages
//! (`onelog_state::acls::validate_binding`), the valid ones put in the log as one
//! `CreateAcls` op (apply validates again and counts against the bound). A controller API: a
//! follower forwards it to the leader at dispatch (`Route::Leader` on its registry row).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{ApiKey, CreateAclsRequest, CreateAclsResponse, RequestKind, ResponseKind};
use onelog_state::acls::{validate_binding, AclBinding, AclEntry, ResourcePattern};
use onelog_state::command::CreateAclsOp;

use super::util::str_bytes;
use super::{not_served, Forwarded, HandlerResult};
use crate::ctx::SharedCtx;
use crate::errors::{propose_error_code, Addressed};
use onelog_state::BrokerState;

pub const KEY: ApiKey = ApiKey::CreateAcls;
pub const VERSIONS: (i16, i16) = (1, 3);
pub const ACCEPTED_MIN_VERSION: i16 = 1;

pub const FORWARDED: Forwarded = Forwarded { when: |_| true, settled: created };

/// Every binding the leader created is here too.
fn created(request: &RequestKind, response: &ResponseKind, state: &BrokerState) -> bool {
    let (RequestKind::CreateAcls(body), ResponseKind::CreateAcls(r)) = (request, response) else {
        return true;
    };
    r.results
        .iter()
        .zip(&body.creations)
        .all(|(r, c)| r.error_code != error_code::NONE || state.acls.contains(&binding(c)))
}

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::CreateAcls(body) = req.body else { anyhow::bail!("not a CreateAcls body") };
    if !ctx.authorizer.enabled() {
        return Ok(Some(all(&body, not_served::SECURITY_DISABLED, Some(not_served::NO_AUTHORIZER))));
    }
    // A follower the leader could not answer for at dispatch.
    if !ctx.may_propose() && !req.forwarded {
        return Ok(Some(all(&body, error_code::NOT_CONTROLLER, None)));
    }
    let mut results: Vec<(i16, Option<String>)> = Vec::with_capacity(body.creations.len());
    let mut valid = Vec::new();
    for creation in &body.creations {
        let binding = binding(creation);
        match validate_binding(&binding) {
            Ok(()) => {
                valid.push((results.len(), binding));
                results.push((error_code::NONE, None));
            }
            Err(refusal) => results.push((refusal.error_code, Some(refusal.message))),
        }
    }
    if !valid.is_empty() {
        let bindings = valid.iter().map(|(_, b)| b.clone()).collect();
        match ctx.proposer.propose(CreateAclsOp { bindings }).await {
            Ok(applied) => {
                for ((index, _), result) in valid.iter().zip(applied) {
                    results[*index] = result;
                }
            }
            Err(e) => {
                let code = propose_error_code(&e, Addressed::Controller);
                for (index, _) in &valid {
                    results[*index] = (code, Some(format!("the ACL change did not commit: {e}")));
                }
            }
        }
    }
    let results = results
        .into_iter()
        .map(|(code, message)| {
            AclCreationResult::default().with_error_code(code).with_error_message(message.map(str_bytes))
        })
        .collect();
    Ok(Some(ResponseKind::CreateAcls(CreateAclsResponse::default().with_results(results))))
}

/// The binding a creation asks for, as sent (validation comes after).
fn binding(c: &AclCreation) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type: c.resource_type,
            pattern_type: c.resource_pattern_type,
            name: c.resource_name.to_string(),
        },
        entry: AclEntry {
            principal: c.principal.to_string(),
            host: c.host.to_string(),
            operation: c.operation,
            permission: c.permission_type,
        },
    }
}

fn all(body: &CreateAclsRequest, code: i16, message: Option<&str>) -> ResponseKind {
    let results = body
        .creations
        .iter()
        .map(|_| {
            AclCreationResult::default().with_error_code(code).with_error_message(message.map(str_bytes))
        })
        .collect();
    ResponseKind::CreateAcls(CreateAclsResponse::default().with_results(results))
}

/// The whole request refused with `code` on every creation (`CreateAclsRequest.getErrorResponse`).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::CreateAcls(body) = body else { return ResponseKind::CreateAcls(Default::default()) };
    all(body, code, None)
}

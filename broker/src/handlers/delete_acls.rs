//! DeleteAcls (key 31), v1–v3, as Kafka's `AclApis.handleDeleteAcls`. Access: CLUSTER ALTER,
//! checked by the pipeline (`handlers::HANDLERS`); then SECURITY_DISABLED without an
//! authorizer. The filters go into the log as one `DeleteAcls` op and are
//! evaluated in apply, so every replica deletes the same bindings and the answer lists what
//! was deleted. A controller API: a follower forwards it to the leader at dispatch
//! (`Route::Leader` on its registry row).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl};
use kafka_protocol::messages::{ApiKey, DeleteAclsRequest, DeleteAclsResponse, RequestKind, ResponseKind};
use onelog_state::acls::AclFilter;
use onelog_state::command::DeleteAclsOp;

use super::util::str_bytes;
use super::{not_served, Forwarded, HandlerResult};
use crate::ctx::SharedCtx;
use crate::errors::{propose_error_code, Addressed};
use onelog_state::BrokerState;

pub const KEY: ApiKey = ApiKey::DeleteAcls;
pub const VERSIONS: (i16, i16) = (1, 3);
pub const ACCEPTED_MIN_VERSION: i16 = 1;

pub const FORWARDED: Forwarded = Forwarded { when: |_| true, settled: deleted };

/// Settled once nothing the filters match is left here.
fn deleted(request: &RequestKind, _: &ResponseKind, state: &BrokerState) -> bool {
    let RequestKind::DeleteAcls(body) = request else { return true };
    body.filters.iter().all(|f| state.acls.matching(&filter(f)).is_empty())
}

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::DeleteAcls(body) = req.body else { anyhow::bail!("not a DeleteAcls body") };
    if !ctx.authorizer.enabled() {
        return Ok(Some(all(&body, not_served::SECURITY_DISABLED, Some(not_served::NO_AUTHORIZER))));
    }
    // A follower the leader could not answer for at dispatch.
    if !ctx.may_propose() && !req.forwarded {
        return Ok(Some(all(&body, error_code::NOT_CONTROLLER, None)));
    }
    let filters: Vec<AclFilter> = body.filters.iter().map(filter).collect();
    let results = match ctx.proposer.propose(DeleteAclsOp { filters }).await {
        Ok(deleted) => deleted.into_iter().map(filter_result).collect(),
        Err(e) => {
            let code = propose_error_code(&e, Addressed::Controller);
            let message = format!("the ACL change did not commit: {e}");
            body.filters
                .iter()
                .map(|_| {
                    DeleteAclsFilterResult::default()
                        .with_error_code(code)
                        .with_error_message(Some(str_bytes(message.clone())))
                })
                .collect()
        }
    };
    Ok(Some(ResponseKind::DeleteAcls(DeleteAclsResponse::default().with_filter_results(results))))
}

pub fn filter(f: &DeleteAclsFilter) -> AclFilter {
    AclFilter {
        resource_type: f.resource_type_filter,
        pattern_type: f.pattern_type_filter,
        name: f.resource_name_filter.as_ref().map(|n| n.to_string()),
        principal: f.principal_filter.as_ref().map(|n| n.to_string()),
        host: f.host_filter.as_ref().map(|n| n.to_string()),
        operation: f.operation,
        permission: f.permission_type,
    }
}

fn filter_result(deleted: onelog_state::acls::FilterDeleted) -> DeleteAclsFilterResult {
    match deleted {
        Err(refusal) => DeleteAclsFilterResult::default()
            .with_error_code(refusal.error_code)
            .with_error_message(Some(str_bytes(refusal.message))),
        Ok(bindings) => DeleteAclsFilterResult::default().with_matching_acls(
            bindings
                .into_iter()
                .map(|b| {
                    DeleteAclsMatchingAcl::default()
                        .with_resource_type(b.pattern.resource_type)
                        .with_resource_name(str_bytes(b.pattern.name))
                        .with_pattern_type(b.pattern.pattern_type)
                        .with_principal(str_bytes(b.entry.principal))
                        .with_host(str_bytes(b.entry.host))
                        .with_operation(b.entry.operation)
                        .with_permission_type(b.entry.permission)
                })
                .collect(),
        ),
    }
}

fn all(body: &DeleteAclsRequest, code: i16, message: Option<&str>) -> ResponseKind {
    let results = body
        .filters
        .iter()
        .map(|_| {
            DeleteAclsFilterResult::default().with_error_code(code).with_error_message(message.map(str_bytes))
        })
        .collect();
    ResponseKind::DeleteAcls(DeleteAclsResponse::default().with_filter_results(results))
}

/// The whole request refused with `code` on every filter (`DeleteAclsRequest.getErrorResponse`).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::DeleteAcls(body) = body else { return ResponseKind::DeleteAcls(Default::default()) };
    all(body, code, None)
}

//! DeleteAcls (key 31), v1–v3, as Kafka's `AclApis.handleDeleteAcls`: SECURITY_DISABLED
//! without an authorizer; ALTER on the cluster, else every filter
//! CLUSTER_AUTHORIZATION_FAILED. The filters go into the log as one `DeleteAcls` op and are
//! evaluated in apply, so every replica deletes the same bindings and the answer lists what
//! was deleted. A controller API: a follower forwards it to the leader.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl};
use kafka_protocol::messages::{ApiKey, DeleteAclsRequest, DeleteAclsResponse, RequestKind, ResponseKind};
use onelog_state::acls::AclFilter;
use onelog_state::command::DeleteAclsOp;

use super::util::str_bytes;
use super::{not_served, HandlerResult};
use crate::authz::{self, code, op, Subject};
use crate::ctx::SharedCtx;
use crate::errors::{propose_error_code, Addressed};
use crate::net::forward;

pub const KEY: ApiKey = ApiKey::DeleteAcls;
pub const VERSIONS: (i16, i16) = (1, 3);
pub const ACCEPTED_MIN_VERSION: i16 = 1;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let forwarded = forward::is_forwarded();
    let origin = forward::Origin::of(&req);
    let RequestKind::DeleteAcls(body) = req.body else { anyhow::bail!("not a DeleteAcls body") };
    if !authz::enabled(&ctx) {
        return Ok(Some(all(&body, not_served::SECURITY_DISABLED, Some(not_served::NO_AUTHORIZER))));
    }
    if !authz::cluster_allowed(&ctx, &who, op::ALTER) {
        return Ok(Some(all(&body, code::CLUSTER_AUTHORIZATION_FAILED, None)));
    }
    if !ctx.may_propose() && !forwarded {
        let filters: Vec<AclFilter> = body.filters.iter().map(filter).collect();
        // Settled once nothing the filters match is left here.
        let settled = |_: &ResponseKind, state: &onelog_state::BrokerState| {
            filters.iter().all(|f| state.acls.matching(f).is_empty())
        };
        let relayed = forward::relay(
            &ctx,
            &origin,
            KEY,
            req.api_version,
            RequestKind::DeleteAcls(body.clone()),
            settled,
        );
        let failed = || all(&body, error_code::NOT_CONTROLLER, None);
        return Ok(Some(relayed.await.unwrap_or_else(failed)));
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

//! DescribeAcls (key 29), v1–v3, as Kafka's `AclApis.handleDescribeAcls`: SECURITY_DISABLED
//! without an authorizer; the bindings the filter matches, grouped by resource pattern, from
//! this node's applied state (every node holds the whole table).
//!
//! Access: CLUSTER DESCRIBE, checked by the pipeline (`handlers::HANDLERS`) before the
//! authorizer is looked for, as Kafka does.

use kafka_compat::codec::Request;
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{ApiKey, DescribeAclsResponse, RequestKind, ResponseKind};
use onelog_state::acls::{validate_filter, AclFilter};

use super::util::str_bytes;
use super::{not_served, HandlerResult};
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::DescribeAcls;
pub const VERSIONS: (i16, i16) = (1, 3);
pub const ACCEPTED_MIN_VERSION: i16 = 1;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::DescribeAcls(body) = req.body else { anyhow::bail!("not a DescribeAcls body") };
    if !ctx.authorizer.enabled() {
        return Ok(Some(error(not_served::SECURITY_DISABLED, Some(not_served::NO_AUTHORIZER.to_string()))));
    }
    let filter = AclFilter {
        resource_type: body.resource_type_filter,
        pattern_type: body.pattern_type_filter,
        name: body.resource_name_filter.as_ref().map(|n| n.to_string()),
        principal: body.principal_filter.as_ref().map(|n| n.to_string()),
        host: body.host_filter.as_ref().map(|n| n.to_string()),
        operation: body.operation,
        permission: body.permission_type,
    };
    if let Err(refusal) = validate_filter(&filter) {
        return Ok(Some(error(refusal.error_code, Some(refusal.message))));
    }
    let matching = ctx.applied.state(|s| s.acls.matching(&filter));
    // `matching` is ordered by pattern, so each pattern's entries are adjacent.
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    let mut last = None;
    for binding in matching {
        let description = AclDescription::default()
            .with_principal(str_bytes(binding.entry.principal))
            .with_host(str_bytes(binding.entry.host))
            .with_operation(binding.entry.operation)
            .with_permission_type(binding.entry.permission);
        match resources.last_mut() {
            Some(resource) if last.as_ref() == Some(&binding.pattern) => resource.acls.push(description),
            _ => {
                resources.push(
                    DescribeAclsResource::default()
                        .with_resource_type(binding.pattern.resource_type)
                        .with_resource_name(str_bytes(binding.pattern.name.clone()))
                        .with_pattern_type(binding.pattern.pattern_type)
                        .with_acls(vec![description]),
                );
                last = Some(binding.pattern);
            }
        }
    }
    Ok(Some(ResponseKind::DescribeAcls(DescribeAclsResponse::default().with_resources(resources))))
}

fn error(code: i16, message: Option<String>) -> ResponseKind {
    ResponseKind::DescribeAcls(
        DescribeAclsResponse::default().with_error_code(code).with_error_message(message.map(str_bytes)),
    )
}

/// The whole request refused with `code` at the top level (`DescribeAclsRequest.getErrorResponse`).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::DescribeAcls(_) = body else { return ResponseKind::DescribeAcls(Default::default()) };
    error(code, None)
}

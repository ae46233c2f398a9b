//! IncrementalAlterConfigs (key 44, KIP-339): set / delete / append / subtract per config, for
//! topics, brokers (dynamic broker configs), groups and client-metrics resources; one Raft
//! entry per request (`config_admin`).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{ApiKey, IncrementalAlterConfigsResponse, RequestKind, ResponseKind};

use super::HandlerResult;
use crate::config_admin::{self, AlterRequest, ResourceRequest, Served};
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::IncrementalAlterConfigs;
pub const VERSIONS: (i16, i16) = (0, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let forwarded = config_admin::is_forwarded(&req);
    let origin = crate::net::forward::Origin::of(&req);
    let RequestKind::IncrementalAlterConfigs(body) = req.body else {
        anyhow::bail!("not an IncrementalAlterConfigs body")
    };
    let names = body.resources.iter().map(|r| (r.resource_type, r.resource_name.clone())).collect();
    let resources = body
        .resources
        .iter()
        .map(|r| ResourceRequest {
            resource_type: r.resource_type,
            resource_name: r.resource_name.as_str(),
            replace: false,
            configs: r
                .configs
                .iter()
                .map(|c| (c.name.to_string(), c.config_operation, c.value.as_ref().map(|v| v.to_string())))
                .collect(),
        })
        .collect();
    let alter = AlterRequest {
        key: KEY,
        version: req.api_version,
        forwarded,
        origin,
        resources,
        validate_only: body.validate_only,
    };
    let results = match config_admin::serve(
        &ctx,
        alter,
        || RequestKind::IncrementalAlterConfigs(body.clone()),
        succeeded,
    )
    .await
    {
        Served::Forwarded(response) => return Ok(Some(*response)),
        Served::Results(results) => results,
    };
    let responses = config_admin::responses(names, results, |resource_type, name, code, message| {
        AlterConfigsResourceResponse::default()
            .with_resource_type(resource_type)
            .with_resource_name(name)
            .with_error_code(code)
            .with_error_message(message)
    });
    let response = IncrementalAlterConfigsResponse::default().with_responses(responses);
    Ok(Some(ResponseKind::IncrementalAlterConfigs(response)))
}

fn succeeded(response: &ResponseKind) -> bool {
    matches!(response, ResponseKind::IncrementalAlterConfigs(r) if r.responses.iter().any(|r| r.error_code == error_code::NONE))
}

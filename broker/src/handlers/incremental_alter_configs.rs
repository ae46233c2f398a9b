//! IncrementalAlterConfigs (key 44, KIP-339): set / delete / append / subtract per config, for
//! topics, brokers (dynamic broker configs), groups and client-metrics resources; one Raft
//! entry per request (`config_admin`). A follower forwards it to the leader at dispatch
//! (`Route::Leader` on its registry row).

use kafka_compat::codec::Request;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    ApiKey, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, RequestKind, ResponseKind,
};
use onelog_state::BrokerState;

use super::{Forwarded, HandlerResult};
use crate::config_admin::{self, AlterRequest, ResourceRequest};
use crate::ctx::SharedCtx;
use crate::security::authz::Subject;

pub const KEY: ApiKey = ApiKey::IncrementalAlterConfigs;
pub const VERSIONS: (i16, i16) = (0, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub const FORWARDED: Forwarded = Forwarded { when: |_| true, settled: shown };

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::IncrementalAlterConfigs(body) = req.body else {
        anyhow::bail!("not an IncrementalAlterConfigs body")
    };
    let names = body.resources.iter().map(|r| (r.resource_type, r.resource_name.clone())).collect();
    let alter = AlterRequest {
        forwarded: req.forwarded,
        who,
        resources: resources(&body),
        validate_only: body.validate_only,
    };
    let results = config_admin::serve(&ctx, alter).await;
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

fn resources(body: &IncrementalAlterConfigsRequest) -> Vec<ResourceRequest<'_>> {
    body.resources
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
        .collect()
}

/// Settled once this node shows every alteration the leader accepted.
fn shown(request: &RequestKind, response: &ResponseKind, state: &BrokerState) -> bool {
    let (RequestKind::IncrementalAlterConfigs(body), ResponseKind::IncrementalAlterConfigs(r)) =
        (request, response)
    else {
        return true;
    };
    let codes: Vec<i16> = r.responses.iter().map(|r| r.error_code).collect();
    config_admin::shows_alterations(state, resources(body), &codes, body.validate_only)
}

//! AlterConfigs (key 33): the older whole-set form. The configs given become the resource's
//! overrides; every override not given is removed (Kafka semantics). One Raft entry per
//! request (`config_admin`). A follower forwards it to the leader at dispatch (`Route::Leader`
//! on its registry row).

use kafka_compat::codec::Request;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, ApiKey, RequestKind, ResponseKind,
};
use onelog_state::BrokerState;

use super::{Forwarded, HandlerResult};
use crate::config_admin::{self, AlterRequest, ResourceRequest};
use crate::ctx::SharedCtx;
use crate::security::authz::Subject;

pub const KEY: ApiKey = ApiKey::AlterConfigs;
pub const VERSIONS: (i16, i16) = (0, 2);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub const FORWARDED: Forwarded = Forwarded { when: |_| true, settled: shown };

/// IncrementalAlterConfigs' SET: every config of an AlterConfigs request sets a value.
const SET: i8 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::AlterConfigs(body) = req.body else { anyhow::bail!("not an AlterConfigs body") };
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
    Ok(Some(ResponseKind::AlterConfigs(AlterConfigsResponse::default().with_responses(responses))))
}

fn resources(body: &AlterConfigsRequest) -> Vec<ResourceRequest<'_>> {
    body.resources
        .iter()
        .map(|r| ResourceRequest {
            resource_type: r.resource_type,
            resource_name: r.resource_name.as_str(),
            replace: true,
            configs: r
                .configs
                .iter()
                .map(|c| (c.name.to_string(), SET, c.value.as_ref().map(|v| v.to_string())))
                .collect(),
        })
        .collect()
}

/// Settled once this node shows every alteration the leader accepted.
fn shown(request: &RequestKind, response: &ResponseKind, state: &BrokerState) -> bool {
    let (RequestKind::AlterConfigs(body), ResponseKind::AlterConfigs(r)) = (request, response) else {
        return true;
    };
    let codes: Vec<i16> = r.responses.iter().map(|r| r.error_code).collect();
    config_admin::shows_alterations(state, resources(body), &codes, body.validate_only)
}

//! ListConfigResources (key 74, KIP-1142; v0 was ListClientMetricsResources), v0–v1: the
//! resources DescribeConfigs can be asked about.
//!
//! v0 lists client-metrics resources only: onelog has none (see get_telemetry_subscriptions),
//! so the list is empty. v1 filters by `ConfigResource.Type` (empty: every type served):
//! topics from the applied state, brokers (every Raft member), groups (committed in the log
//! or with members in the coordinator), client metrics (none). A type Kafka does not list
//! (broker loggers, unknown codes) is INVALID_REQUEST, as Kafka answers.
//!
//! Access: CLUSTER DESCRIBE_CONFIGS, checked by the pipeline (`handlers::HANDLERS`).

use std::collections::BTreeSet;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{ApiKey, ListConfigResourcesResponse, RequestKind, ResponseKind};

use super::util::str_bytes;
use super::HandlerResult;
use crate::ctx::{Ctx, SharedCtx};

pub const KEY: ApiKey = ApiKey::ListConfigResources;
pub const VERSIONS: (i16, i16) = (0, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

/// `ConfigResource.Type` codes.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const CLIENT_METRICS: i8 = 16;
const GROUP: i8 = 32;
const LISTED_TYPES: [i8; 4] = [TOPIC, BROKER, CLIENT_METRICS, GROUP];

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::ListConfigResources(body) = req.body else {
        anyhow::bail!("not a ListConfigResources body")
    };
    let types: Vec<i8> = match (req.api_version, body.resource_types.is_empty()) {
        (0, _) => vec![CLIENT_METRICS],
        (_, true) => LISTED_TYPES.to_vec(),
        (_, false) => body.resource_types,
    };
    if types.iter().any(|t| !LISTED_TYPES.contains(t)) {
        let response = ListConfigResourcesResponse::default().with_error_code(error_code::INVALID_REQUEST);
        return Ok(Some(ResponseKind::ListConfigResources(response)));
    }
    let resources = types
        .into_iter()
        .collect::<BTreeSet<i8>>()
        .into_iter()
        .flat_map(|t| names(&ctx, t).into_iter().map(move |n| (t, n)))
        .map(|(t, name)| {
            let resource = ConfigResource::default().with_resource_name(str_bytes(name));
            if req.api_version >= 1 {
                resource.with_resource_type(t)
            } else {
                resource
            }
        })
        .collect();
    Ok(Some(ResponseKind::ListConfigResources(
        ListConfigResourcesResponse::default()
            .with_error_code(error_code::NONE)
            .with_config_resources(resources),
    )))
}

fn names(ctx: &Ctx, resource_type: i8) -> Vec<String> {
    match resource_type {
        TOPIC => ctx.applied.state(|s| s.topics.keys().cloned().collect()),
        BROKER => ctx.leadership.brokers().into_iter().map(|b| b.node_id.to_string()).collect(),
        GROUP => {
            // Those of every Raft group this node runs.
            let mut groups = BTreeSet::new();
            for lane in ctx.lanes() {
                groups.extend(lane.applied.state(|s| s.groups.groups.keys().cloned().collect::<Vec<_>>()));
                groups.extend(lane.coordinators.classic.list().into_iter().map(|(id, _, _)| id));
            }
            groups.into_iter().collect()
        }
        _ => Vec::new(), // client metrics: none configured
    }
}

/// The whole request refused with `code` at the top level, no resource listed
/// (`ListConfigResourcesRequest.getErrorResponse`).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::ListConfigResources(_) = body else {
        return ResponseKind::ListConfigResources(Default::default());
    };
    ResponseKind::ListConfigResources(ListConfigResourcesResponse::default().with_error_code(code))
}

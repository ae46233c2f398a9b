//! The controller's config administration, shared by AlterConfigs (key 33) and
//! IncrementalAlterConfigs (key 44): resources named as Kafka names them, checked with the
//! validator apply uses (`onelog_state::configs::altered`), then one Raft entry per request.
//!
//! Kafka's admin client sends these requests to any broker (a broker's own configs to that
//! broker), and Kafka brokers forward them to the controller. A follower here does the same:
//! it forwards the request to the leader and answers once it has applied the change itself,
//! so a DescribeConfigs sent to it next sees the new value.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;

use crate::authz;
use crate::config::BrokerConfig;
use crate::ctx::Ctx;
use crate::errors::{propose_error_code, Addressed};
use crate::net::forward;
use onelog_state::command::{AlterConfigsOp, ItemResult};
use onelog_state::configs::{
    altered, AlterKind, ConfigAlteration, ConfigResource, Overrides, ResourceAlteration,
};
use onelog_state::BrokerState;

/// Kafka's ConfigResource.Type codes.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_CLIENT_METRICS: i8 = 16;
pub const RESOURCE_GROUP: i8 = 32;

/// One resource of a request as decoded: (name, operation code, value) per config.
pub struct ResourceRequest<'a> {
    pub resource_type: i8,
    pub resource_name: &'a str,
    /// AlterConfigs: the configs given become the resource's whole set of overrides.
    pub replace: bool,
    pub configs: Vec<(String, i8, Option<String>)>,
}

/// A resource the request names, or why it cannot be altered.
pub type Parsed = Result<ResourceAlteration, (i16, String)>;

/// Names the resource and its alterations; refuses what Kafka refuses before looking at any
/// value: unknown resource types and operations, another broker's id, read-only broker configs.
fn parse(ctx: &Ctx, req: ResourceRequest<'_>, forwarded: bool) -> Parsed {
    let name = req.resource_name;
    let resource = match req.resource_type {
        RESOURCE_TOPIC => ConfigResource::Topic(name.to_string()),
        RESOURCE_BROKER if name.is_empty() => ConfigResource::BrokerDefault,
        RESOURCE_BROKER => broker_resource(ctx, name, forwarded)?,
        RESOURCE_GROUP => ConfigResource::Group(name.to_string()),
        RESOURCE_CLIENT_METRICS => ConfigResource::ClientMetrics(name.to_string()),
        other => return Err((error_code::INVALID_REQUEST, format!("Unsupported resource type {other}."))),
    };
    let mut alterations = Vec::with_capacity(req.configs.len());
    for (config, code, value) in req.configs {
        let kind = AlterKind::from_code(code).ok_or_else(|| {
            (error_code::INVALID_REQUEST, format!("Unknown alter config operation {code}."))
        })?;
        if matches!(resource, ConfigResource::Broker(_) | ConfigResource::BrokerDefault) {
            if let Some(problem) = BrokerConfig::read_only_problem(&config) {
                return Err(problem);
            }
        }
        alterations.push(ConfigAlteration { name: config, kind, value });
    }
    Ok(ResourceAlteration { resource, replace: req.replace, alterations })
}

/// A broker id: this node's, or, in a request a follower forwarded, any member's.
fn broker_resource(ctx: &Ctx, name: &str, forwarded: bool) -> Result<ConfigResource, (i16, String)> {
    let me = ctx.node_id as i32;
    let id = name.parse::<i32>().ok();
    let known = id.is_some_and(|id| id == me || (forwarded && ctx.leadership.voter_ids().contains(&id)));
    match id {
        Some(id) if known => Ok(ConfigResource::Broker(id)),
        _ => Err((
            error_code::INVALID_REQUEST,
            format!("Unexpected broker id, expected {me} or empty string, but received {name}"),
        )),
    }
}

/// Checks every resource against the applied state and, unless `validate_only`, puts the
/// valid ones in one entry; one result per resource, in request order.
async fn alter(ctx: &Ctx, resources: Vec<Parsed>, validate_only: bool) -> Vec<ItemResult> {
    let checked: Vec<Parsed> = ctx.applied.state(|state| {
        resources.into_iter().map(|r| r.and_then(|r| preview(state, &r).map(|()| r))).collect()
    });
    let valid: Vec<ResourceAlteration> = checked.iter().filter_map(|r| r.as_ref().ok().cloned()).collect();
    let mut committed = if validate_only || valid.is_empty() {
        vec![(error_code::NONE, None); valid.len()]
    } else {
        let n = valid.len();
        ctx.proposer
            .propose(AlterConfigsOp { resources: valid })
            .await
            .unwrap_or_else(|e| vec![(propose_error_code(&e, Addressed::Controller), Some(e.to_string())); n])
    }
    .into_iter();
    checked
        .into_iter()
        .map(|r| match r {
            Ok(_) => committed.next().unwrap_or((error_code::NONE, None)),
            Err((code, message)) => (code, Some(message)),
        })
        .collect()
}

/// What apply would answer on the state as it is now.
fn preview(state: &BrokerState, change: &ResourceAlteration) -> Result<(), (i16, String)> {
    let empty = Overrides::new();
    let current = match &change.resource {
        ConfigResource::Topic(name) => match state.topics.get(name) {
            Some(topic) => &topic.configs,
            None => {
                return Err((
                    error_code::UNKNOWN_TOPIC_OR_PARTITION,
                    format!("The topic '{name}' does not exist."),
                ))
            }
        },
        ConfigResource::BrokerDefault => &state.configs.broker_default,
        ConfigResource::Broker(id) => state.configs.brokers.get(id).unwrap_or(&empty),
        ConfigResource::Group(name) => state.configs.groups.get(name).unwrap_or(&empty),
        ConfigResource::ClientMetrics(name) => state.configs.client_metrics.get(name).unwrap_or(&empty),
    };
    altered(current, change).map(|_| ())
}

/// Whether a follower forwarded this request (the leader never forwards it again).
pub fn is_forwarded(_req: &Request) -> bool {
    forward::is_forwarded()
}

/// What serving a request came to: the leader's own answer when a follower forwarded it, or
/// one result per resource, in request order.
pub enum Served {
    Forwarded(Box<ResponseKind>),
    Results(Vec<ItemResult>),
}

/// The request as its handler decoded it.
pub struct AlterRequest<'a> {
    pub key: ApiKey,
    pub version: i16,
    /// Sent by a follower (the leader never forwards it again).
    pub forwarded: bool,
    /// Who sent it, for the leader when it is forwarded.
    pub origin: forward::Origin,
    pub resources: Vec<ResourceRequest<'a>>,
    pub validate_only: bool,
}

/// Serves AlterConfigs or IncrementalAlterConfigs: the leader (or a forwarded request)
/// checks and proposes; a follower forwards `body` to the leader (NOT_CONTROLLER if it
/// cannot, which admin clients retry).
pub async fn serve(
    ctx: &Ctx,
    req: AlterRequest<'_>,
    body: impl FnOnce() -> RequestKind,
    succeeded: fn(&ResponseKind) -> bool,
) -> Served {
    let n = req.resources.len();
    if ctx.may_propose() || req.forwarded {
        let who = authz::Subject { principal: req.origin.principal.clone(), host: req.origin.client_address };
        let parsed = req
            .resources
            .into_iter()
            .map(|r| {
                // KafkaApis: ALTER_CONFIGS on the resource (the cluster for a broker).
                match authz::config_refusal(
                    ctx,
                    &who,
                    r.resource_type,
                    r.resource_name,
                    authz::op::ALTER_CONFIGS,
                ) {
                    Some(code) => Err((code, String::new())),
                    None => parse(ctx, r, req.forwarded),
                }
            })
            .collect();
        return Served::Results(alter(ctx, parsed, req.validate_only).await);
    }
    // Settled once this node has applied an alteration after the leader's (when it made one).
    let before = ctx.applied.state(|s| s.configs.changes);
    let settled = |response: &ResponseKind, s: &onelog_state::BrokerState| {
        !succeeded(response) || s.configs.changes > before
    };
    match forward::relay(ctx, &req.origin, req.key, req.version, body(), settled).await {
        Some(response) => Served::Forwarded(Box::new(response)),
        None => {
            Served::Results(vec![(error_code::NOT_CONTROLLER, Some("No leader to forward to.".into())); n])
        }
    }
}

/// Each resource's response item, built by `make(resource type, resource name, code, message)`.
pub fn responses<T>(
    names: Vec<(i8, StrBytes)>,
    results: Vec<ItemResult>,
    make: impl Fn(i8, StrBytes, i16, Option<StrBytes>) -> T,
) -> Vec<T> {
    let message = |m: Option<String>| m.map(StrBytes::from_string);
    names.into_iter().zip(results).map(|((t, n), (code, m))| make(t, n, code, message(m))).collect()
}

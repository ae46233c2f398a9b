//! The controller's config administration, shared by AlterConfigs (key 33) and
//! IncrementalAlterConfigs (key 44): resources named as Kafka names them, checked with the
//! validator apply uses (`onelog_state::configs::altered`), then one Raft entry per request.
//!
//! Kafka's admin client sends these requests to any broker (a broker's own configs to that
//! broker), and Kafka brokers forward them to the controller. A follower here does the same:
//! it forwards the request to the leader at dispatch (`Route::Leader` on the handlers'
//! registry rows) and answers once its applied state shows the change
//! ([`shows_alterations`]), so a DescribeConfigs sent to it next sees the new value.

use kafka_compat::error_code;
use kafka_protocol::protocol::StrBytes;

use crate::config::{BrokerConfig, Settings};
use crate::ctx::Ctx;
use crate::errors::{propose_error_code, Addressed};
use crate::security::authz;
use onelog_state::command::{AlterConfigsOp, ItemResult};
use onelog_state::configs::{
    altered, AlterKind, ConfigAlteration, ConfigResource, Overrides, ResourceAlteration,
};
use onelog_state::features::{ONELOG_VERSION, ONELOG_VERSION_CONSUMER_GROUPS};
use onelog_state::group_config::{leader_problem, refused_by_0_1_0, BrokerGroupConfigs};
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
        RESOURCE_BROKER if !name.is_empty() => broker_resource(ctx, name, forwarded)?,
        other => resource(other, name)
            .ok_or_else(|| (error_code::INVALID_REQUEST, format!("Unsupported resource type {other}.")))?,
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

/// The resource a request names, unchecked (a broker id as given); `None` for an unknown type.
fn resource(resource_type: i8, name: &str) -> Option<ConfigResource> {
    Some(match resource_type {
        RESOURCE_TOPIC => ConfigResource::Topic(name.to_string()),
        RESOURCE_BROKER if name.is_empty() => ConfigResource::BrokerDefault,
        RESOURCE_BROKER => ConfigResource::Broker(name.parse().ok()?),
        RESOURCE_GROUP => ConfigResource::Group(name.to_string()),
        RESOURCE_CLIENT_METRICS => ConfigResource::ClientMetrics(name.to_string()),
        _ => return None,
    })
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
    let groups = &ctx.config.settings;
    let checked: Vec<Parsed> = ctx.applied.state(|state| {
        resources.into_iter().map(|r| r.and_then(|r| preview(state, &r, groups).map(|()| r))).collect()
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

/// What apply would answer on the state as it is now, and, for a group, what only the
/// leader checks because it depends on the broker's configs (`group_config::leader_problem`).
fn preview(state: &BrokerState, change: &ResourceAlteration, groups: &Settings) -> Result<(), (i16, String)> {
    let empty = Overrides::new();
    if let ConfigResource::Group(name) = &change.resource {
        if name.is_empty() {
            // Kafka's controller (`validateGroupName`), before any key is looked at.
            return Err((error_code::INVALID_REQUEST, "Default group resources are not allowed.".into()));
        }
    }
    let next = altered(overrides(state, &change.resource, &empty)?, change)?;
    if matches!(change.resource, ConfigResource::Group(_)) {
        let invalid = |message| (error_code::INVALID_CONFIG, message);
        if state.features.level(ONELOG_VERSION) < ONELOG_VERSION_CONSUMER_GROUPS {
            change.alterations.iter().find_map(refused_by_0_1_0).map_or(Ok(()), |m| Err(invalid(m)))?;
        }
        let (consumer, streams, share) = (&groups.consumer_group, &groups.streams_group, &groups.share_group);
        let broker = BrokerGroupConfigs {
            consumer: &consumer.settings,
            consumer_bounds: &consumer.bounds,
            streams: &streams.settings,
            streams_bounds: &streams.bounds,
            share: &share.settings,
            share_bounds: &share.bounds,
        };
        if let Some(problem) = leader_problem(&next, broker) {
            return Err(invalid(problem));
        }
    }
    Ok(())
}

/// A resource's overrides in `state` (`empty` when it has none), or why a topic has none.
fn overrides<'a>(
    state: &'a BrokerState,
    resource: &ConfigResource,
    empty: &'a Overrides,
) -> Result<&'a Overrides, (i16, String)> {
    Ok(match resource {
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
        ConfigResource::Broker(id) => state.configs.brokers.get(id).unwrap_or(empty),
        ConfigResource::Group(name) => state.configs.groups.get(name).unwrap_or(empty),
        ConfigResource::ClientMetrics(name) => state.configs.client_metrics.get(name).unwrap_or(empty),
    })
}

/// Whether `state` shows every alteration of a request the leader accepted (`codes`: its
/// answer, one per resource in request order): applying each again would change nothing (set,
/// delete, append and subtract are idempotent). A follower answers a forwarded request once
/// it does, so a DescribeConfigs sent to it next sees the new values. A topic not here yet
/// is not settled; a validation changes nothing to wait for.
pub fn shows_alterations(
    state: &BrokerState,
    resources: Vec<ResourceRequest<'_>>,
    codes: &[i16],
    validate_only: bool,
) -> bool {
    let empty = Overrides::new();
    let shows = |change: &ResourceAlteration| match overrides(state, &change.resource, &empty) {
        Ok(current) => !altered(current, change).is_ok_and(|next| next != *current),
        Err(_) => false,
    };
    validate_only
        || resources
            .into_iter()
            .zip(codes)
            .filter(|(_, code)| **code == error_code::NONE)
            .all(|(r, _)| accepted(r).as_ref().is_none_or(&shows))
}

/// The alteration the leader accepted, as the request names it (the leader checked it).
fn accepted(req: ResourceRequest<'_>) -> Option<ResourceAlteration> {
    let resource = resource(req.resource_type, req.resource_name)?;
    let alterations = req
        .configs
        .into_iter()
        .map(|(name, code, value)| Some(ConfigAlteration { name, kind: AlterKind::from_code(code)?, value }))
        .collect::<Option<Vec<_>>>()?;
    Some(ResourceAlteration { resource, replace: req.replace, alterations })
}

/// The request as its handler decoded it.
pub struct AlterRequest<'a> {
    /// Forwarded by a follower (`Request::forwarded`): a broker resource may be any member's.
    pub forwarded: bool,
    pub who: authz::Subject,
    pub resources: Vec<ResourceRequest<'a>>,
    pub validate_only: bool,
}

/// Serves AlterConfigs or IncrementalAlterConfigs, one result per resource in request order:
/// the leader (or a node serving a forwarded request) checks and proposes. A follower only
/// runs this when the leader could not be asked at dispatch: NOT_CONTROLLER, which admin
/// clients retry.
pub async fn serve(ctx: &Ctx, req: AlterRequest<'_>) -> Vec<ItemResult> {
    if !ctx.may_propose() && !req.forwarded {
        return vec![
            (error_code::NOT_CONTROLLER, Some("No leader to forward to.".into()));
            req.resources.len()
        ];
    }
    let parsed = req
        .resources
        .into_iter()
        .map(|r| {
            // KafkaApis: ALTER_CONFIGS on the resource (the cluster for a broker).
            match ctx.authorizer.config_refusal(
                &req.who,
                r.resource_type,
                r.resource_name,
                authz::op::ALTER_CONFIGS,
            ) {
                Some(code) => Err((code, String::new())),
                None => parse(ctx, r, req.forwarded),
            }
        })
        .collect();
    alter(ctx, parsed, req.validate_only).await
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

#[cfg(test)]
mod tests {
    use super::*;

    const SET: i8 = 0;
    const DELETE: i8 = 1;
    const APPEND: i8 = 2;

    fn group(name: &'static str, configs: &[(&str, i8, Option<&str>)]) -> ResourceRequest<'static> {
        ResourceRequest {
            resource_type: RESOURCE_GROUP,
            resource_name: name,
            replace: false,
            configs: configs.iter().map(|(n, op, v)| (n.to_string(), *op, v.map(str::to_string))).collect(),
        }
    }

    fn state_with(group_name: &str, overrides: &[(&str, &str)]) -> BrokerState {
        let mut state = BrokerState::default();
        let overrides = overrides.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        state.configs.groups.insert(group_name.to_string(), overrides);
        state
    }

    #[test]
    fn a_follower_waits_until_it_shows_what_the_leader_accepted() {
        let asked = || vec![group("g", &[("consumer.session.timeout.ms", SET, Some("50000"))])];
        let before = BrokerState::default();
        let after = state_with("g", &[("consumer.session.timeout.ms", "50000")]);
        assert!(!shows_alterations(&before, asked(), &[error_code::NONE], false));
        assert!(shows_alterations(&after, asked(), &[error_code::NONE], false));
        // Nothing to wait for: the leader refused it, or only validated it.
        assert!(shows_alterations(&before, asked(), &[error_code::INVALID_CONFIG], false));
        assert!(shows_alterations(&before, asked(), &[error_code::NONE], true));
    }

    #[test]
    fn deletions_and_list_appends_show_once_applied() {
        let delete = || vec![group("g", &[("consumer.session.timeout.ms", DELETE, None)])];
        let set = state_with("g", &[("consumer.session.timeout.ms", "50000")]);
        assert!(!shows_alterations(&set, delete(), &[error_code::NONE], false));
        assert!(shows_alterations(&BrokerState::default(), delete(), &[error_code::NONE], false));

        let append = || {
            vec![ResourceRequest {
                resource_type: RESOURCE_CLIENT_METRICS,
                resource_name: "m",
                replace: false,
                configs: vec![("metrics".to_string(), APPEND, Some("a".to_string()))],
            }]
        };
        let mut appended = BrokerState::default();
        appended.configs.client_metrics.insert("m".into(), [("metrics".into(), "a".into())].into());
        assert!(!shows_alterations(&BrokerState::default(), append(), &[error_code::NONE], false));
        assert!(shows_alterations(&appended, append(), &[error_code::NONE], false));
    }

    #[test]
    fn a_topic_not_applied_here_yet_is_not_settled() {
        let topic = || {
            vec![ResourceRequest {
                resource_type: RESOURCE_TOPIC,
                resource_name: "t",
                replace: false,
                configs: vec![("retention.ms".to_string(), SET, Some("1000".to_string()))],
            }]
        };
        assert!(!shows_alterations(&BrokerState::default(), topic(), &[error_code::NONE], false));
    }
}

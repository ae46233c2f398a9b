//! UpdateFeatures (key 57, KIP-584/KIP-778): raises or lowers finalized feature levels, as
//! `kafka-features.sh upgrade|downgrade|disable` and `Admin.updateFeatures` ask.
//!
//! The leader decides as Kafka's controller does (`FeatureControlManager.updateFeature`), in
//! this order, and the first failure refuses the whole request with INVALID_UPDATE_VERSION:
//! a known upgrade type; a level this build supports ("Local controller N …"); Kafka's
//! transition rules and dependencies against the finalized levels (`onelog_state::features`,
//! re-checked in apply); a level every other member's build supports, asked over the Raft
//! transport (`raft::transport::features`; a member that cannot answer, such as a node still
//! on onelog 0.1.0 during a rolling upgrade, refuses every update, since it could not even
//! read the op). Then one `UpdateFeatures` op, unless `validate_only`.
//!
//! Any node accepts the request (the admin client sends it to any broker): a follower
//! forwards it to the leader at dispatch (`Route::Leader`).
//!
//! Access: CLUSTER ALTER, checked by the pipeline (`handlers::HANDLERS`).

use std::time::Duration;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{
    ApiKey, RequestKind, ResponseKind, UpdateFeaturesRequest, UpdateFeaturesResponse,
};
use onelog_state::command::Refusal;
use onelog_state::features::{FeatureUpdate, UpdateFeaturesOp, UpgradeType};
use onelog_state::BrokerState;

use super::util::str_bytes;
use super::{Forwarded, HandlerResult};
use crate::ctx::{Ctx, SharedCtx};
use crate::errors::{propose_error_code, Addressed};
use crate::limits;
use crate::raft::transport::features;
use crate::upgrade;

pub const KEY: ApiKey = ApiKey::UpdateFeatures;
pub const VERSIONS: (i16, i16) = (0, 2);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub const FORWARDED: Forwarded = Forwarded { when: |_| true, settled: shown };

/// Answered once the levels the leader finalized show here, so that ApiVersions sent here
/// next reports them.
fn shown(request: &RequestKind, response: &ResponseKind, state: &BrokerState) -> bool {
    let (RequestKind::UpdateFeatures(body), ResponseKind::UpdateFeatures(r)) = (request, response) else {
        return true;
    };
    body.validate_only
        || r.error_code != error_code::NONE
        || body.feature_updates.iter().all(|u| state.features.level(&u.feature) == u.max_version_level)
}

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::UpdateFeatures(body) = req.body else { anyhow::bail!("not an UpdateFeatures body") };
    // A follower the leader could not answer for at dispatch.
    if !ctx.may_propose() && !req.forwarded {
        return Ok(Some(refused(&RequestKind::UpdateFeatures(body), error_code::NOT_CONTROLLER)));
    }
    let outcome = update(&ctx, &body, req.header.request_api_version).await;
    Ok(Some(ResponseKind::UpdateFeatures(response(&body, req.header.request_api_version, outcome))))
}

/// Checks the request, asks the members and proposes; `Err` refuses every update.
async fn update(ctx: &Ctx, body: &UpdateFeaturesRequest, version: i16) -> Result<(), Refusal> {
    let updates = body
        .feature_updates
        .iter()
        .map(|u| {
            let upgrade_type = match version {
                0 if u.allow_downgrade => Some(UpgradeType::SafeDowngrade),
                0 => Some(UpgradeType::Upgrade),
                _ => UpgradeType::from_code(u.upgrade_type),
            };
            let name = u.feature.to_string();
            let level = u.max_version_level;
            let upgrade_type = upgrade_type.ok_or_else(|| {
                invalid(&name, level, "The controller does not support the given upgrade type.")
            })?;
            Ok(FeatureUpdate { name, level, upgrade_type })
        })
        .collect::<Result<Vec<_>, Refusal>>()?;
    for update in &updates {
        let range = upgrade::supported(&update.name);
        not_supported(update, &format!("Local controller {}", ctx.node_id), (*range.start(), *range.end()))?;
    }
    ctx.applied.state(|s| s.features.check(&updates))?;
    members_support(ctx, &updates).await?;
    if body.validate_only {
        return Ok(());
    }
    tracing::warn!(?updates, "finalizing feature levels");
    match ctx.proposer.propose(UpdateFeaturesOp { updates }).await {
        Ok(applied) => applied,
        Err(e) => Err(Refusal {
            error_code: propose_error_code(&e, Addressed::Controller),
            message: format!("the feature update did not commit: {e}"),
        }),
    }
}

/// Asks every other member which levels its build supports; each must support every update.
async fn members_support(ctx: &Ctx, updates: &[FeatureUpdate]) -> Result<(), Refusal> {
    let members: Vec<(u64, String)> = ctx
        .applied
        .read(|a| a.membership.membership().nodes().map(|(id, addr)| (*id, addr.raft.clone())).collect());
    let ttl = Duration::from_millis(limits::FEATURES_QUERY_TIMEOUT_MS);
    let mut asks = tokio::task::JoinSet::new();
    for (id, addr) in members.into_iter().filter(|(id, _)| *id != ctx.node_id) {
        let identity = ctx.peers.identity().clone();
        asks.spawn(async move { (id, features::ask(&identity, id, &addr, ttl).await) });
    }
    let mut answers = Vec::new();
    while let Some(answer) = asks.join_next().await {
        answers.push(answer.map_err(|e| invalid(&updates[0].name, updates[0].level, &e.to_string()))?);
    }
    answers.sort_by_key(|(id, _)| *id);
    for (id, answer) in answers {
        let supported = answer.map_err(|e| {
            let why = format!(
                "Broker {id} did not say which feature levels it supports ({e}): a build older than onelog \
                 0.2.0 cannot apply a feature update."
            );
            invalid(&updates[0].name, updates[0].level, &why)
        })?;
        for update in updates {
            not_supported(update, &format!("Broker {id}"), supported.range(&update.name))?;
        }
    }
    Ok(())
}

/// Kafka's `QuorumFeatures.reasonNotSupported` for one member's range.
fn not_supported(update: &FeatureUpdate, who: &str, (min, max): (i16, i16)) -> Result<(), Refusal> {
    if (min..=max).contains(&update.level) {
        return Ok(());
    }
    let why = if max == 0 {
        format!("{who} does not support this feature.")
    } else if min == max {
        format!("{who} only supports versions {min}")
    } else {
        format!("{who} only supports versions {min}-{max}")
    };
    Err(invalid(&update.name, update.level, &why))
}

fn invalid(name: &str, level: i16, why: &str) -> Refusal {
    Refusal {
        error_code: error_code::INVALID_UPDATE_VERSION,
        message: format!("Invalid update version {level} for feature {name}. {why}"),
    }
}

/// Kafka's answer (`QuorumController.updateFeatures`): a failure is top-level for all
/// features, with its prefix; v0–v1 list each feature only on success.
fn response(
    body: &UpdateFeaturesRequest,
    version: i16,
    outcome: Result<(), Refusal>,
) -> UpdateFeaturesResponse {
    match outcome {
        Ok(()) => {
            let results = if version <= 1 {
                body.feature_updates
                    .iter()
                    .map(|u| {
                        UpdatableFeatureResult::default().with_feature(u.feature.clone()).with_error_code(0)
                    })
                    .collect()
            } else {
                Vec::new()
            };
            UpdateFeaturesResponse::default().with_results(results)
        }
        Err(refusal) => {
            tracing::info!(message = %refusal.message, "feature update refused");
            let message = if refusal.error_code == error_code::INVALID_UPDATE_VERSION {
                format!(
                    "The update failed for all features since the following feature had an error: {}",
                    refusal.message
                )
            } else {
                refusal.message
            };
            UpdateFeaturesResponse::default()
                .with_error_code(refusal.error_code)
                .with_error_message(Some(str_bytes(&message)))
        }
    }
}

/// The whole request refused with `code` at the top level, no feature listed
/// (`UpdateFeaturesRequest.getErrorResponse`).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::UpdateFeatures(_) = body else {
        return ResponseKind::UpdateFeatures(Default::default());
    };
    ResponseKind::UpdateFeatures(
        UpdateFeaturesResponse::default().with_error_code(code).with_error_message(None),
    )
}

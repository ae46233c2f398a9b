//! UpdateFeatures (key 57), v0–v1: onelog's one feature, `transaction.version`, is fixed at 2
//! (see api_versions); nothing can be upgraded or downgraded. Answered FEATURE_UPDATE_FAILED
//! (96) with a message, at the top level, for the whole request.

use kafka_compat::codec::Request;
use kafka_compat::error_code::FEATURE_UPDATE_FAILED;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind, UpdateFeaturesResponse};

use super::util::str_bytes;
use super::{not_served, HandlerResult};
use crate::authz::{self, code, op, Subject};
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::UpdateFeatures;
pub const VERSIONS: (i16, i16) = (0, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 0;
const MESSAGE: &str = "onelog's finalized features are fixed (transaction.version=2) and cannot be updated";

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::UpdateFeatures(_) = req.body else { anyhow::bail!("not a UpdateFeatures body") };
    // KafkaApis: ALTER on the cluster, before anything else.
    if !authz::cluster_allowed(&ctx, &who, op::ALTER) {
        return Ok(Some(ResponseKind::UpdateFeatures(
            UpdateFeaturesResponse::default().with_error_code(code::CLUSTER_AUTHORIZATION_FAILED),
        )));
    }
    not_served::log(
        KEY,
        "onelog's finalized features are fixed (transaction.version=2) and cannot be updated",
    );
    Ok(Some(ResponseKind::UpdateFeatures(
        UpdateFeaturesResponse::default()
            .with_error_code(FEATURE_UPDATE_FAILED)
            .with_error_message(Some(str_bytes(MESSAGE))),
    )))
}

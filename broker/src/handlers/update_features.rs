//! UpdateFeatures (key 57), v0–v1: onelog's one feature, `transaction.version`, is fixed at 2
//! (see api_versions); nothing can be upgraded or downgraded. Answered FEATURE_UPDATE_FAILED
//! (96) with a message, at the top level, for the whole request.
//!
//! Access: CLUSTER ALTER, checked by the pipeline (`handlers::HANDLERS`).

use kafka_compat::codec::Request;
use kafka_compat::error_code::FEATURE_UPDATE_FAILED;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind, UpdateFeaturesResponse};

use super::util::str_bytes;
use super::{not_served, HandlerResult};
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::UpdateFeatures;
pub const VERSIONS: (i16, i16) = (0, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 0;
const MESSAGE: &str = "onelog's finalized features are fixed (transaction.version=2) and cannot be updated";

pub async fn handle(_ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::UpdateFeatures(_) = req.body else { anyhow::bail!("not a UpdateFeatures body") };
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

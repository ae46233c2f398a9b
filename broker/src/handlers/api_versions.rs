//! ApiVersions (key 18): the versions of every API in the handler registry.
//!
//! A request above our max version never reaches here: the server answers it in v0 with
//! UNSUPPORTED_VERSION (KIP-511), see `server::route`.

use kafka_compat::codec::Request;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, ResponseKind};

use super::{HandlerResult, HANDLERS};
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::ApiVersions;
pub const VERSIONS: (i16, i16) = (0, 4);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

/// The advertised ranges, straight from the registry.
pub fn keys() -> Vec<ApiVersion> {
    HANDLERS
        .iter()
        .filter(|h| h.advertised)
        .map(|h| {
            ApiVersion::default()
                .with_api_key(h.key as i16)
                .with_min_version(h.min_version)
                .with_max_version(h.max_version)
        })
        .collect()
}

pub async fn handle(_ctx: SharedCtx, _req: Request) -> HandlerResult {
    let response = ApiVersionsResponse::default().with_error_code(0).with_api_keys(keys());
    Ok(Some(ResponseKind::ApiVersions(response)))
}

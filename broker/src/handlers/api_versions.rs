//! ApiVersions (key 18): the versions of every API in the handler registry.
//!
//! v3+ also carries features (KIP-584): `transaction.version` 2 is finalized, so Java 4.x
//! clients run transactions v2 (KIP-890 part 2: Produce v12 and TxnOffsetCommit v5 add
//! partitions and groups implicitly, EndTxn v5 bumps the epoch per transaction); clients that
//! do not read features (2.x/3.x, librdkafka) run transactions v1 against the same broker.
//!
//! A request above our max version never reaches here: the server answers it in v0 with
//! UNSUPPORTED_VERSION (KIP-511), see `server::route`.

use kafka_compat::codec::Request;
use kafka_protocol::messages::api_versions_response::{ApiVersion, FinalizedFeatureKey, SupportedFeatureKey};
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

/// KIP-890 part 2's feature, and the level onelog serves it at.
const TRANSACTION_VERSION: &str = "transaction.version";
const TRANSACTION_VERSION_LEVEL: i16 = 2;
/// Features never change in a running cluster, so their epoch is a constant (≥ 0 means
/// "finalized features present" to clients).
const FINALIZED_FEATURES_EPOCH: i64 = 1;

pub async fn handle(_ctx: SharedCtx, _req: Request) -> HandlerResult {
    let name = || super::util::str_bytes(TRANSACTION_VERSION);
    let response = ApiVersionsResponse::default()
        .with_error_code(0)
        .with_api_keys(keys())
        .with_supported_features(vec![SupportedFeatureKey::default()
            .with_name(name())
            .with_min_version(0)
            .with_max_version(TRANSACTION_VERSION_LEVEL)])
        .with_finalized_features_epoch(FINALIZED_FEATURES_EPOCH)
        .with_finalized_features(vec![FinalizedFeatureKey::default()
            .with_name(name())
            .with_min_version_level(TRANSACTION_VERSION_LEVEL)
            .with_max_version_level(TRANSACTION_VERSION_LEVEL)]);
    Ok(Some(ResponseKind::ApiVersions(response)))
}

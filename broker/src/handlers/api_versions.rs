//! ApiVersions (key 18): the versions of every API in the handler registry.
//!
//! v3+ also carries features (KIP-584): the levels this build supports (`upgrade::SUPPORTED`)
//! and the ones the cluster finalized (`onelog_state::features`, changed by UpdateFeatures).
//! With `transaction.version` 2 finalized (every cluster's level unless an operator lowers
//! it), Java 4.x clients run transactions v2 (KIP-890 part 2: Produce v12 and TxnOffsetCommit
//! v5 add partitions and groups implicitly, EndTxn v5 bumps the epoch per transaction);
//! clients that do not read features (2.x/3.x, librdkafka) run transactions v1 against the
//! same broker.
//!
//! A request above our max version never reaches here: the server answers it in v0 with
//! UNSUPPORTED_VERSION (KIP-511), see `server::route`.

use kafka_compat::codec::Request;
use kafka_protocol::messages::api_versions_response::{ApiVersion, FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, ResponseKind};

use super::{HandlerResult, HANDLERS};
use crate::ctx::SharedCtx;
use crate::upgrade;

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

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let (finalized, epoch) = ctx.applied.state(|s| (s.features.finalized(), s.features.epoch()));
    let response = ApiVersionsResponse::default()
        .with_error_code(0)
        .with_api_keys(keys())
        .with_supported_features(supported_features(req.header.request_api_version))
        .with_finalized_features_epoch(epoch)
        .with_finalized_features(
            finalized
                .into_iter()
                .map(|(name, level)| {
                    FinalizedFeatureKey::default()
                        .with_name(super::util::str_bytes(&name))
                        .with_min_version_level(level)
                        .with_max_version_level(level)
                })
                .collect(),
        );
    Ok(Some(ResponseKind::ApiVersions(response)))
}

/// This build's supported levels (`upgrade::SUPPORTED`). Below v4, a feature whose minimum is
/// 0 is left out, as Kafka does (KAFKA-17492): clients before 3.9 refuse a response with one.
fn supported_features(version: i16) -> Vec<SupportedFeatureKey> {
    upgrade::SUPPORTED
        .iter()
        .filter(|(_, min, _)| version >= 4 || *min > 0)
        .map(|(name, min, max)| {
            SupportedFeatureKey::default()
                .with_name(super::util::str_bytes(*name))
                .with_min_version(*min)
                .with_max_version(*max)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_with_a_minimum_of_0_are_left_out_below_v4() {
        let names =
            |version| supported_features(version).into_iter().map(|f| f.name.to_string()).collect::<Vec<_>>();
        assert_eq!(names(3), vec!["onelog.version"]);
        assert_eq!(
            names(4),
            vec![
                "onelog.version",
                "transaction.version",
                "group.version",
                "streams.version",
                "share.version",
                "onelog.group.placement"
            ]
        );
    }
}

//! DescribeDelegationToken (key 41), v1–v3: onelog has no delegation tokens (they need SASL, not built
//! yet). Kafka without `delegation.token.secret.key` answers DELEGATION_TOKEN_AUTH_DISABLED
//! (61); so does onelog, so `kafka-delegation-tokens.sh` reports the feature as disabled.

use kafka_compat::codec::Request;
use kafka_compat::error_code::DELEGATION_TOKEN_AUTH_DISABLED;
use kafka_protocol::messages::{ApiKey, DescribeDelegationTokenResponse, RequestKind, ResponseKind};

use super::{not_served, HandlerResult};
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::DescribeDelegationToken;
pub const VERSIONS: (i16, i16) = (1, 3);
pub const ACCEPTED_MIN_VERSION: i16 = 1;

pub async fn handle(_ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::DescribeDelegationToken(_) = req.body else {
        anyhow::bail!("not a DescribeDelegationToken body")
    };
    not_served::log(KEY, "Delegation tokens are not supported by onelog (no SASL yet)");
    Ok(Some(ResponseKind::DescribeDelegationToken(
        DescribeDelegationTokenResponse::default().with_error_code(DELEGATION_TOKEN_AUTH_DISABLED),
    )))
}

//! SaslHandshake (key 17), v0–v1, when it reaches a handler: on a SASL listener the
//! connection's read loop serves the exchange itself (`security::sasl::session`), so a handshake
//! gets here only on a listener without SASL, or after authentication when re-authentication
//! is off. Kafka answers both ILLEGAL_SASL_STATE.

use kafka_compat::codec::Request;
use kafka_protocol::messages::{ApiKey, ResponseKind, SaslHandshakeResponse};

use super::HandlerResult;
use crate::ctx::SharedCtx;
use crate::security::sasl::ILLEGAL_SASL_STATE;

pub const KEY: ApiKey = ApiKey::SaslHandshake;
pub const VERSIONS: (i16, i16) = (0, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(_ctx: SharedCtx, _req: Request) -> HandlerResult {
    Ok(Some(ResponseKind::SaslHandshake(
        SaslHandshakeResponse::default().with_error_code(ILLEGAL_SASL_STATE),
    )))
}

//! SaslAuthenticate (key 36), v0–v2, when it reaches a handler: on a SASL listener the
//! connection's read loop serves the exchange (`security::sasl::session`), so this is a listener
//! without SASL, or an authenticated connection that is not re-authenticating. Kafka answers
//! ILLEGAL_SASL_STATE with this message (`KafkaApis.handleSaslAuthenticateRequest`).

use kafka_compat::codec::Request;
use kafka_protocol::messages::{ApiKey, ResponseKind, SaslAuthenticateResponse};

use super::util::str_bytes;
use super::HandlerResult;
use crate::ctx::SharedCtx;
use crate::security::sasl::ILLEGAL_SASL_STATE;

pub const KEY: ApiKey = ApiKey::SaslAuthenticate;
pub const VERSIONS: (i16, i16) = (0, 2);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(_ctx: SharedCtx, _req: Request) -> HandlerResult {
    let response =
        SaslAuthenticateResponse::default().with_error_code(ILLEGAL_SASL_STATE).with_error_message(Some(
            str_bytes("SaslAuthenticate request received after successful authentication"),
        ));
    Ok(Some(ResponseKind::SaslAuthenticate(response)))
}

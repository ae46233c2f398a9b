//! PushTelemetry (key 72), v0 (KIP-714): the subscription onelog hands out requests no metrics
//! (see get_telemetry_subscriptions), so no client has reason to push. A push is answered
//! UNKNOWN_SUBSCRIPTION_ID (117), which makes a client fetch its subscription again, as Kafka
//! answers a push for a subscription it does not know; nothing is stored.

use kafka_compat::codec::Request;
use kafka_compat::error_code::UNKNOWN_SUBSCRIPTION_ID;
use kafka_protocol::messages::{ApiKey, PushTelemetryResponse, RequestKind, ResponseKind};

use super::{not_served, HandlerResult};
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::PushTelemetry;
pub const VERSIONS: (i16, i16) = (0, 0);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(_ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::PushTelemetry(_) = req.body else { anyhow::bail!("not a PushTelemetry body") };
    not_served::log(KEY, "client metrics are not collected (the subscription requests none)");
    Ok(Some(ResponseKind::PushTelemetry(
        PushTelemetryResponse::default().with_error_code(UNKNOWN_SUBSCRIPTION_ID),
    )))
}

//! GetTelemetrySubscriptions (key 71), v0 (KIP-714): answered as Kafka answers when no
//! client-metrics resource is configured: a subscription that requests no metrics, so a Java
//! 3.7+ client never pushes and asks again only after the push interval (Kafka's default five
//! minutes). A client without an instance id (the zero UUID) gets a fresh one, as Kafka
//! assigns it; onelog keeps nothing per client.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::{ApiKey, GetTelemetrySubscriptionsResponse, RequestKind, ResponseKind};

use super::HandlerResult;
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::GetTelemetrySubscriptions;
pub const VERSIONS: (i16, i16) = (0, 0);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

/// Kafka's `ClientMetricsConfigs` default push interval, used when no subscription matches.
const PUSH_INTERVAL_MS: i32 = 5 * 60 * 1000;
/// Kafka's default `telemetry.max.bytes`.
const TELEMETRY_BYTES_MAX: i32 = 1024 * 1024;
/// The one (empty) subscription every client gets; never matched by a push (see push_telemetry).
const EMPTY_SUBSCRIPTION_ID: i32 = 0;

pub async fn handle(_ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::GetTelemetrySubscriptions(body) = req.body else {
        anyhow::bail!("not a GetTelemetrySubscriptions body")
    };
    let instance =
        if body.client_instance_id.is_nil() { uuid::Uuid::new_v4() } else { body.client_instance_id };
    // One line per ask: harness/tests/telemetry.rs counts them to show clients do not retry.
    tracing::debug!(client_instance = %instance, "empty telemetry subscription served");
    Ok(Some(ResponseKind::GetTelemetrySubscriptions(
        GetTelemetrySubscriptionsResponse::default()
            .with_error_code(error_code::NONE)
            .with_client_instance_id(instance)
            .with_subscription_id(EMPTY_SUBSCRIPTION_ID)
            .with_push_interval_ms(PUSH_INTERVAL_MS)
            .with_telemetry_max_bytes(TELEMETRY_BYTES_MAX)
            .with_delta_temporality(true)
            .with_requested_metrics(Vec::new()),
    )))
}

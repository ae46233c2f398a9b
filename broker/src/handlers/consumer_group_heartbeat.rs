//! ConsumerGroupHeartbeat (key 68), v0–v1: KIP-848's consumer group protocol is not served;
//! every request is answered UNSUPPORTED_VERSION. The key is not advertised in ApiVersions.
//!
//! A client that checks ApiVersions first (Java 4.x with `group.protocol=consumer`) fails
//! before sending, telling the user to set `group.protocol=classic`. One that sends anyway
//! gets an answer instead of a dropped connection: Java treats UNSUPPORTED_VERSION in this
//! response as fatal with the same advice, while a dropped connection is retried forever.
//! Apache Kafka answers the same (`KafkaApis.handleConsumerGroupHeartbeat`) when the new
//! protocol is not enabled.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::{ApiKey, ConsumerGroupHeartbeatResponse, RequestKind, ResponseKind};

use super::util::str_bytes;
use super::HandlerResult;
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::ConsumerGroupHeartbeat;
pub const VERSIONS: (i16, i16) = (0, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

const MESSAGE: &str =
    "onelog serves the classic consumer group protocol only (KIP-848 is not supported); set group.protocol=classic";

pub async fn handle(_ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::ConsumerGroupHeartbeat(_) = req.body else {
        anyhow::bail!("not a ConsumerGroupHeartbeat body")
    };
    let response = ConsumerGroupHeartbeatResponse::default()
        .with_error_code(error_code::UNSUPPORTED_VERSION)
        .with_error_message(Some(str_bytes(MESSAGE)));
    Ok(Some(ResponseKind::ConsumerGroupHeartbeat(response)))
}

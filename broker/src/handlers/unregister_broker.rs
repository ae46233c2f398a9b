//! UnregisterBroker (key 64), v0: KRaft's membership change. onelog's brokers are the voters of its
//! one openraft group, whose membership changes through the admin API, not the Kafka protocol:
//! answered INVALID_REQUEST (42) with a message naming the admin API's endpoints.
//!
//! Access: CLUSTER ALTER, checked by the pipeline (`handlers::HANDLERS`), as Kafka's controller.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind, UnregisterBrokerResponse};

use super::util::str_bytes;
use super::{not_served, HandlerResult};
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::UnregisterBroker;
pub const VERSIONS: (i16, i16) = (0, 0);
pub const ACCEPTED_MIN_VERSION: i16 = 0;
const MESSAGE: &str = "onelog changes Raft membership through its admin API (POST /members/add-learner, /members/promote, /members/remove)";

pub async fn handle(_ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::UnregisterBroker(_) = req.body else { anyhow::bail!("not a UnregisterBroker body") };
    not_served::log(KEY, "onelog changes Raft membership through its admin API (POST /members/add-learner, /members/promote, /members/remove)");
    Ok(Some(ResponseKind::UnregisterBroker(
        UnregisterBrokerResponse::default()
            .with_error_code(error_code::INVALID_REQUEST)
            .with_error_message(Some(str_bytes(MESSAGE))),
    )))
}

/// The whole request refused with `code` at the top level (`UnregisterBrokerRequest.getErrorResponse`).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::UnregisterBroker(_) = body else {
        return ResponseKind::UnregisterBroker(Default::default());
    };
    ResponseKind::UnregisterBroker(
        UnregisterBrokerResponse::default().with_error_code(code).with_error_message(None),
    )
}

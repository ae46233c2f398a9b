//! RemoveRaftVoter (key 81), v0: KRaft's membership change. onelog's brokers are the voters of its
//! one openraft group, whose membership changes through the admin API, not the Kafka protocol:
//! answered INVALID_REQUEST (42) with a message naming the admin API's endpoints.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::{ApiKey, RemoveRaftVoterResponse, RequestKind, ResponseKind};

use super::util::str_bytes;
use super::{not_served, HandlerResult};
use crate::authz::{self, code, op, Subject};
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::RemoveRaftVoter;
pub const VERSIONS: (i16, i16) = (0, 0);
pub const ACCEPTED_MIN_VERSION: i16 = 0;
const MESSAGE: &str = "onelog changes Raft membership through its admin API (POST /members/add-learner, /members/promote, /members/remove)";

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::RemoveRaftVoter(_) = req.body else { anyhow::bail!("not a RemoveRaftVoter body") };
    // KafkaApis: ALTER on the cluster, before anything else.
    if !authz::cluster_allowed(&ctx, &who, op::ALTER) {
        return Ok(Some(ResponseKind::RemoveRaftVoter(
            RemoveRaftVoterResponse::default().with_error_code(code::CLUSTER_AUTHORIZATION_FAILED),
        )));
    }
    not_served::log(KEY, "onelog changes Raft membership through its admin API (POST /members/add-learner, /members/promote, /members/remove)");
    Ok(Some(ResponseKind::RemoveRaftVoter(
        RemoveRaftVoterResponse::default()
            .with_error_code(error_code::INVALID_REQUEST)
            .with_error_message(Some(str_bytes(MESSAGE))),
    )))
}

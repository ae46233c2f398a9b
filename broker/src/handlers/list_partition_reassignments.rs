//! ListPartitionReassignments (key 46), v0: every partition lives on every Raft voter, so no
//! reassignment is ever in progress: the honest answer is NONE with no topics, which is what
//! Kafka answers when nothing is being reassigned.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::{ApiKey, ListPartitionReassignmentsResponse, RequestKind, ResponseKind};

use super::HandlerResult;
use crate::authz::{self, code, op, Subject};
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::ListPartitionReassignments;
pub const VERSIONS: (i16, i16) = (0, 0);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::ListPartitionReassignments(_) = req.body else {
        anyhow::bail!("not a ListPartitionReassignments body")
    };
    // KafkaApis: DESCRIBE on the cluster.
    if !authz::cluster_allowed(&ctx, &who, op::DESCRIBE) {
        return Ok(Some(ResponseKind::ListPartitionReassignments(
            ListPartitionReassignmentsResponse::default().with_error_code(code::CLUSTER_AUTHORIZATION_FAILED),
        )));
    }
    Ok(Some(ResponseKind::ListPartitionReassignments(
        ListPartitionReassignmentsResponse::default().with_error_code(error_code::NONE),
    )))
}

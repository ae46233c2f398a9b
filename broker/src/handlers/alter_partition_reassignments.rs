//! AlterPartitionReassignments (key 45), v0–v1: onelog places every partition on every Raft
//! voter; a partition cannot move to other replicas. Each partition is answered
//! INVALID_REPLICA_ASSIGNMENT (39) with a message pointing to the admin API's membership
//! endpoints, which move every partition at once.
//!
//! Access: CLUSTER ALTER, checked by the pipeline (`handlers::HANDLERS`).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_compat::error_code::INVALID_REPLICA_ASSIGNMENT;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey, RequestKind,
    ResponseKind,
};

use super::util::str_bytes;
use super::{not_served, HandlerResult};
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::AlterPartitionReassignments;
pub const VERSIONS: (i16, i16) = (0, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 0;
const MESSAGE: &str =
    "onelog places every partition on every Raft voter; change the voters through the admin API (/members)";

pub async fn handle(_ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::AlterPartitionReassignments(body) = req.body else {
        anyhow::bail!("not an AlterPartitionReassignments body")
    };
    not_served::log(KEY, MESSAGE);
    let mut response = AlterPartitionReassignmentsResponse::default()
        .with_error_code(error_code::NONE)
        .with_responses(each_partition(&body, INVALID_REPLICA_ASSIGNMENT, Some(MESSAGE)));
    if req.api_version >= 1 {
        response = response.with_allow_replication_factor_change(body.allow_replication_factor_change);
    }
    Ok(Some(ResponseKind::AlterPartitionReassignments(response)))
}

/// Every partition the request names, answered `code`.
fn each_partition(
    body: &AlterPartitionReassignmentsRequest,
    code: i16,
    message: Option<&str>,
) -> Vec<ReassignableTopicResponse> {
    body.topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    ReassignablePartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                        .with_error_message(message.map(str_bytes))
                })
                .collect();
            ReassignableTopicResponse::default().with_name(t.name.clone()).with_partitions(partitions)
        })
        .collect()
}

/// The whole request refused with `code` at the top level and on every partition it names
/// (`AlterPartitionReassignmentsRequest.getErrorResponse`).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::AlterPartitionReassignments(body) = body else {
        return ResponseKind::AlterPartitionReassignments(Default::default());
    };
    ResponseKind::AlterPartitionReassignments(
        AlterPartitionReassignmentsResponse::default()
            .with_error_code(code)
            .with_error_message(None)
            .with_responses(each_partition(body, code, None)),
    )
}

//! AlterPartitionReassignments (key 45), v0–v1: onelog places every partition on every Raft
//! voter; a partition cannot move to other replicas. Each partition is answered
//! INVALID_REPLICA_ASSIGNMENT (39) with a message pointing to the admin API's membership
//! endpoints, which move every partition at once.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_compat::error_code::INVALID_REPLICA_ASSIGNMENT;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{AlterPartitionReassignmentsResponse, ApiKey, RequestKind, ResponseKind};

use super::util::str_bytes;
use super::{not_served, HandlerResult};
use crate::authz::{self, code, op, Subject};
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::AlterPartitionReassignments;
pub const VERSIONS: (i16, i16) = (0, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 0;
const MESSAGE: &str =
    "onelog places every partition on every Raft voter; change the voters through the admin API (/members)";

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::AlterPartitionReassignments(body) = req.body else {
        anyhow::bail!("not an AlterPartitionReassignments body")
    };
    // KafkaApis: ALTER on the cluster.
    if !authz::cluster_allowed(&ctx, &who, op::ALTER) {
        return Ok(Some(ResponseKind::AlterPartitionReassignments(
            AlterPartitionReassignmentsResponse::default()
                .with_error_code(code::CLUSTER_AUTHORIZATION_FAILED),
        )));
    }
    not_served::log(KEY, MESSAGE);
    let responses = body
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    ReassignablePartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(INVALID_REPLICA_ASSIGNMENT)
                        .with_error_message(Some(str_bytes(MESSAGE)))
                })
                .collect();
            ReassignableTopicResponse::default().with_name(t.name).with_partitions(partitions)
        })
        .collect();
    let mut response = AlterPartitionReassignmentsResponse::default()
        .with_error_code(error_code::NONE)
        .with_responses(responses);
    if req.api_version >= 1 {
        response = response.with_allow_replication_factor_change(body.allow_replication_factor_change);
    }
    Ok(Some(ResponseKind::AlterPartitionReassignments(response)))
}

//! ListPartitionReassignments (key 46), v0: every partition lives on every Raft voter, so no
//! reassignment is ever in progress: the honest answer is NONE with no topics, which is what
//! Kafka answers when nothing is being reassigned.
//!
//! Access: CLUSTER DESCRIBE, checked by the pipeline (`handlers::HANDLERS`).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{ApiKey, ListPartitionReassignmentsResponse, RequestKind, ResponseKind};

use super::HandlerResult;
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::ListPartitionReassignments;
pub const VERSIONS: (i16, i16) = (0, 0);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(_ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::ListPartitionReassignments(_) = req.body else {
        anyhow::bail!("not a ListPartitionReassignments body")
    };
    Ok(Some(ResponseKind::ListPartitionReassignments(
        ListPartitionReassignmentsResponse::default().with_error_code(error_code::NONE),
    )))
}

/// The whole request refused with `code` at the top level, every partition it names listed
/// back with no replicas (`ListPartitionReassignmentsRequest.getErrorResponse`).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::ListPartitionReassignments(body) = body else {
        return ResponseKind::ListPartitionReassignments(Default::default());
    };
    let topics = body
        .topics
        .iter()
        .flatten()
        .map(|t| {
            let partitions = t
                .partition_indexes
                .iter()
                .map(|p| OngoingPartitionReassignment::default().with_partition_index(*p))
                .collect();
            OngoingTopicReassignment::default().with_name(t.name.clone()).with_partitions(partitions)
        })
        .collect();
    ResponseKind::ListPartitionReassignments(
        ListPartitionReassignmentsResponse::default()
            .with_error_code(code)
            .with_error_message(None)
            .with_topics(topics),
    )
}

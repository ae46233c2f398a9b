//! AlterReplicaLogDirs (key 34), v1–v2: a onelog node has one log dir, its data directory
//! (see describe_log_dirs); there is nowhere to move a replica. Each partition is answered
//! LOG_DIR_NOT_FOUND (57), what Kafka answers for a dir that is not one of its log dirs.
//!
//! Access: CLUSTER ALTER, checked by the pipeline (`handlers::HANDLERS`).

use kafka_compat::codec::Request;
use kafka_compat::error_code::LOG_DIR_NOT_FOUND;
use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, ApiKey, RequestKind, ResponseKind,
};

use super::{not_served, HandlerResult};
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::AlterReplicaLogDirs;
pub const VERSIONS: (i16, i16) = (1, 2);
pub const ACCEPTED_MIN_VERSION: i16 = 1;

pub async fn handle(_ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::AlterReplicaLogDirs(body) = req.body else {
        anyhow::bail!("not an AlterReplicaLogDirs body")
    };
    not_served::log(KEY, "a node has one log dir: replicas cannot move between dirs");
    Ok(Some(each_partition(&body, LOG_DIR_NOT_FOUND)))
}

/// Every partition the request names, in each dir, answered `code`.
fn each_partition(body: &AlterReplicaLogDirsRequest, code: i16) -> ResponseKind {
    let results = body
        .dirs
        .iter()
        .flat_map(|d| &d.topics)
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    AlterReplicaLogDirPartitionResult::default()
                        .with_partition_index(*p)
                        .with_error_code(code)
                })
                .collect();
            AlterReplicaLogDirTopicResult::default()
                .with_topic_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ResponseKind::AlterReplicaLogDirs(AlterReplicaLogDirsResponse::default().with_results(results))
}

/// The whole request refused with `code` on every partition it names
/// (`AlterReplicaLogDirsRequest.getErrorResponse`).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::AlterReplicaLogDirs(body) = body else {
        return ResponseKind::AlterReplicaLogDirs(Default::default());
    };
    each_partition(body, code)
}

//! DescribeLogDirs (key 35), v1–v4: this node's one log dir (its data directory) and, per
//! partition it stores, the bytes of record data written to its segment files (not the
//! preallocated size: what Kafka's `UnifiedLog.size` reports). The admin client asks every
//! broker; each node answers for its own replica. Offset lag is 0: only applied (committed)
//! entries are written, so no replica has a "future" log. v4 adds the file system's total and
//! usable bytes (statvfs). A requested partition that does not exist is left out, as Kafka
//! does; a null topic list means every partition.
//!
//! Access: CLUSTER DESCRIBE, checked by the pipeline (`handlers::HANDLERS`).

use std::collections::BTreeMap;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{ApiKey, DescribeLogDirsResponse, RequestKind, ResponseKind};

use super::util::{str_bytes, topic_name};
use super::HandlerResult;
use crate::ctx::{Ctx, Lane, SharedCtx};
use onelog_state::xgroup::placement::holds_topic_data;

pub const KEY: ApiKey = ApiKey::DescribeLogDirs;
pub const VERSIONS: (i16, i16) = (1, 4);
pub const ACCEPTED_MIN_VERSION: i16 = 1;

/// Kafka's "unknown" for total and usable bytes.
const UNKNOWN_BYTES: i64 = -1;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::DescribeLogDirs(body) = req.body else { anyhow::bail!("not a DescribeLogDirs body") };
    // topic → partitions wanted (None: all of the topic's).
    let wanted: Option<BTreeMap<String, Vec<i32>>> =
        body.topics.map(|ts| ts.into_iter().map(|t| (t.topic.0.to_string(), t.partitions)).collect());
    let (total, usable) = match rustix::fs::statvfs(&ctx.data_dir) {
        Ok(s) => {
            let fragment = s.f_frsize as i64;
            (s.f_blocks as i64 * fragment, s.f_bavail as i64 * fragment)
        }
        Err(e) => {
            tracing::warn!(dir = %ctx.data_dir.display(), error = %e, "statvfs of the log dir failed");
            (UNKNOWN_BYTES, UNKNOWN_BYTES)
        }
    };
    let result = DescribeLogDirsResult::default()
        .with_error_code(error_code::NONE)
        .with_log_dir(str_bytes(ctx.data_dir.display().to_string()))
        .with_topics(topics(&ctx, wanted.as_ref()));
    let result =
        if req.api_version >= 4 { result.with_total_bytes(total).with_usable_bytes(usable) } else { result };
    Ok(Some(ResponseKind::DescribeLogDirs(DescribeLogDirsResponse::default().with_results(vec![result]))))
}

/// The replicas this node holds: those of each Raft group it runs (issue 32), each from its
/// group's state; group 0's empty copies of other groups' topics are not replicas.
fn topics(ctx: &Ctx, wanted: Option<&BTreeMap<String, Vec<i32>>>) -> Vec<DescribeLogDirsTopic> {
    ctx.lanes().flat_map(|lane| group_topics(lane, wanted)).collect()
}

fn group_topics(lane: Lane<'_>, wanted: Option<&BTreeMap<String, Vec<i32>>>) -> Vec<DescribeLogDirsTopic> {
    let held_here = |topic: &onelog_state::Topic| holds_topic_data(lane.group, &topic.configs);
    lane.applied.with_partitions(|applied, logs| {
        applied
            .state
            .topics
            .iter()
            .filter(|(_, topic)| held_here(topic))
            .filter_map(|(name, topic)| {
                let indexes: Vec<i32> = match wanted {
                    None => (0..topic.partitions.len() as i32).collect(),
                    Some(w) => w.get(name)?.clone(),
                };
                let partitions: Vec<DescribeLogDirsPartition> = indexes
                    .into_iter()
                    .filter(|p| (0..topic.partitions.len() as i32).contains(p))
                    .map(|p| {
                        // A partition never written has no segment yet: 0 bytes.
                        let size = logs.get(&topic.topic_id, p).map_or(0, |log| log.lock().total_bytes());
                        DescribeLogDirsPartition::default()
                            .with_partition_index(p)
                            .with_partition_size(size as i64)
                            .with_offset_lag(0)
                    })
                    .collect();
                (!partitions.is_empty()).then(|| {
                    DescribeLogDirsTopic::default().with_name(topic_name(name)).with_partitions(partitions)
                })
            })
            .collect()
    })
}

/// The whole request refused with `code` at the top level (v3+; older versions have no such
/// field and see no results) and no log dir, as `KafkaApis.handleDescribeLogDirsRequest`.
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::DescribeLogDirs(_) = body else {
        return ResponseKind::DescribeLogDirs(Default::default());
    };
    ResponseKind::DescribeLogDirs(DescribeLogDirsResponse::default().with_error_code(code))
}

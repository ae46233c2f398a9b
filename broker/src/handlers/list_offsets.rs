//! ListOffsets (key 2): earliest, latest (HW, or LSO under read_committed), max timestamp,
//! and offset-for-timestamp from the time index.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ListOffsetsResponse, RequestKind, ResponseKind};
use kafka_protocol::records::RecordBatchDecoder;

use super::HandlerResult;
use crate::ctx::{Ctx, SharedCtx};
use crate::storage::partitions::SharedLog;
use onelog_state::PartitionState;

pub const KEY: ApiKey = ApiKey::ListOffsets;
pub const VERSIONS: (i16, i16) = (1, 8);
/// KIP-320: the leader epoch is in the response from v4; before, the field does not exist and
/// must stay at its default or the response cannot be encoded (kafkajs and aiokafka use v1–v3).
const LEADER_EPOCH_FROM_VERSION: i16 = 4;
pub const ACCEPTED_MIN_VERSION: i16 = 1;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const READ_COMMITTED: i8 = 1;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::ListOffsets(body) = req.body else { anyhow::bail!("not a ListOffsets body") };
    let is_leader = ctx.is_leader();
    let epoch = ctx.leadership.leader_epoch();
    let answered_epoch = if req.api_version >= LEADER_EPOCH_FROM_VERSION { epoch } else { -1 };
    let mut topics = Vec::with_capacity(body.topics.len());
    for topic in body.topics {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let out = ListOffsetsPartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_leader_epoch(answered_epoch);
            let (code, timestamp, offset) = if !is_leader {
                (error_code::NOT_LEADER_OR_FOLLOWER, -1, -1)
            } else if p.current_leader_epoch > epoch {
                (error_code::UNKNOWN_LEADER_EPOCH, -1, -1)
            } else if p.current_leader_epoch >= 0 && p.current_leader_epoch < epoch {
                (error_code::FENCED_LEADER_EPOCH, -1, -1)
            } else {
                lookup(&ctx, &name, p.partition_index, p.timestamp, body.isolation_level)?
            };
            partitions.push(out.with_error_code(code).with_timestamp(timestamp).with_offset(offset));
        }
        topics.push(ListOffsetsTopicResponse::default().with_name(topic.name).with_partitions(partitions));
    }
    Ok(Some(ResponseKind::ListOffsets(ListOffsetsResponse::default().with_topics(topics))))
}

/// (error code, timestamp, offset) for one partition.
fn lookup(
    ctx: &Ctx,
    topic: &str,
    partition: i32,
    timestamp: i64,
    isolation: i8,
) -> anyhow::Result<(i16, i64, i64)> {
    let Some((ps, log)) = partition_of(ctx, topic, partition) else {
        return Ok((error_code::UNKNOWN_TOPIC_OR_PARTITION, -1, -1));
    };
    let found = match timestamp {
        LATEST if isolation == READ_COMMITTED => (-1, ps.last_stable_offset()),
        LATEST => (-1, ps.high_watermark()),
        EARLIEST | EARLIEST_LOCAL => (-1, ps.log_start_offset),
        MAX_TIMESTAMP => (ps.max_timestamp, ps.max_timestamp_offset),
        t if t >= 0 => offset_for_timestamp(&log, t, ps.high_watermark())?,
        _ => return Ok((error_code::INVALID_REQUEST, -1, -1)),
    };
    Ok((error_code::NONE, found.0, found.1))
}

fn partition_of(ctx: &Ctx, topic: &str, partition: i32) -> Option<(PartitionState, SharedLog)> {
    ctx.applied.with_partitions(|applied, partitions| {
        let t = applied.state.topics.get(topic)?;
        let ps = t.partitions.get(usize::try_from(partition).ok()?)?.clone();
        let log = partitions.get(&t.topic_id, partition)?;
        Some((ps, log))
    })
}

/// The first record with timestamp >= `target`: the time index finds the batch, then the
/// batch's records (decompressed if need be) give the exact offset, as Kafka answers.
fn offset_for_timestamp(log: &SharedLog, target: i64, high_watermark: i64) -> anyhow::Result<(i64, i64)> {
    let log = log.lock().expect("partition lock");
    let Some(entry) =
        log.index_entries().find(|e| e.max_timestamp >= target && e.base_offset < high_watermark).copied()
    else {
        return Ok((-1, -1));
    };
    let mut bytes = bytes::Bytes::from(log.read_batch(&entry)?);
    drop(log);
    let set = RecordBatchDecoder::decode(&mut bytes)?;
    let hit = set.records.iter().find(|r| r.timestamp >= target);
    Ok(hit.map_or((entry.max_timestamp, entry.base_offset), |r| (r.timestamp, r.offset)))
}

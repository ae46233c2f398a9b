//! ListOffsets (key 2): earliest, latest (HW, or LSO under read_committed), max timestamp,
//! and offset-for-timestamp from the time index.
//!
//! Finding the record inside the batch the index points at walks that one batch's records as
//! a stream through a small buffer (`kafka_compat::batch::find_record`): a lookup never holds a
//! batch's inflated records in memory (issue 13, reproduction 3: a 1 MB gzip batch cost 1 GB of
//! RSS per request). One request's lookups inflate at most
//! `limits::LIST_OFFSETS_INFLATED_BYTES_MAX` together; past it, compressed batches are answered
//! from the time index alone (the batch's first offset and maximum timestamp).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_compat::isolation_level::READ_COMMITTED;
use kafka_compat::records::RecordInfo;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ListOffsetsResponse, RequestKind, ResponseKind};

use super::HandlerResult;
use crate::ctx::SharedCtx;
use crate::limits;
use crate::raft::applied::AppliedView;
use crate::security::authz::{code, op, rt, Subject};
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

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::ListOffsets(body) = req.body else { anyhow::bail!("not a ListOffsets body") };
    // KafkaApis: DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED for its partitions.
    let described = ctx.authorizer.allowed_each(
        &who,
        rt::TOPIC,
        body.topics.iter().map(|t| t.name.0.as_str()),
        op::DESCRIBE,
    );
    // Each topic is answered by the leader of the Raft group holding it (issue 32).
    let groups: Vec<u32> = body.topics.iter().map(|t| ctx.topic_group(t.name.0.as_str())).collect();
    let serves = ctx.serves_reads_of(&groups).await;
    let mut topics = Vec::with_capacity(body.topics.len());
    let mut inflate_left = limits::LIST_OFFSETS_INFLATED_BYTES_MAX;
    for ((topic, described), group) in body.topics.into_iter().zip(described).zip(groups) {
        let lane = ctx.lane(group).filter(|_| serves.get(&group).copied().unwrap_or(false));
        let is_leader = lane.is_some();
        let epoch = lane.map_or(-1, |l| l.leadership.leader_epoch());
        let answered_epoch = if req.api_version >= LEADER_EPOCH_FROM_VERSION { epoch } else { -1 };
        let name = topic.name.0.to_string();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let out = ListOffsetsPartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_leader_epoch(answered_epoch);
            let (code, timestamp, offset) = if !described {
                (code::TOPIC_AUTHORIZATION_FAILED, -1, -1)
            } else if !is_leader {
                (error_code::NOT_LEADER_OR_FOLLOWER, -1, -1)
            } else if p.current_leader_epoch > epoch {
                (error_code::UNKNOWN_LEADER_EPOCH, -1, -1)
            } else if p.current_leader_epoch >= 0 && p.current_leader_epoch < epoch {
                (error_code::FENCED_LEADER_EPOCH, -1, -1)
            } else {
                let at = (p.partition_index, p.timestamp);
                let applied = lane.map_or(&ctx.applied, |l| l.applied);
                lookup(applied, &name, at, body.isolation_level, &mut inflate_left)?
            };
            partitions.push(out.with_error_code(code).with_timestamp(timestamp).with_offset(offset));
        }
        topics.push(ListOffsetsTopicResponse::default().with_name(topic.name).with_partitions(partitions));
    }
    Ok(Some(ResponseKind::ListOffsets(ListOffsetsResponse::default().with_topics(topics))))
}

/// (error code, timestamp, offset) for one partition at (partition, asked timestamp).
fn lookup(
    applied: &AppliedView,
    topic: &str,
    (partition, timestamp): (i32, i64),
    isolation: i8,
    inflate_left: &mut usize,
) -> anyhow::Result<(i16, i64, i64)> {
    let Some((ps, log)) = partition_of(applied, topic, partition) else {
        // The virtual `__consumer_offsets` (`internal_topic`): empty, every offset is 0.
        if crate::internal_topic::is_internal(topic)
            && (0..crate::internal_topic::PARTITIONS).contains(&partition)
        {
            return Ok((error_code::NONE, -1, 0));
        }
        return Ok((error_code::UNKNOWN_TOPIC_OR_PARTITION, -1, -1));
    };
    let found = match timestamp {
        LATEST if isolation == READ_COMMITTED => (-1, ps.last_stable_offset()),
        LATEST => (-1, ps.high_watermark()),
        EARLIEST | EARLIEST_LOCAL => (-1, ps.log_start_offset),
        MAX_TIMESTAMP => max_timestamp_record(&log, &ps, inflate_left)?,
        t if t >= 0 => offset_for_timestamp(&log, t, ps.high_watermark(), inflate_left)?,
        _ => return Ok((error_code::INVALID_REQUEST, -1, -1)),
    };
    Ok((error_code::NONE, found.0, found.1))
}

fn partition_of(applied: &AppliedView, topic: &str, partition: i32) -> Option<(PartitionState, SharedLog)> {
    applied.with_partitions(|applied, partitions| {
        let t = applied.state.topics.get(topic)?;
        let ps = t.partitions.get(usize::try_from(partition).ok()?)?.clone();
        let log = partitions.get(&t.topic_id, partition)?;
        Some((ps, log))
    })
}

/// KIP-734: the record with the highest timestamp, the first of them on ties, as Kafka's
/// `offsetOfMaxTimestamp`. The applied state remembers that timestamp and the batch holding it
/// (by its last offset, the first batch reaching it); the batch's records give the record.
/// Reading one batch when asked keeps apply free of record decoding, which would decompress
/// every batch on every replica for a query that is rare. A batch trimmed by retention since
/// leaves the batch's own last offset, as before.
fn max_timestamp_record(
    log: &SharedLog,
    ps: &PartitionState,
    inflate_left: &mut usize,
) -> anyhow::Result<(i64, i64)> {
    let (timestamp, batch_offset) = (ps.max_timestamp, ps.max_timestamp_offset);
    if batch_offset < 0 {
        return Ok((-1, -1));
    }
    let log = log.lock();
    let holding = log.index_entries().find(|e| (e.base_offset..=e.last_offset).contains(&batch_offset));
    let Some(entry) = holding.copied() else { return Ok((timestamp, batch_offset)) };
    let batch = log.read_batch(&entry)?;
    drop(log);
    let found = first_record_with_timestamp(&batch, timestamp, inflate_left)?;
    Ok((timestamp, found.unwrap_or(entry.base_offset)))
}

/// The offset of the first record of `batch` stamped `timestamp`. Under LogAppendTime every
/// record carries the batch's timestamp (the records' own deltas are the client's), so the
/// first record is the batch's first offset.
fn first_record_with_timestamp(
    batch: &[u8],
    timestamp: i64,
    inflate_left: &mut usize,
) -> anyhow::Result<Option<i64>> {
    let header = kafka_compat::batch::parse_header(batch)?;
    if header.is_log_append_time() {
        return Ok(Some(header.base_offset));
    }
    let hit = find_record(batch, inflate_left, |r| r.timestamp == timestamp);
    Ok(hit.map(|r| header.base_offset + i64::from(r.offset_delta)))
}

/// The first record with timestamp >= `target`: the time index finds the batch, then the
/// batch's records (inflated within the budget if need be) give the exact offset, as Kafka
/// answers.
fn offset_for_timestamp(
    log: &SharedLog,
    target: i64,
    high_watermark: i64,
    inflate_left: &mut usize,
) -> anyhow::Result<(i64, i64)> {
    let log = log.lock();
    let Some(entry) =
        log.index_entries().find(|e| e.max_timestamp >= target && e.base_offset < high_watermark).copied()
    else {
        return Ok((-1, -1));
    };
    let batch = log.read_batch(&entry)?;
    drop(log);
    let batch_answer = (entry.max_timestamp, entry.base_offset);
    let header = kafka_compat::batch::parse_header(&batch)?;
    if header.is_log_append_time() {
        return Ok(batch_answer);
    }
    let hit = find_record(&batch, inflate_left, |r| r.timestamp >= target);
    Ok(hit.map_or(batch_answer, |r| (r.timestamp, header.base_offset + i64::from(r.offset_delta))))
}

/// The first record of `batch` for which `matches` holds, inflating within what is left of the
/// request's budget. A batch past it, or whose records do not walk (stored before produce
/// validated batches), answers None, so the caller answers with the batch itself, as the time
/// index knows it.
fn find_record(
    batch: &[u8],
    inflate_left: &mut usize,
    matches: impl FnMut(&RecordInfo) -> bool,
) -> Option<RecordInfo> {
    kafka_compat::batch::find_record(batch, inflate_left, matches)
        .inspect_err(|e| tracing::debug!("ListOffsets answers a batch without its records: {e}"))
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use bytes::{Bytes, BytesMut};
    use kafka_compat::batch::{stamp_batch, BatchStamp};
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    use super::first_record_with_timestamp;

    /// A gzip batch at offset 10 whose records carry `timestamps`.
    fn batch(timestamps: &[i64], timestamp_type: TimestampType) -> Bytes {
        let records: Vec<Record> = timestamps
            .iter()
            .enumerate()
            .map(|(i, t)| Record {
                timestamp_type,
                ..kafka_compat::testing::record(i as i64, *t, None, b"v")
            })
            .collect();
        let mut buf = BytesMut::new();
        let opts = RecordEncodeOptions { version: 2, compression: Compression::Gzip };
        RecordBatchEncoder::encode(&mut buf, &records, &opts).expect("encode");
        let log_append_time_ms = (timestamp_type == TimestampType::LogAppend).then_some(50);
        stamp_batch(&buf, BatchStamp { base_offset: 10, partition_leader_epoch: 1, log_append_time_ms })
    }

    /// Regression: MAX_TIMESTAMP answered the batch's last offset (13); Kafka answers the
    /// first record with the highest timestamp (11), inside a compressed batch too.
    #[test]
    fn the_first_record_with_the_max_timestamp_is_found_inside_the_batch() {
        let mut left = 1 << 20;
        let found = first_record_with_timestamp(&batch(&[5, 9, 3, 9], TimestampType::Creation), 9, &mut left);
        assert_eq!(found.expect("decodes"), Some(11));
        let appended =
            first_record_with_timestamp(&batch(&[5, 9, 3], TimestampType::LogAppend), 50, &mut left);
        assert_eq!(appended.expect("decodes"), Some(10), "LogAppendTime: every record has the batch's time");
        // Past the request's budget the batch is answered without its records.
        let mut spent = 0;
        let unread =
            first_record_with_timestamp(&batch(&[5, 9, 3, 9], TimestampType::Creation), 9, &mut spent);
        assert_eq!(unread.expect("the header decodes"), None);
    }
}

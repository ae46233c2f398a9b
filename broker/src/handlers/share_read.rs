//! What ShareFetch reads from a partition's files: the batches an acquisition may take (from the
//! share partition's next offset up to the high watermark, or the last stable offset for a
//! read_committed group, within the request's bytes), and afterwards the stored batches
//! holding the records acquired. Acquisition itself is replicated state
//! (`onelog_state::share_partition`), applied from what the leader read here.

use bytes::{Bytes, BytesMut};
use kafka_compat::batch::parse_header;
use onelog_state::consumer_group::TopicId;
use onelog_state::share_partition::{Acquired, LogBatch};
use onelog_state::AbortedTxn;

use crate::config::share_group::{AutoOffsetReset, ShareGroupSettings};
use crate::ctx::Lane;
use crate::storage::partitions::SharedLog;
use onelog_state::xgroup::placement::holds_topic_data;

/// One partition as an acquisition sees it.
pub struct Readable {
    pub log: SharedLog,
    /// Where the group's share state of it starts if it has none yet.
    pub start_offset: i64,
    /// The share partition's next offset, or `start_offset`.
    pub from: i64,
    /// High watermark or last stable offset.
    pub upper: i64,
    pub high_watermark: i64,
    /// read_committed: the aborted transactions overlapping `[from, upper)`.
    pub aborted: Vec<AbortedTxn>,
}

/// The partition's files and offsets in `lane` (the share group's Raft group), or None if the
/// topic (by id) or partition is gone, or its data is not in that group (a share group reads
/// the topics placed with it only).
pub fn readable(
    lane: Lane,
    group_id: &str,
    (topic_id, partition): (TopicId, i32),
    group: &ShareGroupSettings,
) -> Option<Readable> {
    lane.applied
        .with_partitions(|applied, partitions| {
            let s = &applied.state;
            let (_, topic) = s.topic_by_id(&topic_id)?;
            if !holds_topic_data(lane.group, &topic.configs) {
                return None;
            }
            let ps = usize::try_from(partition).ok().and_then(|i| topic.partitions.get(i))?;
            let log = partitions.get(&topic_id, partition)?;
            let upper = if group.read_committed { ps.last_stable_offset() } else { ps.high_watermark() };
            let share = s.share_states.get(group_id, &topic_id, partition);
            let start_offset = match group.auto_offset_reset {
                AutoOffsetReset::Earliest => ps.log_start_offset,
                AutoOffsetReset::Latest => upper,
                // Resolved below, outside the state's lock.
                AutoOffsetReset::ByDuration(_) => -1,
            };
            let from = share.map_or(start_offset, |sp| sp.next_offset.max(ps.log_start_offset));
            let aborted =
                if group.read_committed { ps.aborted_in(from, upper).cloned().collect() } else { Vec::new() };
            Some(Readable { log, start_offset, from, upper, high_watermark: ps.high_watermark(), aborted })
        })
        .map(|mut r| {
            if let AutoOffsetReset::ByDuration(ms) = group.auto_offset_reset {
                let target = crate::clock::wall_clock_ms() - ms;
                r.start_offset = first_batch_at(&r.log, target, r.upper);
                if r.from < 0 {
                    r.from = r.start_offset;
                }
            }
            r
        })
}

/// The base offset of the first batch whose max timestamp is at least `target`, else `upper`:
/// `by_duration` resolved at batch granularity, from the time index.
fn first_batch_at(log: &SharedLog, target: i64, upper: i64) -> i64 {
    let log = log.lock();
    let hit = log.index_entries().find(|e| e.max_timestamp >= target && e.base_offset < upper);
    hit.map_or(upper, |e| e.base_offset)
}

/// The batches from `r.from` below `r.upper`, at most `max_bytes` (the first whole), as an
/// acquisition takes them: control batches and, read_committed, aborted transactions' batches
/// are marked to be archived rather than handed out.
pub fn batches(r: &Readable, max_bytes: usize) -> anyhow::Result<Vec<LogBatch>> {
    if r.from >= r.upper {
        return Ok(Vec::new());
    }
    let Some(read) = r.log.lock().read(r.from, max_bytes.max(1), r.upper)? else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    let mut rest: &[u8] = &read.bytes;
    while !rest.is_empty() {
        let header = parse_header(rest)?;
        let skip = header.is_control()
            || (header.is_transactional() && aborted(&r.aborted, header.producer_id, header.base_offset));
        out.push(LogBatch {
            first_offset: header.base_offset,
            last_offset: header.last_offset(),
            aborted: skip,
        });
        rest = rest.get(header.size_bytes..).unwrap_or_default();
    }
    Ok(out)
}

fn aborted(list: &[AbortedTxn], producer_id: i64, offset: i64) -> bool {
    list.iter().any(|a| a.producer_id == producer_id && a.first_offset <= offset && offset <= a.last_offset)
}

/// The stored batches holding every acquired record, each once, in offset order (the client
/// keeps only the acquired offsets of them).
pub fn records(log: &SharedLog, acquired: &[Acquired], high_watermark: i64) -> anyhow::Result<Bytes> {
    let mut ranges: Vec<(i64, i64)> = acquired.iter().map(|a| (a.first_offset, a.last_offset)).collect();
    ranges.sort_unstable();
    let mut out = BytesMut::new();
    // The next offset not yet covered by a batch in `out`.
    let mut covered = i64::MIN;
    for (first, last) in ranges {
        let mut offset = first.max(covered);
        while offset <= last {
            let read = log.lock().read(offset, crate::limits::FETCH_RESPONSE_BYTES_MAX, high_watermark)?;
            let Some(read) = read.filter(|r| !r.bytes.is_empty()) else { return Ok(out.freeze()) };
            let mut rest: &[u8] = &read.bytes;
            while !rest.is_empty() && offset <= last {
                let header = parse_header(rest)?;
                out.extend_from_slice(rest.get(..header.size_bytes).unwrap_or(rest));
                offset = header.last_offset() + 1;
                rest = rest.get(header.size_bytes..).unwrap_or_default();
            }
        }
        covered = covered.max(offset);
    }
    Ok(out.freeze())
}

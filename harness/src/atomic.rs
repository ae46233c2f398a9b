//! `send_atomic`: several topics written by ONE Produce request.
//!
//! onelog turns one Produce request into one Raft entry, so all of its slices become visible
//! together or not at all, even across topics (DESIGN §3). A stock client cannot express that
//! request (it groups by broker, not by caller intent), so the harness builds it by hand.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};

use crate::batch::{encode_batch, TestRecord};
use crate::raw_client::RawClient;
use crate::raw_ops::{produce, produce_results, BatchFor};

/// The partition every slice goes to: the atomic API names topics, not partitions.
pub const ATOMIC_PARTITION: i32 = 0;

/// One record of an atomic write.
#[derive(Debug, Clone, Copy)]
pub struct Slice<'a> {
    pub topic: &'a str,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// Sends every slice in ONE Produce request with acks=all (records of one topic share a batch,
/// in slice order) and returns each slice's (partition, offset) in slice order.
pub async fn send_atomic(client: &mut RawClient, slices: &[Slice<'_>]) -> Result<Vec<(i32, i64)>> {
    let timestamp_ms = now_ms();
    let mut topics: Vec<&str> = Vec::new();
    for slice in slices {
        if !topics.contains(&slice.topic) {
            topics.push(slice.topic);
        }
    }
    let mut batches = Vec::new();
    for topic in &topics {
        let records: Vec<TestRecord> = slices
            .iter()
            .filter(|s| s.topic == *topic)
            .map(|s| TestRecord::new(s.key.to_vec(), s.value.to_vec(), timestamp_ms))
            .collect();
        batches.push(BatchFor {
            topic: topic.to_string(),
            partition: ATOMIC_PARTITION,
            records: encode_batch(&records)?,
        });
    }
    let response = produce(client, -1, &batches).await?;
    let results = produce_results(&response);
    let mut base_offsets = Vec::new();
    for topic in &topics {
        let (_, _, code, base) = results
            .iter()
            .find(|(t, p, _, _)| t == topic && *p == ATOMIC_PARTITION)
            .with_context(|| format!("Produce response lacks {topic}/{ATOMIC_PARTITION}"))?;
        if *code != 0 {
            bail!("atomic produce: {topic}/{ATOMIC_PARTITION} error {code} (all results {results:?})");
        }
        base_offsets.push((*topic, *base));
    }
    Ok(offsets_in_slice_order(slices, &base_offsets))
}

fn offsets_in_slice_order(slices: &[Slice<'_>], base_offsets: &[(&str, i64)]) -> Vec<(i32, i64)> {
    let mut next: Vec<(&str, i64)> = base_offsets.to_vec();
    slices
        .iter()
        .map(|s| {
            let entry = next.iter_mut().find(|(t, _)| *t == s.topic).expect("topic seen");
            let offset = entry.1;
            entry.1 += 1;
            (ATOMIC_PARTITION, offset)
        })
        .collect()
}

/// Wall-clock milliseconds, for record timestamps.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

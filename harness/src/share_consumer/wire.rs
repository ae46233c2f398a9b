//! The share consumer's requests and what it reads from the answers: ShareFetch and
//! ShareAcknowledge bodies with their acknowledgement batches (KIP-932: ascending,
//! non-overlapping, one type per batch here), and the records of a ShareFetch answer, kept
//! only where the AcquiredRecords ranges say this member holds them. The broker returns whole
//! stored batches, so a batch may carry records other members hold; an acquired offset with no
//! record (a control batch, a compacted record) is acknowledged as a gap, as Kafka's
//! `ShareCompletedFetch` does.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use bytes::Bytes;
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatch,
};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic, ForgottenTopic,
};
use kafka_protocol::messages::share_fetch_response::PartitionData;
use kafka_protocol::messages::{GroupId, ShareAcknowledgeRequest, ShareFetchRequest};
use kafka_protocol::records::{Record, RecordBatchDecoder};
use uuid::Uuid;

use super::leader::text;
use super::{Ack, AckType, Delivery, ShareConsumerConfig};

/// Bytes one ShareFetch asks for.
const FETCH_BYTES_MAX: i32 = 1 << 20;

/// (first, last, type) runs of consecutive offsets acknowledged alike, in offset order.
pub(super) fn runs(acks: &[Ack]) -> Vec<(i64, i64, AckType)> {
    let mut sorted: Vec<&Ack> = acks.iter().collect();
    sorted.sort_by_key(|a| a.offset);
    let mut out: Vec<(i64, i64, AckType)> = Vec::new();
    for a in sorted {
        match out.last_mut() {
            Some(run) if run.1 + 1 == a.offset && run.2 == a.kind => run.1 = a.offset,
            _ => out.push((a.offset, a.offset, a.kind)),
        }
    }
    out
}

/// One ShareFetch: the session's epoch, the partitions to fetch each with its
/// acknowledgements, and the partitions to forget.
pub(super) fn fetch_request(
    config: &ShareConsumerConfig,
    epoch: i32,
    topic_id: Uuid,
    partitions: &BTreeMap<i32, Vec<Ack>>,
    forget: &[i32],
) -> ShareFetchRequest {
    let fetch: Vec<FetchPartition> = partitions
        .iter()
        .map(|(p, acks)| {
            let batches = runs(acks)
                .into_iter()
                .map(|(first, last, kind)| {
                    AcknowledgementBatch::default()
                        .with_first_offset(first)
                        .with_last_offset(last)
                        .with_acknowledge_types(vec![kind.wire()])
                })
                .collect();
            FetchPartition::default().with_partition_index(*p).with_acknowledgement_batches(batches)
        })
        .collect();
    let topics = if fetch.is_empty() {
        Vec::new()
    } else {
        vec![FetchTopic::default().with_topic_id(topic_id).with_partitions(fetch)]
    };
    let forgotten = if forget.is_empty() {
        Vec::new()
    } else {
        vec![ForgottenTopic::default().with_topic_id(topic_id).with_partitions(forget.to_vec())]
    };
    ShareFetchRequest::default()
        .with_group_id(Some(GroupId(text(&config.group))))
        .with_member_id(Some(text(&config.member_id)))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(config.max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(FETCH_BYTES_MAX)
        .with_max_records(config.max_records)
        .with_batch_size(config.max_records)
        .with_topics(topics)
        .with_forgotten_topics_data(forgotten)
}

/// One ShareAcknowledge at `epoch` (-1 closes the session after the acknowledgements).
pub(super) fn ack_request(
    config: &ShareConsumerConfig,
    epoch: i32,
    topic_id: Uuid,
    partitions: &BTreeMap<i32, Vec<Ack>>,
) -> ShareAcknowledgeRequest {
    let acked: Vec<AcknowledgePartition> = partitions
        .iter()
        .map(|(p, acks)| {
            let batches = runs(acks)
                .into_iter()
                .map(|(first, last, kind)| {
                    AckBatch::default()
                        .with_first_offset(first)
                        .with_last_offset(last)
                        .with_acknowledge_types(vec![kind.wire()])
                })
                .collect();
            AcknowledgePartition::default().with_partition_index(*p).with_acknowledgement_batches(batches)
        })
        .collect();
    let topics = if acked.is_empty() {
        Vec::new()
    } else {
        vec![AcknowledgeTopic::default().with_topic_id(topic_id).with_partitions(acked)]
    };
    ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(text(&config.group))))
        .with_member_id(Some(text(&config.member_id)))
        .with_share_session_epoch(epoch)
        .with_topics(topics)
}

/// What one partition of a ShareFetch answer holds for this member.
#[derive(Debug, Default)]
pub(super) struct PartitionRecords {
    /// The records inside the acquired ranges, each with its delivery count.
    pub acquired: Vec<Delivery>,
    /// Acquired offsets without a record (to acknowledge as gaps), with their delivery counts.
    pub gaps: Vec<(i64, i16)>,
    /// With `keep_unacquired` only (a deliberately broken client, for the checker's
    /// self-test): the other records of the returned batches, with the first range's
    /// delivery count.
    pub unacquired: Vec<Delivery>,
}

pub(super) fn deliveries(partition: &PartitionData, keep_unacquired: bool) -> Result<PartitionRecords> {
    let records = decode(partition.records.clone().unwrap_or_default())?;
    let p = partition.partition_index;
    let mut out = PartitionRecords::default();
    for range in &partition.acquired_records {
        for offset in range.first_offset..=range.last_offset {
            match records.get(&offset) {
                Some(r) => out.acquired.push(delivery(p, r, range.delivery_count)),
                None => out.gaps.push((offset, range.delivery_count)),
            }
        }
    }
    if keep_unacquired {
        let count = partition.acquired_records.first().map_or(1, |r| r.delivery_count);
        let inside =
            |o: i64| partition.acquired_records.iter().any(|r| r.first_offset <= o && o <= r.last_offset);
        out.unacquired =
            records.values().filter(|r| !inside(r.offset)).map(|r| delivery(p, r, count)).collect();
    }
    Ok(out)
}

fn delivery(partition: i32, r: &Record, delivery_count: i16) -> Delivery {
    Delivery {
        partition,
        offset: r.offset,
        delivery_count,
        key: r.key.clone(),
        value: r.value.clone(),
        transactional: r.transactional,
    }
}

/// The data records of a records blob by offset (control records left out).
fn decode(mut bytes: Bytes) -> Result<BTreeMap<i64, Record>> {
    if bytes.is_empty() {
        return Ok(BTreeMap::new());
    }
    let sets = RecordBatchDecoder::decode_all(&mut bytes).context("decoding a ShareFetch's batches")?;
    Ok(sets.into_iter().flat_map(|s| s.records).filter(|r| !r.control).map(|r| (r.offset, r)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{encode_batch, TestRecord};
    use kafka_protocol::messages::share_fetch_response::AcquiredRecords;

    fn ack(offset: i64, kind: AckType) -> Ack {
        Ack { offset, delivery_count: 1, kind }
    }

    #[test]
    fn acknowledgements_go_out_as_ascending_runs_of_one_type() {
        let acks = [
            ack(5, AckType::Accept),
            ack(3, AckType::Accept),
            ack(4, AckType::Accept),
            ack(6, AckType::Release),
            ack(9, AckType::Release),
        ];
        assert_eq!(
            runs(&acks),
            vec![(3, 5, AckType::Accept), (6, 6, AckType::Release), (9, 9, AckType::Release)]
        );
    }

    /// Records 0..4 in one batch; offsets 1-2 acquired at count 2, offset 7 acquired with no
    /// record behind it: two deliveries and one gap; the broken client keeps all five.
    #[test]
    fn only_acquired_offsets_are_kept_and_empty_ones_are_gaps() {
        let records: Vec<TestRecord> = (0..5).map(|i| TestRecord::new("k", format!("v{i}"), 1)).collect();
        let partition = PartitionData::default()
            .with_partition_index(3)
            .with_records(Some(encode_batch(&records).unwrap()))
            .with_acquired_records(vec![
                AcquiredRecords::default().with_first_offset(1).with_last_offset(2).with_delivery_count(2),
                AcquiredRecords::default().with_first_offset(7).with_last_offset(7).with_delivery_count(1),
            ]);
        let got = deliveries(&partition, false).unwrap();
        let seen: Vec<(i32, i64, i16)> =
            got.acquired.iter().map(|d| (d.partition, d.offset, d.delivery_count)).collect();
        assert_eq!(seen, vec![(3, 1, 2), (3, 2, 2)]);
        assert_eq!(got.acquired[0].value.as_deref(), Some(&b"v1"[..]));
        assert_eq!(got.gaps, vec![(7, 1)]);
        assert!(got.unacquired.is_empty());
        let broken = deliveries(&partition, true).unwrap();
        assert_eq!(broken.unacquired.len(), 3, "the broken client keeps every record of the batch");
    }
}

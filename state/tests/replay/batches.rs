//! Record batches, as a client sends them, built by kafka-protocol's encoder (as in
//! `onelog_state::testing`, which integration tests cannot see), and handed over as the
//! produce handler does: validated, not yet stamped.

use bytes::{Bytes, BytesMut};
use kafka_compat::batch::validate_record_set;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use onelog_state::entry::UnstampedAppend;

pub(crate) fn encode_batch(
    records: i32,
    producer: Option<(i64, i16, i32)>,
    transactional: bool,
    timestamp_ms: i64,
    tag: u64,
) -> Bytes {
    let (producer_id, producer_epoch, first_seq) = producer.unwrap_or((-1, -1, -1));
    let records: Vec<Record> = (0..records)
        .map(|i| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i64::from(i),
            sequence: if producer_id < 0 { -1 } else { first_seq.wrapping_add(i) },
            timestamp: timestamp_ms + i64::from(i),
            key: (i % 2 == 0).then(|| Bytes::from(format!("k{}", tag % 7))),
            value: Some(Bytes::from(format!("{tag}:{i}"))),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, &records, &options).expect("kafka-protocol encodes the batch");
    buf.freeze()
}

/// The client's record set as the produce handler hands it over: validated batches.
pub(crate) fn unstamped(topic: &str, partition: i32, bytes: &Bytes) -> UnstampedAppend {
    let batches = validate_record_set(bytes, usize::MAX).expect("the encoder's batches are valid");
    UnstampedAppend { topic: topic.to_string(), partition, batches }
}

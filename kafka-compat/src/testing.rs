//! Records for tests and benchmarks of batch validation (feature `testing`): one place that
//! spells out a `kafka-protocol` record, so tests build batches with an independent encoder.

use bytes::Bytes;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{Record, TimestampType};

/// A CreateTime record without producer id at `offset` (its sequence in step with the offset,
/// or the encoder starts a new batch).
pub fn record(offset: i64, timestamp: i64, key: Option<&[u8]>, value: &[u8]) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset,
        sequence: offset as i32,
        timestamp,
        key: key.map(Bytes::copy_from_slice),
        value: Some(Bytes::copy_from_slice(value)),
        headers: IndexMap::new(),
    }
}

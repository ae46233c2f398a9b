//! What apply asks of the partition files: the only output of the state machine besides the
//! new state and the op results. The broker's storage performs effects in order after each
//! op; a replay test compares them across replicas, byte for byte.

use bytes::Bytes;

/// A change to partition files that the storage layer performs after apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    CreatePartitionLog { topic_id: [u8; 16], partition: i32 },
    Append { topic_id: [u8; 16], partition: i32, batch: Bytes },
    DeleteTopicLogs { topic_id: [u8; 16] },
    TrimLog { topic_id: [u8; 16], partition: i32, log_start_offset: i64 },
}

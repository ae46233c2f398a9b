//! Record batches (and the topics to hold them) for unit tests here and in `broker`, built by
//! an independent encoder (the `kafka-protocol` crate's) and stamped the way the leader stamps them, so tests never check the broker's
//! parsing against itself.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use kafka_compat::batch::{stamp_batch, BatchStamp};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

/// What a test batch holds; `Default` is one non-idempotent record with value "v".
#[derive(Debug, Clone)]
pub struct BatchSpec {
    pub base_offset: i64,
    pub records: i64,
    /// Producer id, epoch and first sequence (-1, -1, 0: not idempotent).
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub first_sequence: i32,
    /// Every record's value.
    pub value: Vec<u8>,
    /// Timestamp of the first record; each next record is 1 ms later.
    pub first_timestamp: i64,
    /// The leader epoch stamped into the batch.
    pub leader_epoch: i32,
    /// Part of a transaction (KIP-98).
    pub transactional: bool,
}

impl Default for BatchSpec {
    fn default() -> Self {
        BatchSpec {
            base_offset: 0,
            records: 1,
            producer_id: -1,
            producer_epoch: -1,
            first_sequence: 0,
            value: b"v".to_vec(),
            first_timestamp: 1000,
            leader_epoch: 1,
            transactional: false,
        }
    }
}

pub fn build(spec: &BatchSpec) -> Bytes {
    let records: Vec<Record> = (0..spec.records)
        .map(|i| Record {
            transactional: spec.transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: spec.producer_id,
            producer_epoch: spec.producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: spec.first_sequence.wrapping_add(i as i32),
            timestamp: spec.first_timestamp + i,
            key: None,
            value: Some(Bytes::from(spec.value.clone())),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let opts = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, &records, &opts).expect("encode");
    let stamp = BatchStamp {
        base_offset: spec.base_offset,
        partition_leader_epoch: spec.leader_epoch,
        log_append_time_ms: None,
    };
    stamp_batch(&buf, stamp)
}

/// `records` records of value "v" stamped at `base_offset`.
pub fn batch(base_offset: i64, records: i64) -> Bytes {
    build(&BatchSpec { base_offset, records, ..Default::default() })
}

/// A batch from producer `pid` at `epoch` whose first sequence is `seq`.
pub fn producer_batch(base_offset: i64, records: i64, pid: i64, epoch: i16, seq: i32) -> Bytes {
    build(&BatchSpec {
        base_offset,
        records,
        producer_id: pid,
        producer_epoch: epoch,
        first_sequence: seq,
        ..Default::default()
    })
}

/// A transactional batch from producer `pid` at `epoch`.
pub fn txn_batch(base_offset: i64, records: i64, pid: i64, epoch: i16, seq: i32) -> Bytes {
    build(&BatchSpec {
        base_offset,
        records,
        producer_id: pid,
        producer_epoch: epoch,
        first_sequence: seq,
        transactional: true,
        ..Default::default()
    })
}

/// An op creating topic `name` with `partitions` partitions and topic id `[id; 16]`.
pub fn create_topic(name: &str, partitions: i32, id: u8) -> crate::command::Op {
    crate::command::Op::CreateTopics(crate::command::CreateTopicsOp {
        topics: vec![crate::command::NewTopic {
            name: name.into(),
            topic_id: [id; 16],
            partitions,
            replication_factor: 1,
            configs: BTreeMap::new(),
        }],
    })
}

/// One op as a unit test applies it: the stamp of the entry holding it and the replicated
/// limits in force (what a leader's `SetLimits` entry before it would have set).
#[derive(Debug, Clone)]
pub struct Step {
    pub stamp: crate::command::LeaderStamp,
    pub limits: crate::command::ReplicatedLimits,
    pub op: crate::command::Op,
}

impl From<crate::command::Op> for Step {
    fn from(op: crate::command::Op) -> Step {
        at(0, op)
    }
}

/// `op` in an entry stamped `now_ms` by the leader of term 1.
pub fn at(now_ms: i64, op: crate::command::Op) -> Step {
    let stamp = crate::command::LeaderStamp { now_ms, term: 1 };
    Step { stamp, limits: Default::default(), op }
}

impl Step {
    /// The same op applied under other replicated limits.
    pub fn with_limits(mut self, change: impl FnOnce(&mut crate::command::ReplicatedLimits)) -> Step {
        change(&mut self.limits);
        self
    }

    /// Applies the step to `state` as a replica applies its entry.
    pub fn apply(
        &self,
        state: &mut crate::BrokerState,
        effects: &mut Vec<crate::Effect>,
    ) -> crate::command::OpResult {
        state.limits = self.limits;
        crate::apply_op(state, &self.stamp, &self.op, effects)
    }
}

/// A KIP-848 first join of `member` to `group`, subscribed to nothing, as a v1 client sends it.
pub fn consumer_join(group: &str, member: &str) -> crate::consumer_group::Heartbeat {
    crate::consumer_group::Heartbeat {
        version: 1,
        group_id: group.into(),
        member_id: member.into(),
        rebalance_timeout_ms: 300_000,
        subscribed_topic_names: Some(vec![]),
        topic_partitions: Some(vec![]),
        ..Default::default()
    }
}

/// A KIP-932 ShareGroupHeartbeat op of `member` in `group` at `epoch` (0 joins subscribed to
/// `topics`, -1 leaves), with Kafka's default settings and limits.
pub fn share_heartbeat(group: &str, member: &str, epoch: i32, topics: &[&str]) -> crate::command::Op {
    let heartbeat = crate::share_group::Heartbeat {
        group_id: group.into(),
        member_id: member.into(),
        member_epoch: epoch,
        subscribed_topic_names: (epoch == 0).then(|| topics.iter().map(|t| t.to_string()).collect()),
        ..Default::default()
    };
    let limits = crate::share_partition::Limits {
        delivery_count_limit: 5,
        max_in_flight_records: 2_000,
        renew_enabled: true,
    };
    crate::command::Op::ShareGroupHeartbeat(Box::new(crate::command::ShareGroupHeartbeatOp {
        heartbeat,
        settings: Default::default(),
        limits,
        now_ms: 1_000,
    }))
}

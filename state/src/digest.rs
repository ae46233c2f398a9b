//! Digests of what apply produces, for comparing replicas: the state (its serialized bytes)
//! and the stream of effects (every partition file change, byte for byte). Two replicas that
//! applied the same log must agree on both after every entry.

use crate::effect::Effect;
use crate::features::{
    ONELOG_VERSION, ONELOG_VERSION_CONSUMER_GROUPS, ONELOG_VERSION_RAFT_GROUPS, ONELOG_VERSION_SHARE_GROUPS,
    ONELOG_VERSION_STREAMS_GROUPS,
};
use crate::BrokerState;

/// CRC32C of the state's serialized form. `BrokerState` holds only ordered collections, so
/// equal states serialize to equal bytes. The finalized features, which serde skips, count
/// once recorded; before that the digest is the one onelog 0.1.0 computes for the same state.
/// Consumer, Streams and share groups (with their share-partition states) and the cross-group
/// state, skipped too, count from the `onelog.version` that brought them.
pub fn state_digest(state: &BrokerState) -> u32 {
    let bytes = bincode::serialize(state).expect("the broker state serializes");
    let mut crc = crc32c::crc32c(&bytes);
    if !state.features.is_recorded() {
        return crc;
    }
    let features = bincode::serialize(&state.features).expect("the features serialize");
    crc = crc32c::crc32c_append(crc, &features);
    if state.features.level(ONELOG_VERSION) >= ONELOG_VERSION_CONSUMER_GROUPS {
        let groups = bincode::serialize(&state.consumer_groups).expect("the consumer groups serialize");
        crc = crc32c::crc32c_append(crc, &groups);
    }
    if state.features.level(ONELOG_VERSION) >= ONELOG_VERSION_STREAMS_GROUPS {
        let groups = bincode::serialize(&state.streams_groups).expect("the Streams groups serialize");
        crc = crc32c::crc32c_append(crc, &groups);
    }
    if state.features.level(ONELOG_VERSION) >= ONELOG_VERSION_SHARE_GROUPS {
        let groups = bincode::serialize(&state.share_groups).expect("the share groups serialize");
        let states = bincode::serialize(&state.share_states).expect("the share states serialize");
        crc = crc32c::crc32c_append(crc32c::crc32c_append(crc, &groups), &states);
    }
    if state.features.level(ONELOG_VERSION) >= ONELOG_VERSION_RAFT_GROUPS {
        let xgroup = bincode::serialize(&state.xgroup).expect("the cross-group state serializes");
        crc = crc32c::crc32c_append(crc, &xgroup);
    }
    crc
}

/// A running CRC32C over the effects applied so far, in order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EffectsDigest {
    pub crc: u32,
    pub count: u64,
}

impl EffectsDigest {
    pub fn add(&mut self, effect: &Effect) {
        let mut part = |bytes: &[u8]| self.crc = crc32c::crc32c_append(self.crc, bytes);
        match effect {
            Effect::CreatePartitionLog { topic_id, partition } => {
                part(&[0]);
                part(topic_id);
                part(&partition.to_be_bytes());
            }
            Effect::Append { topic_id, partition, batch } => {
                part(&[1]);
                part(topic_id);
                part(&partition.to_be_bytes());
                part(batch);
            }
            Effect::DeleteTopicLogs { topic_id } => {
                part(&[2]);
                part(topic_id);
            }
            Effect::TrimLog { topic_id, partition, log_start_offset } => {
                part(&[3]);
                part(topic_id);
                part(&partition.to_be_bytes());
                part(&log_start_offset.to_be_bytes());
            }
        }
        self.count += 1;
    }
}

//! The consumer protocol embedded in the classic APIs (Kafka's `ConsumerProtocol`): a classic
//! member's JoinGroup metadata (`ConsumerProtocolSubscription`) and its SyncGroup assignment
//! (`ConsumerProtocolAssignment`), each a big-endian i16 version followed by that version's
//! fields. Online migration reads both when a classic group becomes a consumer group, reads
//! the subscription of every classic member that joins a consumer group, and writes the
//! assignment its SyncGroup answers with.
//!
//! Read as Kafka reads them: a version above the highest known (3) is read as 3, a negative
//! one is malformed. Decoding goes through `kafka-protocol`, whose array decoders onelog
//! bounds by the bytes present (vendor/kafka-protocol/ONELOG.md), so hostile metadata cannot
//! make apply allocate more than its size. Topic names become ids here; a topic that does not
//! exist is left out, as Kafka's `toTopicPartitionMap` leaves it out.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::{
    ConsumerProtocolAssignment, TopicPartition as AssignedTopic,
};
use kafka_protocol::messages::consumer_protocol_subscription::ConsumerProtocolSubscription;
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::model::Assignment;
use crate::{internal_topic, Topic};

/// The highest version of both structures Kafka 4.4 knows.
const HIGHEST_VERSION: i16 = 3;

/// A classic member's subscription, as the consumer group keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// The version the member wrote: its SyncGroup assignment is written back at it.
    pub version: i16,
    pub topics: Vec<String>,
    /// v1+: what the member owns now (cooperative rebalancing), by topic id.
    pub owned: Assignment,
    /// v3+.
    pub rack_id: Option<String>,
}

/// A malformed embedded structure (Kafka's `SchemaException`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

/// The version prefix, as `ConsumerProtocol.deserializeVersion` and `checkVersion` read it.
fn version(buf: &mut Bytes) -> Result<i16, Malformed> {
    if buf.remaining() < 2 {
        return Err(Malformed("no version".into()));
    }
    let version = buf.get_i16();
    if version < 0 {
        return Err(Malformed(format!("version {version} is negative")));
    }
    Ok(version.min(HIGHEST_VERSION))
}

/// The version a subscription was written at (for the answer's assignment), 0 if unreadable.
pub fn subscription_version(metadata: &[u8]) -> i16 {
    version(&mut Bytes::copy_from_slice(metadata)).unwrap_or(0)
}

pub fn parse_subscription(
    metadata: &[u8],
    topics: &BTreeMap<String, Topic>,
) -> Result<Subscription, Malformed> {
    let mut buf = Bytes::copy_from_slice(metadata);
    let version = version(&mut buf)?;
    let decoded =
        ConsumerProtocolSubscription::decode(&mut buf, version).map_err(|e| Malformed(e.to_string()))?;
    let owned = decoded.owned_partitions.iter().map(|tp| (tp.topic.0.to_string(), tp.partitions.as_slice()));
    Ok(Subscription {
        version,
        topics: decoded.topics.iter().map(|t| t.to_string()).collect(),
        owned: by_id(owned, topics),
        rack_id: decoded.rack_id.map(|r| r.to_string()),
    })
}

/// A classic member's last assignment: its partitions by topic id and whether it carried
/// user data (a custom assignor's state, which a conversion would lose). Empty bytes are a
/// member that has no assignment yet.
pub fn parse_assignment(
    bytes: &[u8],
    topics: &BTreeMap<String, Topic>,
) -> Result<(Assignment, bool), Malformed> {
    if bytes.is_empty() {
        return Ok((Assignment::new(), false));
    }
    let mut buf = Bytes::copy_from_slice(bytes);
    let version = version(&mut buf)?;
    let decoded =
        ConsumerProtocolAssignment::decode(&mut buf, version).map_err(|e| Malformed(e.to_string()))?;
    let assigned =
        decoded.assigned_partitions.iter().map(|tp| (tp.topic.0.to_string(), tp.partitions.as_slice()));
    let user_data = decoded.user_data.is_some_and(|d| !d.is_empty());
    Ok((by_id(assigned, topics), user_data))
}

/// `assignment` written as a `ConsumerProtocolAssignment` at `version` (names in name order).
pub fn write_assignment(assignment: &Assignment, version: i16, topics: &BTreeMap<String, Topic>) -> Vec<u8> {
    let mut by_name: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (id, partitions) in assignment {
        if let Some(name) = internal_topic::name_of(topics, id) {
            by_name.entry(name).or_default().extend(partitions.iter().copied());
        }
    }
    let assigned = by_name
        .into_iter()
        .map(|(name, partitions)| {
            AssignedTopic::default()
                .with_topic(TopicName(StrBytes::from_string(name.to_string())))
                .with_partitions(partitions)
        })
        .collect();
    let body = ConsumerProtocolAssignment::default().with_assigned_partitions(assigned);
    let version = version.clamp(0, HIGHEST_VERSION);
    let mut out = BytesMut::new();
    out.put_i16(version);
    // Encoding a struct built here at a version it has cannot fail.
    if body.encode(&mut out, version).is_err() {
        return Vec::new();
    }
    out.to_vec()
}

fn by_id<'a>(
    named: impl Iterator<Item = (String, &'a [i32])>,
    topics: &BTreeMap<String, Topic>,
) -> Assignment {
    let mut out = Assignment::new();
    for (name, partitions) in named {
        if let Some((id, _)) = internal_topic::lookup(topics, &name) {
            out.entry(id).or_default().extend(partitions.iter().copied());
        }
    }
    out
}

#[cfg(test)]
#[path = "embedded_tests.rs"]
mod tests;

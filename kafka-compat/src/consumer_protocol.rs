//! The topics of a consumer-protocol subscription (the JoinGroup metadata of protocol type
//! "consumer"), read the way Kafka's group coordinator reads them.
//!
//! The broker otherwise carries member metadata as opaque bytes; only OffsetDelete (KIP-496)
//! needs to know which topics a group's members subscribe to. Like Kafka's
//! `ClassicGroup.computeSubscribedTopics` this reads the version and then the fields of
//! version 0 — the prefix every later version keeps — so it does not depend on the version
//! a client sends. Counts and lengths are checked against the bytes present before anything
//! is allocated, so hostile metadata cannot make it allocate more than the metadata's size.

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum SubscriptionError {
    #[error("subscription truncated at byte {0}")]
    Truncated(usize),
    #[error("subscription version {0} is negative")]
    Version(i16),
    #[error("negative {what} {value} at byte {at}")]
    Negative { what: &'static str, value: i32, at: usize },
    #[error("topic name is not UTF-8")]
    NotUtf8,
}

/// The subscribed topic names of `metadata` (`ConsumerProtocolSubscription`, read as v0:
/// version, topics, user data; later fields are ignored).
pub fn subscribed_topics(metadata: &[u8]) -> Result<Vec<String>, SubscriptionError> {
    let mut r = Reader { bytes: metadata, at: 0 };
    let version = r.i16()?;
    if version < 0 {
        return Err(SubscriptionError::Version(version));
    }
    let count = r.len_i32("topic count")?;
    // Each topic takes at least its two length bytes.
    if count > r.remaining() / 2 {
        return Err(SubscriptionError::Truncated(metadata.len()));
    }
    let mut topics = Vec::with_capacity(count);
    for _ in 0..count {
        let len = r.i16()?;
        let len = usize::try_from(len).map_err(|_| SubscriptionError::Negative {
            what: "topic name length",
            value: len.into(),
            at: r.at,
        })?;
        let name = std::str::from_utf8(r.take(len)?).map_err(|_| SubscriptionError::NotUtf8)?;
        topics.push(name.to_string());
    }
    // user_data: nullable bytes (-1 is null).
    let user_data = r.i32()?;
    if user_data > 0 {
        r.take(user_data as usize)?;
    }
    Ok(topics)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], SubscriptionError> {
        if n > self.remaining() {
            return Err(SubscriptionError::Truncated(self.at));
        }
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    fn i16(&mut self) -> Result<i16, SubscriptionError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, SubscriptionError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn len_i32(&mut self, what: &'static str) -> Result<usize, SubscriptionError> {
        let at = self.at;
        let value = self.i32()?;
        usize::try_from(value).map_err(|_| SubscriptionError::Negative { what, value, at })
    }
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use kafka_protocol::messages::consumer_protocol_subscription::{
        ConsumerProtocolSubscription, TopicPartition,
    };
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    use super::*;

    /// The bytes a client sends: the version, then the body of that version.
    fn encoded(version: i16, topics: &[&str]) -> Vec<u8> {
        let subscription = ConsumerProtocolSubscription::default()
            .with_topics(topics.iter().map(|t| StrBytes::from_string(t.to_string())).collect())
            .with_user_data(Some(bytes::Bytes::from_static(b"ud")))
            .with_owned_partitions(if version >= 1 {
                vec![TopicPartition::default()
                    .with_topic(TopicName(StrBytes::from_static_str("a")))
                    .with_partitions(vec![0, 1])]
            } else {
                Vec::new()
            });
        let mut out = BytesMut::new();
        out.extend_from_slice(&version.to_be_bytes());
        subscription.encode(&mut out, version).expect("encodes");
        out.to_vec()
    }

    #[test]
    fn every_version_s_topics_are_read_through_the_v0_prefix() {
        for version in 0..=3 {
            let bytes = encoded(version, &["a", "b"]);
            assert_eq!(subscribed_topics(&bytes), Ok(vec!["a".to_string(), "b".to_string()]), "v{version}");
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic_or_an_allocation() {
        assert!(subscribed_topics(b"").is_err());
        assert!(subscribed_topics(b"meta").is_err());
        assert_eq!(subscribed_topics(&[0xff, 0xff, 0, 0, 0, 0]), Err(SubscriptionError::Version(-1)));
        // Two billion topics claimed in six bytes.
        assert!(subscribed_topics(&[0, 0, 0x7f, 0xff, 0xff, 0xff]).is_err());
        let mut truncated = encoded(0, &["topic"]);
        truncated.truncate(truncated.len() - 3);
        assert!(subscribed_topics(&truncated).is_err());
        for len in 0..encoded(1, &["x", "yz"]).len() {
            let _ = subscribed_topics(&encoded(1, &["x", "yz"])[..len]);
        }
    }
}

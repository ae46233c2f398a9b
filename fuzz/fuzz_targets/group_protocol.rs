//! Fuzz target: consumer-protocol member metadata (the JoinGroup `protocols[].metadata` of
//! protocol type "consumer"), which the broker reads from client bytes for OffsetDelete
//! (broker/src/coord/group/deletion.rs) with `consumer_protocol::subscribed_topics`.
#![no_main]

use kafka_compat::consumer_protocol::subscribed_topics;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|metadata: &[u8]| {
    if let Ok(topics) = subscribed_topics(metadata) {
        // Each topic takes at least its two length bytes: the answer is bounded by the input.
        assert!(topics.len() <= metadata.len() / 2, "{} topics from {} bytes", topics.len(), metadata.len());
    }
});

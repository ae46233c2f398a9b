//! Fuzz target: a request frame as the listener handles it before any handler runs
//! (broker/src/net/listener.rs `route`): peek the prefix, answer legacy Produce v0–v2 from
//! `legacy_produce`, decode everything else with `codec::decode_request`. The input is the frame
//! body without its length prefix: the listener has already checked that prefix against
//! `socket.request.max.bytes` (`frame::frame_body_len`) before it allocates the frame.
//!
//! Any panic, and any single allocation above `-malloc_limit_mb` (an allocation sized from a
//! length the frame cannot back), is a finding. The broker's handler registry is not consulted:
//! every key and version `kafka-protocol` knows is decoded, a superset of what the broker serves.
#![no_main]

use bytes::Bytes;
use kafka_compat::codec;
use kafka_compat::legacy_produce::{unsupported_version_response, LEGACY_PRODUCE_VERSION_MAX};
use libfuzzer_sys::fuzz_target;

/// Produce's api key; versions up to `LEGACY_PRODUCE_VERSION_MAX` take the legacy path.
const PRODUCE_API_KEY: i16 = 0;

fuzz_target!(|frame: &[u8]| {
    let Ok(prefix) = codec::peek_prefix(frame) else { return };
    if prefix.api_key == PRODUCE_API_KEY && prefix.api_version <= LEGACY_PRODUCE_VERSION_MAX {
        let _ = unsupported_version_response(frame);
        return;
    }
    let _ = codec::decode_request(Bytes::copy_from_slice(frame));
});

//! Kafka frame encoding for the async raw client and the synchronous readiness probe: the
//! harness's client id over `kafka_compat::client`, which both share with `onelog admin`.
//!
//! A frame is a big-endian i32 length followed by a request (or response) header and body. The
//! header version comes from the API key and version, exactly as a real client chooses it, so
//! requests built here look like a client's.

use anyhow::Result;
use bytes::Bytes;
use kafka_protocol::protocol::Request;

pub use kafka_compat::client::length_prefixed;

/// The client id every harness request carries, so broker logs show where a request came from.
pub const CLIENT_ID: &str = "onelog-harness";

/// Encodes one request, length prefix included.
pub fn encode_request<R: Request>(correlation_id: i32, version: i16, request: &R) -> Result<Bytes> {
    encode_request_as(CLIENT_ID, correlation_id, version, request)
}

/// [`encode_request`] with another client id (quotas, for one, are per client id).
pub fn encode_request_as<R: Request>(
    client_id: &str,
    correlation_id: i32,
    version: i16,
    request: &R,
) -> Result<Bytes> {
    Ok(kafka_compat::client::encode_request(client_id, correlation_id, version, request)?)
}

/// Decodes a response frame body (without its length prefix) for request type `R`; fails on
/// another correlation id or bytes left after the body (`kafka_compat::client`).
pub fn decode_response<R: Request>(frame: Bytes, correlation_id: i32, version: i16) -> Result<R::Response> {
    Ok(kafka_compat::client::decode_response::<R>(frame, correlation_id, version)?)
}

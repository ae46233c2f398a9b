//! Request and response codec on top of the `kafka-protocol` crate.
//!
//! Decoding is split in two steps so the broker can apply its own rules in between: first the
//! fixed prefix (api key, version, correlation id) is peeked without allocating; the broker
//! checks the key and version against its handler registry; only then is the header and body
//! decoded. Response header versions come from each message type's own schema (flexible
//! versions use header v1, except ApiVersions which always answers with header v0).

use std::net::IpAddr;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, RequestHeader, RequestKind, ResponseHeader, ResponseKind,
};
use kafka_protocol::protocol::{Decodable, Encodable};
use thiserror::Error;

use crate::error_code;
use crate::principal::KafkaPrincipal;

/// The first fields of every request header, readable before anything is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestPrefix {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
}

/// Why a request frame could not be decoded.
#[derive(Debug, Error)]
pub enum DecodeError {
    #[error("frame of {0} bytes is too short for a request header")]
    TooShort(usize),
    #[error("unknown api key {0}")]
    UnknownApiKey(i16),
    #[error("malformed {api_key:?} v{api_version} request: {reason}")]
    Malformed { api_key: ApiKey, api_version: i16, reason: String },
}

/// A decoded request: header plus typed body.
#[derive(Debug)]
pub struct Request {
    pub api_key: ApiKey,
    pub api_version: i16,
    pub header: RequestHeader,
    pub body: RequestKind,
    /// The client's IP address. Not in the frame: `None` until the server, which knows the
    /// connection, sets it (Kafka's `RequestContext.clientAddress`).
    pub client_address: Option<IpAddr>,
    /// Who sent it: `User:ANONYMOUS` until the server sets the connection's authenticated
    /// principal (Kafka's `RequestContext.principal`).
    pub principal: Arc<KafkaPrincipal>,
    /// The name of the listener the request arrived on (`PLAINTEXT`, `SASL_SSL`, or an
    /// operator's name from `listener.security.protocol.map`); `None` until the server sets it.
    /// Metadata and FindCoordinator answer with the brokers' addresses on this listener.
    pub listener: Option<Arc<str>>,
    /// A follower forwarded it to this node (the leader) over the Raft transport: it is
    /// served here and never forwarded again (Kafka's envelope, KIP-590).
    pub forwarded: bool,
    /// The connection it arrived on, unique while the process runs; 0 until the server sets
    /// it (share sessions close with their connection, as Kafka's `ShareSessionCache`).
    pub connection_id: u64,
}

/// Reads api key, api version and correlation id from the start of a request frame.
pub fn peek_prefix(frame: &[u8]) -> Result<RequestPrefix, DecodeError> {
    if frame.len() < 8 {
        return Err(DecodeError::TooShort(frame.len()));
    }
    Ok(RequestPrefix {
        api_key: i16::from_be_bytes([frame[0], frame[1]]),
        api_version: i16::from_be_bytes([frame[2], frame[3]]),
        correlation_id: i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]),
    })
}

/// Decodes header and body of a request whose version the caller has already accepted.
pub fn decode_request(frame: Bytes) -> Result<Request, DecodeError> {
    let prefix = peek_prefix(&frame)?;
    let api_key = ApiKey::try_from(prefix.api_key).map_err(|_| DecodeError::UnknownApiKey(prefix.api_key))?;
    let api_version = prefix.api_version;
    let malformed =
        |e: anyhow::Error| DecodeError::Malformed { api_key, api_version, reason: format!("{e:#}") };
    let mut buf = frame;
    let header =
        RequestHeader::decode(&mut buf, api_key.request_header_version(api_version)).map_err(malformed)?;
    let body = RequestKind::decode(api_key, &mut buf, api_version).map_err(malformed)?;
    Ok(Request {
        api_key,
        api_version,
        header,
        body,
        client_address: None,
        principal: KafkaPrincipal::anonymous(),
        listener: None,
        forwarded: false,
        connection_id: 0,
    })
}

/// Encodes a response frame: length prefix, response header, body.
pub fn encode_response(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> anyhow::Result<Bytes> {
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header.encode(&mut buf, api_key.response_header_version(api_version))?;
    body.encode(&mut buf, api_version)?;
    let len = i32::try_from(buf.len() - 4)?;
    buf[0..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf.freeze())
}

/// The reply to an ApiVersions request at a version newer than ours: Kafka's rule (KIP-511) is
/// a v0-format body with UNSUPPORTED_VERSION and our key list, so the client can retry with a
/// version we both speak.
pub fn encode_api_versions_fallback(correlation_id: i32, api_keys: Vec<ApiVersion>) -> anyhow::Result<Bytes> {
    let body = ApiVersionsResponse::default()
        .with_error_code(error_code::UNSUPPORTED_VERSION)
        .with_api_keys(api_keys);
    encode_response(ApiKey::ApiVersions, 0, correlation_id, &ResponseKind::ApiVersions(body))
}

/// Encodes a request frame (length prefix, header, body), for brokers talking to each other.
pub fn encode_request(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    client_id: &str,
    body: &RequestKind,
) -> anyhow::Result<Bytes> {
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(api_version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(kafka_protocol::protocol::StrBytes::from_string(client_id.to_string())));
    header.encode(&mut buf, api_key.request_header_version(api_version))?;
    body.encode(&mut buf, api_version)?;
    let len = i32::try_from(buf.len() - 4)?;
    buf[0..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf.freeze())
}

/// Decodes a response frame (without its length prefix); used by tests and tools.
pub fn decode_response(
    api_key: ApiKey,
    api_version: i16,
    mut frame: Bytes,
) -> anyhow::Result<(i32, ResponseKind)> {
    let header = ResponseHeader::decode(&mut frame, api_key.response_header_version(api_version))?;
    let body = ResponseKind::decode(api_key, &mut frame, api_version)?;
    Ok((header.correlation_id, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{ApiVersionsRequest, MetadataRequest};
    use kafka_protocol::protocol::StrBytes;

    fn frame_of(api_key: ApiKey, version: i16, body: &RequestKind) -> Bytes {
        let mut buf = BytesMut::new();
        let header = RequestHeader::default()
            .with_request_api_key(api_key as i16)
            .with_request_api_version(version)
            .with_correlation_id(77)
            .with_client_id(Some(StrBytes::from_static_str("t")));
        header.encode(&mut buf, api_key.request_header_version(version)).expect("header");
        body.encode(&mut buf, version).expect("body");
        buf.freeze()
    }

    #[test]
    fn round_trips_flexible_and_non_flexible_requests() {
        for version in [0i16, 3] {
            let body = RequestKind::ApiVersions(ApiVersionsRequest::default());
            let req = decode_request(frame_of(ApiKey::ApiVersions, version, &body)).expect("decode");
            assert_eq!(
                (req.api_key, req.api_version, req.header.correlation_id),
                (ApiKey::ApiVersions, version, 77)
            );
        }
        let body = RequestKind::Metadata(MetadataRequest::default());
        let req = decode_request(frame_of(ApiKey::Metadata, 12, &body)).expect("decode");
        assert_eq!(req.api_version, 12);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(matches!(decode_request(Bytes::from_static(b"\x00")), Err(DecodeError::TooShort(1))));
        let unknown = Bytes::from_static(&[0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0, 0]);
        assert!(matches!(decode_request(unknown), Err(DecodeError::UnknownApiKey(999))));
        let truncated = Bytes::from_static(&[0, 3, 0, 12, 0, 0, 0, 1, 0xff]);
        assert!(matches!(decode_request(truncated), Err(DecodeError::Malformed { .. })));
    }

    #[test]
    fn fallback_reply_is_v0_with_error_35() {
        let keys = vec![ApiVersion::default().with_api_key(18).with_min_version(0).with_max_version(4)];
        let frame = encode_api_versions_fallback(5, keys).expect("encode");
        let (corr, body) = decode_response(ApiKey::ApiVersions, 0, frame.slice(4..)).expect("decode");
        let ResponseKind::ApiVersions(body) = body else { panic!("wrong kind") };
        assert_eq!((corr, body.error_code, body.api_keys.len()), (5, 35, 1));
    }
}

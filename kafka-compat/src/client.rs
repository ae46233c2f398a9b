//! The client side of the wire, sans I/O: what a Kafka client does between its socket and its
//! typed requests. Encode a typed request with its header and length prefix, decode the
//! response to it (checking the correlation id and that nothing is left over), and pick each
//! API's version from the ranges a broker advertised in ApiVersions.
//!
//! Used by `onelog admin` (`broker::cli::kafka`) and the harness's raw client and probes; each
//! owns its socket (tokio or blocking) and calls in here for everything else, as the broker
//! does with `codec` on the server side.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use thiserror::Error;

/// The ApiVersions version a client opens with (KIP-511: v3 names the client software).
pub const API_VERSIONS_VERSION: i16 = 3;

/// Why a request could not be encoded, a response not decoded or no version agreed.
#[derive(Debug, Error)]
pub enum ClientError {
    #[error("unknown api key {0}")]
    UnknownApiKey(i16),
    #[error("encoding {api_key:?} v{version}: {reason}")]
    Encode { api_key: ApiKey, version: i16, reason: String },
    #[error("decoding {api_key:?} v{version} response: {reason}")]
    Decode { api_key: ApiKey, version: i16, reason: String },
    #[error("{api_key:?} v{version}: correlation id {got} in response, expected {expected}")]
    CorrelationId { api_key: ApiKey, version: i16, got: i32, expected: i32 },
    #[error("{api_key:?} v{version} response: {left} bytes left after the body")]
    TrailingBytes { api_key: ApiKey, version: i16, left: usize },
    #[error("the broker does not advertise {0:?}")]
    NotAdvertised(ApiKey),
    #[error("no common version of {api_key:?}: broker {broker:?}, client {client:?}, cap {cap}")]
    NoCommonVersion { api_key: ApiKey, broker: (i16, i16), client: (i16, i16), cap: i16 },
}

fn api_key_of<R: Request>() -> Result<ApiKey, ClientError> {
    ApiKey::try_from(R::KEY).map_err(|_| ClientError::UnknownApiKey(R::KEY))
}

/// Encodes one request as `client_id` sends it, length prefix included. The header version
/// comes from the API key and version, exactly as a real client chooses it.
pub fn encode_request<R: Request>(
    client_id: &str,
    correlation_id: i32,
    version: i16,
    request: &R,
) -> Result<Bytes, ClientError> {
    let api_key = api_key_of::<R>()?;
    let encode_error = |e: anyhow::Error| ClientError::Encode { api_key, version, reason: format!("{e:#}") };
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_string(client_id.to_owned())));
    let mut body = BytesMut::new();
    header.encode(&mut body, api_key.request_header_version(version)).map_err(encode_error)?;
    request.encode(&mut body, version).map_err(encode_error)?;
    Ok(length_prefixed(&body))
}

/// Prepends the i32 length to `payload`.
pub fn length_prefixed(payload: &[u8]) -> Bytes {
    let mut frame = BytesMut::with_capacity(payload.len() + 4);
    frame.put_i32(i32::try_from(payload.len()).expect("frame fits in i32"));
    frame.put_slice(payload);
    frame.freeze()
}

/// Decodes a response frame body (without its length prefix) for request type `R`.
///
/// Fails when the correlation id differs or when bytes are left over after the body: a broker
/// that encodes a field the version does not have is a bug a client must notice.
pub fn decode_response<R: Request>(
    mut frame: Bytes,
    correlation_id: i32,
    version: i16,
) -> Result<R::Response, ClientError> {
    let api_key = api_key_of::<R>()?;
    let decode_error = |e: anyhow::Error| ClientError::Decode { api_key, version, reason: format!("{e:#}") };
    let header =
        ResponseHeader::decode(&mut frame, api_key.response_header_version(version)).map_err(decode_error)?;
    if header.correlation_id != correlation_id {
        let got = header.correlation_id;
        return Err(ClientError::CorrelationId { api_key, version, got, expected: correlation_id });
    }
    let response = R::Response::decode(&mut frame, version).map_err(decode_error)?;
    if frame.has_remaining() {
        return Err(ClientError::TrailingBytes { api_key, version, left: frame.remaining() });
    }
    Ok(response)
}

/// ApiVersions v3 naming the client software (KIP-511).
pub fn api_versions_request(
    software_name: &'static str,
    software_version: &'static str,
) -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str(software_name))
        .with_client_software_version(StrBytes::from_static_str(software_version))
}

/// The (min, max) version a broker advertised for each API key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Versions(BTreeMap<i16, (i16, i16)>);

impl Versions {
    pub fn from_response(response: &ApiVersionsResponse) -> Self {
        Self(response.api_keys.iter().map(|k| (k.api_key, (k.min_version, k.max_version))).collect())
    }

    /// The highest version of `R` that the broker, kafka-protocol and `cap` all allow.
    pub fn pick<R: Request>(&self, cap: i16) -> Result<i16, ClientError> {
        let api_key = api_key_of::<R>()?;
        let broker = *self.0.get(&R::KEY).ok_or(ClientError::NotAdvertised(api_key))?;
        let client = (R::VERSIONS.min, R::VERSIONS.max);
        let version = broker.1.min(client.1).min(cap);
        if version < broker.0.max(client.0) {
            return Err(ClientError::NoCommonVersion { api_key, broker, client, cap });
        }
        Ok(version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::MetadataRequest;
    use kafka_protocol::protocol::decode_request_header_from_buffer;

    #[test]
    fn request_frame_decodes_as_a_broker_would() {
        let request = api_versions_request("a", "1");
        let mut frame = encode_request("c", 9, 3, &request).unwrap();
        let length = frame.get_i32();
        assert_eq!(length as usize, frame.len());
        let header = decode_request_header_from_buffer(&mut frame).unwrap();
        assert_eq!((header.request_api_key, header.request_api_version), (18, 3));
        assert_eq!(header.correlation_id, 9);
        assert_eq!(ApiVersionsRequest::decode(&mut frame, 3).unwrap(), request);
    }

    #[test]
    fn response_with_trailing_bytes_or_another_correlation_id_is_rejected() {
        let mut body = BytesMut::new();
        ResponseHeader::default().with_correlation_id(5).encode(&mut body, 0).unwrap();
        ApiVersionsResponse::default().encode(&mut body, 3).unwrap();
        let good = body.clone().freeze();
        assert!(decode_response::<ApiVersionsRequest>(good.clone(), 5, 3).is_ok());
        assert!(matches!(
            decode_response::<ApiVersionsRequest>(good, 6, 3),
            Err(ClientError::CorrelationId { got: 5, expected: 6, .. })
        ));
        body.put_u8(0);
        assert!(matches!(
            decode_response::<ApiVersionsRequest>(body.freeze(), 5, 3),
            Err(ClientError::TrailingBytes { left: 1, .. })
        ));
    }

    #[test]
    fn picks_the_highest_common_version_or_says_why_not() {
        let advertised = |min, max| {
            let key = ApiVersion::default().with_api_key(MetadataRequest::KEY);
            Versions::from_response(
                &ApiVersionsResponse::default()
                    .with_api_keys(vec![key.with_min_version(min).with_max_version(max)]),
            )
        };
        assert_eq!(advertised(0, 12).pick::<MetadataRequest>(9).unwrap(), 9);
        assert_eq!(advertised(0, 4).pick::<MetadataRequest>(9).unwrap(), 4);
        assert!(matches!(
            advertised(10, 12).pick::<MetadataRequest>(9),
            Err(ClientError::NoCommonVersion { .. })
        ));
        assert!(matches!(Versions::default().pick::<MetadataRequest>(9), Err(ClientError::NotAdvertised(_))));
    }
}

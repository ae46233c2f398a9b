//! Kafka frame encoding shared by the async raw client and the synchronous readiness probe.
//!
//! A frame is a big-endian i32 length followed by a request (or response) header and body. The
//! header version comes from the API key and version (`ApiKey::request_header_version`), exactly
//! as a real client chooses it, so requests built here look like a client's.

use anyhow::{bail, Context, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};

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
    let api_key = ApiKey::try_from(R::KEY).map_err(|_| anyhow::anyhow!("unknown key {}", R::KEY))?;
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_string(client_id.to_owned())));
    let mut body = BytesMut::new();
    header.encode(&mut body, api_key.request_header_version(version))?;
    request.encode(&mut body, version).with_context(|| format!("encoding {api_key:?} v{version}"))?;
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
/// that encodes a field the version does not have is a bug the harness must notice.
pub fn decode_response<R: Request>(
    mut frame: Bytes,
    correlation_id: i32,
    version: i16,
) -> Result<R::Response> {
    let api_key = ApiKey::try_from(R::KEY).map_err(|_| anyhow::anyhow!("unknown key {}", R::KEY))?;
    let header = ResponseHeader::decode(&mut frame, api_key.response_header_version(version))
        .with_context(|| format!("decoding {api_key:?} v{version} response header"))?;
    if header.correlation_id != correlation_id {
        bail!(
            "{api_key:?} v{version}: correlation id {} in response, expected {correlation_id}",
            header.correlation_id
        );
    }
    let response = R::Response::decode(&mut frame, version)
        .with_context(|| format!("decoding {api_key:?} v{version} response body"))?;
    if frame.has_remaining() {
        bail!("{api_key:?} v{version} response: {} bytes left after the body", frame.remaining());
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
    use kafka_protocol::protocol::decode_request_header_from_buffer;

    #[test]
    fn request_frame_decodes_as_a_broker_would() {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("a"))
            .with_client_software_version(StrBytes::from_static_str("1"));
        let mut frame = encode_request(9, 3, &request).unwrap();
        let length = frame.get_i32();
        assert_eq!(length as usize, frame.len());
        let header = decode_request_header_from_buffer(&mut frame).unwrap();
        assert_eq!((header.request_api_key, header.request_api_version), (18, 3));
        assert_eq!(header.correlation_id, 9);
        assert_eq!(ApiVersionsRequest::decode(&mut frame, 3).unwrap(), request);
    }

    #[test]
    fn response_with_trailing_bytes_is_rejected() {
        let mut body = BytesMut::new();
        ResponseHeader::default().with_correlation_id(5).encode(&mut body, 0).unwrap();
        ApiVersionsResponse::default().encode(&mut body, 3).unwrap();
        let good = body.clone().freeze();
        assert!(decode_response::<ApiVersionsRequest>(good.clone(), 5, 3).is_ok());
        assert!(decode_response::<ApiVersionsRequest>(good, 6, 3).is_err());
        body.put_u8(0);
        assert!(decode_response::<ApiVersionsRequest>(body.freeze(), 5, 3).is_err());
    }
}

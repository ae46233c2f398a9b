//! A blocking ApiVersions round trip: the readiness check for a freshly spawned broker.
//!
//! Blocking on purpose, so process control works from plain `#[test]`s and from inside a tokio
//! runtime alike, without needing a runtime of its own.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::codec::{decode_response, encode_request, CLIENT_ID};

/// Largest ApiVersions response the probe reads, in bytes.
const PROBE_RESPONSE_BYTES_MAX: usize = 1024 * 1024;

/// Connects, sends ApiVersions v3 and checks the answer has error code 0.
pub fn probe_api_versions(addr: SocketAddr, timeout: Duration) -> Result<ApiVersionsResponse> {
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).with_context(|| format!("connecting to {addr}"))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let request = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str(CLIENT_ID))
        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
    stream.write_all(&encode_request(0, 3, &request)?)?;
    let mut length = [0u8; 4];
    stream.read_exact(&mut length).context("reading length")?;
    let length = i32::from_be_bytes(length);
    let Some(length) = usize::try_from(length).ok().filter(|&l| l <= PROBE_RESPONSE_BYTES_MAX) else {
        bail!("ApiVersions response length {length} out of range");
    };
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).context("reading body")?;
    let response = decode_response::<ApiVersionsRequest>(Bytes::from(body), 0, 3)?;
    if response.error_code != 0 {
        bail!("ApiVersions v3 error code {}", response.error_code);
    }
    Ok(response)
}

//! Blocking round trips: ApiVersions, the readiness check for a freshly spawned broker, and
//! Metadata's controller id, a node's view of the leader when it has no admin API.
//!
//! Blocking on purpose, so process control works from plain `#[test]`s and from inside a tokio
//! runtime alike, without needing a runtime of its own.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use kafka_compat::client::{api_versions_request, API_VERSIONS_VERSION};
use kafka_protocol::messages::{ApiVersionsResponse, MetadataRequest};
use kafka_protocol::protocol::Request;

use crate::codec::{decode_response, encode_request, CLIENT_ID};

/// Largest response a probe reads, in bytes.
const PROBE_RESPONSE_BYTES_MAX: usize = 1024 * 1024;

/// Connects, sends ApiVersions v3 and checks the answer has error code 0.
pub fn probe_api_versions(addr: SocketAddr, timeout: Duration) -> Result<ApiVersionsResponse> {
    let request = api_versions_request(CLIENT_ID, env!("CARGO_PKG_VERSION"));
    let response = blocking_request(addr, API_VERSIONS_VERSION, &request, timeout)?;
    if response.error_code != 0 {
        bail!("ApiVersions v3 error code {}", response.error_code);
    }
    Ok(response)
}

/// The controller id a broker reports in Metadata v1 (all topics omitted): onelog's Raft
/// leader as that node sees it, -1 when it knows none.
pub fn probe_controller(addr: SocketAddr, timeout: Duration) -> Result<i32> {
    let request = MetadataRequest::default().with_topics(Some(Vec::new()));
    let response = blocking_request(addr, 1, &request, timeout)?;
    Ok(response.controller_id.0)
}

/// One request and its response on a fresh blocking connection.
pub fn blocking_request<R: Request>(
    addr: SocketAddr,
    version: i16,
    request: &R,
    timeout: Duration,
) -> Result<R::Response> {
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).with_context(|| format!("connecting to {addr}"))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(&encode_request(0, version, request)?)?;
    let mut length = [0u8; 4];
    stream.read_exact(&mut length).context("reading length")?;
    let length = i32::from_be_bytes(length);
    let Some(length) = usize::try_from(length).ok().filter(|&l| l <= PROBE_RESPONSE_BYTES_MAX) else {
        bail!("response length {length} out of range");
    };
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).context("reading body")?;
    decode_response::<R>(Bytes::from(body), 0, version)
}

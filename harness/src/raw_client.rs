//! A minimal async Kafka client over one TCP connection, built on kafka-protocol's codecs.
//!
//! Real clients hide the wire; the harness needs it in the open: to send garbage and check the
//! connection is closed, to send one Produce request spanning several topics, and to read back
//! exactly the bytes the broker stores. One request at a time, in order, no retries.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use bytes::{Buf, Bytes, BytesMut};
use kafka_compat::client::{api_versions_request, Versions, API_VERSIONS_VERSION};
use kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Encodable, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::codec::{decode_response, encode_request_as, length_prefixed, CLIENT_ID};

/// Largest response frame the harness accepts, in bytes.
pub const RESPONSE_BYTES_MAX: usize = 256 * 1024 * 1024;

/// How long a request may wait for its response before the harness calls it hung.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// One connection to a broker.
pub struct RawClient {
    stream: TcpStream,
    next_correlation_id: i32,
    /// Broker-advertised (min, max) version per API key, once `api_versions` ran.
    versions: Versions,
    /// The client id of the requests' headers.
    client_id: String,
}

/// How a connection ended when a test expected the broker to drop it.
#[derive(Debug, PartialEq, Eq)]
pub enum Closed {
    /// Orderly close (read returned 0).
    Eof,
    /// The broker reset the connection.
    Reset,
}

impl RawClient {
    /// Connects with TCP_NODELAY set.
    pub async fn connect(addr: SocketAddr) -> Result<Self> {
        let stream = TcpStream::connect(addr).await.with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            next_correlation_id: 1,
            versions: Versions::default(),
            client_id: CLIENT_ID.to_owned(),
        })
    }

    /// Connects and negotiates versions with ApiVersions v3.
    pub async fn connect_negotiated(addr: SocketAddr) -> Result<Self> {
        let mut client = Self::connect(addr).await?;
        let response = client.api_versions().await?;
        if response.error_code != 0 {
            bail!("ApiVersions v3 answered error {}", response.error_code);
        }
        Ok(client)
    }

    /// Sends the requests that follow with this client id.
    pub fn set_client_id(&mut self, client_id: &str) {
        self.client_id = client_id.to_owned();
    }

    /// Sends one request and decodes its response.
    pub async fn request<R: Request>(&mut self, version: i16, request: &R) -> Result<R::Response> {
        let correlation_id = self.send_request(version, request).await?;
        self.receive_response::<R>(correlation_id, version).await
    }

    /// Sends a request without waiting for its response (pipelining); returns its correlation id.
    pub async fn send_request<R: Request>(&mut self, version: i16, request: &R) -> Result<i32> {
        let correlation_id = self.take_correlation_id();
        let frame = encode_request_as(&self.client_id, correlation_id, version, request)?;
        self.write_raw(&frame).await?;
        Ok(correlation_id)
    }

    /// Reads the next response and checks it answers `correlation_id` (responses come back in
    /// request order on one connection).
    pub async fn receive_response<R: Request>(
        &mut self,
        correlation_id: i32,
        version: i16,
    ) -> Result<R::Response> {
        let response = self.read_frame().await?;
        decode_response::<R>(response, correlation_id, version)
    }

    /// ApiVersions v3; remembers the advertised ranges for [`RawClient::version`].
    pub async fn api_versions(&mut self) -> Result<ApiVersionsResponse> {
        let request = api_versions_request(CLIENT_ID, env!("CARGO_PKG_VERSION"));
        let response = self.request(API_VERSIONS_VERSION, &request).await?;
        self.versions = Versions::from_response(&response);
        Ok(response)
    }

    /// The highest version of `R` that the broker, kafka-protocol and `cap` all allow.
    pub fn version<R: Request>(&self, cap: i16) -> Result<i16> {
        Ok(self.versions.pick::<R>(cap)?)
    }

    /// Writes `payload` with its i32 length prefix.
    pub async fn send_frame(&mut self, payload: &[u8]) -> Result<()> {
        self.write_raw(&length_prefixed(payload)).await
    }

    /// Writes bytes exactly as given.
    pub async fn write_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await?;
        Ok(())
    }

    /// Reads one response frame, without its length prefix.
    pub async fn read_frame(&mut self) -> Result<Bytes> {
        tokio::time::timeout(RESPONSE_TIMEOUT, self.read_frame_untimed())
            .await
            .map_err(|_| anyhow!("no response within {RESPONSE_TIMEOUT:?}"))?
    }

    async fn read_frame_untimed(&mut self) -> Result<Bytes> {
        let length = self.stream.read_i32().await.context("reading frame length")?;
        let length = usize::try_from(length)
            .ok()
            .filter(|&l| l <= RESPONSE_BYTES_MAX)
            .ok_or_else(|| anyhow!("response frame length {length} out of range"))?;
        let mut frame = BytesMut::zeroed(length);
        self.stream.read_exact(&mut frame).await.context("reading frame body")?;
        Ok(frame.freeze())
    }

    /// Waits until the broker closes the connection. Fails if it sends bytes instead or keeps
    /// the connection open for `within`.
    pub async fn expect_closed(&mut self, within: Duration) -> Result<Closed> {
        let mut buf = [0u8; 4096];
        let read = tokio::time::timeout(within, self.stream.read(&mut buf))
            .await
            .map_err(|_| anyhow!("connection still open after {within:?}"))?;
        match read {
            Ok(0) => Ok(Closed::Eof),
            Ok(n) => {
                let mut bytes = &buf[..n];
                let prefix = if n >= 4 { bytes.get_i32() } else { -1 };
                bail!("expected the connection closed, got {n} bytes (length prefix {prefix})")
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(Closed::Reset),
            Err(e) => Err(e).context("reading while expecting close"),
        }
    }

    fn take_correlation_id(&mut self) -> i32 {
        let id = self.next_correlation_id;
        self.next_correlation_id += 1;
        id
    }
}

/// Encodes a request header plus `body` (already encoded) without checking either: for requests
/// kafka-protocol cannot encode (versions it dropped, versions nobody has).
pub fn frame_with_header(api_key: i16, version: i16, correlation_id: i32, body: &[u8]) -> Bytes {
    let header_version =
        ApiKey::try_from(api_key).map(|k| k.request_header_version(version.clamp(0, i16::MAX))).unwrap_or(1);
    let header = RequestHeader::default()
        .with_request_api_key(api_key)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
    let mut payload = BytesMut::new();
    header.encode(&mut payload, header_version).expect("a request header always encodes");
    payload.extend_from_slice(body);
    length_prefixed(&payload)
}

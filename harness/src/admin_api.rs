//! A blocking client for the broker's HTTP/1.1 admin API (`--admin-listen`): `GET /status`,
//! `GET /digest` and the membership `POST`s, decoded from JSON.
//!
//! Blocking on purpose, like `probe`: cluster control runs from plain `#[test]`s and from inside
//! a tokio runtime alike. One request per connection (`Connection: close`), bounded in time and
//! in response size, so a paused (SIGSTOP) node costs a timeout, never a hang.
//!
//! A node with `onelog.admin.ssl.*` serves HTTPS only: the `_via` functions take the CA file
//! its certificate chains to (`ClusterOptions::admin_ca`), and check the certificate against it
//! and the address's IP.
//!
//! Fields whose JSON shape the contract leaves open (`last_applied`, `hash`, `kafka`) are kept
//! as `serde_json::Value`: the harness only compares them for equality and prints them.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde::Deserialize;
use serde_json::Value;

/// Longest one admin request may take, connect included.
pub const ADMIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest admin response the harness reads, in bytes.
pub const ADMIN_RESPONSE_BYTES_MAX: u64 = 16 * 1024 * 1024;
/// HTTP status of a leader-only endpoint asked on a follower ("Misdirected Request").
pub const STATUS_MISDIRECTED: u16 = 421;

/// `GET /status`: one node's view of the Raft group.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Status {
    pub node_id: u64,
    /// The leader this node knows of, if any.
    pub leader: Option<u64>,
    pub term: u64,
    /// openraft's server state: "Leader", "Follower", "Candidate", "Learner", "Shutdown".
    pub role: String,
    /// Whether this node leads and has applied an entry of its own term (so it takes writes).
    #[serde(default)]
    pub serving: bool,
    #[serde(default)]
    pub last_log_index: Value,
    #[serde(default)]
    pub last_applied: Value,
    /// Index of the last checkpoint (openraft snapshot); null before the first.
    #[serde(default)]
    pub checkpoint_index: Value,
    /// Index of the last Raft log entry purged (below the checkpoint); null before any.
    #[serde(default)]
    pub purged_index: Value,
    /// Whether new partition segments leave their batches in the Raft log (issue 31).
    #[serde(default)]
    pub journaled_segments: bool,
    /// Raft log segments kept past their purge because partitions point into them.
    #[serde(default)]
    pub parked_log_segments: u64,
    #[serde(default)]
    pub parked_log_bytes: u64,
    #[serde(default)]
    pub voters: Vec<u64>,
    #[serde(default)]
    pub learners: Vec<u64>,
    #[serde(default)]
    pub kafka: Value,
    /// The feature levels: `finalized` (the cluster's, as this node applied them), `supported`
    /// (its build's) and `epoch`.
    #[serde(default)]
    pub features: Value,
    /// The Raft groups this node runs: `{"count", "groups": [{"group", "leader", "term",
    /// "role", "voters", "preferred_leader", "last_log_index", "last_applied"}]}`.
    #[serde(default)]
    pub raft_groups: Value,
}

impl Status {
    /// Whether this node says it is the leader.
    pub fn is_leader(&self) -> bool {
        self.role.eq_ignore_ascii_case("leader")
    }
}

/// `GET /digest`: what one node has applied, partition by partition.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Digest {
    pub node_id: u64,
    pub last_applied: Value,
    pub partitions: Vec<PartitionDigest>,
}

/// One partition of a [`Digest`].
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct PartitionDigest {
    pub topic: String,
    pub partition: i32,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub hash: Value,
    /// Every other field the broker reports (topic id, batch and byte counts, ...): compared
    /// like the rest, so a replica differing in any of them differs.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// An HTTP response: status code and body.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The body as text, for error messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// `GET /status`.
pub fn status(addr: SocketAddr) -> Result<Status> {
    status_via(addr, None)
}

/// `GET /status`, over HTTPS when `ca` is given.
pub fn status_via(addr: SocketAddr, ca: Option<&Path>) -> Result<Status> {
    get_json(addr, "/status", ca)
}

/// `GET /digest`.
pub fn digest(addr: SocketAddr) -> Result<Digest> {
    digest_via(addr, None)
}

/// `GET /digest`, over HTTPS when `ca` is given.
pub fn digest_via(addr: SocketAddr, ca: Option<&Path>) -> Result<Digest> {
    get_json(addr, "/digest", ca)
}

/// `GET /digest?group=G`: the partitions of Raft group G (issue 32).
pub fn group_digest(addr: SocketAddr, group: u64) -> Result<Digest> {
    get_json(addr, &format!("/digest?group={group}"), None)
}

/// `POST /checkpoint`, then waits (at most `timeout`) until the node has purged its Raft log
/// past `index` (it keeps `LOG_ENTRIES_KEPT_BELOW_CHECKPOINT` entries below a checkpoint, so
/// enough must have been written after `index`); returns its status then.
pub fn checkpoint_and_purge_past(addr: SocketAddr, index: u64, timeout: Duration) -> Result<Status> {
    let response = post(addr, "/checkpoint")?;
    if response.status != 202 {
        bail!("POST /checkpoint on {addr}: HTTP {}: {}", response.status, response.text());
    }
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let status = status(addr)?;
        if status.purged_index.as_u64().is_some_and(|purged| purged > index) {
            return Ok(status);
        }
        if std::time::Instant::now() > deadline {
            bail!("{addr} did not purge past {index} within {timeout:?}: {status:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `POST path` (e.g. `/members/promote?id=4`); returns the response whatever its status.
pub fn post(addr: SocketAddr, path: &str) -> Result<HttpResponse> {
    request(addr, "POST", path)
}

fn get_json<T: serde::de::DeserializeOwned>(addr: SocketAddr, path: &str, ca: Option<&Path>) -> Result<T> {
    let response = request_via(addr, "GET", path, ca)?;
    if response.status != 200 {
        bail!("GET {path} on {addr}: HTTP {}: {}", response.status, response.text());
    }
    serde_json::from_slice(&response.body)
        .with_context(|| format!("GET {path} on {addr}: decoding {}", response.text()))
}

/// One HTTP/1.1 request on a fresh connection.
pub fn request(addr: SocketAddr, method: &str, path: &str) -> Result<HttpResponse> {
    request_via(addr, method, path, None)
}

/// One HTTP/1.1 request on a fresh connection; HTTPS, the server's certificate checked
/// against the CA certificates in the PEM file `ca`, when given.
pub fn request_via(addr: SocketAddr, method: &str, path: &str, ca: Option<&Path>) -> Result<HttpResponse> {
    let stream = TcpStream::connect_timeout(&addr, ADMIN_REQUEST_TIMEOUT)
        .with_context(|| format!("connecting to admin API {addr}"))?;
    stream.set_read_timeout(Some(ADMIN_REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(ADMIN_REQUEST_TIMEOUT))?;
    let head =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    let raw = match ca {
        None => exchange(stream, &head),
        Some(ca) => {
            let name = ServerName::IpAddress(addr.ip().into());
            let connection = rustls::ClientConnection::new(tls_config(ca)?, name)?;
            exchange(rustls::StreamOwned::new(connection, stream), &head)
        }
    }
    .with_context(|| format!("{method} {path} on {addr}"))?;
    parse_response(&raw).with_context(|| format!("{method} {path} on {addr}"))
}

/// Writes the request head and reads the whole response, until the server closes.
fn exchange(mut stream: impl Read + Write, head: &str) -> Result<Vec<u8>> {
    stream.write_all(head.as_bytes()).context("sending the request")?;
    let mut raw = Vec::new();
    match stream.take(ADMIN_RESPONSE_BYTES_MAX).read_to_end(&mut raw) {
        Ok(_) => Ok(raw),
        // A TLS peer closing without close_notify: the response is whole if it parses.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => Ok(raw),
        Err(e) => Err(e).context("reading the response"),
    }
}

/// A client configuration trusting the CA certificates in `ca`.
fn tls_config(ca: &Path) -> Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).with_context(|| format!("reading {}", ca.display()))? {
        roots.add(cert.with_context(|| format!("reading {}", ca.display()))?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Parses a whole HTTP/1.1 response read until the server closed the connection.
fn parse_response(raw: &[u8]) -> Result<HttpResponse> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").context("no end of headers")?;
    let head = std::str::from_utf8(&raw[..split]).context("headers are not UTF-8")?;
    let body = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("bad status line {status_line:?}"))?;
    let header = |name: &str| {
        head.split("\r\n").skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    };
    let body = if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        dechunk(body)?
    } else if let Some(length) = header("content-length") {
        let length: usize = length.parse().context("bad Content-Length")?;
        if body.len() < length {
            bail!("body cut short: {} of {length} bytes", body.len());
        }
        body[..length].to_vec()
    } else {
        body.to_vec()
    };
    Ok(HttpResponse { status, body })
}

/// Decodes a chunked body (RFC 9112 §7.1), ignoring extensions and trailers.
fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let end = rest.windows(2).position(|w| w == b"\r\n").context("chunk size line")?;
        let line = std::str::from_utf8(&rest[..end])?;
        let size = usize::from_str_radix(line.split(';').next().unwrap_or_default().trim(), 16)
            .with_context(|| format!("chunk size {line:?}"))?;
        rest = &rest[end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if rest.len() < size + 2 {
            bail!("chunk cut short");
        }
        out.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_content_length_and_chunked_bodies() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
        let response = parse_response(plain).unwrap();
        assert_eq!((response.status, response.body.as_slice()), (200, &b"{}"[..]));

        let chunked = b"HTTP/1.1 421 Misdirected Request\r\nTransfer-Encoding: chunked\r\n\r\n\
                        3\r\nnot\r\n7\r\n leader\r\n0\r\n\r\n";
        let response = parse_response(chunked).unwrap();
        assert_eq!((response.status, response.text().as_str()), (421, "not leader"));
    }

    #[test]
    fn decodes_status_and_digest() {
        let status: Status = serde_json::from_str(
            r#"{"node_id":2,"leader":null,"term":3,"role":"Follower","last_log_index":10,
                "last_applied":9,"voters":[1,2,3],"learners":[],"kafka":"127.0.0.1:9093"}"#,
        )
        .unwrap();
        assert_eq!((status.node_id, status.leader, status.is_leader()), (2, None, false));
        let digest: Digest = serde_json::from_str(
            r#"{"node_id":1,"last_applied":9,"partitions":[{"topic":"t","partition":0,
                "log_start_offset":0,"log_end_offset":5,"hash":"ab12"}]}"#,
        )
        .unwrap();
        assert_eq!(digest.partitions[0].log_end_offset, 5);
    }
}

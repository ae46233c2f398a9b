//! The admin API's client side: one HTTP/1.1 request per connection on hyper's client
//! connection, its JSON answer decoded, and the choice of which `--admin` address to ask.
//!
//! Membership and leadership changes are leader-only; a follower answers 421 with the leader's
//! id. `/status` names every node's Raft and Kafka addresses but not its admin one, so the
//! leader's admin address cannot be looked up: each given address is tried in turn until one
//! accepts (`AdminApi::post_to_leader`). With `--admin-ca` (nodes with `onelog.admin.ssl.*`)
//! the connection is HTTPS, the server's certificate checked against that CA and the host of
//! the address given.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper::{header, Method, Request};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use serde_json::Value;
use tokio::net::TcpStream;

use super::net_error;
use crate::limits::ADMIN_MEMBERSHIP_CHANGE_TIMEOUT_MS;

/// How long connecting to an admin address may take.
const ADMIN_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long an answer may take: a membership change answers once committed, a learner once
/// it has caught up, within the server's own bound plus a margin.
const ADMIN_ANSWER_TIMEOUT: Duration = Duration::from_millis(ADMIN_MEMBERSHIP_CHANGE_TIMEOUT_MS + 10_000);
/// Largest admin answer read, in bytes.
const ADMIN_ANSWER_BYTES_MAX: usize = 16 * 1024 * 1024;
/// HTTP status of a leader-only endpoint asked on a follower ("Misdirected Request").
const STATUS_MISDIRECTED: u16 = 421;

/// One admin answer: its HTTP status and JSON body.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

impl Answer {
    fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body's `error` field, or the body itself.
    fn error(&self) -> String {
        match self.body.get("error").and_then(Value::as_str) {
            Some(e) => e.to_string(),
            None => self.body.to_string(),
        }
    }
}

/// The client configuration for HTTPS: server certificates checked against `ca`, and the
/// client certificate in `keystore`, if given.
pub fn tls_config(ca: &Path, keystore: Option<&Path>) -> Result<Arc<ClientConfig>> {
    let roots =
        crate::net::tls::truststore_roots(ca).with_context(|| format!("--admin-ca {}", ca.display()))?;
    let builder = ClientConfig::builder_with_provider(crate::net::tls::provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_root_certificates(roots);
    let config = match keystore {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let (chain, key) = crate::net::tls::keystore_files(path)
                .with_context(|| format!("--admin-keystore {}", path.display()))?;
            builder
                .with_client_auth_cert(chain, key)
                .with_context(|| format!("--admin-keystore {}", path.display()))?
        }
    };
    Ok(Arc::new(config))
}

/// Sends `method path` to `addr` (with the bearer `token`, if any; over TLS with `tls`) and
/// decodes the JSON answer, whatever its status.
pub async fn call(
    addr: &str,
    method: Method,
    path: &str,
    token: Option<&str>,
    tls: Option<&Arc<ClientConfig>>,
) -> Result<Answer> {
    let unreachable = |e: &std::io::Error| anyhow!("cannot reach the admin API at {addr}: {}", net_error(e));
    let stream = match tokio::time::timeout(ADMIN_CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
        Err(_) => {
            bail!("cannot reach the admin API at {addr}: no connection within {ADMIN_CONNECT_TIMEOUT:?}")
        }
        Ok(Err(e)) => return Err(unreachable(&e)),
        Ok(Ok(stream)) => stream,
    };
    let exchange = async {
        let mut sender = match tls {
            None => handshake(stream).await?,
            Some(tls) => {
                let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host).trim_matches(['[', ']']);
                let name = ServerName::try_from(host.to_string())
                    .map_err(|e| anyhow!("{host} is not a name a certificate can carry: {e}"))?;
                let stream = tokio_rustls::TlsConnector::from(tls.clone())
                    .connect(name, stream)
                    .await
                    .map_err(|e| anyhow!("TLS handshake: {e}"))?;
                handshake(stream).await?
            }
        };
        let mut request = Request::builder().method(method.clone()).uri(path).header(header::HOST, addr);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request.body(Empty::<Bytes>::new())?;
        let response = sender.send_request(request).await?;
        let status = response.status().as_u16();
        let body = Limited::new(response.into_body(), ADMIN_ANSWER_BYTES_MAX)
            .collect()
            .await
            .map_err(|e| anyhow!("reading the body: {e}"))?
            .to_bytes();
        anyhow::Ok((status, body))
    };
    let (status, body) = tokio::time::timeout(ADMIN_ANSWER_TIMEOUT, exchange)
        .await
        .map_err(|_| anyhow!("{method} {path} at {addr}: no answer within {ADMIN_ANSWER_TIMEOUT:?}"))?
        .with_context(|| format!("{method} {path} at {addr}"))?;
    let body = serde_json::from_slice(&body).with_context(|| {
        format!("{method} {path} at {addr} answered {status} with a body that is not JSON")
    })?;
    Ok(Answer { status, body })
}

/// hyper's HTTP/1.1 client handshake on `stream`, its connection driven in the background.
async fn handshake<S>(stream: S) -> Result<hyper::client::conn::http1::SendRequest<Empty<Bytes>>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

/// The `--admin` addresses, in the order given.
#[derive(Debug, Clone)]
pub struct AdminApi {
    pub addrs: Vec<String>,
    /// `--token-file`'s bearer token.
    pub token: Option<String>,
    /// `--admin-ca`'s HTTPS configuration; `None`: plain HTTP.
    pub tls: Option<Arc<ClientConfig>>,
}

impl AdminApi {
    /// `GET /status` of the first address that answers: (that address, its status).
    pub async fn first_status(&self) -> Result<(String, Value)> {
        let mut failures = Vec::new();
        for addr in &self.addrs {
            match call(addr, Method::GET, "/status", self.token.as_deref(), self.tls.as_ref()).await {
                Ok(answer) if answer.is_success() => return Ok((addr.clone(), answer.body)),
                Ok(answer) => failures.push(format!("{addr} answered {}: {}", answer.status, answer.error())),
                Err(e) => failures.push(format!("{e:#}")),
            }
        }
        bail!("{}", failures.join("; "))
    }

    /// `GET /status` of every address; an address that does not answer is left out.
    pub async fn all_statuses(&self) -> Vec<(String, Value)> {
        let mut statuses = Vec::new();
        for addr in &self.addrs {
            if let Ok(answer) =
                call(addr, Method::GET, "/status", self.token.as_deref(), self.tls.as_ref()).await
            {
                if answer.is_success() {
                    statuses.push((addr.clone(), answer.body));
                }
            }
        }
        statuses
    }

    /// POSTs `path` to each address in turn until one is not a follower answering 421; its
    /// answer is returned if it is a success, its error otherwise.
    pub async fn post_to_leader(&self, path: &str) -> Result<Value> {
        let mut failures = Vec::new();
        let mut leader = None;
        for addr in &self.addrs {
            let answer = match call(addr, Method::POST, path, self.token.as_deref(), self.tls.as_ref()).await
            {
                Ok(answer) => answer,
                Err(e) => {
                    failures.push(format!("{e:#}"));
                    continue;
                }
            };
            if answer.status == STATUS_MISDIRECTED {
                leader = leader.or_else(|| answer.body.get("leader").and_then(Value::as_u64));
                failures.push(format!("{addr} is not the leader"));
                continue;
            }
            if answer.is_success() {
                return Ok(answer.body);
            }
            bail!("POST {path} at {addr} answered {}: {}", answer.status, answer.error());
        }
        let hint = match leader {
            Some(id) => format!(" (node {id} leads: give its admin address with --admin)"),
            None => String::new(),
        };
        bail!("no admin address given accepted POST {path}: {}{hint}", failures.join("; "))
    }
}

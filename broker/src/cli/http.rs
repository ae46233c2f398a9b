//! The admin API's client side: one HTTP/1.1 request per connection on hyper's client
//! connection, its JSON answer decoded, and the choice of which `--admin` address to ask.
//!
//! Membership and leadership changes are leader-only; a follower answers 421 with the leader's
//! id. `/status` names every node's Raft and Kafka addresses but not its admin one, so the
//! leader's admin address cannot be looked up: each given address is tried in turn until one
//! accepts (`AdminApi::post_to_leader`).

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper::{header, Method, Request};
use hyper_util::rt::TokioIo;
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

/// Sends `method path` to `addr` (with the bearer `token`, if any) and decodes the JSON
/// answer, whatever its status.
pub async fn call(addr: &str, method: Method, path: &str, token: Option<&str>) -> Result<Answer> {
    let unreachable = |e: &std::io::Error| anyhow!("cannot reach the admin API at {addr}: {}", net_error(e));
    let stream = match tokio::time::timeout(ADMIN_CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
        Err(_) => {
            bail!("cannot reach the admin API at {addr}: no connection within {ADMIN_CONNECT_TIMEOUT:?}")
        }
        Ok(Err(e)) => return Err(unreachable(&e)),
        Ok(Ok(stream)) => stream,
    };
    let exchange = async {
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(connection);
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

/// The `--admin` addresses, in the order given.
#[derive(Debug, Clone)]
pub struct AdminApi {
    pub addrs: Vec<String>,
    /// `--token-file`'s bearer token.
    pub token: Option<String>,
}

impl AdminApi {
    /// `GET /status` of the first address that answers: (that address, its status).
    pub async fn first_status(&self) -> Result<(String, Value)> {
        let mut failures = Vec::new();
        for addr in &self.addrs {
            match call(addr, Method::GET, "/status", self.token.as_deref()).await {
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
            if let Ok(answer) = call(addr, Method::GET, "/status", self.token.as_deref()).await {
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
            let answer = match call(addr, Method::POST, path, self.token.as_deref()).await {
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

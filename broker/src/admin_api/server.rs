//! The admin API's HTTP/1.1 server, on hyper: connections accepted up to
//! `ADMIN_CONNECTIONS_MAX`, kept alive between requests (Prometheus scrapes reuse theirs),
//! with hyper's bounds on the request head and a read timeout; each request is turned into a
//! [`Request`] for `routes::route`, whose answer becomes the response. With
//! `onelog.admin.ssl.*` every connection starts with a TLS handshake (`net::tls`): HTTPS only,
//! a plain-HTTP request fails the handshake and is closed.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body as _, Incoming};
use hyper::header::{HeaderValue, ALLOW, AUTHORIZATION, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::Method;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::query::{Query, Request};
use super::routes::{self, Body, Response};
use super::AdminCtx;
use crate::limits;
use crate::net::tls::Tls;

/// Accepts connections for as long as the process runs.
pub async fn serve(listener: TcpListener, tls: Option<Arc<Tls>>, ctx: AdminCtx) {
    let connections = Arc::new(Semaphore::new(limits::ADMIN_CONNECTIONS_MAX));
    loop {
        let Ok(permit) = connections.clone().acquire_owned().await else { return };
        match listener.accept().await {
            Ok((stream, peer)) => {
                let (ctx, tls) = (ctx.clone(), tls.clone());
                tokio::spawn(async move {
                    let lifetime = Duration::from_millis(limits::ADMIN_CONNECTION_MS_MAX);
                    let served = tokio::time::timeout(lifetime, async {
                        match tls {
                            None => serve_connection(stream, peer, ctx).await,
                            Some(tls) => match tls.accept(stream).await {
                                Ok(stream) => serve_connection(stream, peer, ctx).await,
                                Err(e) => REFUSED_HANDSHAKES.record(|t| {
                                    tracing::warn!(%peer, error = %e, suppressed = t.suppressed, total = t.total, "admin API TLS handshake failed (plain HTTP on an HTTPS port?); closing");
                                }),
                            },
                        }
                    });
                    if served.await.is_err() {
                        tracing::debug!(%peer, "admin connection open too long; closed");
                    }
                    drop(permit);
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "admin listener accept failed");
                tokio::time::sleep(Duration::from_millis(limits::RAFT_ACCEPT_ERROR_BACKOFF_MS)).await;
            }
        }
    }
}

/// TLS handshakes on the admin port that failed, logged at a bounded rate.
static REFUSED_HANDSHAKES: crate::incident::Incident = crate::incident::Incident::new();

/// HTTP/1.1 on one connection, plain or TLS, with hyper's bounds.
async fn serve_connection<S>(stream: S, peer: SocketAddr, ctx: AdminCtx)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request| answer(ctx.clone(), peer.ip(), request));
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(limits::ADMIN_REQUEST_READ_TIMEOUT_MS))
        .max_buf_size(limits::ADMIN_REQUEST_HEAD_BYTES_MAX)
        .max_headers(limits::ADMIN_REQUEST_HEADERS_MAX)
        .serve_connection(TokioIo::new(stream), service);
    if let Err(e) = connection.await {
        tracing::debug!(%peer, error = %e, "admin connection ended with an error")
    }
}

async fn answer(
    ctx: AdminCtx,
    peer: IpAddr,
    request: hyper::Request<Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let authorization = request.headers().get(AUTHORIZATION).map(|v| v.as_bytes());
    let access =
        super::access::check(request.method() == Method::POST, peer, authorization, ctx.token.as_deref());
    let response = if let Err(refused) = access {
        tracing::warn!(%peer, method = %request.method(), path = request.uri().path(), status = refused.status, "admin request refused");
        refused
    } else if crate::fatal::is_stopping() {
        // A node stopping on a fault reports nothing from its frozen state (`fatal.rs`).
        Response::error(503, "the node is stopping on a fault")
    } else if request.body().size_hint().upper() != Some(0) {
        // No endpoint takes a body; not reading one keeps every request bounded.
        Response::error(413, "admin requests take no body: parameters go in the query string")
    } else {
        match Query::parse(request.uri().query().unwrap_or_default()) {
            Ok(query) => {
                let request = Request {
                    method: request.method().as_str().to_string(),
                    path: request.uri().path().to_string(),
                    query,
                };
                tracing::debug!(method = %request.method, path = %request.path, "admin request");
                routes::route(&ctx, &request).await
            }
            Err(e) => e.into(),
        }
    };
    Ok(encode(response))
}

fn encode(response: Response) -> hyper::Response<Full<Bytes>> {
    let (content_type, body) = match response.body {
        // A trailing newline, so `curl` output ends cleanly.
        Body::Json(value) => ("application/json", format!("{value}\n")),
        Body::Text { content_type, text } => (content_type, text),
    };
    let mut out = hyper::Response::new(Full::new(Bytes::from(body)));
    *out.status_mut() =
        hyper::StatusCode::from_u16(response.status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    out.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Some(methods) = response.allow {
        out.headers_mut().insert(ALLOW, HeaderValue::from_static(methods));
    }
    out
}

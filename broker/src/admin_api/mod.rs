//! The HTTP admin API, bound only with `--admin-listen HOST:PORT`: node status, a replica
//! digest, membership changes and elections, for operators, the harness and tests.
//!
//! It exists beside the Kafka listener because none of this is Kafka's: Raft membership and
//! per-replica content are onelog's own. It is plain HTTP/1.1 on tokio, one request per
//! connection, JSON responses (see `http.rs` for the bounds), and it is served from just after
//! the Raft node starts, so `/status` answers while a node is still catching up.
//!
//! Endpoints (every body is JSON; every error is `{"error": "..."}`):
//!
//! - `GET /status` → 200 `{"node_id", "leader" (id or null), "term", "role"
//!   ("leader"|"follower"|"candidate"|"learner"|"shutdown"), "last_log_index" (or null),
//!   "last_applied" (index or null), "voters": [ids], "learners": [ids],
//!   "nodes": [{"id","raft","kafka"}], "membership_log_index" (or null), "kafka": "host:port"}`.
//! - `GET /digest` → 200 `{"node_id", "last_applied" (index or null), "partitions":
//!   [{"topic", "topic_id" (32 hex), "partition", "log_start_offset", "log_end_offset",
//!   "batches", "bytes", "hash" (8 hex, CRC32C; null if the partition has no files)}]}`,
//!   topics by name then partition; identical on replicas at the same `last_applied`.
//! - `POST /members/add-learner?id=N&raft=HOST:PORT&kafka=HOST:PORT` → 200 membership once
//!   the learner has caught up; 409 if `id` is a member with other addresses.
//! - `POST /members/promote?id=N` → 200 membership with the learner made a voter.
//! - `POST /members/remove?id=N` → 200 membership without node N (voter or learner);
//!   404 if N is not a member.
//! - `POST /leader/elect` → 200 `{"node_id", "triggered": bool, "leader"}`: `triggered` is
//!   false when this node already leads; 409 on a non-voter. Returns before the election.
//!   openraft 0.9 has no leadership transfer and voters refuse a candidate while their leader
//!   lease lasts, so this moves leadership only when the leader is gone, paused or cut off;
//!   against a healthy leader it bumps the term and any up-to-date voter may win.
//!
//! A membership is `{"log_index", "voters", "learners", "nodes": [{"id","raft","kafka"}],
//! "joint": bool}`. Membership endpoints answer 421 `{"error", "leader": id or null}` on a
//! non-leader, 409 while an earlier change is uncommitted (or for an unknown learner, or
//! removing the last voter), 504 after `ADMIN_MEMBERSHIP_CHANGE_TIMEOUT_MS` (the change may
//! still complete), 503 once the Raft node has stopped. Malformed requests, unknown or
//! missing parameters: 400; unknown path 404; wrong method 405; a body 413; an oversized
//! head 431; a head not sent within `ADMIN_REQUEST_READ_TIMEOUT_MS` 408.

mod digest;
mod http;
mod members;
mod routes;
mod status;

#[cfg(test)]
mod server_tests;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::limits;
use crate::raft::applied::AppliedView;
use crate::raft::transport::vote_gate::VoteGate;
use crate::raft::Raft;

/// What the admin API reads and drives. Not `Ctx`: that exists only once the node has caught
/// up, and the admin API is most useful before (watching a learner catch up).
#[derive(Clone)]
pub struct AdminCtx {
    pub node_id: u64,
    pub raft: Raft,
    pub applied: AppliedView,
    /// The advertised Kafka address, `host:port`.
    pub kafka: String,
    /// The votes this node may cast (withheld while it rejoins after losing its log).
    pub votes: Arc<VoteGate>,
}

/// Binds `listen` (if given) and serves the admin API in the background; returns the bound
/// address. A bind failure stops the node: asked-for admin access must not silently lack.
pub async fn start(listen: Option<SocketAddr>, ctx: AdminCtx) -> anyhow::Result<Option<SocketAddr>> {
    let Some(listen) = listen else { return Ok(None) };
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding the admin API listener {listen} (onelog.admin.listener)"))?;
    let bound = listener.local_addr()?;
    tracing::info!(admin = %bound, node_id = ctx.node_id, "serving the admin API");
    tokio::spawn(serve(listener, ctx));
    Ok(Some(bound))
}

/// Accepts connections for as long as the process runs; each gets one request.
pub async fn serve(listener: TcpListener, ctx: AdminCtx) {
    let connections = Arc::new(Semaphore::new(limits::ADMIN_CONNECTIONS_MAX));
    loop {
        let Ok(permit) = connections.clone().acquire_owned().await else { return };
        match listener.accept().await {
            Ok((stream, peer)) => {
                let ctx = ctx.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve_connection(stream, &ctx).await {
                        tracing::debug!(%peer, error = %e, "admin connection ended with an error");
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

async fn serve_connection(mut stream: TcpStream, ctx: &AdminCtx) -> std::io::Result<()> {
    let read_timeout = Duration::from_millis(limits::ADMIN_REQUEST_READ_TIMEOUT_MS);
    let head = tokio::time::timeout(
        read_timeout,
        http::read_head(&mut stream, limits::ADMIN_REQUEST_HEAD_BYTES_MAX),
    );
    let response = match head.await {
        Err(_) => routes::Response::error(408, "request head not received in time"),
        Ok(Ok(None)) => return Ok(()),
        Ok(Err(e)) => e.into(),
        // A node stopping on a fault reports nothing from its frozen state (`fatal.rs`).
        Ok(Ok(Some(_))) if crate::fatal::is_stopping() => {
            routes::Response::error(503, "the node is stopping on a fault")
        }
        Ok(Ok(Some(head))) => match http::parse_head(&head, limits::ADMIN_REQUEST_HEADERS_MAX) {
            Ok(request) => {
                tracing::debug!(method = %request.method, path = %request.path, "admin request");
                routes::route(ctx, &request).await
            }
            Err(e) => e.into(),
        },
    };
    let bytes = http::encode_response(response.status, &response.body, response.allow);
    let write_timeout = Duration::from_millis(limits::ADMIN_RESPONSE_WRITE_TIMEOUT_MS);
    match tokio::time::timeout(write_timeout, stream.write_all(&bytes)).await {
        Ok(result) => result?,
        Err(_) => return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "response write timed out")),
    }
    stream.shutdown().await?;
    drain(&mut stream).await;
    Ok(())
}

/// Lingering close: see `ADMIN_CLOSE_DRAIN_MS`.
async fn drain(stream: &mut TcpStream) {
    let mut buf = [0u8; 4096];
    let mut left = limits::ADMIN_CLOSE_DRAIN_BYTES_MAX;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(limits::ADMIN_CLOSE_DRAIN_MS);
    while left > 0 {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => left = left.saturating_sub(n),
            _ => return,
        }
    }
}

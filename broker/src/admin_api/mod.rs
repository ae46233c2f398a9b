//! The HTTP admin API, bound only with `--admin-listen HOST:PORT`: node status, a replica
//! digest, membership changes and elections, for operators, the harness and tests.
//!
//! It exists beside the Kafka listener because none of this is Kafka's: Raft membership and
//! per-replica content are onelog's own. It is HTTP/1.1 on hyper (`server.rs`, with its
//! bounds), JSON responses but for `/metrics`, and it is served from just after the Raft node
//! starts, so `/status` answers while a node is still catching up.
//!
//! Endpoints (every body but `/metrics` is JSON; every error is `{"error": "..."}`):
//!
//! - `GET /` → 200, the status page (HTML, `status_page.rs`).
//! - `GET /status` → 200 `{"node_id", "leader" (id or null), "term", "role"
//!   ("leader"|"follower"|"candidate"|"learner"|"shutdown"), "last_log_index" (or null),
//!   "last_applied" (index or null), "voters": [ids], "learners": [ids],
//!   "nodes": [{"id","raft","kafka"}], "membership_log_index" (or null), "kafka": "host:port",
//!   "raft_groups": {"count", "groups": [{"group", "leader", "term", "role", "voters",
//!   "preferred_leader", "last_log_index", "last_applied"}]}}`: the node-wide fields are group
//!   0's; `raft_groups` lists every group this node runs.
//! - `GET /metrics` → 200, Prometheus' text format (`crate::metrics`).
//! - `GET /digest` → 200 `{"node_id", "last_applied" (index or null), "partitions":
//!   [{"topic", "topic_id" (32 hex), "partition", "log_start_offset", "log_end_offset",
//!   "batches", "bytes", "hash" (8 hex, CRC32C; null if the partition has no files)}]}`,
//!   topics by name then partition; identical on replicas at the same `last_applied`.
//! - `POST /members/add-learner?id=N&raft=HOST:PORT&kafka=HOST:PORT` → 200 membership once
//!   the learner has caught up; 409 if `id` is a member with other addresses.
//! - `POST /members/promote?id=N` → 200 membership with the learner made a voter.
//! - `POST /members/remove?id=N` → 200 membership without node N (voter or learner);
//!   404 if N is not a member.
//! - `POST /leader/transfer?to=N[&group=G]` → 200 `{"node_id", "leader", "term"}` once group
//!   G's (default 0) new leader is
//!   elected (N, or another up-to-date voter); leader only (421 elsewhere), 409 if N is not a
//!   voter or does not catch up, or a transfer is under way, 504 without an election in time.
//! - `POST /leader/elect` → 200 `{"node_id", "triggered": bool, "leader"}`: `triggered` is
//!   false when this node already leads; 409 on a non-voter. Returns before the election.
//!   openraft 0.9 has no leadership transfer and voters refuse a candidate while their leader
//!   lease lasts, so this moves leadership only when the leader is gone, paused or cut off;
//!   against a healthy leader it bumps the term and any up-to-date voter may win.
//!
//! Every POST needs `Authorization: Bearer <token>` when `onelog.admin.token.file` is set,
//! and otherwise comes from a loopback address (`access.rs`): 401 without it, 403 otherwise.
//!
//! A membership is `{"log_index", "voters", "learners", "nodes": [{"id","raft","kafka"}],
//! "joint": bool}`. Membership endpoints answer 421 `{"error", "leader": id or null}` on a
//! non-leader, 409 while an earlier change is uncommitted (or for an unknown learner, or
//! removing the last voter), 504 after `ADMIN_MEMBERSHIP_CHANGE_TIMEOUT_MS` (the change may
//! still complete), 503 once the Raft node has stopped. Malformed requests, unknown or
//! missing parameters: 400; unknown path 404; wrong method 405; a body 413; an oversized
//! head 431; a head not sent within `ADMIN_REQUEST_READ_TIMEOUT_MS` 408.

mod access;
mod digest;
pub mod leader_changes;
mod members;
pub mod metrics;
mod query;
mod raft_groups;
mod routes;
mod server;
mod share_groups;
mod status;
mod status_page;

pub use server::serve;

#[cfg(test)]
mod server_tests;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use anyhow::Context;
use tokio::net::TcpListener;

use crate::ctx::SharedCtx;
use crate::raft::applied::AppliedView;
use crate::raft::transport::auth::Identity;
use crate::raft::transport::transfer::LeaderTransfer;
use crate::raft::transport::vote_gate::VoteGate;
use crate::raft::Raft;

/// What the admin API reads and drives. Not `Ctx`: that exists only once the node has caught
/// up, and the admin API is most useful before (watching a learner catch up).
#[derive(Clone)]
pub struct AdminCtx {
    pub node_id: u64,
    /// This node's id and cluster secret, for the Raft messages admin calls send.
    pub identity: Identity,
    pub raft: Raft,
    /// This node's leadership transfer (`POST /leader/transfer`), shared with its Raft network
    /// and its `Leadership`.
    pub transfer: Arc<LeaderTransfer>,
    pub applied: AppliedView,
    /// The advertised Kafka address, `host:port`.
    pub kafka: String,
    /// The votes this node may cast (withheld while it rejoins after losing its log).
    pub votes: Arc<VoteGate>,
    /// The serving node's context, set once it has caught up: its group and transaction
    /// coordinators, for `/metrics` and the status page.
    pub serving: Arc<OnceLock<SharedCtx>>,
    /// The leader changes this node has seen, for the status page (`leader_changes::watch`).
    pub leader_changes: Arc<leader_changes::LeaderChanges>,
    /// `onelog.admin.token.file`'s token: every POST must carry it (`access`); `None`: POSTs
    /// from loopback addresses only.
    pub token: Option<Arc<[u8]>>,
    /// Every Raft group the node runs, group 0 first (`/status`, `/metrics`, transfers).
    pub groups: crate::raft::groups::NodeGroups,
}

impl AdminCtx {
    pub fn metric_sources(&self) -> metrics::Sources<'_> {
        metrics::Sources {
            node_id: self.node_id,
            raft: &self.raft,
            applied: &self.applied,
            votes: &self.votes,
            serving: self.serving.get().cloned(),
            groups: &self.groups,
        }
    }
}

/// Binds `listen` (if given) and serves the admin API in the background, over HTTPS only when
/// `tls` (`onelog.admin.ssl.*`) is given; returns the bound address. A bind failure or a
/// keystore that does not load stops the node: asked-for admin access must not silently lack.
pub async fn start(
    listen: Option<SocketAddr>,
    tls: Option<crate::config::security::TlsSettings>,
    ctx: AdminCtx,
) -> anyhow::Result<Option<SocketAddr>> {
    let Some(listen) = listen else { return Ok(None) };
    let tls = tls
        .map(crate::net::tls::Tls::new)
        .transpose()
        .context("the admin API's TLS (onelog.admin.ssl.keystore.location)")?;
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding the admin API listener {listen} (onelog.admin.listener)"))?;
    let bound = listener.local_addr()?;
    if let Some(tls) = &tls {
        tls.watch(Arc::from("admin"));
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(admin = %bound, scheme, node_id = ctx.node_id, "serving the admin API");
    tokio::spawn(server::serve(listener, tls, ctx));
    Ok(Some(bound))
}

//! Forwarding a Kafka request to the leader over the Raft transport (Kafka's Envelope,
//! KIP-590): the request frame as the client sent it, with who sent it — the principal the
//! follower's listener authenticated, the client address and the listener name — so the
//! leader authorizes the original principal. The Raft connection is mutually authenticated
//! with the cluster secret (`auth`), which is what makes the principal trustworthy: a Kafka
//! client cannot open one, whatever client id it sets.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::codec::{self, Kind};
use super::peers::Peers;
use crate::limits;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Envelope {
    /// The forwarding node, which the connection authenticated (`guard`).
    pub from: u64,
    pub principal_type: String,
    pub principal_name: String,
    pub client_address: Option<IpAddr>,
    pub listener: Option<String>,
    /// The Kafka request frame (header and body, without the size prefix).
    pub request: Vec<u8>,
}

/// The leader's Kafka response frame (header and body, without the size prefix), or why it
/// could not serve the request.
pub type EnvelopeResponse = Result<Vec<u8>, String>;

pub type EnvelopeFuture = Pin<Box<dyn Future<Output = EnvelopeResponse> + Send>>;

/// What serves forwarded requests on the leader: the Kafka handlers (`net::forward`), and
/// the messages between Raft groups' leaders (`xgroup`, `coord::xgroup`); set once the node's
/// request context exists.
pub trait ForwardHandler: Send + Sync {
    fn serve(&self, envelope: Envelope) -> EnvelopeFuture;
    fn cross_group(&self, message: super::xgroup::XMessage) -> super::xgroup::XFuture;
}

/// Where the Raft server finds the handler; empty until the node serves Kafka requests.
pub type ForwardSlot = Arc<OnceLock<Arc<dyn ForwardHandler>>>;

/// Peer side: hands the envelope to the Kafka handlers.
pub async fn on_envelope(slot: &ForwardSlot, envelope: Envelope) -> EnvelopeResponse {
    let Some(handler) = slot.get() else { return Err("this node does not serve Kafka requests yet".into()) };
    handler.serve(envelope).await
}

/// Sends `envelope` to node `target` at its Raft address, over the connection the node keeps
/// to it (`peers`), and waits at most `ttl`.
pub async fn send(
    peers: &Peers,
    target: u64,
    addr: &str,
    envelope: &Envelope,
    ttl: Duration,
) -> anyhow::Result<Vec<u8>> {
    let peer = peers.get(target, addr);
    let request_id = peer.next_request_id();
    let frame = codec::encode(Kind::Forward, request_id, envelope, limits::RAFT_FRAME_BYTES_MAX)?;
    let response = peer.call(request_id, frame, ttl).await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    response.decode_body::<EnvelopeResponse>()?.map_err(|e| anyhow::anyhow!("the leader refused: {e}"))
}

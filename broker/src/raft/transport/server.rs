//! The server end of the Raft transport: accepts peer connections and hands their requests to
//! the local `Raft`.
//!
//! Each request runs in its own task, so a vote or heartbeat is answered while an earlier
//! AppendEntries waits for its fsync; responses carry the request id and leave through one
//! writer task per connection, in completion order. A frame that fails its length or CRC
//! check, or does not decode, closes the connection: the byte stream is no longer trusted, and
//! the client fails its outstanding requests and reconnects. When the Raft node stops, the
//! listener and every connection close, so peers see it as unreachable. A Vote passes the
//! node's [`VoteGate`] before openraft sees it.
//!
//! With several Raft groups (issue 32) one port serves them all: a `Grouped` frame names its
//! group ([`codec`]), and its request goes to that group's Raft, gate and log
//! ([`RaftService::groups`]). A frame naming a group this node does not serve, or wrapping a
//! request that is the node's and not a group's (a forward, a feature query, a removal
//! notice), closes the connection like any other bad frame.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::RaftError;
use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest, VoteResponse};
use raft_store::LogReader;
use serde::Serialize;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

use super::auth::{self, Auth, Challenge, Hello, Identity};
use super::codec::{self, Frame, FrameError, Kind, PROTOCOL_VERSION};
use super::guard;
use super::tls::{ReadHalf, WriteHalf};
use super::vote_gate::{self, VoteGate};
use crate::limits;
use crate::raft::{Raft, TypeConfig};

/// What the server answers with: the local Raft node, the gate its votes pass, and a reader
/// on its log (for `LogState`).
#[derive(Clone)]
pub struct RaftService {
    pub raft: Raft,
    /// This node's id and the cluster secret the handshake checks.
    pub identity: Identity,
    pub votes: Arc<VoteGate>,
    pub log: LogReader<TypeConfig>,
    /// The Kafka handlers that serve forwarded requests (`envelope`), once the node has them.
    pub forward: super::envelope::ForwardSlot,
    /// Woken when the leader tells this node it was removed (`removal`).
    pub removal: Arc<super::removal::RemovalNotice>,
    /// The node's other Raft groups (1 …), whose requests come in `Grouped` frames; empty in
    /// a one-group cluster. The fields above are group 0's.
    pub groups: GroupRafts,
}

/// One Raft group a node serves besides group 0: its Raft, the gate its votes pass, its log.
#[derive(Clone)]
pub struct GroupRaft {
    pub raft: Raft,
    pub votes: Arc<VoteGate>,
    pub log: LogReader<TypeConfig>,
}

/// A node's groups other than 0, by group number.
pub type GroupRafts = Arc<std::collections::BTreeMap<u32, GroupRaft>>;

impl RaftService {
    /// The Raft, gate and log of `group`, if this node serves it.
    fn group(&self, group: u32) -> Option<GroupRaft> {
        match group {
            0 => {
                Some(GroupRaft { raft: self.raft.clone(), votes: self.votes.clone(), log: self.log.clone() })
            }
            g => self.groups.get(&g).cloned(),
        }
    }
}

/// Serves Raft RPCs from peers until the local Raft node shuts down (then returns `Ok`).
/// Accept errors (e.g. out of file descriptors) are logged and retried after a pause.
pub async fn serve_raft(listener: TcpListener, service: RaftService) -> anyhow::Result<()> {
    let raft = service.raft.clone();
    let node_id = raft.metrics().borrow().id;
    // Dropped on return: every connection task sees it and closes.
    let (_stop, stop) = watch::channel(());
    let stopped = raft_stopped(raft.clone());
    tokio::pin!(stopped);
    tracing::info!(node_id, addr = ?listener.local_addr().ok(), "serving raft peers");
    loop {
        tokio::select! {
            _ = &mut stopped => {
                tracing::info!(node_id, "raft stopped; closing the raft listener");
                return Ok(());
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    tokio::spawn(serve_connection(stream, peer, service.clone(), stop.clone()));
                }
                Err(e) => {
                    tracing::warn!(node_id, error = %e, "raft listener accept failed");
                    tokio::time::sleep(Duration::from_millis(limits::RAFT_ACCEPT_ERROR_BACKOFF_MS)).await;
                }
            },
        }
    }
}

/// Resolves once the Raft core has exited: its metrics sender is dropped with it.
async fn raft_stopped(raft: Raft) {
    let mut metrics = raft.metrics();
    drop(raft);
    while metrics.changed().await.is_ok() {}
}

/// One peer connection, in phases: the handshake (who calls, and does it know the cluster
/// secret), the requests until either side stops or a frame is bad, then the close.
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    service: RaftService,
    stop: watch::Receiver<()>,
) {
    let _ = stream.set_nodelay(true);
    let Some((from, mut reader, write_half)) = handshake(stream, &service.identity, peer).await else {
        return;
    };
    tracing::debug!(%peer, from, "raft peer connected");

    let (responses, outbound) = mpsc::channel(limits::RAFT_INFLIGHT_RPCS_PER_CONNECTION_MAX);
    let writer = tokio::spawn(codec::write_frames(outbound, write_half));
    let connection = Connection { peer, from, service, responses };
    match connection.serve_requests(&mut reader, stop).await {
        Ok(()) => tracing::debug!(%peer, "raft peer connection closed"),
        Err(e) => tracing::warn!(%peer, error = %e, "bad frame from raft peer; closing the connection"),
    }
    // The client has gone, sent garbage, or we are stopping: responses still being computed
    // have nobody to go to. Aborting the writer closes the socket now.
    writer.abort();
}

/// The handshakes under their deadline: the client's node id and the connection's halves,
/// or `None` (logged at a bounded rate) when it was refused or did not finish in time, and the
/// connection is to close.
async fn handshake(stream: TcpStream, identity: &Identity, peer: SocketAddr) -> Option<Accepted> {
    let deadline = Duration::from_millis(limits::RAFT_HANDSHAKE_TIMEOUT_MS);
    match tokio::time::timeout(deadline, accept(stream, identity)).await {
        Ok(Ok(accepted)) => Some(accepted),
        Ok(Err(e)) => {
            REFUSED_HANDSHAKES.record(|t| {
                tracing::warn!(%peer, error = %e, suppressed = t.suppressed, total = t.total, "raft peer handshake refused; closing");
            });
            None
        }
        Err(_) => {
            REFUSED_HANDSHAKES.record(|t| {
                tracing::warn!(%peer, suppressed = t.suppressed, total = t.total, "raft peer sent no handshake in time; closing");
            });
            None
        }
    }
}

/// A connection past its handshake: who is at the other end, and where responses go.
struct Connection {
    peer: SocketAddr,
    /// The node id the client proved in the handshake.
    from: u64,
    service: RaftService,
    /// Into the connection's writer task.
    responses: mpsc::Sender<Vec<u8>>,
}

impl Connection {
    /// Reads requests and runs each in its own task, until the node stops, the client closes,
    /// a request is refused (`Ok`) or a frame is bad (`Err`).
    async fn serve_requests(
        &self,
        reader: &mut BufReader<ReadHalf>,
        mut stop: watch::Receiver<()>,
    ) -> Result<(), FrameError> {
        let inflight = Arc::new(Semaphore::new(limits::RAFT_INFLIGHT_RPCS_PER_CONNECTION_MAX));
        loop {
            let next = async {
                // Stop reading while the connection has its limit of requests being handled.
                // (The semaphore is never closed, so `ok()` is always `Some`.)
                let permit = inflight.clone().acquire_owned().await.ok();
                (permit, codec::read_frame(reader, limits::RAFT_FRAME_BYTES_MAX).await)
            };
            let (permit, frame) = tokio::select! {
                _ = stop.changed() => return Ok(()),
                next = next => next,
            };
            let (request_id, group, request) = match frame? {
                None => return Ok(()),
                Some(frame) => Request::decode(frame)?,
            };
            let Some(target) = self.admit(group, &request) else {
                return Ok(());
            };
            let node = self.service.clone();
            drop(tokio::spawn(handle((request_id, request), node, target, self.responses.clone(), permit)));
        }
    }

    /// The group a request is for, once admitted. A request openraft must never see (another
    /// sender, an absurd term, a vote from outside the membership, a group this node does not
    /// serve) is refused, and closes the connection.
    fn admit(&self, group: u32, request: &Request) -> Option<GroupRaft> {
        let target = self.service.group(group);
        let checked = match &target {
            Some(target) => guard::check(&target.raft, self.from, request),
            None => Err(format!("names Raft group {group}, which this node does not serve")),
        };
        let Err(refused) = checked else { return target };
        let (peer, from) = (self.peer, self.from);
        guard::REFUSED.record(|t| {
            tracing::warn!(%peer, from, group, %refused, suppressed = t.suppressed, total = t.total, "raft request refused; closing");
        });
        None
    }
}

/// Handshakes refused or not completed in time, logged at a bounded rate.
pub(super) static REFUSED_HANDSHAKES: crate::incident::Incident = crate::incident::Incident::new();

/// A connection past its handshakes: the client's node id and the connection's halves.
type Accepted = (u64, BufReader<ReadHalf>, WriteHalf);

/// The server's half of the TLS handshake (`tls`, when configured: a plain-text peer fails
/// it) and of the cluster-secret handshake (`auth`); returns the client's node id once it has
/// proved the cluster secret, and the connection's halves.
async fn accept(stream: TcpStream, identity: &Identity) -> anyhow::Result<Accepted> {
    let (read_half, mut writer) = match identity.tls() {
        Some(tls) => tls.accept(stream).await.map_err(|e| anyhow::anyhow!("TLS handshake: {e}"))?,
        None => super::tls::plain(stream),
    };
    let mut reader = BufReader::with_capacity(limits::RAFT_SOCKET_BUFFER_BYTES, read_half);
    let from = prove(&mut reader, &mut writer, identity).await?;
    Ok((from, reader, writer))
}

/// The cluster-secret handshake, server side.
async fn prove(
    reader: &mut BufReader<ReadHalf>,
    writer: &mut WriteHalf,
    identity: &Identity,
) -> anyhow::Result<u64> {
    let node_id = identity.node_id;
    let hello: Hello = read_handshake(reader).await?;
    anyhow::ensure!(
        hello.protocol_version == PROTOCOL_VERSION,
        "peer speaks protocol {}, we speak {PROTOCOL_VERSION}",
        hello.protocol_version
    );
    if hello.node_id != node_id {
        // The client refuses our reply; say why on this side too.
        tracing::warn!(expected = hello.node_id, node_id, "raft peer dialed us for another node id");
    }
    let nonce = auth::nonce();
    let proof = identity.server_proof(&hello.nonce, &nonce, node_id, hello.from);
    let challenge = Challenge { protocol_version: PROTOCOL_VERSION, node_id, nonce, proof };
    writer.write_all(&codec::encode(Kind::Hello, 0, &challenge, limits::RAFT_FRAME_BYTES_MAX)?).await?;
    let answer: Auth = read_handshake(reader).await?;
    anyhow::ensure!(
        identity.verify_client(&answer.proof, &nonce, &hello.nonce, hello.from, node_id),
        "node {} did not prove the cluster secret (onelog.cluster.secret.file)",
        hello.from
    );
    Ok(hello.from)
}

async fn read_handshake<T: serde::de::DeserializeOwned>(
    reader: &mut BufReader<ReadHalf>,
) -> anyhow::Result<T> {
    let frame = codec::read_frame(reader, limits::RAFT_HANDSHAKE_FRAME_BYTES_MAX)
        .await?
        .ok_or_else(|| anyhow::anyhow!("closed during the handshake"))?;
    anyhow::ensure!(frame.kind == Kind::Hello, "expected a handshake, got a {:?} frame", frame.kind);
    Ok(frame.decode_body()?)
}

pub(super) enum Request {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<u64>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    TimeoutNow(super::handover::TimeoutNow),
    Removed(super::removal::Removed),
    LogState(super::log_state::LogStateQuery),
    Forward(super::envelope::Envelope),
    Features(super::features::FeaturesQuery),
    CrossGroup(super::xgroup::XRequest),
}

impl Request {
    /// Decodes on the reading task, so a body that does not decode closes the connection:
    /// the request id, the group and the request.
    fn decode(frame: Frame) -> Result<(u64, u32, Request), FrameError> {
        let node_wide =
            matches!(frame.kind, Kind::Removed | Kind::Forward | Kind::Features | Kind::CrossGroup);
        if frame.group != 0 && node_wide {
            return Err(FrameError::BadGroup(frame.kind));
        }
        let request = match frame.kind {
            Kind::AppendEntries => Request::AppendEntries(frame.decode_body()?),
            Kind::Vote => Request::Vote(frame.decode_body()?),
            Kind::InstallSnapshot => Request::InstallSnapshot(frame.decode_body()?),
            Kind::TimeoutNow => Request::TimeoutNow(frame.decode_body()?),
            Kind::Removed => Request::Removed(frame.decode_body()?),
            Kind::LogState => Request::LogState(frame.decode_body()?),
            Kind::Forward => Request::Forward(frame.decode_body()?),
            Kind::Features => Request::Features(frame.decode_body()?),
            Kind::CrossGroup => Request::CrossGroup(frame.decode_body()?),
            Kind::Hello | Kind::Grouped | Kind::Response => return Err(FrameError::Unexpected(frame.kind)),
        };
        Ok((frame.request_id, frame.group, request))
    }
}

/// Runs one request against its group's Raft (`target`) and queues its tagged result, `Ok` or
/// the `RaftError`, for the client to map back.
async fn handle(
    (request_id, request): (u64, Request),
    service: RaftService,
    target: GroupRaft,
    responses: mpsc::Sender<Vec<u8>>,
    _permit: Option<OwnedSemaphorePermit>,
) {
    let raft = &target.raft;
    let frame = match request {
        Request::AppendEntries(req) => {
            crate::metrics::recorded::METRICS.append_entries_received(req.entries.len());
            encode_response(request_id, &raft.append_entries(req).await)
        }
        Request::Vote(req) if target.votes.admits(&req) => encode_response(request_id, &raft.vote(req).await),
        Request::Vote(_) => {
            let refused: Result<VoteResponse<u64>, RaftError<u64>> =
                Ok(vote_gate::refusal(raft.metrics().borrow().vote));
            encode_response(request_id, &refused)
        }
        Request::InstallSnapshot(req) => encode_response(request_id, &raft.install_snapshot(req).await),
        Request::TimeoutNow(req) => encode_response(request_id, &super::handover::on_timeout_now(raft, req)),
        Request::Removed(req) => {
            encode_response(request_id, &super::removal::on_removed(raft, &service.removal, req))
        }
        Request::LogState(query) => {
            tracing::debug!(from = query.from, "a peer asks how much log this node holds");
            encode_response(request_id, &super::log_state::on_log_state(raft, &target.log).await)
        }
        Request::Features(query) => encode_response(request_id, &super::features::on_features(&query)),
        Request::CrossGroup(request) => {
            encode_response(request_id, &super::xgroup::on_request(&service.forward, request).await)
        }
        Request::Forward(envelope) => {
            encode_response(request_id, &super::envelope::on_envelope(&service.forward, envelope).await)
        }
    };
    if let Some(frame) = frame {
        // The connection may be gone; then nobody is waiting for this response.
        let _ = responses.send(frame).await;
    }
}

fn encode_response<T: Serialize>(request_id: u64, result: &T) -> Option<Vec<u8>> {
    match codec::encode(Kind::Response, request_id, result, limits::RAFT_FRAME_BYTES_MAX) {
        Ok(frame) => Some(frame),
        Err(e) => {
            // Responses are a few bytes; the client times out and retries.
            tracing::error!(request_id, error = %e, "cannot encode a raft response");
            None
        }
    }
}

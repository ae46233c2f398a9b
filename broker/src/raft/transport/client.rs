//! The client end of one Raft peer: a persistent, pipelined connection, reconnected with
//! backoff.
//!
//! openraft creates a `RaftNetwork` per replication stream and per election or read-index
//! round; they all share the node's [`Peer`], hence one TCP connection per peer. Requests are
//! matched to responses by request id, so any number may be outstanding: a heartbeat or a vote
//! never waits behind an AppendEntries, and a pipelining caller keeps the link busy. A writer
//! task owns the socket's write half, a reader task its read half and the map of waiting
//! callers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::auth::{self, Auth, Challenge, Hello, Identity};
use super::codec::{self, Frame, Kind, PROTOCOL_VERSION};
use super::tls::ReadHalf;
use crate::limits;

/// Why a call got no response. The caller maps these onto openraft's `RPCError`.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No connection could be made (or we are waiting out the reconnect backoff): openraft
    /// backs off before retrying.
    #[error("raft peer {target} at {addr} is unreachable: {reason}")]
    Unreachable { target: u64, addr: String, reason: String },
    /// The connection failed while the request was outstanding: retried at once.
    #[error("raft peer {target} at {addr}: {reason}")]
    Network { target: u64, addr: String, reason: String },
    /// No response within the RPC's timeout; a late response is dropped.
    #[error("raft peer {target} at {addr}: no response within {ttl:?}")]
    Timeout { target: u64, addr: String, ttl: Duration },
}

pub struct Peer {
    identity: Identity,
    target: u64,
    addr: String,
    next_request_id: AtomicU64,
    slot: tokio::sync::Mutex<Slot>,
    heard: Arc<Heard>,
}

/// When a response of any kind last arrived from a peer, over any of its connections, late
/// ones that no caller waits for any more included: check-quorum's evidence that the peer is
/// there (`Leadership::quorum_heard`). openraft's own clock counts an answer from when its
/// request was sent, so a peer that answers late looks as silent as one that is gone.
#[derive(Default)]
pub struct Heard(Mutex<Option<Instant>>);

impl Heard {
    fn now(&self) {
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Instant::now());
    }

    fn within(&self, window: Duration) -> bool {
        let at = *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        at.is_some_and(|at| at.elapsed() < window)
    }
}

/// The current connection, or the reconnect backoff after failed connects.
#[derive(Default)]
struct Slot {
    conn: Option<Arc<Conn>>,
    connect_failures: u32,
    retry_at: Option<Instant>,
}

impl Peer {
    /// The connection from this node (`identity`) to node `target` at `addr`.
    pub fn new(identity: Identity, target: u64, addr: String) -> Self {
        // Id 0 is the handshake's; ids are never reused across reconnects, so a late response
        // can only ever match the request it answers.
        Peer {
            identity,
            target,
            addr,
            next_request_id: AtomicU64::new(1),
            slot: Default::default(),
            heard: Arc::default(),
        }
    }

    /// Whether a response from this peer arrived within `window`.
    pub fn answered_within(&self, window: Duration) -> bool {
        self.heard.within(window)
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The node this peer is.
    pub fn target(&self) -> u64 {
        self.target
    }

    pub fn next_request_id(&self) -> u64 {
        self.next_request_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends an encoded request frame (carrying `request_id`) and waits up to `ttl` for its
    /// response, connecting first if need be.
    pub async fn call(&self, request_id: u64, frame: Vec<u8>, ttl: Duration) -> Result<Frame, CallError> {
        let deadline = Instant::now() + ttl;
        let timeout = || CallError::Timeout { target: self.target, addr: self.addr.clone(), ttl };
        // Connecting gets half the time: past that the peer counts as unreachable.
        let conn =
            tokio::time::timeout_at(deadline, self.connection(ttl / 2)).await.map_err(|_| timeout())??;
        match tokio::time::timeout_at(deadline, conn.call(request_id, frame)).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(reason)) => Err(CallError::Network {
                target: self.target,
                addr: self.addr.clone(),
                reason: reason.to_string(),
            }),
            Err(_) => {
                // A peer that vanished without a FIN or RST leaves a connection that never
                // answers; after a few silent timeouts over a long enough silence (a slow
                // peer answers late), drop it and connect afresh.
                let (timeouts, silence) = conn.pending.timed_out();
                if timeouts >= limits::RAFT_SILENT_TIMEOUTS_BEFORE_RECONNECT
                    && silence >= Duration::from_millis(limits::RAFT_SILENCE_BEFORE_RECONNECT_MS)
                {
                    tracing::warn!(target_node = self.target, addr = %self.addr, "raft peer stopped answering; reconnecting");
                    conn.pending.close();
                }
                Err(timeout())
            }
        }
    }

    async fn connection(&self, ttl_budget: Duration) -> Result<Arc<Conn>, CallError> {
        let mut slot = self.slot.lock().await;
        if let Some(conn) = &slot.conn {
            if !conn.pending.is_closed() {
                return Ok(conn.clone());
            }
            slot.conn = None;
        }
        let unreachable =
            |reason: String| CallError::Unreachable { target: self.target, addr: self.addr.clone(), reason };
        if let Some(at) = slot.retry_at.filter(|at| Instant::now() < *at) {
            let failures = slot.connect_failures;
            return Err(unreachable(format!(
                "{failures} failed connects, next attempt in {:?}",
                at - Instant::now()
            )));
        }
        let budget = ttl_budget.min(Duration::from_millis(limits::RAFT_CONNECT_TIMEOUT_MS));
        let result = match tokio::time::timeout(
            budget,
            Conn::connect(&self.identity, self.target, &self.addr, self.heard.clone()),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Err(format!("connect and handshake took over {budget:?}")),
        };
        match result {
            Ok(conn) => {
                tracing::info!(target_node = self.target, addr = %self.addr, "connected to raft peer");
                let conn = Arc::new(conn);
                *slot = Slot { conn: Some(conn.clone()), connect_failures: 0, retry_at: None };
                Ok(conn)
            }
            Err(reason) => {
                slot.connect_failures += 1;
                let backoff = reconnect_backoff(slot.connect_failures);
                slot.retry_at = Some(Instant::now() + backoff);
                if slot.connect_failures == 1 {
                    tracing::warn!(target_node = self.target, addr = %self.addr, %reason, "cannot connect to raft peer");
                } else {
                    tracing::debug!(target_node = self.target, failures = slot.connect_failures, %reason, ?backoff, "cannot connect to raft peer");
                }
                Err(unreachable(reason))
            }
        }
    }
}

/// Doubles from the minimum per consecutive failure, up to the maximum.
fn reconnect_backoff(failures: u32) -> Duration {
    let ms = limits::RAFT_RECONNECT_BACKOFF_MS_MIN.saturating_mul(1 << failures.saturating_sub(1).min(16));
    Duration::from_millis(ms.min(limits::RAFT_RECONNECT_BACKOFF_MS_MAX))
}

/// One live connection. Dropping it (reconnect, or the Raft node shutting down) stops its
/// tasks and closes the socket.
struct Conn {
    queue: mpsc::Sender<Vec<u8>>,
    pending: Arc<Pending>,
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer.abort();
    }
}

impl Conn {
    async fn connect(
        identity: &Identity,
        target: u64,
        addr: &str,
        heard: Arc<Heard>,
    ) -> Result<Conn, String> {
        let stream = TcpStream::connect(addr).await.map_err(|e| format!("connect: {e}"))?;
        // Raft RPCs are small and latency-bound; never let Nagle hold one back.
        stream.set_nodelay(true).map_err(|e| format!("set TCP_NODELAY: {e}"))?;
        let (read_half, mut write_half) = match identity.tls() {
            Some(tls) => tls.connect(stream).await.map_err(|e| format!("TLS handshake: {e}"))?,
            None => super::tls::plain(stream),
        };
        let mut reader = BufReader::with_capacity(limits::RAFT_SOCKET_BUFFER_BYTES, read_half);

        // The handshake (`auth`): we prove the cluster secret over the peer's nonce, and it
        // over ours.
        let nonce_c = auth::nonce();
        let hello = Hello {
            protocol_version: PROTOCOL_VERSION,
            node_id: target,
            from: identity.node_id,
            nonce: nonce_c,
        };
        let frame =
            codec::encode(Kind::Hello, 0, &hello, limits::RAFT_FRAME_BYTES_MAX).map_err(|e| e.to_string())?;
        write_half.write_all(&frame).await.map_err(|e| format!("sending handshake: {e}"))?;
        let reply = codec::read_frame(&mut reader, limits::RAFT_FRAME_BYTES_MAX)
            .await
            .map_err(|e| format!("reading handshake: {e}"))?
            .ok_or("closed during the handshake (does it hold the same cluster secret?)")?;
        if reply.kind != Kind::Hello {
            return Err(format!("expected a handshake, got a {:?} frame", reply.kind));
        }
        let challenge: Challenge = reply.decode_body().map_err(|e| format!("handshake: {e}"))?;
        if challenge.protocol_version != PROTOCOL_VERSION || challenge.node_id != target {
            return Err(format!(
                "expected node {target} protocol {PROTOCOL_VERSION}, the peer is node {} protocol {}",
                challenge.node_id, challenge.protocol_version
            ));
        }
        if !identity.verify_server(&challenge.proof, &nonce_c, &challenge.nonce, target, identity.node_id) {
            return Err("the peer did not prove the cluster secret (onelog.cluster.secret.file)".to_string());
        }
        let proof = identity.client_proof(&challenge.nonce, &nonce_c, identity.node_id, target);
        let frame = codec::encode(Kind::Hello, 0, &Auth { proof }, limits::RAFT_FRAME_BYTES_MAX)
            .map_err(|e| e.to_string())?;
        write_half.write_all(&frame).await.map_err(|e| format!("sending handshake: {e}"))?;

        let pending = Arc::new(Pending { inner: Mutex::default(), heard });
        let (queue, outbound) = mpsc::channel(limits::RAFT_OUTBOUND_FRAMES_PER_PEER_MAX);
        let writer = tokio::spawn({
            let pending = pending.clone();
            async move {
                if let Err(e) = codec::write_frames(outbound, write_half).await {
                    tracing::debug!(target_node = target, error = %e, "raft peer connection write failed");
                }
                pending.close();
            }
        });
        let reader = tokio::spawn(read_responses(reader, pending.clone(), target));
        Ok(Conn { queue, pending, reader, writer })
    }

    async fn call(&self, request_id: u64, frame: Vec<u8>) -> Result<Frame, &'static str> {
        let response = self.pending.register(request_id).ok_or("connection closed")?;
        // Forget the request if the caller gives up (its timeout): a late response is dropped.
        let _unregister = Unregister { pending: &self.pending, request_id };
        self.queue.send(frame).await.map_err(|_| "connection writer stopped")?;
        response.await.map_err(|_| "connection closed before the response arrived")
    }
}

/// Hands each response frame to the caller waiting on its id; on any error or close, fails
/// every waiting caller so they retry on a new connection.
async fn read_responses(mut reader: BufReader<ReadHalf>, pending: Arc<Pending>, target: u64) {
    loop {
        match codec::read_frame(&mut reader, limits::RAFT_FRAME_BYTES_MAX).await {
            Ok(Some(frame)) if frame.kind == Kind::Response => pending.complete(frame),
            Ok(Some(frame)) => {
                tracing::warn!(target_node = target, kind = ?frame.kind, "raft peer sent a request frame; closing");
                break;
            }
            Ok(None) => {
                tracing::debug!(target_node = target, "raft peer closed the connection");
                break;
            }
            Err(e) => {
                tracing::warn!(target_node = target, error = %e, "bad frame from raft peer; closing");
                break;
            }
        }
    }
    pending.close();
}

/// Callers waiting for a response, by request id.
struct Pending {
    inner: Mutex<PendingInner>,
    heard: Arc<Heard>,
}

#[derive(Default)]
struct PendingInner {
    waiting: HashMap<u64, oneshot::Sender<Frame>>,
    closed: bool,
    /// Calls timed out since the last response of any kind arrived.
    silent_timeouts: u32,
    /// When the first of them timed out.
    silent_since: Option<Instant>,
}

impl Pending {
    fn lock(&self) -> std::sync::MutexGuard<'_, PendingInner> {
        // Nothing panics while holding this lock; recover the data if something ever did.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn register(&self, request_id: u64) -> Option<oneshot::Receiver<Frame>> {
        let mut inner = self.lock();
        if inner.closed {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        inner.waiting.insert(request_id, tx);
        Some(rx)
    }

    fn complete(&self, frame: Frame) {
        self.heard.now();
        let waiter = {
            let mut inner = self.lock();
            inner.silent_timeouts = 0;
            inner.silent_since = None;
            inner.waiting.remove(&frame.request_id)
        };
        match waiter {
            // The caller may have just timed out; then nobody wants the frame.
            Some(tx) => drop(tx.send(frame)),
            None => tracing::debug!(request_id = frame.request_id, "response for a request nobody waits for"),
        }
    }

    /// Counts a timed-out call; returns the count since the last response and how long ago
    /// the first of them timed out.
    fn timed_out(&self) -> (u32, Duration) {
        let mut inner = self.lock();
        inner.silent_timeouts += 1;
        let since = *inner.silent_since.get_or_insert_with(Instant::now);
        (inner.silent_timeouts, since.elapsed())
    }

    fn unregister(&self, request_id: u64) {
        self.lock().waiting.remove(&request_id);
    }

    /// Marks the connection dead and fails every waiting caller (dropping a sender wakes its
    /// receiver with an error).
    fn close(&self) {
        let waiting = {
            let mut inner = self.lock();
            inner.closed = true;
            std::mem::take(&mut inner.waiting)
        };
        drop(waiting);
    }

    fn is_closed(&self) -> bool {
        self.lock().closed
    }
}

struct Unregister<'a> {
    pending: &'a Pending,
    request_id: u64,
}

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        self.pending.unregister(self.request_id);
    }
}

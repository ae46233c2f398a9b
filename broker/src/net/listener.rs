//! The Kafka listeners: each accepts connections (after a TLS handshake on SSL and SASL_SSL
//! listeners), reads length-prefixed frames, runs one task per request, and writes responses
//! strictly in request order (a FIFO of pending responses per connection, so a produce
//! waiting for its Raft commit never lets a later response overtake). On SASL listeners the
//! read loop first runs the connection's authentication (`security::sasl::session`); every other frame
//! goes to the request pipeline the node passes in (`pipeline`). A response that
//! carries a quota throttle mutes the connection for that long (KIP-219). Who may connect is
//! `connections` (one budget for all listeners, as Kafka's `max.connections`); how a frame is
//! read in bounded time and memory is `framing`; what clients do wrong is counted and logged at
//! a bounded rate in `incidents`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_compat::codec;
use kafka_compat::principal::KafkaPrincipal;
use kafka_protocol::messages::ApiKey;
use tokio::io::{AsyncBufRead, AsyncRead, AsyncWrite, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::connections::{self, Connections, Slot};
use super::exchange::{Closed, Dispatch, Incoming, Pending, Refused, Reply, Sender};
use super::framing::{self, Activity, FrameLimits, ReadError, RequestMemory, Reservation};
use super::incidents::{ADDRESS_STATS, STATS};
use super::responses::{write_responses, Mute, WriterSide};
use super::tls::{self, Tls};
use crate::config::listeners::SecurityProtocol;
use crate::config::security::{ListenerSpec, SaslSettings};
use crate::ctx::SharedCtx;
use crate::fatal;
use crate::limits;
use crate::metrics::{recorded::ListenerLabels, METRICS};
use crate::security::sasl::session::{Session, Verdict};
use crate::security::sasl::SaslView;

/// One Kafka listener, ready to serve: its name, protocol, and TLS and SASL if it has them.
pub struct Listener {
    name: Arc<str>,
    protocol: SecurityProtocol,
    /// The `listener` label of this listener's metrics.
    labels: ListenerLabels,
    tls: Option<Arc<Tls>>,
    sasl: Option<SaslSettings>,
}

impl Listener {
    /// Loads the listener's certificates (start-up fails on a bad keystore, as Kafka's does).
    pub fn prepare(spec: &ListenerSpec) -> anyhow::Result<Self> {
        let tls = spec.tls.clone().map(Tls::new).transpose()?;
        // A handful of listeners, named once at start-up: the metric label needs 'static.
        let label: &'static str = Box::leak(spec.endpoint.name.to_string().into_boxed_str());
        Ok(Listener {
            name: spec.endpoint.name.clone(),
            protocol: spec.protocol,
            labels: ListenerLabels { listener: label },
            tls,
            sasl: spec.sasl.clone(),
        })
    }
}

/// What every listener of the node shares: the connection budget, request memory, the frame
/// bounds and the SASL exchanges' view (the node's attempt throttle).
#[derive(Clone)]
struct Shared {
    connections: Arc<Connections>,
    memory: RequestMemory,
    frame_limits: FrameLimits,
    sasl: SaslView,
    /// The request pipeline (`pipeline`).
    dispatch: Dispatch,
    /// What ends with a connection (`exchange::Closed`).
    closed: Closed,
}

/// Serves every listener until the node stops.
pub async fn serve_all(
    listeners: Vec<(TcpListener, Listener)>,
    ctx: SharedCtx,
    (dispatch, closed): (Dispatch, Closed),
) {
    let settings = ctx.config.settings.listener;
    let open_files_allow = connections::open_files_allow();
    let total_max = open_files_allow.map_or(settings.max_connections, |n| n.min(settings.max_connections));
    let connections = Connections::new(total_max, settings.max_connections_per_ip);
    tracing::info!(
        connections_max = connections.total_max(),
        max_connections = settings.max_connections,
        open_files_allow,
        max_connections_per_ip = settings.max_connections_per_ip,
        "Kafka connection limits"
    );
    let shared = Shared {
        connections,
        memory: RequestMemory::new(settings.queued_max_request_bytes),
        frame_limits: FrameLimits {
            frame_bytes_max: ctx.config.settings.socket_request_max_bytes,
            read_timeout: Duration::from_millis(settings.request_read_timeout_ms),
            idle_timeout: Duration::from_millis(settings.connections_max_idle_ms),
        },
        sasl: SaslView::new(ctx.applied.clone()),
        dispatch,
        closed,
    };
    let mut running = tokio::task::JoinSet::new();
    for (socket, listener) in listeners {
        let listener = Arc::new(listener);
        if let Some(tls) = &listener.tls {
            tls.watch(listener.name.clone());
        }
        running.spawn(serve(socket, listener, shared.clone(), ctx.clone()));
    }
    while running.join_next().await.is_some() {}
}

/// Accepts connections for as long as the node runs; once it stops on a fault, closes each
/// at once. Nothing a client does ends this loop: a
/// failed accept (out of file descriptors, an aborted handshake) is logged at a bounded rate
/// and retried after a pause, since the pending connection stays in the backlog and an
/// immediate retry would spin.
async fn serve(socket: TcpListener, listener: Arc<Listener>, shared: Shared, ctx: SharedCtx) {
    loop {
        let listener = listener.clone();
        let (stream, peer) = match socket.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                STATS.accept_errors.record(|t| {
                    tracing::warn!(error = %e, suppressed = t.suppressed, total = t.total, "Kafka accept failed");
                });
                tokio::time::sleep(Duration::from_millis(limits::ACCEPT_ERROR_BACKOFF_MS)).await;
                continue;
            }
        };
        METRICS.connections_accepted.get_or_create(&listener.labels).inc();
        if fatal::is_stopping() {
            drop(stream);
            continue;
        }
        let slot = match shared.connections.admit(peer.ip()) {
            Ok(slot) => slot,
            Err(refusal) => {
                STATS.connections_refused.record(|t| {
                    tracing::warn!(%peer, suppressed = t.suppressed, total = t.total, "closing new connection: {refusal}");
                });
                drop(stream);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(accepted(stream, peer, slot, listener, shared.clone(), ctx.clone()));
    }
}

/// A connection admitted: its TLS handshake (bounded by the request read timeout, so a client
/// that connects and sends nothing is closed), then its requests.
async fn accepted(
    stream: TcpStream,
    peer: SocketAddr,
    slot: Slot,
    listener: Arc<Listener>,
    shared: Shared,
    ctx: SharedCtx,
) {
    let Some(tls) = listener.tls.clone() else {
        serve_connection(stream, peer, KafkaPrincipal::anonymous(), listener, shared, ctx).await;
        drop(slot);
        return;
    };
    let name = listener.name.clone();
    let handshake = tokio::time::timeout(shared.frame_limits.read_timeout, tls.accept(stream)).await;
    let failed = |why: String| {
        ADDRESS_STATS.tls_handshake_failures.record(peer.ip(), |t| {
            tracing::warn!(%peer, listener = %name, suppressed = t.suppressed, total = t.total, "closing connection: TLS handshake failed: {why}");
        });
    };
    let stream = match handshake {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return failed(e.to_string()),
        Err(_) => {
            return failed(format!(
                "not complete within {:?} (onelog.request.read.timeout.ms)",
                shared.frame_limits.read_timeout
            ))
        }
    };
    let mapper = &tls.settings().principal_mapper;
    let principal = match tls::principal::of_chain(stream.get_ref().1.peer_certificates(), mapper) {
        Ok(principal) => principal,
        Err(why) => return failed(why),
    };
    if !principal.is_anonymous() {
        tracing::info!(%peer, listener = %name, %principal, "TLS client authenticated by certificate");
    }
    serve_connection(stream, peer, principal, listener, shared, ctx).await;
    drop(slot);
}

/// A reply ready now (the SASL exchange's answers).
fn ready(bytes: Bytes) -> Pending {
    tokio::spawn(async move { Ok(Reply::unthrottled(Some(bytes))) })
}

/// `principal`: the connection's before any SASL (its certificate's, or ANONYMOUS). Reads
/// frames until the client closes, a frame is refused or the node stops; the writer task
/// sends the replies in request order.
async fn serve_connection<S: AsyncRead + AsyncWrite + Send + Unpin + 'static>(
    stream: S,
    peer: SocketAddr,
    principal: Arc<KafkaPrincipal>,
    listener: Arc<Listener>,
    shared: Shared,
    ctx: SharedCtx,
) {
    let (reader, writer) = tokio::io::split(stream);
    let mut reader = BufReader::new(reader);
    let (tx, rx) = mpsc::channel::<Pending>(limits::INFLIGHT_REQUESTS_PER_CONNECTION_MAX);
    let mut conn = Connection {
        id: NEXT_CONNECTION_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        peer,
        principal,
        sasl: listener.sasl.clone().map(|settings| Session::new(settings, shared.sasl.clone(), peer)),
        mute: Arc::default(),
        activity: Activity::new(),
        tx,
        listener,
        ctx,
    };
    debug_assert_eq!(conn.sasl.is_some(), conn.listener.protocol.uses_sasl());
    let bytes_out = METRICS.response_bytes.get_or_create(&conn.listener.labels).clone();
    let limits = shared.frame_limits;
    let side = WriterSide {
        peer,
        muted: conn.mute.clone(),
        activity: conn.activity.clone(),
        idle_timeout: limits.idle_timeout,
        bytes_out,
    };
    let writing = write_responses(writer, rx, side);
    let write_loop = tokio::spawn(writing);
    conn.read_loop(&mut reader, &shared).await;
    (shared.closed)(&conn.ctx, conn.id);
    drop(conn);
    let _ = write_loop.await;
}

/// Connection ids (`Request::connection_id`); 0 is never one.
static NEXT_CONNECTION_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// One connection's read side: who it is, its SASL exchange, and the queue to its writer.
struct Connection {
    id: u64,
    peer: SocketAddr,
    /// Before any SASL: the certificate's principal, or ANONYMOUS.
    principal: Arc<KafkaPrincipal>,
    sasl: Option<Session>,
    mute: Mute,
    activity: Arc<Activity>,
    tx: mpsc::Sender<Pending>,
    listener: Arc<Listener>,
    ctx: SharedCtx,
}

/// What to do after a frame.
enum Next {
    Read,
    Close,
}

impl Connection {
    async fn read_loop<R: AsyncBufRead + Unpin>(&mut self, reader: &mut R, shared: &Shared) {
        // Before authentication a frame is at most Kafka's `sasl.server.max.receive.size`: an
        // unauthenticated client cannot make the broker buffer a large frame.
        let frame_limits = shared.frame_limits;
        let unauthenticated_limits = FrameLimits {
            frame_bytes_max: frame_limits.frame_bytes_max.min(limits::SASL_UNAUTHENTICATED_FRAME_BYTES_MAX),
            ..frame_limits
        };
        // Looked up once per connection, not per frame: a family lookup takes a lock.
        let bytes_in = METRICS.request_bytes.get_or_create(&self.listener.labels).clone();
        loop {
            let unauthenticated = self.sasl.as_ref().is_some_and(|s| s.principal().is_none());
            let bounds = if unauthenticated { &unauthenticated_limits } else { &frame_limits };
            let (frame, reservation) =
                match framing::read_frame(reader, &shared.memory, bounds, &self.activity).await {
                    Ok(read) => read,
                    Err(e) => return closing_on_read_error(self.peer, &e),
                };
            // A node stopping on a fault answers nothing from its frozen state (`fatal.rs`).
            if fatal::is_stopping() {
                return;
            }
            // The frame and its 4-byte length prefix.
            bytes_in.inc_by(frame.len() as u64 + 4);
            // A throttled connection's next request waits out the throttle (the bytes may
            // already be here; Kafka would leave them in the socket buffer).
            let muted_until = self.mute.lock().expect("mute lock").take();
            if let Some(until) = muted_until {
                tokio::time::sleep_until(until).await;
            }
            let next = match self.sasl_step(&frame).await {
                Some(next) => next,
                None => self.dispatch(frame, reservation, shared.dispatch).await,
            };
            if let Next::Close = next {
                return;
            }
        }
    }

    /// The SASL exchange's part of a frame on a SASL listener: `None` when the frame is a
    /// request for the pipeline.
    async fn sasl_step(&mut self, frame: &Bytes) -> Option<Next> {
        let verdict = self.sasl.as_mut()?.on_frame(frame);
        let (answer, close) = match verdict {
            Verdict::Route => return None,
            Verdict::Answer(bytes) => (bytes, false),
            Verdict::AnswerAndClose(bytes) => (bytes, true),
            Verdict::Close(why) => {
                let (peer, listener) = (self.peer, &self.listener.name);
                STATS.sasl_state_closes.record(|t| {
                    tracing::warn!(%peer, %listener, suppressed = t.suppressed, total = t.total, "closing connection: {why}");
                });
                return Some(Next::Close);
            }
        };
        self.activity.request_started();
        let sent = self.tx.send(ready(answer)).await.is_ok();
        Some(if sent && !close { Next::Read } else { Next::Close })
    }

    /// Hands a request to the pipeline and queues its reply.
    async fn dispatch(&mut self, frame: Bytes, memory: Reservation, dispatch: Dispatch) -> Next {
        let peer = self.peer;
        let sender = Sender {
            ip: peer.ip(),
            listener: self.listener.name.clone(),
            principal: self
                .sasl
                .as_ref()
                .and_then(Session::principal)
                .unwrap_or_else(|| self.principal.clone()),
            connection: self.id,
        };
        let lookup = codec::peek_prefix(&frame).is_ok_and(|p| {
            p.api_key == ApiKey::Metadata as i16 || p.api_key == ApiKey::FindCoordinator as i16
        });
        let pending = match dispatch(self.ctx.clone(), Incoming { frame, memory, sender }).await {
            Ok(pending) => pending,
            Err(refused) => {
                let (stats, reason) = match refused {
                    Refused::Malformed(reason) => (&STATS.malformed_requests, reason),
                    Refused::Failed(reason) => (&STATS.request_failures, reason),
                };
                stats.record(|t| {
                    tracing::warn!(%peer, suppressed = t.suppressed, total = t.total, "closing connection: {reason}");
                });
                return Next::Close;
            }
        };
        self.activity.request_started();
        if self.tx.send(pending).await.is_err() {
            return Next::Close;
        }
        // A lookup (Metadata, FindCoordinator) answered, then the connection closed: the
        // client looks for the leader or coordinator elsewhere (see `Leadership::is_cut_off`).
        // Other requests get their NOT_LEADER_OR_FOLLOWER (or coordinator) error on an open
        // connection, and the lookup that follows ends here.
        if lookup && self.ctx.leadership.is_cut_off() {
            STATS.cut_off_closes.record(|t| {
                tracing::info!(%peer, suppressed = t.suppressed, total = t.total, "closing client connection: this node is cut off from the quorum");
            });
            return Next::Close;
        }
        Next::Read
    }
}

/// Counts (and logs, at a bounded rate) why a connection's reader stopped.
fn closing_on_read_error(peer: SocketAddr, error: &ReadError) {
    match error {
        ReadError::Closed => {}
        ReadError::Idle => STATS.idle_connections_closed.record(|_| {
            tracing::debug!(%peer, "closing idle connection (connections.max.idle.ms)");
        }),
        ReadError::TimedOut { .. } => STATS.frame_read_timeouts.record(|t| {
            tracing::warn!(%peer, suppressed = t.suppressed, total = t.total, "closing connection: {error}");
        }),
        ReadError::Length(_) => STATS.malformed_requests.record(|t| {
            tracing::warn!(%peer, suppressed = t.suppressed, total = t.total, "closing connection: {error}");
        }),
        ReadError::Io(e) => tracing::debug!(%peer, error = %e, "connection ended with an error"),
    }
}

//! The Kafka listener: accepts connections, reads length-prefixed frames, runs one task per
//! request, and writes responses strictly in request order (a FIFO of pending responses per
//! connection, so a produce waiting for its Raft commit never lets a later response overtake).
//! A response that carries a quota throttle mutes the connection for that long (KIP-219).

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_compat::codec::{self, DecodeError};
use kafka_compat::frame::{frame_body_len, FRAME_PREFIX_BYTES};
use kafka_protocol::messages::ApiKey;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::ctx::SharedCtx;
use crate::handlers::{self, api_versions, HandlerFuture, Run};
use crate::limits;
use crate::quotas;

pub async fn serve(listener: TcpListener, ctx: SharedCtx) -> anyhow::Result<()> {
    let connections = Arc::new(Semaphore::new(limits::CONNECTIONS_MAX));
    let request_memory = Arc::new(Semaphore::new(limits::REQUEST_MEMORY_BYTES_MAX));
    loop {
        let permit = connections.clone().acquire_owned().await?;
        let (stream, peer) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let ctx = ctx.clone();
        let request_memory = request_memory.clone();
        tokio::spawn(async move {
            if let Err(e) = serve_connection(stream, ctx, request_memory).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
            drop(permit);
        });
    }
}

/// A response slot: the task producing the response.
type Pending = JoinHandle<anyhow::Result<Reply>>;

/// A response's bytes (None: the request wants none) and the quota throttle it asks for.
struct Reply {
    bytes: Option<Bytes>,
    throttle_ms: i32,
    /// The client does not wait out the throttle itself (pre-KIP-219 versions): the response
    /// is held back for the throttle time instead.
    hold_response: bool,
}

impl Reply {
    fn unthrottled(bytes: Option<Bytes>) -> Self {
        Reply { bytes, throttle_ms: 0, hold_response: false }
    }
}

/// Until when the connection reads no request: Kafka mutes a throttled channel.
type Mute = Arc<Mutex<Option<Instant>>>;

async fn serve_connection(
    stream: TcpStream,
    ctx: SharedCtx,
    request_memory: Arc<Semaphore>,
) -> anyhow::Result<()> {
    let peer = stream.peer_addr()?;
    let (mut reader, mut writer) = stream.into_split();
    let (tx, mut rx) = mpsc::channel::<Pending>(limits::INFLIGHT_REQUESTS_PER_CONNECTION_MAX);
    let mute: Mute = Arc::default();
    let muted = mute.clone();
    let write_loop = tokio::spawn(async move {
        while let Some(pending) = rx.recv().await {
            match pending.await {
                Ok(Ok(reply)) => {
                    let throttle = Duration::from_millis(reply.throttle_ms.max(0) as u64);
                    if reply.hold_response {
                        tokio::time::sleep(throttle).await;
                    }
                    if let Some(bytes) = reply.bytes {
                        writer.write_all(&bytes).await?;
                    }
                    if !throttle.is_zero() {
                        let until = Instant::now() + throttle;
                        let mut mute = muted.lock().expect("mute lock");
                        *mute = Some(mute.map_or(until, |m| m.max(until)));
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(%peer, error = %e, "closing connection: request failed");
                    break;
                }
                Err(e) => {
                    tracing::error!(%peer, error = %e, "closing connection: request task panicked");
                    break;
                }
            }
        }
        writer.shutdown().await
    });
    let frame_bytes_max = ctx.config.settings.socket_request_max_bytes;
    loop {
        let mut prefix = [0u8; FRAME_PREFIX_BYTES];
        if reader.read_exact(&mut prefix).await.is_err() {
            break; // EOF or reset: the client went away.
        }
        let len = match frame_body_len(prefix, frame_bytes_max) {
            Ok(len) => len,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "closing connection: bad frame length");
                break;
            }
        };
        // Bound the memory of all requests being read or handled, across connections, before
        // allocating (Kafka's queued.max.request.bytes); the permit lives as long as the task.
        let permits = len.min(limits::REQUEST_MEMORY_BYTES_MAX) as u32;
        let memory = request_memory.clone().acquire_many_owned(permits).await?;
        let mut frame = BytesMut::zeroed(len);
        reader.read_exact(&mut frame).await?;
        // A throttled connection's next request waits out the throttle (the bytes may already
        // be here; Kafka would leave them in the socket buffer).
        let muted_until = mute.lock().expect("mute lock").take();
        if let Some(until) = muted_until {
            tokio::time::sleep_until(until).await;
        }
        match route(&ctx, frame.freeze(), memory, peer.ip()).await {
            Ok(pending) => {
                if tx.send(pending).await.is_err() {
                    break;
                }
            }
            Err(reason) => {
                tracing::warn!(%peer, "closing connection: {reason}");
                break;
            }
        }
    }
    drop(tx);
    let _ = write_loop.await;
    Ok(())
}

/// Checks api key and version against the handler registry, then spawns the handler. An
/// ordered handler's first stage runs here, in the read loop, so that requests of one
/// connection reach the log in the order they were sent (Kafka appends a connection's
/// produce requests in order; librdkafka pipelines them).
async fn route(
    ctx: &SharedCtx,
    frame: Bytes,
    memory: OwnedSemaphorePermit,
    client_address: IpAddr,
) -> Result<Pending, String> {
    let prefix = codec::peek_prefix(&frame).map_err(|e| e.to_string())?;
    let Some(handler) = handlers::lookup(prefix.api_key) else {
        return Err(format!("unknown api key {}", prefix.api_key));
    };
    let version = prefix.api_version;
    if handler.key == ApiKey::ApiVersions && version > handler.max_version {
        // KIP-511: answer in v0 with UNSUPPORTED_VERSION and our ranges.
        let corr = prefix.correlation_id;
        return Ok(tokio::spawn(async move {
            Ok(Reply::unthrottled(Some(codec::encode_api_versions_fallback(corr, api_versions::keys())?)))
        }));
    }
    if handler.key == ApiKey::Produce && version < handler.accepted_min_version {
        // Advertised-only versions still get an answer (every partition UNSUPPORTED_VERSION),
        // never a closed connection; api_version_sweep is the regression test.
        let answer = kafka_compat::legacy_produce::unsupported_version_response(&frame)?;
        return Ok(tokio::spawn(async move {
            drop(memory);
            Ok(Reply::unthrottled(answer))
        }));
    }
    if version < handler.accepted_min_version || version > handler.max_version {
        return Err(format!(
            "{:?} v{version} is not served (accepted v{}..=v{})",
            handler.key, handler.accepted_min_version, handler.max_version
        ));
    }
    let mut request = codec::decode_request(frame).map_err(|e: DecodeError| e.to_string())?;
    request.client_address = Some(client_address);
    let (key, version, corr) = (request.api_key, request.api_version, request.header.correlation_id);
    let response: HandlerFuture = match handler.run {
        Run::Concurrent(run) => run(ctx.clone(), request),
        Run::Ordered(submit) => match submit(ctx.clone(), request).await {
            Ok(rest) => rest,
            Err(e) => return Err(format!("{key:?} v{version}: {e:#}")),
        },
    };
    Ok(tokio::spawn(async move {
        let response = response.await?;
        drop(memory);
        match response {
            Some(body) => Ok(Reply {
                bytes: Some(codec::encode_response(key, version, corr, &body)?),
                throttle_ms: quotas::response_throttle_ms(&body),
                hold_response: !quotas::client_waits_itself(key, version),
            }),
            None => Ok(Reply::unthrottled(None)),
        }
    }))
}

//! A connection's writer: awaits the replies of its requests in request order and writes
//! them. Replies that are ready together leave in one write (issue 31): librdkafka sends a
//! transaction's writes to two partitions as two Produce requests a moment apart, they commit
//! in one Raft entry, and one send instead of two saves a system call here and a wake-up in
//! the client. Coalescing never waits for a reply: it takes the next one only if it is
//! already computed, and only small ones, so a large Fetch response is never copied.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::exchange::{Pending, Reply};
use super::framing::Activity;
use super::incidents::STATS;
use crate::fatal;
use crate::limits;

/// Until when the connection reads no request: Kafka mutes a throttled channel.
pub type Mute = Arc<Mutex<Option<Instant>>>;

/// What the writer needs besides its socket and queue.
pub struct WriterSide {
    pub peer: SocketAddr,
    pub muted: Mute,
    pub activity: Arc<Activity>,
    pub idle_timeout: Duration,
    pub bytes_out: Counter,
}

/// Responses read to go, not yet written.
#[derive(Default)]
struct Outgoing {
    responses: Vec<Bytes>,
    bytes: usize,
}

impl Outgoing {
    fn push(&mut self, bytes: Bytes) {
        self.bytes += bytes.len();
        self.responses.push(bytes);
    }

    /// Whether another ready reply may join this write.
    fn has_room(&self) -> bool {
        self.bytes < limits::RESPONSE_COALESCE_BYTES_MAX
    }

    /// Writes what is held as one write. `Ok(false)`: the client has not read its responses
    /// within the idle timeout, and the connection closes.
    async fn write<W: AsyncWrite + Unpin>(
        &mut self,
        writer: &mut W,
        side: &WriterSide,
    ) -> std::io::Result<bool> {
        let responses = std::mem::take(&mut self.responses);
        let bytes = std::mem::take(&mut self.bytes);
        let joined: Bytes = match responses.len() {
            0 => return Ok(true),
            1 => responses.into_iter().next().unwrap_or_default(),
            _ => responses.concat().into(),
        };
        // A client that stops reading its responses is idle too: it would keep this response
        // and the ones queued behind it in memory for ever.
        match tokio::time::timeout(side.idle_timeout, writer.write_all(&joined)).await {
            Ok(written) => {
                written?;
                side.bytes_out.inc_by(bytes as u64);
                side.activity.touch();
                Ok(true)
            }
            Err(_) => {
                let peer = side.peer;
                STATS.idle_connections_closed.record(|_| {
                    tracing::debug!(%peer, "closing connection: responses not read (connections.max.idle.ms)");
                });
                Ok(false)
            }
        }
    }
}

/// Writes the responses of one connection in request order, then closes its write side.
pub async fn write_responses<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut rx: mpsc::Receiver<Pending>,
    side: WriterSide,
) -> std::io::Result<()> {
    let mut out = Outgoing::default();
    let mut next: Option<Pending> = None;
    loop {
        let pending = match next.take() {
            Some(pending) => pending,
            None => match rx.recv().await {
                Some(pending) => pending,
                None => break,
            },
        };
        let result = pending.await;
        side.activity.request_finished();
        let Some(reply) = reply_or_close(result, side.peer) else { break };
        // A held response leaves after its throttle; what is ready before it does not wait.
        if let Some(hold) = reply.hold() {
            if !out.write(&mut writer, &side).await? {
                return writer.shutdown().await;
            }
            tokio::time::sleep(hold).await;
        }
        mute_for(&side.muted, reply.throttle_ms);
        if fatal::is_stopping() {
            break;
        }
        if let Some(bytes) = reply.bytes {
            out.push(bytes);
        }
        if let Ok(pending) = rx.try_recv() {
            let ready = pending.is_finished();
            next = Some(pending);
            if ready && out.has_room() {
                continue;
            }
        }
        if !out.write(&mut writer, &side).await? {
            break;
        }
    }
    if !fatal::is_stopping() {
        out.write(&mut writer, &side).await?;
    }
    writer.shutdown().await
}

/// The reply, or `None` when the request failed or its task panicked: the connection closes.
fn reply_or_close(
    result: Result<anyhow::Result<Reply>, tokio::task::JoinError>,
    peer: SocketAddr,
) -> Option<Reply> {
    match result {
        Ok(Ok(reply)) => Some(reply),
        Ok(Err(e)) => {
            STATS.request_failures.record(|t| {
                tracing::warn!(%peer, error = %e, suppressed = t.suppressed, total = t.total, "closing connection: request failed");
            });
            None
        }
        Err(e) => {
            STATS.handler_panics.record(|t| {
                tracing::error!(%peer, error = %e, suppressed = t.suppressed, total = t.total, "closing connection: request task panicked");
            });
            None
        }
    }
}

/// Mutes the connection for a throttled reply before the reply leaves: the client may send
/// its next request the moment it reads this one, and that request must wait out the
/// throttle.
fn mute_for(muted: &Mute, throttle_ms: i32) {
    let throttle = Duration::from_millis(throttle_ms.max(0) as u64);
    if throttle.is_zero() {
        return;
    }
    let until = Instant::now() + throttle;
    let mut mute = muted.lock().expect("mute lock");
    *mute = Some(mute.map_or(until, |m| m.max(until)));
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use super::*;

    /// Records each write call's bytes.
    #[derive(Clone, Default)]
    struct Recorder {
        writes: Arc<Mutex<Vec<Vec<u8>>>>,
    }

    impl Recorder {
        fn writes(&self) -> Vec<Vec<u8>> {
            self.writes.lock().expect("writes").clone()
        }
    }

    impl AsyncWrite for Recorder {
        fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
            self.writes.lock().expect("writes").push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn side() -> WriterSide {
        WriterSide {
            peer: "127.0.0.1:1".parse().expect("address"),
            muted: Mute::default(),
            activity: Activity::new(),
            idle_timeout: Duration::from_secs(5),
            bytes_out: Counter::default(),
        }
    }

    fn reply(text: &'static str) -> Pending {
        tokio::spawn(async move { Ok(Reply::unthrottled(Some(Bytes::from_static(text.as_bytes())))) })
    }

    /// Queues `pendings` (after letting each run), closes the queue, and returns the writes.
    async fn written(pendings: Vec<Pending>) -> Vec<Vec<u8>> {
        let (tx, rx) = mpsc::channel(8);
        for pending in pendings {
            while !pending.is_finished() {
                tokio::task::yield_now().await;
            }
            tx.send(pending).await.expect("queue");
        }
        drop(tx);
        let recorder = Recorder::default();
        write_responses(recorder.clone(), rx, side()).await.expect("written");
        recorder.writes()
    }

    /// Regression (issue 31): replies that are ready together went out in one write each.
    #[tokio::test]
    async fn replies_ready_together_leave_in_one_write_in_order() {
        let writes = written(vec![reply("a"), reply("bb"), reply("ccc")]).await;
        assert_eq!(writes, vec![b"abbccc".to_vec()]);
    }

    /// A reply still being computed is not waited for: what is ready goes out first.
    #[tokio::test]
    async fn a_reply_not_ready_is_not_waited_for() {
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let slow: Pending = tokio::spawn(async move {
            let _ = released.await;
            Ok(Reply::unthrottled(Some(Bytes::from_static(b"slow"))))
        });
        let (tx, rx) = mpsc::channel(8);
        let first = reply("first");
        while !first.is_finished() {
            tokio::task::yield_now().await;
        }
        tx.send(first).await.expect("queue");
        tx.send(slow).await.expect("queue");
        drop(tx);
        let recorder = Recorder::default();
        let writer = tokio::spawn(write_responses(recorder.clone(), rx, side()));
        // The first reply is written while the second is still being computed.
        while recorder.writes().is_empty() {
            tokio::task::yield_now().await;
        }
        assert_eq!(recorder.writes(), vec![b"first".to_vec()]);
        release.send(()).expect("release");
        writer.await.expect("writer").expect("written");
        assert_eq!(recorder.writes(), vec![b"first".to_vec(), b"slow".to_vec()]);
    }

    /// A large reply is never copied to join another.
    #[tokio::test]
    async fn large_replies_are_written_alone() {
        let big: &'static str = Box::leak("x".repeat(limits::RESPONSE_COALESCE_BYTES_MAX).into_boxed_str());
        let writes = written(vec![reply(big), reply("after")]).await;
        assert_eq!(writes.len(), 2);
        assert_eq!(writes[1], b"after".to_vec());
    }
}

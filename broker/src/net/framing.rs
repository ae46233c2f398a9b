//! Reading request frames off a connection within bounded time and memory.
//!
//! - Request memory (`queued.max.request.bytes`, shared by all connections) is reserved as a
//!   frame's bytes arrive, never from its length prefix alone: the buffer starts at
//!   `REQUEST_READ_BYTES_MIN` once the first body bytes are readable and at most doubles when
//!   full, and the reservation always covers the buffer's capacity. Six connections sending
//!   only a 100 MiB prefix therefore hold nothing (issue 13 found them holding the whole pool
//!   while every other client waited).
//! - A frame, from its first byte to its last, including any wait for request memory, must
//!   arrive within the request read timeout (`onelog.request.read.timeout.ms`); a frame whose
//!   bytes stop arriving is dropped with its connection, which frees its memory. This also
//!   ends the one stall the reservation cannot prevent: connections that sent part of large
//!   frames and hold the pool between them.
//! - A connection with no request in flight and nothing written or read for
//!   `connections.max.idle.ms` is closed (Kafka's idle close).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes};
use kafka_compat::frame::{frame_body_len, FrameError, FRAME_PREFIX_BYTES};
use thiserror::Error;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};
use tokio::sync::Semaphore;
use tokio::time::{timeout_at, Instant};

use super::incidents::STATS;
use crate::limits::REQUEST_READ_BYTES_MIN;

/// The pool of request memory shared by every connection.
#[derive(Clone)]
pub struct RequestMemory {
    pool: Arc<Semaphore>,
}

/// Bytes of request memory held by one frame, from its first body bytes until its response
/// is written (or the request is dropped).
pub struct Reservation {
    pool: Arc<Semaphore>,
    bytes: usize,
}

impl RequestMemory {
    pub fn new(bytes: usize) -> Self {
        RequestMemory { pool: Arc::new(Semaphore::new(bytes.min(Semaphore::MAX_PERMITS))) }
    }

    fn empty(&self) -> Reservation {
        Reservation { pool: self.pool.clone(), bytes: 0 }
    }
}

impl Reservation {
    /// Waits for `bytes` more of the pool (FIFO among all connections).
    async fn grow(&mut self, bytes: usize) {
        // `bytes` is at most socket.request.max.bytes (an i32), so it fits the u32 permit count.
        let permits = u32::try_from(bytes).unwrap_or(u32::MAX);
        match self.pool.acquire_many(permits).await {
            Ok(permit) => permit.forget(),
            // The pool is never closed; if it were, nothing is held and reading goes on.
            Err(_) => return,
        }
        self.bytes += permits as usize;
        STATS.request_memory_bytes.fetch_add(permits as u64, Ordering::Relaxed);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.pool.add_permits(self.bytes);
            STATS.request_memory_bytes.fetch_sub(self.bytes as u64, Ordering::Relaxed);
        }
    }
}

/// The timing and size bounds of one connection's frames.
#[derive(Debug, Clone, Copy)]
pub struct FrameLimits {
    /// `socket.request.max.bytes`.
    pub frame_bytes_max: usize,
    /// `onelog.request.read.timeout.ms`.
    pub read_timeout: Duration,
    /// `connections.max.idle.ms`.
    pub idle_timeout: Duration,
}

/// When a connection last did something, and how many of its requests are in flight: the
/// reader and the writer of a connection share it to decide idleness.
pub struct Activity {
    start: Instant,
    last_ms: AtomicU64,
    inflight: AtomicUsize,
}

impl Activity {
    pub fn new() -> Arc<Self> {
        Arc::new(Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            inflight: AtomicUsize::new(0),
        })
    }

    pub fn touch(&self) {
        let ms = self.start.elapsed().as_millis() as u64;
        self.last_ms.fetch_max(ms, Ordering::Relaxed);
    }

    pub fn request_started(&self) {
        self.inflight.fetch_add(1, Ordering::Relaxed);
        self.touch();
    }

    pub fn request_finished(&self) {
        self.inflight.fetch_sub(1, Ordering::Relaxed);
        self.touch();
    }

    fn idle_until(&self, idle: Duration) -> Instant {
        self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed)) + idle
    }
}

/// Why no frame was read.
#[derive(Debug, Error)]
pub enum ReadError {
    #[error("the client closed the connection")]
    Closed,
    #[error("idle for connections.max.idle.ms")]
    Idle,
    #[error("frame incomplete after the request read timeout: {received} of {expected} bytes")]
    TimedOut { received: usize, expected: usize },
    #[error("bad frame length: {0}")]
    Length(#[from] FrameError),
    #[error(transparent)]
    Io(std::io::Error),
}

fn io_error(e: std::io::Error) -> ReadError {
    use std::io::ErrorKind::*;
    match e.kind() {
        UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe => ReadError::Closed,
        _ => ReadError::Io(e),
    }
}

/// Reads the next frame's body and the memory it holds.
///
/// `reader` is buffered (a TCP or TLS stream's read half): what it has buffered stands for the
/// bytes a socket has received, so memory is reserved only for bytes that arrived.
pub async fn read_frame<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    memory: &RequestMemory,
    limits: &FrameLimits,
    activity: &Activity,
) -> Result<(Bytes, Reservation), ReadError> {
    wait_for_request(reader, limits.idle_timeout, activity).await?;
    let deadline = Instant::now() + limits.read_timeout;
    let mut prefix = [0u8; FRAME_PREFIX_BYTES];
    match timeout_at(deadline, reader.read_exact(&mut prefix)).await {
        Ok(read) => read.map_err(io_error)?,
        Err(_) => return Err(ReadError::TimedOut { received: 0, expected: FRAME_PREFIX_BYTES }),
    };
    let len = frame_body_len(prefix, limits.frame_bytes_max)?;
    let timed_out = |received| ReadError::TimedOut { received, expected: len };
    let mut body: Vec<u8> = Vec::new();
    let mut reservation = memory.empty();
    while body.len() < len {
        // Reserve only once bytes are there.
        match timeout_at(deadline, reader.fill_buf()).await {
            Ok(Ok([])) => return Err(ReadError::Closed),
            Ok(filled) => filled.map_err(io_error).map(drop)?,
            Err(_) => return Err(timed_out(body.len())),
        }
        if body.len() == body.capacity() {
            let target = len.min((body.capacity() * 2).max(REQUEST_READ_BYTES_MIN));
            let more = target.saturating_sub(body.capacity());
            if timeout_at(deadline, reservation.grow(more)).await.is_err() {
                return Err(timed_out(body.len()));
            }
            body.reserve_exact(target - body.len());
        }
        // Buffered bytes are there (above); this returns them without waiting.
        let buffered = reader.fill_buf().await.map_err(io_error)?;
        let take = buffered.len().min(len - body.len()).min(body.capacity() - body.len());
        body.put_slice(&buffered[..take]);
        reader.consume(take);
    }
    activity.touch();
    Ok((Bytes::from(body), reservation))
}

/// Waits until the next frame's first bytes are readable; fails once the connection has been
/// idle (nothing in flight, nothing read or written) for `idle`.
async fn wait_for_request<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    idle: Duration,
    activity: &Activity,
) -> Result<(), ReadError> {
    loop {
        match timeout_at(activity.idle_until(idle), reader.fill_buf()).await {
            Ok(Ok([])) => return Err(ReadError::Closed),
            Ok(filled) => return filled.map_err(io_error).map(drop),
            Err(_) => {
                let busy = activity.inflight.load(Ordering::Relaxed) > 0;
                if !busy && activity.idle_until(idle) <= Instant::now() {
                    return Err(ReadError::Idle);
                }
                if busy {
                    // A request in flight (a long-polling Fetch) keeps the connection alive.
                    activity.touch();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncWriteExt, BufReader};
    use tokio::net::tcp::OwnedReadHalf;
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    const KIB: usize = 1024;

    fn limits() -> FrameLimits {
        FrameLimits {
            frame_bytes_max: 1024 * KIB,
            read_timeout: Duration::from_millis(300),
            idle_timeout: Duration::from_secs(60),
        }
    }

    /// A connected pair: the client's stream and the server's read half (write half kept).
    async fn pair() -> (TcpStream, BufReader<OwnedReadHalf>, tokio::net::tcp::OwnedWriteHalf) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).await.expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        let (read, write) = server.into_split();
        (client, BufReader::new(read), write)
    }

    fn frame(len: usize, fill: u8) -> Vec<u8> {
        let mut bytes = (len as i32).to_be_bytes().to_vec();
        bytes.resize(4 + len, fill);
        bytes
    }

    #[tokio::test]
    async fn a_length_prefix_alone_holds_no_request_memory() {
        // A pool smaller than both frames together: reserving from the prefix would stall B.
        let memory = RequestMemory::new(100 * KIB);
        let (mut a, mut a_read, _a_write) = pair().await;
        let (mut b, mut b_read, _b_write) = pair().await;
        let whole_a = frame(90 * KIB, 1);
        a.write_all(&whole_a[..4]).await.expect("A's prefix");
        let (memory_a, activity_a) = (memory.clone(), Activity::new());
        let reading_a = tokio::spawn(async move {
            read_frame(&mut a_read, &memory_a, &limits(), &activity_a).await.map(|r| r.0)
        });
        b.write_all(&frame(60 * KIB, 2)).await.expect("B's frame");
        let activity_b = Activity::new();
        let (body_b, reservation_b) = tokio::time::timeout(
            Duration::from_secs(30),
            read_frame(
                &mut b_read,
                &memory,
                &FrameLimits { read_timeout: Duration::from_secs(30), ..limits() },
                &activity_b,
            ),
        )
        .await
        .expect("B read while A holds a 90 KiB prefix")
        .expect("B's frame");
        assert_eq!((body_b.len(), body_b[0]), (60 * KIB, 2));
        assert!(
            reservation_b.bytes >= 60 * KIB && reservation_b.bytes <= 100 * KIB,
            "{}",
            reservation_b.bytes
        );
        drop(reservation_b);
        // A's body never came: its frame times out and holds nothing afterwards.
        let outcome = reading_a.await.expect("task");
        assert!(
            matches!(outcome, Err(ReadError::TimedOut { received: 0, expected }) if expected == 90 * KIB)
        );
        assert_eq!(memory.pool.available_permits(), 100 * KIB);
    }

    #[tokio::test]
    async fn a_frame_holds_what_it_received_and_releases_it_when_dropped() {
        let memory = RequestMemory::new(1024 * KIB);
        let (mut client, mut read, _write) = pair().await;
        let whole = frame(300 * KIB, 7);
        client.write_all(&whole).await.expect("frame");
        let (body, reservation) =
            read_frame(&mut read, &memory, &limits(), &Activity::new()).await.expect("frame");
        assert_eq!(body.len(), 300 * KIB);
        assert!(body.iter().all(|b| *b == 7));
        assert_eq!(reservation.bytes, 300 * KIB, "the buffer ends at the frame's size");
        drop(reservation);
        assert_eq!(memory.pool.available_permits(), 1024 * KIB);
    }
}

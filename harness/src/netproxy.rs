//! A fault-injecting TCP proxy: listens on an ephemeral 127.0.0.1 port, forwards every
//! connection to a target address, and can be switched at run time between passing bytes,
//! delaying them, black-holing them (both ways or one way) and refusing connections. The
//! cluster puts one in front of every directed Raft link and every Kafka listener
//! (`ClusterOptions::link_proxies`), so a test can partition nodes without network namespaces
//! or root.
//!
//! Black-holing holds the bytes instead of dropping them: TCP is a reliable stream, so what a
//! partition looks like to both ends is an open connection over which nothing arrives; when
//! the partition heals, TCP's retransmissions deliver what was sent, and so does the proxy.
//! A blocked direction stops reading from its source, so the sender's buffers fill as they
//! would behind a lost route.
//!
//! The proxy runs on its own thread and tokio runtime, so it works the same under a blocking
//! test and inside `#[tokio::test]`; [`ProxyHandle`] is the cheap, cloneable switch.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};

/// Bytes read from one side before they are forwarded (one chunk).
const CHUNK_BYTES_MAX: usize = 64 * 1024;
/// Chunks read ahead of the writer per direction (bounds memory under Delay).
const CHUNKS_IN_FLIGHT_MAX: usize = 64;

/// What the proxy does with traffic; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward every byte at once.
    Pass,
    /// Forward each chunk this long after it was read, both ways.
    Delay(Duration),
    /// Connections stay open (new ones are accepted); no byte moves either way.
    BlackHole,
    /// Close every connection (with a reset) and reset new ones at once.
    Refuse,
    /// Bytes from the dialling side to the target are held; the other way passes.
    BlockClientToTarget,
    /// Bytes from the target back to the dialling side are held; the other way passes.
    BlockTargetToClient,
}

impl Mode {
    /// The mode that blocks the given directions (both: [`Mode::BlackHole`]).
    pub fn blocking(client_to_target: bool, target_to_client: bool) -> Mode {
        match (client_to_target, target_to_client) {
            (false, false) => Mode::Pass,
            (true, false) => Mode::BlockClientToTarget,
            (false, true) => Mode::BlockTargetToClient,
            (true, true) => Mode::BlackHole,
        }
    }

    /// Whether bytes may move in `direction` now.
    fn passes(self, direction: Direction) -> bool {
        match self {
            Mode::Pass | Mode::Delay(_) => true,
            Mode::BlackHole | Mode::Refuse => false,
            Mode::BlockClientToTarget => direction == Direction::TargetToClient,
            Mode::BlockTargetToClient => direction == Direction::ClientToTarget,
        }
    }

    fn delay(self) -> Duration {
        match self {
            Mode::Delay(d) => d,
            _ => Duration::ZERO,
        }
    }
}

/// One direction of a proxied connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    ClientToTarget,
    TargetToClient,
}

struct Shared {
    mode: watch::Sender<Mode>,
    to_target_bytes: AtomicU64,
    to_client_bytes: AtomicU64,
    accepted: AtomicU64,
}

/// Switches a running proxy and reads its counters. Clone + Send + Sync; switching is cheap.
#[derive(Clone)]
pub struct ProxyHandle {
    shared: Arc<Shared>,
    listen: SocketAddr,
    target: SocketAddr,
}

impl std::fmt::Debug for ProxyHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "proxy {} -> {} ({:?})", self.listen, self.target, self.mode())
    }
}

impl ProxyHandle {
    /// Switches every connection, present and future, to `mode`.
    pub fn set(&self, mode: Mode) {
        self.shared.mode.send_replace(mode);
    }

    pub fn mode(&self) -> Mode {
        *self.shared.mode.borrow()
    }

    /// The address clients dial.
    pub fn addr(&self) -> SocketAddr {
        self.listen
    }

    /// Where the proxy forwards to.
    pub fn target(&self) -> SocketAddr {
        self.target
    }

    /// Bytes written to the target so far (client → target).
    pub fn to_target_bytes(&self) -> u64 {
        self.shared.to_target_bytes.load(Ordering::SeqCst)
    }

    /// Bytes written back to clients so far (target → client).
    pub fn to_client_bytes(&self) -> u64 {
        self.shared.to_client_bytes.load(Ordering::SeqCst)
    }

    /// Connections accepted and forwarded (refused ones do not count).
    pub fn connections(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    fn counter(&self, direction: Direction) -> &AtomicU64 {
        match direction {
            Direction::ClientToTarget => &self.shared.to_target_bytes,
            Direction::TargetToClient => &self.shared.to_client_bytes,
        }
    }
}

/// A running proxy; dropping it closes the listener and every connection.
pub struct Proxy {
    handle: ProxyHandle,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// Binds an ephemeral 127.0.0.1 port (one no node was given, `ports::bind_unhanded`) and forwards to `target`, starting in [`Mode::Pass`].
    pub fn start(target: SocketAddr) -> Result<Proxy> {
        let std_listener = crate::ports::bind_unhanded().context("binding a proxy port")?;
        std_listener.set_nonblocking(true)?;
        let listen = std_listener.local_addr()?;
        let (mode, _) = watch::channel(Mode::Pass);
        let shared = Arc::new(Shared {
            mode,
            to_target_bytes: AtomicU64::new(0),
            to_client_bytes: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
        });
        let handle = ProxyHandle { shared, listen, target };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (stop, stopped) = oneshot::channel();
        let accept_handle = handle.clone();
        let thread =
            std::thread::Builder::new().name(format!("proxy-{}", listen.port())).spawn(move || {
                runtime.block_on(async move {
                    let listener = match TcpListener::from_std(std_listener) {
                        Ok(l) => l,
                        Err(e) => return eprintln!("proxy {listen}: {e}"),
                    };
                    tokio::select! {
                        _ = stopped => {}
                        () = accept_loop(listener, accept_handle) => {}
                    }
                });
                // Dropping the runtime here cancels every connection task.
            })?;
        Ok(Proxy { handle, stop: Some(stop), thread: Some(thread) })
    }

    pub fn handle(&self) -> &ProxyHandle {
        &self.handle
    }

    pub fn addr(&self) -> SocketAddr {
        self.handle.listen
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(listener: TcpListener, handle: ProxyHandle) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        if handle.mode() == Mode::Refuse {
            reset(&client);
            continue;
        }
        tokio::spawn(connection(client, handle.clone()));
    }
}

/// Closing with SO_LINGER 0 sends a reset, as a refused or torn-down route would.
// Deprecated because a non-zero linger blocks the dropping thread; a zero one never does.
#[allow(deprecated)]
fn reset(stream: &TcpStream) {
    let _ = stream.set_linger(Some(Duration::ZERO));
}

async fn connection(client: TcpStream, handle: ProxyHandle) {
    let Ok(target) = TcpStream::connect(handle.target).await else {
        // The target is down: the client sees its connection reset, as it would dialling it.
        reset(&client);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = target.set_nodelay(true);
    handle.shared.accepted.fetch_add(1, Ordering::SeqCst);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut target_read, mut target_write) = target.into_split();
    let mut refused = handle.shared.mode.subscribe();
    let up = pump(&mut client_read, &mut target_write, Direction::ClientToTarget, &handle);
    let down = pump(&mut target_read, &mut client_write, Direction::TargetToClient, &handle);
    let was_refused = tokio::select! {
        _ = async { tokio::join!(up, down) } => false,
        _ = refused.wait_for(|m| *m == Mode::Refuse) => true,
    };
    if was_refused {
        reset(client_read.as_ref());
        reset(target_read.as_ref());
    }
}

/// Moves bytes one way until the source ends (then half-closes the destination) or either
/// side fails. A reader and a writer joined by a bounded queue, so a delay adds latency
/// without limiting throughput to a chunk per delay.
async fn pump(
    from: &mut tokio::net::tcp::OwnedReadHalf,
    to: &mut tokio::net::tcp::OwnedWriteHalf,
    direction: Direction,
    handle: &ProxyHandle,
) {
    let (queue, mut queued) = mpsc::channel::<(tokio::time::Instant, Vec<u8>)>(CHUNKS_IN_FLIGHT_MAX);
    let read = async move {
        let mut buf = vec![0u8; CHUNK_BYTES_MAX];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let due = tokio::time::Instant::now() + handle.mode().delay();
                    if queue.send((due, buf[..n].to_vec())).await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    let write = async move {
        let mut mode = handle.shared.mode.subscribe();
        while let Some((due, chunk)) = queued.recv().await {
            // Held, not dropped, while this direction is blocked (see the module docs).
            if mode.wait_for(|m| m.passes(direction)).await.is_err() {
                return;
            }
            tokio::time::sleep_until(due).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
            handle.counter(direction).fetch_add(chunk.len() as u64, Ordering::SeqCst);
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(read, write);
}

#[cfg(test)]
mod tests {
    use std::io::{ErrorKind, Read, Write};
    use std::net::TcpStream as StdStream;
    use std::time::Instant;

    use super::*;

    /// An echo server on an ephemeral port, on its own thread.
    fn echo_server() -> SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = stream.read(&mut buf) {
                        if n == 0 || stream.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    fn connect(proxy: &Proxy) -> StdStream {
        let stream = StdStream::connect(proxy.addr()).unwrap();
        stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        stream
    }

    fn echo(stream: &mut StdStream, bytes: &[u8]) -> std::io::Result<Vec<u8>> {
        stream.write_all(bytes)?;
        let mut back = vec![0u8; bytes.len()];
        stream.read_exact(&mut back)?;
        Ok(back)
    }

    fn is_timeout(e: &std::io::Error) -> bool {
        matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
    }

    #[test]
    fn pass_forwards_and_counts_both_ways() {
        let proxy = Proxy::start(echo_server()).unwrap();
        let mut stream = connect(&proxy);
        assert_eq!(echo(&mut stream, b"hello").unwrap(), b"hello");
        // Regression (CI, 97fc24e): a direction counts its bytes once written, and the client
        // may read them before that: (5, 0) was seen. Wait for the count, bounded.
        let counts = || (proxy.handle().to_target_bytes(), proxy.handle().to_client_bytes());
        let deadline = Instant::now() + Duration::from_secs(5);
        while counts() != (5, 5) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(counts(), (5, 5));
        assert_eq!(proxy.handle().connections(), 1);
    }

    #[test]
    fn black_hole_holds_bytes_on_an_open_connection_until_healed() {
        let proxy = Proxy::start(echo_server()).unwrap();
        let mut stream = connect(&proxy);
        echo(&mut stream, b"x").unwrap();
        proxy.handle().set(Mode::BlackHole);
        stream.write_all(b"held").unwrap();
        let mut buf = [0u8; 4];
        let e = stream.read_exact(&mut buf).unwrap_err();
        assert!(is_timeout(&e), "nothing arrives, the connection stays open: {e}");
        assert_eq!(proxy.handle().to_target_bytes(), 1, "nothing reached the target");
        // A new connection is accepted, and black-holed too.
        let mut other = connect(&proxy);
        assert!(echo(&mut other, b"y").is_err_and(|e| is_timeout(&e)));
        proxy.handle().set(Mode::Pass);
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stream.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"held", "held bytes are delivered after the heal, as TCP would");
    }

    #[test]
    fn one_way_blocks_only_its_direction() {
        let proxy = Proxy::start(echo_server()).unwrap();
        let mut stream = connect(&proxy);
        proxy.handle().set(Mode::BlockTargetToClient);
        stream.write_all(b"abc").unwrap();
        let mut buf = [0u8; 3];
        assert!(stream.read_exact(&mut buf).is_err_and(|e| is_timeout(&e)));
        let deadline = Instant::now() + Duration::from_secs(10);
        while proxy.handle().to_target_bytes() < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(proxy.handle().to_target_bytes(), 3, "client → target passes");
        assert_eq!(proxy.handle().to_client_bytes(), 0, "target → client is held");

        proxy.handle().set(Mode::BlockClientToTarget);
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stream.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"abc", "the echo held on the way back now passes");
        stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        assert!(echo(&mut stream, b"d").is_err_and(|e| is_timeout(&e)));
        assert_eq!(proxy.handle().to_target_bytes(), 3, "client → target is held");
    }

    #[test]
    fn delay_postpones_each_chunk() {
        let proxy = Proxy::start(echo_server()).unwrap();
        let mut stream = connect(&proxy);
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let delay = Duration::from_millis(150);
        proxy.handle().set(Mode::Delay(delay));
        let started = Instant::now();
        assert_eq!(echo(&mut stream, b"slow").unwrap(), b"slow");
        // Delayed once on the way there and once on the way back: a lower bound, not a timing
        // threshold on the machine's speed.
        assert!(started.elapsed() >= 2 * delay, "round trip took {:?}", started.elapsed());
    }

    #[test]
    fn refuse_closes_open_connections_and_resets_new_ones() {
        let proxy = Proxy::start(echo_server()).unwrap();
        let mut stream = connect(&proxy);
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        echo(&mut stream, b"x").unwrap();
        proxy.handle().set(Mode::Refuse);
        let mut buf = [0u8; 1];
        match stream.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => panic!("read {n} bytes from a refused connection"),
            Err(e) => assert!(!is_timeout(&e), "the connection must be closed, not silent: {e}"),
        }
        let mut fresh = StdStream::connect(proxy.addr()).unwrap();
        fresh.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = fresh.write_all(b"y");
        match fresh.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => panic!("read {n} bytes through a refusing proxy"),
            Err(e) => assert!(!is_timeout(&e), "a new connection must be reset: {e}"),
        }
        assert_eq!(proxy.handle().connections(), 1, "the refused one was never forwarded");
        proxy.handle().set(Mode::Pass);
        let mut again = connect(&proxy);
        again.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert_eq!(echo(&mut again, b"z").unwrap(), b"z");
    }
}

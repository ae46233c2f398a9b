//! Ports for the nodes a test starts: chosen outside the kernel's ephemeral range and reserved
//! across test processes, so a port stays the node's while it is down between a kill and a
//! restart.
//!
//! Regression (CI, `raft_peer_auth`): ports were the kernel's ephemeral ones (`bind :0`). A
//! node killed and restarted on its ports leaves them free for a moment, and any outgoing
//! connection on the machine (the other test binary's Java client, say) may be given one of
//! them as its local port; the restarted node then fails to bind and its admin API never
//! answers. Outgoing connections take their local port from `ip_local_port_range` only, so a
//! port below it is safe from them; other test processes choosing ports are kept off by a
//! lock file per port, held (`flock`) for the life of the process that chose it, and released
//! by the kernel however that process ends.

use std::fs::File;
use std::net::TcpListener;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{bail, Context, Result};

/// The ports, within each thousand, that the repository's fixed-port runs use: every script
/// and fixture with a base port puts it at N092 (`scripts/compat.sh` 19092, 22092, 26092; the
/// upgrade fixture's 27092; the benches' 19x92, 29x92, …) and its nodes' ports at +0…+2
/// (Kafka), +100… (Raft), +200… (admin), +300… (extra listeners). Never handed out, so a
/// script run beside a test cannot find its port taken.
const FIXED_IN_EACH_THOUSAND: Range<u16> = 92..500;
/// The lowest port handed out: above the well-known and registered services a developer's
/// machine may run (Kafka on 9092, ZooKeeper on 2181, …).
const POOL_START: u16 = 20000;
/// The fewest ports below the ephemeral range worth a pool; with fewer, the ports are the
/// kernel's ephemeral ones, as before.
const POOL_MIN: usize = 2000;

/// Ports this process handed out, each with its lock file (open and locked until the process
/// exits; none for an ephemeral port of [`ephemeral_ports`]).
static RESERVED: Mutex<Vec<(u16, Option<File>)>> = Mutex::new(Vec::new());
/// Where the next search of the pool starts, so one process does not retry the same ports.
static NEXT: Mutex<usize> = Mutex::new(usize::MAX);

/// A port that was free a moment ago (the broker binds it next) and is this process's alone.
pub fn free_port() -> Result<u16> {
    Ok(free_ports(1)?[0])
}

/// `count` distinct ports, each free a moment ago and reserved for this process. Regression:
/// two tests of one binary start clusters in parallel; a port handed to the first but not yet
/// bound went to the second too (java_consumer_group produced into the wrong cluster): a
/// reserved port is never handed out again.
pub fn free_ports(count: usize) -> Result<Vec<u16>> {
    let pool = pool();
    if pool.len() < POOL_MIN {
        return ephemeral_ports(count);
    }
    let mut reserved = RESERVED.lock().unwrap_or_else(|e| e.into_inner());
    let mut next = NEXT.lock().unwrap_or_else(|e| e.into_inner());
    if *next == usize::MAX {
        *next = std::process::id() as usize * 97 % pool.len();
    }
    let mut ports = Vec::with_capacity(count);
    for _ in 0..pool.len() {
        if ports.len() == count {
            return Ok(ports);
        }
        let port = pool[*next % pool.len()];
        *next += 1;
        if reserved.iter().any(|(p, _)| *p == port) {
            continue;
        }
        if let Some(lock) = reserve(port)? {
            reserved.push((port, Some(lock)));
            ports.push(port);
        }
    }
    if ports.len() == count {
        return Ok(ports);
    }
    bail!("no {count} free ports left in {} candidates", pool.len())
}

/// A listener on an ephemeral 127.0.0.1 port, kept bound (a harness proxy). Ephemeral ports
/// are never in the pool nodes get theirs from, so a proxy cannot take a node's port.
pub fn bind_unhanded() -> Result<TcpListener> {
    Ok(TcpListener::bind("127.0.0.1:0")?)
}

/// The candidate ports: from [`POOL_START`] up to the ephemeral range, without the ones
/// fixed-port runs use.
fn pool() -> Vec<u16> {
    let ephemeral_low = ephemeral_range().map_or(32768, |r| r.start);
    (POOL_START..ephemeral_low).filter(|p| !FIXED_IN_EACH_THOUSAND.contains(&(p % 1000))).collect()
}

/// The kernel's `ip_local_port_range`, when it can be read.
fn ephemeral_range() -> Option<Range<u16>> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut bounds = text.split_whitespace().map(|n| n.parse::<u16>());
    let (low, high) = (bounds.next()?.ok()?, bounds.next()?.ok()?);
    Some(low..high.saturating_add(1))
}

/// Locks `port`'s file and checks the port binds: `Some(lock)` when both hold, `None` when
/// another process holds the lock or the port.
fn reserve(port: u16) -> Result<Option<File>> {
    let dir = lock_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(port.to_string());
    let file = File::options().create(true).truncate(false).write(true).open(&path)?;
    // SAFETY: flock on a descriptor this function owns; non-blocking, so it returns at once.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    if !locked || TcpListener::bind(("127.0.0.1", port)).is_err() {
        return Ok(None);
    }
    Ok(Some(file))
}

/// The lock files' directory: one per machine, whatever `TMPDIR` each test process has.
fn lock_dir() -> PathBuf {
    PathBuf::from("/tmp/onelog-test-ports")
}

/// `count` distinct ephemeral ports, bound at once then released (a machine whose ephemeral
/// range leaves no pool below it).
fn ephemeral_ports(count: usize) -> Result<Vec<u16>> {
    let mut reserved = RESERVED.lock().unwrap_or_else(|e| e.into_inner());
    let mut held = Vec::new();
    let mut ports = Vec::with_capacity(count);
    while ports.len() < count {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        if !reserved.iter().any(|(p, _)| *p == port) {
            reserved.push((port, None));
            ports.push(port);
        }
        held.push(listener);
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_below_the_ephemeral_range_and_never_handed_out_twice() {
        let first = free_ports(20).expect("ports");
        let second = free_ports(20).expect("ports");
        let ephemeral = ephemeral_range().expect("ip_local_port_range");
        for port in first.iter().chain(&second) {
            assert!(!ephemeral.contains(port), "port {port} is in the ephemeral range {ephemeral:?}");
            assert!(!FIXED_IN_EACH_THOUSAND.contains(&(port % 1000)), "port {port} is a fixed-port run's");
            assert!(!second.contains(port) || !first.contains(port), "port {port} handed out twice");
        }
    }

    #[test]
    fn a_port_locked_by_another_holder_is_skipped() {
        let port = free_port().expect("a port");
        assert!(reserve(port).expect("reserving").is_none(), "a second lock on {port} was granted");
    }

    /// A proxy's port is never one just handed out for a node, and never handed out after.
    #[test]
    fn bind_unhanded_never_returns_a_port_free_ports_handed_out() {
        let for_nodes = free_ports(64).expect("ports");
        let proxies: Vec<TcpListener> = (0..64).map(|_| bind_unhanded().expect("a proxy port")).collect();
        let proxy_ports: Vec<u16> = proxies.iter().map(|l| l.local_addr().expect("addr").port()).collect();
        assert!(proxy_ports.iter().all(|p| !for_nodes.contains(p)), "{proxy_ports:?} / {for_nodes:?}");
        drop(proxies);
        let later = free_ports(64).expect("ports");
        assert!(later.iter().all(|p| !proxy_ports.contains(p)));
    }
}

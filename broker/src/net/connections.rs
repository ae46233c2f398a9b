//! Who may hold a Kafka connection: `max.connections`, `max.connections.per.ip`, and the open
//! files limit of the process.
//!
//! Over either limit the newest connection is accepted and closed at once, as Kafka does for
//! `max.connections.per.ip` (its acceptor blocks instead for `max.connections`; onelog closes
//! there too, so the client sees a prompt close and retries with its reconnect backoff instead
//! of waiting in the kernel's backlog behind connections that may never leave).
//!
//! The total is further capped below the open files limit (RLIMIT_NOFILE, whose soft limit is
//! first raised to the hard one, as the JVM does for Kafka): partition segments, the Raft log
//! and peer connections need descriptors too, and a node that cannot open a segment file
//! stops. Clients can therefore never take the descriptors the node needs (issue 13: with
//! `ulimit -n 256` a node exited at 238 connections).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::incidents::STATS;
use crate::limits::{OPEN_FILES_RESERVED_FRACTION, OPEN_FILES_RESERVED_MIN};

/// Open connections, in total and per client address.
pub struct Connections {
    total_max: usize,
    per_ip_max: usize,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `max.connections` (or the open files cap) reached.
    Total(usize),
    /// `max.connections.per.ip` reached for this address.
    PerIp(usize),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Total(max) => write!(f, "{max} connections open (max.connections / open files limit)"),
            Refusal::PerIp(max) => {
                write!(f, "{max} connections open from this address (max.connections.per.ip)")
            }
        }
    }
}

/// A connection's place in the count; leaving it frees the place.
pub struct Slot {
    connections: Arc<Connections>,
    ip: IpAddr,
}

impl Connections {
    pub fn new(total_max: usize, per_ip_max: usize) -> Arc<Self> {
        Arc::new(Connections { total_max, per_ip_max, open: Mutex::default() })
    }

    pub fn total_max(&self) -> usize {
        self.total_max
    }

    /// Counts a new connection from `ip`, or says which limit it is over.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Slot, Refusal> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.total >= self.total_max {
            return Err(Refusal::Total(self.total_max));
        }
        let from_ip = open.per_ip.entry(ip).or_insert(0);
        if *from_ip >= self.per_ip_max {
            return Err(Refusal::PerIp(self.per_ip_max));
        }
        *from_ip += 1;
        open.total += 1;
        STATS.connections_open.fetch_add(1, Ordering::Relaxed);
        Ok(Slot { connections: self.clone(), ip })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.connections.open.lock().unwrap_or_else(|e| e.into_inner());
        open.total -= 1;
        if let Some(n) = open.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.per_ip.remove(&self.ip);
            }
        }
        STATS.connections_open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The connections the open files limit leaves room for, after raising the soft limit to the
/// hard one; `None` if the limit cannot be read.
pub fn open_files_allow() -> Option<usize> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
        // SAFETY: setrlimit reads one rlimit struct we own; failure leaves the limit as it was.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    Some(connections_within(limit.rlim_cur))
}

/// Connections allowed under a soft open files limit of `soft`.
fn connections_within(soft: libc::rlim_t) -> usize {
    let soft = usize::try_from(soft).unwrap_or(usize::MAX);
    // Under a tiny limit the floor would leave no room at all: keep at most half for the node.
    let reserved = (soft / OPEN_FILES_RESERVED_FRACTION).max(OPEN_FILES_RESERVED_MIN).min(soft / 2);
    soft - reserved
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_ip_and_total_limits_free_their_place_on_drop() {
        let connections = Connections::new(3, 2);
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let a1 = connections.admit(a).expect("first from a");
        let _a2 = connections.admit(a).expect("second from a");
        assert_eq!(connections.admit(a).err(), Some(Refusal::PerIp(2)));
        let _b1 = connections.admit(b).expect("first from b");
        assert_eq!(connections.admit(b).err(), Some(Refusal::Total(3)));
        drop(a1);
        connections.admit(b).expect("a place freed");
    }

    #[test]
    fn open_files_keep_a_reserve_for_the_node() {
        assert_eq!(connections_within(256), 192);
        assert_eq!(connections_within(100), 50);
        assert_eq!(connections_within(24), 12);
        assert_eq!(connections_within(0), 0);
        assert_eq!(connections_within(1 << 20), 786_432);
    }
}

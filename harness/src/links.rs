//! The network between a cluster's nodes, made of fault-injecting proxies (`netproxy`):
//! one per DIRECTED Raft link i→j (node i dials peer j through it, by the broker's test-only
//! `ONELOG_RAFT_DIAL`) and one in front of each node's Kafka listener, which is also the
//! address the node advertises, so stock clients go through it after bootstrap too.
//!
//! Link i→j carries i's requests to j and j's answers to i on the connections i opens. The
//! faults compose from per-direction blocks on these proxies: a partition black-holes both
//! directions of every link between two groups; `one_way(a, b)` holds what a sends to b (a's
//! requests on link a→b and a's answers on link b→a) and lets b's bytes through.
//!
//! Enabled by `ClusterOptions::link_proxies`; the `Cluster` methods `partition`, `isolate`,
//! `one_way`, `heal`, `delay_link`, `raft_link` and `client_link` act on it. Nodes added later
//! with `spawn_joining_node` are dialled directly.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::netproxy::{Mode, Proxy, ProxyHandle};

pub struct Links {
    raft: BTreeMap<(u64, u64), Proxy>,
    client: BTreeMap<u64, Proxy>,
}

impl Links {
    /// Proxies for every directed link between `nodes` (id → (Raft, Kafka) listener) and one
    /// in front of each Kafka listener, all passing.
    pub fn new(nodes: &BTreeMap<u64, (SocketAddr, SocketAddr)>) -> Result<Links> {
        let mut raft = BTreeMap::new();
        let mut client = BTreeMap::new();
        for (&from, _) in nodes.iter() {
            for (&to, &(to_raft, _)) in nodes.iter().filter(|(to, _)| **to != from) {
                raft.insert((from, to), Proxy::start(to_raft)?);
            }
        }
        for (&id, &(_, kafka)) in nodes {
            client.insert(id, Proxy::start(kafka)?);
        }
        Ok(Links { raft, client })
    }

    /// The `ONELOG_RAFT_DIAL` value for node `id`: each peer's link proxy.
    pub fn dial_env(&self, id: u64) -> Option<String> {
        let pairs: Vec<String> = self
            .raft
            .iter()
            .filter(|((from, _), _)| *from == id)
            .map(|((_, to), proxy)| format!("{to}={}", proxy.addr()))
            .collect();
        (!pairs.is_empty()).then(|| pairs.join(","))
    }

    /// The proxy of the directed Raft link `from`→`to`.
    pub fn raft(&self, from: u64, to: u64) -> Result<&ProxyHandle> {
        self.raft.get(&(from, to)).map(Proxy::handle).with_context(|| format!("no Raft link {from}->{to}"))
    }

    /// The proxy in front of node `id`'s Kafka listener.
    pub fn client(&self, id: u64) -> Result<&ProxyHandle> {
        self.client.get(&id).map(Proxy::handle).with_context(|| format!("no client link for node {id}"))
    }

    /// Black-holes both directions between nodes of different groups; links inside a group
    /// pass. A node named in no group is alone.
    pub fn partition(&self, groups: &[&[u64]]) -> Result<()> {
        let group_of = |id: u64| groups.iter().position(|g| g.contains(&id));
        for id in groups.iter().flat_map(|g| g.iter()) {
            if !self.client.contains_key(id) {
                bail!("partition: no node {id}");
            }
        }
        for (&(from, to), proxy) in &self.raft {
            let together = group_of(from).is_some() && group_of(from) == group_of(to);
            proxy.handle().set(if together { Mode::Pass } else { Mode::BlackHole });
        }
        Ok(())
    }

    /// Cuts node `id` from every peer, both ways; other links are left as they are.
    pub fn isolate(&self, id: u64) -> Result<()> {
        self.client(id)?;
        for (_, proxy) in self.raft.iter().filter(|((from, to), _)| *from == id || *to == id) {
            proxy.handle().set(Mode::BlackHole);
        }
        Ok(())
    }

    /// Holds every byte `from` sends to `to`; `to`'s bytes still reach `from`. Adds to what is
    /// already blocked.
    pub fn one_way(&self, from: u64, to: u64) -> Result<()> {
        block(self.raft(from, to)?, true, false);
        block(self.raft(to, from)?, false, true);
        Ok(())
    }

    /// Delays both directions of link `from`→`to` by `delay` per chunk.
    pub fn delay(&self, from: u64, to: u64, delay: Duration) -> Result<()> {
        self.raft(from, to)?.set(Mode::Delay(delay));
        Ok(())
    }

    /// Every Raft and client link passes again.
    pub fn heal(&self) {
        for proxy in self.raft.values().chain(self.client.values()) {
            proxy.handle().set(Mode::Pass);
        }
    }
}

/// Adds blocks to a link's current mode (a delay is replaced by the block).
fn block(link: &ProxyHandle, client_to_target: bool, target_to_client: bool) {
    let (c2t, t2c) = match link.mode() {
        Mode::Pass | Mode::Delay(_) => (false, false),
        Mode::BlackHole | Mode::Refuse => (true, true),
        Mode::BlockClientToTarget => (true, false),
        Mode::BlockTargetToClient => (false, true),
    };
    link.set(Mode::blocking(c2t || client_to_target, t2c || target_to_client));
}

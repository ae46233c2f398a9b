//! Who leads the Raft groups this node is not a voter of (issue 32): with more nodes than a
//! group's replication factor, a node runs only some groups, yet its Metadata must name every
//! partition's leader, as any Kafka broker does from its metadata cache.
//!
//! Once a second (every 100 ms until one has answered), for each such group, the node asks
//! the group's voters how much of its log they hold (`LogState`, the query a rejoining node
//! makes, over the node's kept connection to each peer): the id of a voter's last entry names
//! the leader that wrote it, and a leader writes an entry as soon as it is elected, so the
//! answer with the highest term names the group's current leader, or its last one while an
//! election runs. What it learnt stays until a newer term replaces it; a node that hears from
//! no voter keeps the last answer, as a Kafka broker keeps a stale metadata cache. Start-up
//! waits to have heard of every group (bounded) before the Kafka listener opens, as a Kafka
//! broker serves once its metadata has caught up: a client's first Metadata then names every
//! partition's leader.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use onelog_state::xgroup::placement::Layout;

use super::transport::log_state;
use super::transport::peers::Peers;
use super::NodeAddr;
use crate::limits;

/// A group's leader as its voters last told this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteLeader {
    pub leader: u64,
    pub term: u64,
    /// The group's voters as placed, preferred leader first.
    pub voters: Vec<u64>,
}

/// The leaders of the groups this node does not run, by group.
#[derive(Clone, Default)]
pub struct RemoteLeaders {
    known: Arc<RwLock<BTreeMap<u32, RemoteLeader>>>,
    /// The groups asked about: every group this node is not a voter of.
    watched: Arc<Vec<u32>>,
}

impl RemoteLeaders {
    pub fn get(&self, group: u32) -> Option<RemoteLeader> {
        self.known.read().unwrap_or_else(|poisoned| poisoned.into_inner()).get(&group).cloned()
    }

    /// Keeps `heard` unless a leader of a newer term is known already.
    fn learn(&self, group: u32, heard: RemoteLeader) {
        let mut known = self.known.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        if known.get(&group).is_none_or(|k| k.term <= heard.term) {
            known.insert(group, heard);
        }
    }

    /// The watched groups whose leader no voter has named yet.
    fn unheard(&self) -> Vec<u32> {
        self.watched.iter().copied().filter(|g| self.get(*g).is_none()).collect()
    }

    /// Waits until every watched group's leader is known or `patience` has passed (start-up,
    /// before the Kafka listener opens: `limits::REMOTE_LEADER_STARTUP_WAIT_MS`); returns the
    /// groups still unheard of.
    pub async fn wait_heard_of_all(&self, patience: Duration) -> Vec<u32> {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let unheard = self.unheard();
            if unheard.is_empty() || tokio::time::Instant::now() >= deadline {
                return unheard;
            }
            tokio::time::sleep(Duration::from_millis(limits::REMOTE_LEADER_UNKNOWN_RETRY_MS / 2)).await;
        }
    }
}

/// Starts asking, for each group of `layout` whose voters do not name `me`, its voters at the
/// addresses in `members`. Nothing runs with one group, or when this node runs every group.
pub fn start(
    peers: &Arc<Peers>,
    members: &BTreeMap<u64, NodeAddr>,
    layout: &Layout,
    me: u64,
) -> RemoteLeaders {
    let watches: Vec<Watch> = (layout.voters.iter().enumerate().skip(1))
        .filter(|(_, voters)| !voters.contains(&me))
        .map(|(group, voters)| {
            let addrs: Vec<(u64, String)> =
                voters.iter().filter_map(|v| Some((*v, members.get(v)?.raft.clone()))).collect();
            Watch { group: group as u32, voters: voters.clone(), addrs, peers: peers.clone(), me }
        })
        .collect();
    let watched = Arc::new(watches.iter().map(|w| w.group).collect());
    let leaders = RemoteLeaders { watched, ..Default::default() };
    for watch in watches {
        tokio::spawn(watch.run(leaders.clone()));
    }
    leaders
}

struct Watch {
    group: u32,
    voters: Vec<u64>,
    addrs: Vec<(u64, String)>,
    peers: Arc<Peers>,
    me: u64,
}

impl Watch {
    async fn run(self, leaders: RemoteLeaders) {
        let ttl = Duration::from_millis(limits::REMOTE_LEADER_ASK_TIMEOUT_MS);
        loop {
            let heard = self.ask_voters(ttl).await;
            let interval = match heard {
                Some(heard) => {
                    leaders.learn(self.group, heard);
                    limits::REMOTE_LEADER_CHECK_INTERVAL_MS
                }
                None if leaders.get(self.group).is_none() => limits::REMOTE_LEADER_UNKNOWN_RETRY_MS,
                None => limits::REMOTE_LEADER_CHECK_INTERVAL_MS,
            };
            tokio::time::sleep(Duration::from_millis(interval)).await;
        }
    }

    /// The leader of the newest term any voter's last entry names.
    async fn ask_voters(&self, ttl: Duration) -> Option<RemoteLeader> {
        let mut newest: Option<(u64, u64)> = None;
        for (target, addr) in &self.addrs {
            let peer = self.peers.get(*target, addr);
            let Some(state) = log_state::ask_peer(&peer, self.me, ttl, self.group).await else { continue };
            // Term 0 is the entry that initialized the group, which no leader wrote (it names
            // node 0): the group has not elected its first leader yet.
            let Some(last) = state.last_log_id.filter(|id| id.leader_id.term > 0) else { continue };
            let (term, leader) = (last.leader_id.term, last.leader_id.node_id);
            if newest.is_none_or(|(t, _)| t < term) {
                newest = Some((term, leader));
            }
        }
        let (term, leader) = newest?;
        Some(RemoteLeader { leader, term, voters: self.voters.clone() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_term_replaces_an_older_one_never_the_reverse() {
        let leaders = RemoteLeaders::default();
        let heard = |leader, term| RemoteLeader { leader, term, voters: vec![3, 4, 5] };
        leaders.learn(2, heard(3, 4));
        leaders.learn(2, heard(4, 3));
        assert_eq!(leaders.get(2), Some(heard(3, 4)), "a voter behind the others does not move it back");
        leaders.learn(2, heard(5, 6));
        assert_eq!(leaders.get(2), Some(heard(5, 6)));
        assert_eq!(leaders.get(1), None);
    }
}

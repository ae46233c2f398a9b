//! The node's connections to its peers, one per peer, shared by openraft's network
//! (`raft::network`) and by forwarding to the leader (`envelope::send`): a forwarded request
//! rides the connection replication already keeps open and authenticated, instead of a new
//! TCP connection and handshake per request. Requests on a connection are matched to their
//! responses by id and served concurrently, so a forwarded request waiting for its commit
//! holds up no Raft RPC.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::auth::Identity;
use super::client::Peer;

pub struct Peers {
    identity: Identity,
    by_id: Mutex<BTreeMap<u64, Arc<Peer>>>,
}

impl Peers {
    /// The connections of the node `identity` names, which their handshakes prove.
    pub fn new(identity: Identity) -> Arc<Peers> {
        Arc::new(Peers { identity, by_id: Mutex::default() })
    }

    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Whether a response from node `target` arrived within `window` (see `client::Heard`).
    pub fn answered_within(&self, target: u64, window: Duration) -> bool {
        let by_id = self.by_id.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        by_id.get(&target).is_some_and(|peer| peer.answered_within(window))
    }

    /// The connection to node `target` at `addr` (a test's proxy for the link, if it routes
    /// one): the one kept open, or a new one for a new target or one the membership moved (the
    /// old connection goes when its last user drops it).
    pub fn get(&self, target: u64, addr: &str) -> Arc<Peer> {
        let addr = crate::fault::raft_dial(target).unwrap_or_else(|| addr.to_string());
        let mut by_id = self.by_id.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match by_id.get(&target) {
            Some(peer) if peer.addr() == addr => peer.clone(),
            _ => {
                let peer = Arc::new(Peer::new(self.identity.clone(), target, addr));
                by_id.insert(target, peer.clone());
                peer
            }
        }
    }
}

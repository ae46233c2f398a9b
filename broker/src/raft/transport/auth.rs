//! Who may speak on the Raft port: a mutual challenge–response on every new connection,
//! keyed by the cluster secret (`onelog.cluster.secret.file`), before any frame is decoded.
//!
//! ```text
//!   client → Hello      { protocol_version, node_id: the node it dials, from: its own id, nonce_c }
//!   server → Challenge  { protocol_version, node_id, nonce_s, proof_s = HMAC(key, "server" | nonce_c | nonce_s | node_id | from) }
//!   client → Auth       { proof_c = HMAC(key, "client" | nonce_s | nonce_c | from | node_id) }
//! ```
//!
//! Each side proves it holds the key over the other's fresh nonce, so a recorded exchange
//! cannot be replayed; HMAC-SHA256 (the `hmac` and `sha2` crates) with a constant-time
//! comparison. The server then takes every request on the connection as from `from`, and
//! refuses one that names another sender. Without a secret both sides use the empty key: the
//! handshake still runs (and a node with a secret refuses one without), but anyone who speaks
//! the protocol gets in; start-up warns about it.

use std::sync::Arc;

use hmac::{Hmac, Mac};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

pub type Nonce = [u8; 32];
pub type Proof = [u8; 32];

/// This node's id, the cluster secret and, with `onelog.raft.ssl.*`, its certificate, for
/// both ends of the transport.
#[derive(Clone, Debug)]
pub struct Identity {
    pub node_id: u64,
    key: Option<Arc<[u8]>>,
    tls: Option<Arc<super::tls::RaftTls>>,
}

impl Identity {
    pub fn new(node_id: u64, key: Option<Arc<[u8]>>) -> Self {
        Identity { node_id, key, tls: None }
    }

    /// The same identity, its connections in mutual TLS (`tls`).
    pub fn with_tls(self, tls: Arc<super::tls::RaftTls>) -> Self {
        Identity { tls: Some(tls), ..self }
    }

    /// The Raft port's TLS, when configured.
    pub fn tls(&self) -> Option<&super::tls::RaftTls> {
        self.tls.as_deref()
    }

    pub fn has_secret(&self) -> bool {
        self.key.is_some()
    }

    fn mac(&self, role: &[u8], first: &Nonce, second: &Nonce, a: u64, b: u64) -> HmacSha256 {
        let key: &[u8] = self.key.as_deref().unwrap_or_default();
        // HMAC takes a key of any length.
        let mut mac = HmacSha256::new_from_slice(key).expect("HMAC accepts any key length");
        mac.update(role);
        mac.update(first);
        mac.update(second);
        mac.update(&a.to_le_bytes());
        mac.update(&b.to_le_bytes());
        mac
    }

    /// The server's proof: over the client's nonce, then its own.
    pub fn server_proof(&self, nonce_c: &Nonce, nonce_s: &Nonce, server: u64, client: u64) -> Proof {
        self.mac(b"onelog-raft-server", nonce_c, nonce_s, server, client).finalize().into_bytes().into()
    }

    /// The client's proof: over the server's nonce, then its own.
    pub fn client_proof(&self, nonce_s: &Nonce, nonce_c: &Nonce, client: u64, server: u64) -> Proof {
        self.mac(b"onelog-raft-client", nonce_s, nonce_c, client, server).finalize().into_bytes().into()
    }

    /// Constant-time check of a server's proof.
    pub fn verify_server(
        &self,
        proof: &Proof,
        nonce_c: &Nonce,
        nonce_s: &Nonce,
        server: u64,
        client: u64,
    ) -> bool {
        self.mac(b"onelog-raft-server", nonce_c, nonce_s, server, client).verify_slice(proof).is_ok()
    }

    /// Constant-time check of a client's proof.
    pub fn verify_client(
        &self,
        proof: &Proof,
        nonce_s: &Nonce,
        nonce_c: &Nonce,
        client: u64,
        server: u64,
    ) -> bool {
        self.mac(b"onelog-raft-client", nonce_s, nonce_c, client, server).verify_slice(proof).is_ok()
    }
}

pub fn nonce() -> Nonce {
    let mut nonce = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut nonce);
    nonce
}

/// First frame, client to server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol_version: u32,
    /// The node the client means to reach: a stale address now serving another node is
    /// refused (openraft: "ensure connection to the correct node").
    pub node_id: u64,
    /// The client's own node id.
    pub from: u64,
    pub nonce: Nonce,
}

/// Server to client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    pub protocol_version: u32,
    pub node_id: u64,
    pub nonce: Nonce,
    pub proof: Proof,
}

/// Client to server; after it, request frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Auth {
    pub proof: Proof,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_verify_only_with_the_same_key_nonces_and_ids() {
        let ours = Identity::new(1, Some(Arc::from(&b"a cluster secret of some length"[..])));
        let other = Identity::new(2, Some(Arc::from(&b"another secret entirely, not ours"[..])));
        let none = Identity::new(3, None);
        let (nc, ns) = (nonce(), nonce());
        let proof = ours.server_proof(&nc, &ns, 1, 2);
        assert!(ours.verify_server(&proof, &nc, &ns, 1, 2));
        assert!(!other.verify_server(&proof, &nc, &ns, 1, 2), "another key");
        assert!(!none.verify_server(&proof, &nc, &ns, 1, 2), "no key");
        assert!(!ours.verify_server(&proof, &ns, &nc, 1, 2), "nonces swapped");
        assert!(!ours.verify_server(&proof, &nc, &ns, 1, 3), "another client id");
        assert!(!ours.verify_client(&proof, &nc, &ns, 1, 2), "a server proof is no client proof");
        let empty = none.client_proof(&ns, &nc, 3, 1);
        assert!(Identity::new(1, None).verify_client(&empty, &ns, &nc, 3, 1), "no key on both sides");
    }
}

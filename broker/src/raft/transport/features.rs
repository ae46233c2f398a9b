//! Asking a peer which feature levels its build supports, before the leader finalizes one
//! (KIP-584's broker registration, for a cluster whose members are its Raft peers).
//!
//! Its own frame kind on a connection of its own: a node of onelog 0.1.0 does not know the
//! kind and closes the connection, which is its answer ("a build that cannot apply feature
//! updates"), without disturbing the connection replication runs on.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::auth::Identity;
use super::client::Peer;
use super::codec::{self, Kind};
use crate::limits;
use crate::upgrade;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FeaturesQuery {
    pub from: u64,
}

/// A build's supported levels: (name, min, max), as `upgrade::SUPPORTED`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SupportedFeatures {
    /// The build's release, for messages ("node 3 (onelog 0.2.0) only supports …").
    pub release: String,
    pub features: Vec<(String, i16, i16)>,
}

impl SupportedFeatures {
    /// This build's.
    pub fn local() -> Self {
        SupportedFeatures {
            release: upgrade::RELEASE.to_string(),
            features: upgrade::SUPPORTED.iter().map(|(n, min, max)| (n.to_string(), *min, *max)).collect(),
        }
    }

    /// The range of `name`; `0..=0` when the build does not know it.
    pub fn range(&self, name: &str) -> (i16, i16) {
        self.features.iter().find(|(n, _, _)| n == name).map_or((0, 0), |(_, min, max)| (*min, *max))
    }
}

/// Peer side.
pub fn on_features(query: &FeaturesQuery) -> SupportedFeatures {
    tracing::debug!(from = query.from, "a peer asks which feature levels this build supports");
    SupportedFeatures::local()
}

/// Asks `target` at `addr` once, waiting at most `ttl`; `Err` says why there is no answer.
pub async fn ask(
    identity: &Identity,
    target: u64,
    addr: &str,
    ttl: Duration,
) -> Result<SupportedFeatures, String> {
    let addr = crate::fault::raft_dial(target).unwrap_or_else(|| addr.to_string());
    let peer = Peer::new(identity.clone(), target, addr);
    let request_id = peer.next_request_id();
    let query = FeaturesQuery { from: identity.node_id };
    let frame = codec::encode(Kind::Features, request_id, &query, limits::RAFT_FRAME_BYTES_MAX)
        .map_err(|e| e.to_string())?;
    let response = peer.call(request_id, frame, ttl).await.map_err(|e| format!("{e:?}"))?;
    response.decode_body::<SupportedFeatures>().map_err(|e| e.to_string())
}

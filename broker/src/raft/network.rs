//! openraft's view of the Raft transport: the network factory and the per-target client,
//! mapping each call onto a framed request over the peer's connection (see [`transport`]) and
//! each failure onto the `RPCError` variant openraft acts on:
//!
//! - `Unreachable`: no connection could be made; openraft backs off before retrying.
//! - `Timeout`: no response within the RPC's `hard_ttl`; the response, if it comes, is dropped.
//! - `Network`: the connection broke with the request outstanding, or the response did not
//!   decode; retried at once (on a new connection).
//! - `RemoteError`: the peer's `Raft` returned an error, carried back as data.
//! - `PayloadTooLarge`: an AppendEntries over its byte limit; openraft resends fewer entries.
//!
//! [`transport`]: super::transport

use std::sync::Arc;

use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError, Timeout,
    Unreachable,
};
use openraft::network::{RPCOption, RPCTypes, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::AnyError;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::transport::auth::Identity;
use super::transport::client::{CallError, Peer};
use super::transport::codec::{self, Kind};
use super::transport::peers::Peers;
use super::transport::transfer::LeaderTransfer;
use super::{NodeAddr, TypeConfig};
use crate::limits;

type RpcResult<T, E = RaftError<u64>> = Result<T, RPCError<u64, NodeAddr, E>>;

/// The network factory one `Raft` owns: one [`Peer`] (one connection) per target node, from
/// the node's [`Peers`], which forwarding and the node's other Raft groups share.
pub struct Network {
    peers: Arc<Peers>,
    transfer: Arc<LeaderTransfer>,
    /// The Raft group whose requests this factory sends (`codec::encode_for`).
    group: u32,
}

impl Network {
    /// The factory of the node `identity` names, holding the cluster secret its handshakes use;
    /// `transfer` is that node's leadership transfer, which withholds its AppendEntries.
    pub fn new(identity: Identity, transfer: Arc<LeaderTransfer>) -> Self {
        Network::with_peers(Peers::new(identity), transfer)
    }

    /// The factory over connections the node shares with forwarding.
    pub fn with_peers(peers: Arc<Peers>, transfer: Arc<LeaderTransfer>) -> Self {
        Network { peers, transfer, group: 0 }
    }

    /// The factory of Raft group `group` over the node's shared connections: its requests go
    /// in `Grouped` frames (group 0's in plain ones), on the same connection per peer.
    pub fn for_group(peers: Arc<Peers>, transfer: Arc<LeaderTransfer>, group: u32) -> Self {
        Network { peers, transfer, group }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: u64, node: &NodeAddr) -> PeerClient {
        // Tests route each directed link through its own proxy (`fault::raft_dial`).
        let peer = self.peers.get(target, &node.raft);
        PeerClient { target, node: node.clone(), peer, transfer: self.transfer.clone(), group: self.group }
    }
}

pub struct PeerClient {
    target: u64,
    node: NodeAddr,
    peer: Arc<Peer>,
    transfer: Arc<LeaderTransfer>,
    group: u32,
}

impl PeerClient {
    /// One request/response round. `sender` is this node's id, named in a `Timeout` error;
    /// every request carries it as the vote's candidate or leader.
    async fn call<Req, Resp, E>(
        &self,
        kind: Kind,
        action: RPCTypes,
        sender: u64,
        request: &Req,
        option: &RPCOption,
    ) -> RpcResult<Resp, RaftError<u64, E>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let request_id = self.peer.next_request_id();
        let frame = codec::encode_for(self.group, kind, request_id, request, limits::RAFT_FRAME_BYTES_MAX)
            .map_err(|e| network_error(format!("cannot send {action}: {e}")))?;
        let ttl = option.hard_ttl();
        let response = match self.peer.call(request_id, frame, ttl).await {
            Ok(response) => response,
            Err(e @ CallError::Unreachable { .. }) => {
                return Err(RPCError::Unreachable(Unreachable::new(&e)))
            }
            Err(e @ CallError::Network { .. }) => return Err(RPCError::Network(NetworkError::new(&e))),
            Err(CallError::Timeout { .. }) => {
                let timeout = Timeout { action, id: sender, target: self.target, timeout: ttl };
                return Err(RPCError::Timeout(timeout));
            }
        };
        let result: Result<Resp, RaftError<u64, E>> =
            response.decode_body().map_err(|e| network_error(format!("bad {action} response: {e}")))?;
        result
            .map_err(|e| RPCError::RemoteError(RemoteError::new_with_node(self.target, self.node.clone(), e)))
    }
}

fn network_error<E: std::error::Error>(message: String) -> RPCError<u64, NodeAddr, E> {
    RPCError::Network(NetworkError::new(&AnyError::error(message)))
}

/// Refuses an AppendEntries over its byte limit that could be split, with a hint that
/// shrinks it below the limit. A single entry goes whole (the frame limit fits the largest).
fn too_large(rpc: &AppendEntriesRequest<TypeConfig>) -> Option<PayloadTooLarge> {
    let entries = rpc.entries.len();
    let limit = limits::RAFT_APPEND_ENTRIES_BYTES_MAX;
    if entries <= 1 || codec::body_size(rpc, limit).is_some() {
        return None;
    }
    let bytes = codec::body_size(rpc, usize::MAX).unwrap_or(usize::MAX);
    let hint = (entries as u128 * limit as u128 / bytes.max(1) as u128).clamp(1, entries as u128 - 1);
    Some(PayloadTooLarge::new_entries_hint(hint as u64))
}

fn sender_of(vote: &openraft::Vote<u64>) -> u64 {
    vote.leader_id().voted_for().unwrap_or_default()
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<u64>> {
        if let Some(too_large) = too_large(&rpc) {
            return Err(RPCError::PayloadTooLarge(too_large));
        }
        if self.transfer.heartbeats_withheld() {
            // A leadership transfer lets every voter's lease on this leader run out.
            let withheld = AnyError::error("withheld during a leadership transfer");
            return Err(RPCError::Unreachable(Unreachable::new(&withheld)));
        }
        let sender = sender_of(&rpc.vote);
        self.call(Kind::AppendEntries, RPCTypes::AppendEntries, sender, &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>> {
        // Chunks come from openraft's default `full_snapshot`, `snapshot_max_chunk_size` each;
        // a chunk over the frame limit fails here with a message naming the limit.
        let sender = sender_of(&rpc.vote);
        self.call(Kind::InstallSnapshot, RPCTypes::InstallSnapshot, sender, &rpc, &option).await
    }

    async fn vote(&mut self, rpc: VoteRequest<u64>, option: RPCOption) -> RpcResult<VoteResponse<u64>> {
        let sender = sender_of(&rpc.vote);
        self.call(Kind::Vote, RPCTypes::Vote, sender, &rpc, &option).await
    }
}

#[cfg(test)]
mod tests {
    use openraft::{Entry, EntryPayload, LogId, Vote};

    use super::*;
    use onelog_state::command::{Command, InitClusterOp, Op};

    fn append_entries(entries: usize, bytes_each: usize) -> AppendEntriesRequest<TypeConfig> {
        let entry = |index| Entry::<TypeConfig> {
            log_id: LogId::new(openraft::CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Normal(Command {
                stamp: Default::default(),
                ops: vec![Op::InitCluster(InitClusterOp { cluster_id: "x".repeat(bytes_each) })],
            }),
        };
        AppendEntriesRequest {
            vote: Vote::new_committed(1, 1),
            prev_log_id: None,
            leader_commit: None,
            entries: (1..=entries as u64).map(entry).collect(),
        }
    }

    #[test]
    fn oversized_append_entries_is_split_by_hint() {
        let mib = 1024 * 1024;
        assert!(too_large(&append_entries(3, mib)).is_none());
        // One entry always goes whole, however large.
        assert!(too_large(&append_entries(1, limits::RAFT_APPEND_ENTRIES_BYTES_MAX + mib)).is_none());
        let entries = limits::RAFT_APPEND_ENTRIES_BYTES_MAX / mib + 4;
        let hint = too_large(&append_entries(entries, mib)).expect("over the limit").entries_hint();
        assert!(hint >= 1 && hint < entries as u64, "hint {hint} for {entries} entries");
        assert!(too_large(&append_entries(hint as usize, mib)).is_none(), "the hinted request fits");
    }
}

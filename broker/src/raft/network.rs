//! Raft RPC transport between nodes.
//!
//! A one-node cluster never sends a Raft RPC: the leader is the whole quorum. Multi-node
//! transport (a framed binary protocol over tokio TCP) is the replication issue's work; until
//! then a peer is reported unreachable, which openraft handles by retrying with backoff.

use openraft::error::{InstallSnapshotError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};

use super::{NodeAddr, TypeConfig};

type RpcResult<T, E = RaftError<u64>> = Result<T, RPCError<u64, NodeAddr, E>>;

#[derive(Debug, Clone, Default)]
pub struct Network;

pub struct PeerClient {
    target: u64,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: u64, _node: &NodeAddr) -> PeerClient {
        PeerClient { target }
    }
}

impl PeerClient {
    fn unreachable<E: std::error::Error>(&self) -> RPCError<u64, NodeAddr, E> {
        let err = std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!("no Raft transport to node {} in this build", self.target),
        );
        RPCError::Unreachable(Unreachable::new(&err))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<u64>> {
        Err(self.unreachable())
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>> {
        Err(self.unreachable())
    }

    async fn vote(&mut self, _rpc: VoteRequest<u64>, _option: RPCOption) -> RpcResult<VoteResponse<u64>> {
        Err(self.unreachable())
    }
}

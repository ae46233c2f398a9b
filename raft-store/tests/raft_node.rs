//! End to end with openraft itself: a single-node `Raft` on a `LogStore` commits many
//! concurrent writes (their appends share fsyncs through the flusher), shuts down, and a new
//! `Raft` on the reopened log re-applies everything and keeps going.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::sm::MemStateMachine;
use common::*;
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::storage::RaftLogStorage;
use openraft::{BasicNode, EntryPayload, Raft, ServerState};

/// A single-node cluster never sends an RPC; any attempt is an error.
struct NoNetwork;

type RpcResult<T, E = RaftError<u64>> = Result<T, RPCError<u64, BasicNode, E>>;

fn unreachable<E: std::error::Error>() -> RPCError<u64, BasicNode, E> {
    RPCError::Network(NetworkError::new(&std::io::Error::other("single-node test has no network")))
}

impl RaftNetworkFactory<TestConfig> for NoNetwork {
    type Network = NoNetwork;

    async fn new_client(&mut self, _target: u64, _node: &BasicNode) -> NoNetwork {
        NoNetwork
    }
}

impl RaftNetwork<TestConfig> for NoNetwork {
    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<TestConfig>,
        _option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<u64>> {
        Err(unreachable())
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TestConfig>,
        _option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>> {
        Err(unreachable())
    }

    async fn vote(&mut self, _rpc: VoteRequest<u64>, _option: RPCOption) -> RpcResult<VoteResponse<u64>> {
        Err(unreachable())
    }
}

async fn start_node(store: Store, sm: MemStateMachine) -> Raft<TestConfig> {
    let config = openraft::Config {
        heartbeat_interval: 50,
        election_timeout_min: 150,
        election_timeout_max: 300,
        ..Default::default()
    };
    let raft = Raft::new(1, Arc::new(config.validate().unwrap()), NoNetwork, store, sm).await.unwrap();
    raft
}

async fn wait_leader(raft: &Raft<TestConfig>) {
    raft.wait(Some(Duration::from_secs(10)))
        .state(ServerState::Leader, "single node becomes leader")
        .await
        .unwrap();
}

async fn write_concurrently(raft: &Raft<TestConfig>, keys: std::ops::Range<u64>) -> Vec<u64> {
    let writes: Vec<_> = keys
        .map(|i| {
            let raft = raft.clone();
            tokio::spawn(async move {
                let cmd = Cmd { key: format!("k{i}"), value: vec![i as u8; 100] };
                raft.client_write(cmd).await.expect("client write").log_id.index
            })
        })
        .collect();
    let mut indexes = Vec::new();
    for w in writes {
        indexes.push(w.await.unwrap());
    }
    indexes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_node_commits_concurrent_writes_and_recovers_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let opts = small_opts();

    let sm = MemStateMachine::default();
    let raft = start_node(open(dir.path(), &opts), sm.clone()).await;
    raft.initialize(BTreeMap::from([(1u64, BasicNode::default())])).await.unwrap();
    wait_leader(&raft).await;
    let mut indexes = write_concurrently(&raft, 0..300).await;
    indexes.sort_unstable();
    indexes.dedup();
    assert_eq!(indexes.len(), 300, "every write got its own log index");
    assert_eq!(sm.inner.lock().unwrap().data.applied_normal, 300);
    raft.shutdown().await.unwrap();
    drop(raft);

    let mut store = open(dir.path(), &opts);
    let logged = read_all(&mut store).await;
    let normal = logged.iter().filter(|e| matches!(e.payload, EntryPayload::Normal(_))).count();
    assert_eq!(normal, 300, "every acknowledged write is in the log after restart");
    let vote = store.read_vote().await.unwrap().expect("vote saved");
    assert!(vote.is_committed() && vote.leader_id().voted_for() == Some(1));
    assert!(store.read_committed().await.unwrap().is_some());

    // A fresh state machine: openraft re-applies the committed log from our store.
    let sm = MemStateMachine::default();
    let raft = start_node(store, sm.clone()).await;
    wait_leader(&raft).await;
    write_concurrently(&raft, 300..310).await;
    assert_eq!(sm.inner.lock().unwrap().data.applied_normal, 310);
    raft.shutdown().await.unwrap();
}

//! Several Raft groups over one transport (issue 32): three nodes each run groups 0 and 1 on
//! one Raft port and one connection per peer. Each group elects its own leader and keeps its
//! own log; a group that loses its leader elects another while the other group's leader stays;
//! a frame naming a group the node does not serve, or grouping a node-wide request, closes the
//! connection, and the node still serves both groups after it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use openraft::raft::VoteRequest;
use openraft::Vote;
use raft_store::{LogStore, LogStoreOptions};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::auth::Identity;
use super::codec::{self, Kind};
use super::peers::Peers;
use super::tests::{assert_closed, raft_config, raw_connection};
use super::transfer::LeaderTransfer;
use super::vote_gate::{VoteGate, Votes};
use super::{serve_raft, GroupRaft, RaftService};
use crate::config::BrokerConfig;
use crate::limits;
use crate::raft::network::Network;
use crate::raft::sm_store;
use crate::raft::{NodeAddr, Raft};
use onelog_state::command::Command;

const WAIT: Option<Duration> = Some(Duration::from_secs(10));

struct GroupedNode {
    id: u64,
    addr: NodeAddr,
    /// Group 0's Raft, then group 1's.
    rafts: [Raft; 2],
    server: JoinHandle<anyhow::Result<()>>,
    _dir: tempfile::TempDir,
}

/// One group's Raft in `dir/group`, sending over `peers`.
async fn open_group(
    id: u64,
    group: u32,
    dir: &std::path::Path,
    peers: Arc<Peers>,
) -> anyhow::Result<GroupRaft> {
    let dir = dir.join(format!("group-{group}"));
    let options = LogStoreOptions { segment_bytes: 1024 * 1024, ..Default::default() };
    let log_store = LogStore::open(&dir.join("raft-log"), options)?;
    let (state_machine, _) =
        sm_store::open(dir.join("state"), BrokerConfig::from_overrides(&[])?.into(), None)?;
    let log = log_store.reader();
    let network = Network::for_group(peers, Arc::new(LeaderTransfer::default()), group);
    let raft = Raft::new(id, raft_config(|_| {}), network, log_store, state_machine).await?;
    Ok(GroupRaft { raft, votes: Arc::new(VoteGate::new(Votes::Open)), log })
}

async fn start(id: u64) -> anyhow::Result<GroupedNode> {
    let _ = tracing_subscriber::fmt().with_env_filter("warn").with_test_writer().try_init();
    let identity = Identity::new(id, None);
    let dir = tempfile::tempdir()?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = NodeAddr { raft: listener.local_addr()?.to_string(), kafka: "127.0.0.1:0".to_string() };
    let peers = Peers::new(identity.clone());
    let zero = open_group(id, 0, dir.path(), peers.clone()).await?;
    let one = open_group(id, 1, dir.path(), peers).await?;
    let rafts = [zero.raft.clone(), one.raft.clone()];
    let service = RaftService {
        raft: zero.raft,
        identity,
        votes: zero.votes,
        log: zero.log,
        forward: Default::default(),
        removal: Default::default(),
        groups: Arc::new(BTreeMap::from([(1, one)])),
    };
    let server = tokio::spawn(serve_raft(listener, service));
    Ok(GroupedNode { id, addr, rafts, server, _dir: dir })
}

/// The leader `raft` knows, other than `not`.
async fn leader(raft: &Raft, not: Option<u64>) -> anyhow::Result<u64> {
    let m = raft
        .wait(WAIT)
        .metrics(|m| m.current_leader.is_some() && m.current_leader != not, "a leader")
        .await?;
    Ok(m.current_leader.expect("waited for a leader"))
}

/// `count` empty entries through group `g`'s leader; the last one's index.
async fn write(nodes: &[GroupedNode], g: usize, leader: u64, count: usize) -> anyhow::Result<u64> {
    let raft = &nodes.iter().find(|n| n.id == leader).expect("a member").rafts[g];
    let mut index = 0;
    for _ in 0..count {
        index = raft.client_write(Command::default()).await?.log_id.index;
    }
    Ok(index)
}

async fn applied_everywhere(nodes: &[&GroupedNode], g: usize, index: u64) -> anyhow::Result<()> {
    for node in nodes {
        node.rafts[g].wait(WAIT).applied_index_at_least(Some(index), "entries applied").await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_groups_share_one_port_and_keep_their_own_logs_and_leaders() -> anyhow::Result<()> {
    let mut nodes = Vec::new();
    for id in [1, 2, 3] {
        nodes.push(start(id).await?);
    }
    let members: BTreeMap<u64, NodeAddr> = nodes.iter().map(|n| (n.id, n.addr.clone())).collect();
    nodes[0].rafts[0].initialize(members.clone()).await?;
    nodes[2].rafts[1].initialize(members).await?;
    let (leader_0, leader_1) =
        (leader(&nodes[0].rafts[0], None).await?, leader(&nodes[0].rafts[1], None).await?);

    // Each group replicates its own entries: 5 in group 0, 12 in group 1.
    let index_0 = write(&nodes, 0, leader_0, 5).await?;
    let index_1 = write(&nodes, 1, leader_1, 12).await?;
    assert!(index_1 > index_0, "group 1's log holds more: {index_1} against {index_0}");
    let all: Vec<&GroupedNode> = nodes.iter().collect();
    applied_everywhere(&all, 0, index_0).await?;
    applied_everywhere(&all, 1, index_1).await?;
    for node in &nodes {
        let applied = node.rafts[0].metrics().borrow().last_applied.map(|l| l.index);
        assert_eq!(applied, Some(index_0), "node {}: group 0 applied another group's entries", node.id);
    }

    // Group 1 loses its leader's Raft (the node's port and group 0 stay up): it elects
    // another, and group 0's leader and entries are unaffected.
    let lost = nodes.iter().find(|n| n.id == leader_1).expect("a member");
    lost.rafts[1].shutdown().await?;
    let survivor = nodes.iter().find(|n| n.id != leader_1).expect("another member");
    let new_leader_1 = leader(&survivor.rafts[1], Some(leader_1)).await?;
    let index_1 = write(&nodes, 1, new_leader_1, 3).await?;
    let others: Vec<&GroupedNode> = nodes.iter().filter(|n| n.id != leader_1).collect();
    applied_everywhere(&others, 1, index_1).await?;
    assert_eq!(leader(&survivor.rafts[0], None).await?, leader_0, "group 0 kept its leader");
    let index_0 = write(&nodes, 0, leader_0, 2).await?;
    applied_everywhere(&all, 0, index_0).await?;

    for node in &nodes {
        assert!(!node.server.is_finished(), "node {}'s Raft port closed", node.id);
        for raft in &node.rafts {
            raft.shutdown().await.ok();
        }
    }
    nodes.clear();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_for_a_group_not_served_or_a_grouped_node_request_closes_the_connection() -> anyhow::Result<()>
{
    let node = start(1).await?;
    let vote = VoteRequest::new(Vote::new(1, 9u64), None);
    let max = limits::RAFT_FRAME_BYTES_MAX;
    let unserved = codec::encode_for(2, Kind::Vote, 1, &vote, max)?;
    let node_wide = codec::encode_for(1, Kind::Features, 2, &0u8, max)?;
    for bad in [unserved, node_wide] {
        let mut stream = raw_connection(&node.addr.raft, 1).await?;
        stream.write_all(&bad).await?;
        assert_closed(stream).await;
    }
    // Both groups still answer: a vote from node 9 in each.
    for group in [0, 1] {
        let mut stream = raw_connection(&node.addr.raft, 1).await?;
        stream.write_all(&codec::encode_for(group, Kind::Vote, 7, &vote, max)?).await?;
        let reply = codec::read_frame(&mut stream, max).await?.expect("a vote reply");
        assert_eq!((reply.kind, reply.request_id), (Kind::Response, 7), "group {group}");
    }
    for raft in &node.rafts {
        raft.shutdown().await?;
    }
    Ok(())
}

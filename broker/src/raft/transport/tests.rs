//! Transport tests: real openraft nodes (the broker's own log and state machine stores)
//! talking over loopback, the server's handling of bad frames, and the client's mapping of
//! failures onto openraft's `RPCError` variants. Frame codec tests live in `codec.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::error::{RPCError, RaftError};
use openraft::network::{RPCOption, RPCTypes, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, VoteRequest};
use openraft::Vote;
use raft_store::{LogStore, LogStoreOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::auth::{self, Auth, Challenge, Hello, Identity};
use super::codec::{self, Kind, PROTOCOL_VERSION};
use super::transfer::{self, LeaderTransfer};
use super::vote_gate::{VoteGate, Votes};
use super::{serve_raft, RaftService};
use crate::config::BrokerConfig;
use crate::limits;
use crate::raft::network::{Network, PeerClient};
use crate::raft::sm_store;
use crate::raft::{NodeAddr, Raft, TypeConfig};
use onelog_state::command::Command;

const WAIT: Option<Duration> = Some(Duration::from_secs(10));

pub(super) struct TestNode {
    pub id: u64,
    pub raft: Raft,
    pub addr: NodeAddr,
    pub server: JoinHandle<anyhow::Result<()>>,
    /// This node's own leadership-transfer flags, as `node::run` gives each node.
    pub transfer: Arc<LeaderTransfer>,
    _dir: tempfile::TempDir,
}

pub(super) fn raft_config(tweak: impl FnOnce(&mut openraft::Config)) -> Arc<openraft::Config> {
    // The broker's timing (node.rs), so the tests see the RPC timeouts production sees.
    let mut config = openraft::Config {
        cluster_name: "transport-test".to_string(),
        heartbeat_interval: 100,
        election_timeout_min: 300,
        election_timeout_max: 600,
        ..Default::default()
    };
    tweak(&mut config);
    Arc::new(config.validate().expect("valid raft config"))
}

async fn start_node(id: u64, config: Arc<openraft::Config>) -> anyhow::Result<TestNode> {
    start_node_with_secret(id, config, None).await
}

/// A node whose Raft handshake uses `secret` (none: the empty key).
pub(super) async fn start_node_with_secret(
    id: u64,
    config: Arc<openraft::Config>,
    secret: Option<&[u8]>,
) -> anyhow::Result<TestNode> {
    let identity = Identity::new(id, secret.map(Arc::from));
    let _ = tracing_subscriber::fmt().with_env_filter("warn").with_test_writer().try_init();
    let dir = tempfile::tempdir()?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = NodeAddr { raft: listener.local_addr()?.to_string(), kafka: "127.0.0.1:0".to_string() };
    // Small segments: the default pre-writes 64 MiB per node.
    let options = LogStoreOptions { segment_bytes: 1024 * 1024, ..Default::default() };
    let log_store = LogStore::<TypeConfig>::open(&dir.path().join("raft-log"), options)?;
    let (state_machine, _) =
        sm_store::open(dir.path().join("state"), BrokerConfig::from_overrides(&[])?.into(), None)?;
    let log = log_store.reader();
    let transfer = Arc::new(LeaderTransfer::default());
    let network = Network::new(identity.clone(), transfer.clone());
    let raft = Raft::new(id, config, network, log_store, state_machine).await?;
    let votes = Arc::new(VoteGate::new(Votes::Open));
    let service = RaftService {
        raft: raft.clone(),
        identity,
        votes,
        log,
        forward: Default::default(),
        removal: Default::default(),
        groups: Default::default(),
    };
    let server = tokio::spawn(serve_raft(listener, service));
    Ok(TestNode { id, raft, addr, server, transfer, _dir: dir })
}

pub(super) async fn start_cluster(
    ids: &[u64],
    config: Arc<openraft::Config>,
) -> anyhow::Result<Vec<TestNode>> {
    start_cluster_with_secret(ids, config, None).await
}

pub(super) async fn start_cluster_with_secret(
    ids: &[u64],
    config: Arc<openraft::Config>,
    secret: Option<&[u8]>,
) -> anyhow::Result<Vec<TestNode>> {
    let mut nodes = Vec::new();
    for &id in ids {
        nodes.push(start_node_with_secret(id, config.clone(), secret).await?);
    }
    let members: BTreeMap<u64, NodeAddr> = nodes.iter().map(|n| (n.id, n.addr.clone())).collect();
    nodes[0].raft.initialize(members).await?;
    Ok(nodes)
}

/// Waits until `node` knows a leader other than `not`, and returns it.
pub(super) async fn leader_of(node: &TestNode, not: Option<u64>) -> anyhow::Result<u64> {
    let metrics = node
        .raft
        .wait(WAIT)
        .metrics(|m| m.current_leader.is_some() && m.current_leader != not, "a leader is elected")
        .await?;
    Ok(metrics.current_leader.expect("waited for a leader"))
}

/// Proposes `count` empty commands on the leader; returns the last one's log index.
pub(super) async fn write(leader: &TestNode, count: usize) -> anyhow::Result<u64> {
    let mut index = 0;
    for _ in 0..count {
        index = leader.raft.client_write(Command::default()).await?.log_id.index;
    }
    Ok(index)
}

/// Every node applies through `index`, and all agree on the last applied log id.
async fn assert_applied_everywhere(nodes: &[&TestNode], index: u64) -> anyhow::Result<()> {
    let mut applied = BTreeSet::new();
    for node in nodes {
        let m = node.raft.wait(WAIT).applied_index_at_least(Some(index), "entries applied").await?;
        applied.insert(m.last_applied);
    }
    assert_eq!(applied.len(), 1, "nodes disagree on last_applied: {applied:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_replicate_and_survive_leader_loss() -> anyhow::Result<()> {
    let nodes = start_cluster(&[1, 2, 3], raft_config(|_| {})).await?;
    let leader_id = leader_of(&nodes[0], None).await?;
    let leader = nodes.iter().find(|n| n.id == leader_id).expect("leader is a member");
    let index = write(leader, 5).await?;
    assert_applied_everywhere(&nodes.iter().collect::<Vec<_>>(), index).await?;

    // Kill the leader: its Raft stops, serve_raft returns and closes its connections.
    leader.raft.shutdown().await?;
    let (dead, survivors): (Vec<&TestNode>, Vec<&TestNode>) = nodes.iter().partition(|n| n.id == leader_id);
    let stopping = Instant::now();
    while !dead[0].server.is_finished() {
        assert!(stopping.elapsed() < Duration::from_secs(5), "serve_raft still running after shutdown");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let new_leader_id = leader_of(survivors[0], Some(leader_id)).await?;
    assert_eq!(leader_of(survivors[1], Some(leader_id)).await?, new_leader_id);
    let new_leader = survivors.iter().find(|n| n.id == new_leader_id).expect("new leader survives");
    let index = write(new_leader, 3).await?;
    assert_applied_everywhere(&survivors, index).await?;
    for node in survivors {
        node.raft.shutdown().await?;
    }
    Ok(())
}

/// A leadership transfer among three nodes of one process: the leader pauses its own writes
/// and withholds its own heartbeats, no other node's flags move (each node owns its
/// `LeaderTransfer`; they were process-wide statics), another node takes over, and every
/// flag is clear afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_transfer_sets_only_the_leaders_flags() -> anyhow::Result<()> {
    let nodes = start_cluster(&[1, 2, 3], raft_config(|_| {})).await?;
    let leader_id = leader_of(&nodes[0], None).await?;
    let leader = nodes.iter().find(|n| n.id == leader_id).expect("leader is a member");
    let target = nodes.iter().find(|n| n.id != leader_id).expect("a follower");
    let index = write(leader, 3).await?;
    assert_applied_everywhere(&nodes.iter().collect::<Vec<_>>(), index).await?;

    let identity = Identity::new(leader_id, None);
    let moving = transfer::transfer((&leader.raft, &leader.transfer, 0), &identity, target.id);
    let observe = async {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !leader.transfer.heartbeats_withheld() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let flags = |n: &TestNode| (n.transfer.writes_paused(), n.transfer.heartbeats_withheld());
        (flags(leader), nodes.iter().filter(|n| n.id != leader_id).map(flags).collect::<Vec<_>>())
    };
    let (moved, (leader_flags, others)) = tokio::join!(moving, observe);
    let (new_leader, _term) = moved?;
    assert_eq!(leader_flags, (true, true), "the leader's writes paused and heartbeats withheld");
    assert_eq!(others, vec![(false, false); 2], "another node's flags moved with the leader's");
    assert_ne!(new_leader, leader_id);
    for node in &nodes {
        assert!(!node.transfer.writes_paused() && !node.transfer.heartbeats_withheld(), "node {}", node.id);
    }
    let new_leader = nodes.iter().find(|n| n.id == new_leader).expect("new leader is a member");
    let index = write(new_leader, 1).await?;
    assert_applied_everywhere(&nodes.iter().collect::<Vec<_>>(), index).await?;
    for node in &nodes {
        node.raft.shutdown().await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_learner_catches_up_by_chunked_snapshot() -> anyhow::Result<()> {
    // Tiny chunks: the checkpoint crosses the wire in many InstallSnapshot RPCs.
    let config = raft_config(|c| {
        c.snapshot_max_chunk_size = 16;
        c.max_in_snapshot_log_to_keep = 0;
        c.purge_batch_size = 1;
    });
    let nodes = start_cluster(&[1], config.clone()).await?;
    let leader = &nodes[0];
    leader_of(leader, None).await?;
    let index = write(leader, 5).await?;

    leader.raft.trigger().snapshot().await?;
    let m =
        leader.raft.wait(WAIT).metrics(|m| m.snapshot.map(|s| s.index) == Some(index), "snapshot").await?;
    let snapshot = m.snapshot;
    leader.raft.trigger().purge_log(index).await?;
    leader.raft.wait(WAIT).purged(snapshot, "log purged up to the snapshot").await?;

    // The log the learner needs is gone: only the snapshot can bring it up to date.
    let learner = start_node(2, config).await?;
    leader.raft.add_learner(2, learner.addr.clone(), true).await?;
    // add_learner appended a membership entry after the snapshot.
    let last = leader.raft.metrics().borrow().last_applied;
    let m = learner.raft.wait(WAIT).applied_index_at_least(last.map(|l| l.index), "learner applied").await?;
    assert_eq!(m.snapshot, snapshot, "the learner installed the leader's snapshot");
    assert_eq!(m.last_applied, last);
    leader.raft.shutdown().await?;
    learner.raft.shutdown().await?;
    Ok(())
}

/// Connects to node `node_id` and handshakes as the raft client does, as `identity`; returns
/// the stream and whether the server proved the same secret.
pub(super) async fn raw_connection_as(
    addr: &str,
    node_id: u64,
    identity: &Identity,
) -> anyhow::Result<(TcpStream, bool)> {
    let mut stream = TcpStream::connect(addr).await?;
    let nonce_c = auth::nonce();
    let hello = Hello { protocol_version: PROTOCOL_VERSION, node_id, from: identity.node_id, nonce: nonce_c };
    stream.write_all(&codec::encode(Kind::Hello, 0, &hello, limits::RAFT_FRAME_BYTES_MAX)?).await?;
    let reply = codec::read_frame(&mut stream, limits::RAFT_FRAME_BYTES_MAX).await?.expect("handshake reply");
    let challenge: Challenge = reply.decode_body()?;
    assert_eq!(challenge.node_id, node_id);
    let proven =
        identity.verify_server(&challenge.proof, &nonce_c, &challenge.nonce, node_id, identity.node_id);
    let proof = identity.client_proof(&challenge.nonce, &nonce_c, identity.node_id, node_id);
    stream.write_all(&codec::encode(Kind::Hello, 0, &Auth { proof }, limits::RAFT_FRAME_BYTES_MAX)?).await?;
    Ok((stream, proven))
}

/// [`raw_connection_as`] node 9 without a secret, as the bad-frame tests' vote is from node 9.
pub(super) async fn raw_connection(addr: &str, node_id: u64) -> anyhow::Result<TcpStream> {
    let (stream, proven) = raw_connection_as(addr, node_id, &Identity::new(9, None)).await?;
    assert!(proven, "the server's proof");
    Ok(stream)
}

/// The server closes the connection (read sees EOF) within a second.
pub(super) async fn assert_closed(mut stream: TcpStream) {
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(1), stream.read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "connection still open: {read:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_closes_connections_on_bad_frames() -> anyhow::Result<()> {
    let node = start_node(1, raft_config(|_| {})).await?;
    let frame = codec::encode(
        Kind::Vote,
        1,
        &VoteRequest::new(Vote::new(1, 9u64), None),
        limits::RAFT_FRAME_BYTES_MAX,
    )?;

    let mut bad_crc = frame.clone();
    *bad_crc.last_mut().expect("non-empty") ^= 0xff;
    let mut oversized = frame.clone();
    oversized[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
    let wrong_body = codec::encode(Kind::AppendEntries, 2, &7u8, limits::RAFT_FRAME_BYTES_MAX)?;
    let response_kind = codec::encode(Kind::Response, 3, &7u8, limits::RAFT_FRAME_BYTES_MAX)?;
    for bad in [bad_crc, oversized, wrong_body, response_kind, b"not a frame at all".to_vec()] {
        let mut stream = raw_connection(&node.addr.raft, 1).await?;
        stream.write_all(&bad).await?;
        assert_closed(stream).await;
    }
    // No handshake at all.
    let mut stream = TcpStream::connect(&node.addr.raft).await?;
    stream.write_all(&frame).await?;
    assert_closed(stream).await;

    // The node still serves well-formed requests: a vote from node 9 for term 1.
    let mut stream = raw_connection(&node.addr.raft, 1).await?;
    stream.write_all(&frame).await?;
    let reply = codec::read_frame(&mut stream, limits::RAFT_FRAME_BYTES_MAX).await?.expect("vote reply");
    assert_eq!((reply.kind, reply.request_id), (Kind::Response, 1));
    let result: Result<openraft::raft::VoteResponse<u64>, RaftError<u64>> = reply.decode_body()?;
    result?;
    assert!(!node.server.is_finished());
    node.raft.shutdown().await?;
    Ok(())
}

enum FakePeer {
    /// Answers the handshake as another node.
    WrongNode,
    /// Handshakes, then never answers.
    Silent,
    /// Handshakes, then answers a request with bytes that are not a frame.
    Garbage,
}

/// A listener that behaves badly in one way; returns its address and a count of the
/// connections it accepted.
async fn fake_peer(behavior: FakePeer) -> anyhow::Result<(String, Arc<AtomicUsize>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?.to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::Relaxed);
            let max = limits::RAFT_FRAME_BYTES_MAX;
            let Ok(Some(hello)) = codec::read_frame(&mut stream, max).await else { continue };
            let hello: Hello = hello.decode_body().expect("hello");
            let node_id =
                if matches!(behavior, FakePeer::WrongNode) { hello.node_id + 1 } else { hello.node_id };
            let nonce = auth::nonce();
            let proof = Identity::new(node_id, None).server_proof(&hello.nonce, &nonce, node_id, hello.from);
            let challenge = Challenge { protocol_version: PROTOCOL_VERSION, node_id, nonce, proof };
            stream.write_all(&codec::encode(Kind::Hello, 0, &challenge, max).expect("encode")).await.ok();
            let Ok(Some(_auth)) = codec::read_frame(&mut stream, max).await else { continue };
            while let Ok(Some(_request)) = codec::read_frame(&mut stream, max).await {
                if matches!(behavior, FakePeer::Garbage) {
                    stream.write_all(b"garbage, garbage, garbage").await.ok();
                }
            }
        }
    });
    Ok((addr, accepted))
}

type VoteResult = Result<(), RPCError<u64, NodeAddr, RaftError<u64>>>;

async fn vote(client: &mut PeerClient, option: &RPCOption) -> VoteResult {
    client.vote(VoteRequest::new(Vote::new(3, 1), None), option.clone()).await.map(drop)
}

async fn client_for(addr: String) -> PeerClient {
    Network::new(Identity::new(1, None), Default::default())
        .new_client(7, &NodeAddr { raft: addr, kafka: String::new() })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_failures_map_to_openraft_errors() -> anyhow::Result<()> {
    let option = RPCOption::new(Duration::from_millis(200));

    // Nothing listens: unreachable, and again at once while the reconnect backoff lasts.
    let closed = TcpListener::bind("127.0.0.1:0").await?.local_addr()?.to_string();
    let mut client = client_for(closed).await;
    for _ in 0..2 {
        let started = Instant::now();
        let err = vote(&mut client, &option).await.unwrap_err();
        assert!(matches!(err, RPCError::Unreachable(_)), "{err}");
        assert!(started.elapsed() < option.hard_ttl(), "unreachable is reported without waiting");
    }

    let mut client = client_for(fake_peer(FakePeer::WrongNode).await?.0).await;
    let err = vote(&mut client, &option).await.unwrap_err();
    assert!(matches!(err, RPCError::Unreachable(_)), "{err}");

    let mut client = client_for(fake_peer(FakePeer::Garbage).await?.0).await;
    let err = vote(&mut client, &option).await.unwrap_err();
    assert!(matches!(err, RPCError::Network(_)), "{err}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_peer_times_out_then_gets_a_new_connection() -> anyhow::Result<()> {
    let option = RPCOption::new(Duration::from_millis(50));
    let (addr, accepted) = fake_peer(FakePeer::Silent).await?;
    let mut client = client_for(addr).await;
    // A silence shorter than RAFT_SILENCE_BEFORE_RECONNECT_MS is a slow peer: the connection
    // stays, however many calls time out meanwhile.
    let started = Instant::now();
    let mut calls = 0;
    while started.elapsed() < Duration::from_millis(limits::RAFT_SILENCE_BEFORE_RECONNECT_MS) {
        let call_started = Instant::now();
        let err = vote(&mut client, &option).await.unwrap_err();
        let RPCError::Timeout(timeout) = &err else { panic!("expected a timeout, got {err}") };
        assert_eq!((timeout.action, timeout.id, timeout.target), (RPCTypes::Vote, 1, 7));
        assert!(call_started.elapsed() >= option.hard_ttl());
        calls += 1;
    }
    assert!(calls >= limits::RAFT_SILENT_TIMEOUTS_BEFORE_RECONNECT, "{calls} calls");
    assert_eq!(accepted.load(Ordering::Relaxed), 1, "one connection carries every call of a slow peer");
    for _ in 0..3 {
        vote(&mut client, &option).await.unwrap_err();
    }
    assert_eq!(accepted.load(Ordering::Relaxed), 2, "a connection silent for longer is replaced");
    Ok(())
}

/// Not a test: reports the round-trip time of an empty AppendEntries (a heartbeat) between
/// two real nodes over loopback, one at a time and pipelined over the one shared connection.
/// Run: `cargo test -p broker --release append_entries_rtt -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn append_entries_rtt() -> anyhow::Result<()> {
    let nodes = start_cluster(&[1, 2], raft_config(|_| {})).await?;
    let leader_id = leader_of(&nodes[0], None).await?;
    let (leader, follower) = if leader_id == 1 { (&nodes[0], &nodes[1]) } else { (&nodes[1], &nodes[0]) };
    let index = write(leader, 3).await?;
    assert_applied_everywhere(&[leader, follower], index).await?;
    let m = leader.raft.metrics().borrow().clone();
    // Exactly what the leader's own heartbeats carry.
    let heartbeat = AppendEntriesRequest::<TypeConfig> {
        vote: m.vote,
        prev_log_id: m.last_applied,
        leader_commit: m.last_applied,
        entries: vec![],
    };
    let mut network = Network::new(Identity::new(leader.id, None), Default::default());
    let option = RPCOption::new(Duration::from_secs(1));

    let mut client = network.new_client(follower.id, &follower.addr).await;
    let mut samples = Vec::new();
    for _ in 0..2000 {
        let started = Instant::now();
        let response = client.append_entries(heartbeat.clone(), option.clone()).await?;
        samples.push(started.elapsed());
        assert!(matches!(response, AppendEntriesResponse::Success), "{response:?}");
    }
    samples.sort();
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    let pct = |p: usize| samples[samples.len() * p / 100];
    println!("empty AppendEntries RTT over loopback: mean {mean:?} p50 {:?} p99 {:?}", pct(50), pct(99));

    let rounds = 500;
    let pipelined = 16;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..pipelined {
        let mut client = network.new_client(follower.id, &follower.addr).await;
        let (heartbeat, option) = (heartbeat.clone(), option.clone());
        tasks.spawn(async move {
            for _ in 0..rounds {
                client.append_entries(heartbeat.clone(), option.clone()).await.expect("heartbeat");
            }
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined?;
    }
    let rate = (rounds * pipelined) as f64 / started.elapsed().as_secs_f64();
    println!("{pipelined} in flight on one connection: {rate:.0} empty AppendEntries/s");
    for node in &nodes {
        node.raft.shutdown().await?;
    }
    Ok(())
}

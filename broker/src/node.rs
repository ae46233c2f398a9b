//! Starting and running one onelog node: storage, the Raft node, the proposer, background
//! duties, and the Kafka listener — in that order, so that no client request is served
//! before the node has applied its whole log.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use onelog_state::xgroup::placement::Layout;
use tokio::net::TcpListener;

use crate::config::listeners::{peer_kafka_text, resolve, SecurityProtocol};
use crate::config::{BrokerConfig, NodeSettings};
use crate::coord::lane::GroupCoordinators;
use crate::coord::txn::TxnCoordinator;
use crate::ctx::Ctx;
use crate::leader::duties;
use crate::leader::groups::GroupLeaderWith;
use crate::net::listener;
use crate::raft::groups::{GroupHandle, NodeGroups};
use crate::raft::open::{self, OpenWith, Opened};
use crate::raft::rejoin;
use crate::raft::transport::auth::Identity;
use crate::raft::transport::peers::Peers;
use crate::raft::transport::RaftService;
use crate::raft::{NodeAddr, Raft};
use crate::security::authz::Authorizer;

/// Holds an exclusive lock on the data directory for the life of the process, so two
/// brokers can never write the same Raft log.
fn lock_data_dir(dir: &Path) -> anyhow::Result<std::fs::File> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    match raft_store::lock_dir(dir)? {
        Some(lock) => Ok(lock),
        None => anyhow::bail!("data directory {} is in use by another onelog process", dir.display()),
    }
}

/// Runs the node with its configuration (`BrokerConfig::load`, which `main` calls first to
/// size the runtime) until it stops.
pub async fn run(config: BrokerConfig) -> anyhow::Result<()> {
    let config = Arc::new(config);
    raft_store::set_fsync_observer(crate::metrics::recorded::observe_fsync);
    tracing::info!(configs = %config.describe_set(), "configuration");
    let node: NodeSettings = config.node.clone();
    let _lock = lock_data_dir(&node.data_dir)?;
    let (kafka_listeners, peers) = preflight(&node)?;
    let identity = raft_identity(&node)?;
    if !peers.is_empty() && !identity.has_secret() {
        tracing::warn!(
            "onelog.cluster.secret.file is not set: the Raft port admits any process that speaks its protocol; \
             give every node the same secret file"
        );
    }
    let connections = Peers::new(identity.clone());
    let layout = crate::raft::groups::layout(&config, node.node_id, &peers)?;
    let with = OpenWith {
        node_id: node.node_id,
        data_dir: &node.data_dir,
        config: &config,
        peers: &connections,
        has_peers: !peers.is_empty(),
    };
    let opened = open::open(&with, 0).await?;
    let others = crate::raft::groups::open_others(&with, &layout).await?;
    let groups = node_groups(&opened, &others, &layout);
    // Filled once the Kafka handlers' context exists: forwarded requests wait for it.
    let forward_slot = crate::raft::transport::envelope::ForwardSlot::default();
    let removal = Arc::new(crate::raft::transport::removal::RemovalNotice::default());
    let raft_addr = serve_raft_port(&node, (&opened, &groups), &identity, &forward_slot, &removal).await?;
    // Up before the rejoin decision, which can wait long, so `/status` shows the node waiting.
    let serving = Arc::new(std::sync::OnceLock::new());
    start_admin(&node, (&opened, &groups), &identity, &serving).await?;
    let me = NodeAddr { raft: raft_addr, kafka: peer_kafka_text(&node.advertised) };
    let members = peers.clone().into_iter().chain([(node.node_id, me.clone())]).collect();
    crate::raft::groups::join_others(&identity, &members, &others, &groups);
    join_cluster(&node, &identity, &peers, &opened, me).await?;
    let remote_leaders = crate::raft::remote_leaders::start(&connections, &members, &layout, node.node_id);
    let patience = Duration::from_millis(crate::limits::REMOTE_LEADER_STARTUP_WAIT_MS);
    let unheard = remote_leaders.wait_heard_of_all(patience).await;
    if !unheard.is_empty() {
        tracing::warn!(groups = ?unheard, "serving before any voter of these Raft groups named a leader: their partitions have none in Metadata until one does");
    }
    let ctx = serving_ctx(&node, &config, (&opened, &connections), (removal, &groups, remote_leaders)).await;
    crate::leader::rebalance::start(&config, &connections, &groups);
    let _ = serving.set(ctx.clone());
    let _ = forward_slot.set(Arc::new(crate::pipeline::forwarded::Forwarded { ctx: ctx.clone() }));
    let bound = bind_kafka(&node, kafka_listeners).await?;
    let advertised_all: Vec<String> = node.advertised.iter().map(|e| e.to_string()).collect();
    tracing::info!(kafka = %node.kafka_listener, advertised = %advertised_all.join(","), node_id = node.node_id, "onelog ready");
    let leadership = ctx.leadership.clone();
    tokio::select! {
        () = listener::serve_all(bound, ctx, (crate::pipeline::dispatch, crate::handlers::share_connection_closed)) => {}
        _ = shutdown_signal() => tracing::info!("shutting down"),
    }
    leadership.begin_shutdown();
    groups.begin_stopping();
    // Kafka requests are refused from here (`Leadership::is_leader`); every group hands its
    // leadership over, writes a checkpoint and stops, at the same time.
    let mut stops = tokio::task::JoinSet::new();
    for handle in groups.handles.iter() {
        stops.spawn(crate::raft::stop::stop_group(handle.raft.clone(), identity.clone(), handle.group));
    }
    while stops.join_next().await.is_some() {}
    tracing::info!("onelog stopped");
    Ok(())
}

/// This node's id, the cluster secret and the Raft port's TLS (`onelog.raft.ssl.*`), whose
/// files are read now so that a bad keystore fails start-up.
fn raft_identity(node: &NodeSettings) -> anyhow::Result<Identity> {
    let identity = Identity::new(node.node_id, node.cluster_secret.clone());
    let Some(settings) = node.raft_tls.clone() else { return Ok(identity) };
    let tls = crate::raft::transport::tls::RaftTls::new(settings).context(
        "the Raft port's TLS (onelog.raft.ssl.keystore.location, onelog.raft.ssl.truststore.location)",
    )?;
    tracing::info!("the Raft port and every connection to a peer use mutual TLS");
    Ok(identity.with_tls(tls))
}

/// What start-up checks before it touches the data directory: the listeners' certificates (a
/// bad keystore fails at once), the peers, and that every port is free (the Kafka listener
/// itself is bound only once the node can serve).
fn preflight(node: &NodeSettings) -> anyhow::Result<(Vec<listener::Listener>, BTreeMap<u64, NodeAddr>)> {
    let kafka_listeners =
        node.listeners.iter().map(listener::Listener::prepare).collect::<anyhow::Result<Vec<_>>>()?;
    let peers = parse_peers(&node.peers)?;
    if !peers.is_empty() && node.raft_listen.is_none() {
        anyhow::bail!("onelog.peers (--peers) needs onelog.raft.listener (--raft-listen): peers must be able to reach this node");
    }
    for spec in &node.listeners {
        std::net::TcpListener::bind(resolve(&spec.endpoint.address())?)
            .with_context(|| format!("the Kafka listener {} (listeners)", spec.endpoint))?;
    }
    if let Some(admin) = node.admin_listen {
        std::net::TcpListener::bind(admin)
            .with_context(|| format!("the admin API listener {admin} (onelog.admin.listener)"))?;
    }
    Ok((kafka_listeners, peers))
}

/// Every group this node runs: group 0 (whose preferred leader is the layout's, its voters
/// the configured nodes as ever) and the others it opened.
fn node_groups(opened: &Opened, others: &[(Opened, Vec<u64>)], layout: &Layout) -> NodeGroups {
    let mut handles = vec![GroupHandle::of(opened, layout.voters[0].clone())];
    handles.extend(others.iter().map(|(o, placed)| GroupHandle::of(o, placed.clone())));
    NodeGroups::new(layout.voters.len() as u32, handles)
}

/// Serves the Raft port when one is configured and returns its address. A one-node cluster
/// has no peers to hear from; the Raft listener is bound when asked for (or when peers
/// exist), so many single-node brokers can share a machine.
async fn serve_raft_port(
    node: &NodeSettings,
    (opened, groups): (&Opened, &NodeGroups),
    identity: &Identity,
    forward: &crate::raft::transport::envelope::ForwardSlot,
    removal: &Arc<crate::raft::transport::removal::RemovalNotice>,
) -> anyhow::Result<String> {
    let Some(addr) = node.raft_listen else { return Ok(String::new()) };
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the Raft listener {addr} (onelog.raft.listener)"))?;
    let service = RaftService {
        raft: opened.raft.clone(),
        identity: identity.clone(),
        votes: opened.votes.clone(),
        log: opened.log_reader.clone(),
        forward: forward.clone(),
        removal: removal.clone(),
        groups: groups.served(),
    };
    tokio::spawn(crate::raft::transport::serve_raft(listener, service));
    Ok(addr.to_string())
}

async fn start_admin(
    node: &NodeSettings,
    (opened, groups): (&Opened, &NodeGroups),
    identity: &Identity,
    serving: &Arc<std::sync::OnceLock<crate::ctx::SharedCtx>>,
) -> anyhow::Result<()> {
    let raft = &opened.raft;
    let admin = crate::admin_api::AdminCtx {
        node_id: node.node_id,
        identity: identity.clone(),
        raft: raft.clone(),
        transfer: opened.transfer.clone(),
        applied: opened.applied.clone(),
        kafka: node.advertised_kafka.clone(),
        votes: opened.votes.clone(),
        serving: serving.clone(),
        leader_changes: crate::admin_api::leader_changes::watch(raft.clone()),
        token: node.admin_token.clone(),
        groups: groups.clone(),
    };
    crate::admin_api::start(node.admin_listen, node.admin_tls.clone(), admin).await?;
    Ok(())
}

/// A node with an empty log learns from its peers whether the cluster is new or one it lost
/// its data in (`raft::rejoin`); only for a new one does the lowest id initialize it, with
/// every voter's addresses (the others learn the membership from its first AppendEntries).
async fn join_cluster(
    node: &NodeSettings,
    identity: &Identity,
    peers: &BTreeMap<u64, NodeAddr>,
    opened: &Opened,
    me: NodeAddr,
) -> anyhow::Result<()> {
    let raft = &opened.raft;
    let catching_up = match opened.start {
        rejoin::Start::Normal => None,
        rejoin::Start::CatchingUp(target) => Some(target),
        rejoin::Start::Ask => {
            match rejoin::decide(identity, peers, (&node.data_dir, 0), &opened.votes).await? {
                rejoin::Decision::NewCluster => None,
                rejoin::Decision::Existing { target } => Some(target),
            }
        }
    };
    if let Some(target) = catching_up {
        let votes = opened.votes.clone();
        tokio::spawn(rejoin::open_when_caught_up(raft.clone(), target, node.data_dir.clone(), votes));
    }
    let lowest = peers.keys().next().is_none_or(|id| node.node_id < *id);
    if catching_up.is_none() && !raft.is_initialized().await? && lowest {
        let mut members = peers.clone();
        members.insert(node.node_id, me);
        tracing::info!(node_id = node.node_id, voters = members.len(), "initializing a new cluster");
        raft.initialize(members).await?;
    }
    Ok(())
}

/// The request context once the node has caught up with the log, and the leader's duties
/// started on it.
async fn serving_ctx(
    node: &NodeSettings,
    config: &Arc<BrokerConfig>,
    (opened, connections): (&Opened, &Arc<Peers>),
    (removal, groups, remote_leaders): (
        Arc<crate::raft::transport::removal::RemovalNotice>,
        &NodeGroups,
        crate::raft::remote_leaders::RemoteLeaders,
    ),
) -> crate::ctx::SharedCtx {
    let (raft, applied) = (&opened.raft, &opened.applied);
    let inter_broker = inter_broker_listener(node);
    let with = GroupLeaderWith {
        node_id: node.node_id,
        config,
        peers: connections,
        advertised: &node.advertised,
        inter_broker: &inter_broker,
        group0: applied,
    };
    let (leadership, proposer) = crate::leader::groups::lead(&with, (raft, applied, &opened.transfer));
    // The other groups' leaderships, proposers and duties (`leader::groups`).
    let others = groups.handles.iter().filter(|h| h.group != 0);
    // One cache of share sessions per node, as per Kafka broker (`coord::share::sessions`).
    let sessions = crate::coord::share::sessions::SessionCache::default();
    let group_leaders =
        others.map(|h| group_lane(crate::leader::groups::start(&with, h), &sessions)).collect();
    wait_until_caught_up(raft, node.node_id).await;
    let duty = Arc::new(duties::DutyCtx {
        node_id: node.node_id,
        leadership: leadership.clone(),
        applied: applied.clone(),
        metadata: applied.clone(),
        proposer: proposer.clone(),
        config: config.clone(),
        removal,
        peers: connections.clone(),
    });
    let ctx = Arc::new(Ctx {
        node_id: node.node_id,
        data_dir: std::fs::canonicalize(&node.data_dir).unwrap_or_else(|_| node.data_dir.clone()),
        leadership: leadership.clone(),
        applied: applied.clone(),
        config: config.clone(),
        proposer: proposer.clone(),
        coordinators: GroupCoordinators::start(&duty, &sessions),
        txns: Arc::new(TxnCoordinator::new(0, leadership.clone(), applied.clone(), proposer.clone())),
        authorizer: Authorizer::new(config.settings.authz.clone(), applied.clone()),
        quotas: Default::default(),
        peers: connections.clone(),
        group_leaders,
        remote_leaders,
    });
    duties::start(duty.clone(), raft.clone());
    crate::coord::txn::duties::start(duty, ctx.txns.clone());
    crate::coord::xgroup::duties::start(&ctx);
    ctx
}

/// A group's lane: its leader and the coordinators of the transactional ids and group ids
/// placed in it, whose duties (timeouts, expiry, sessions) run while this node leads the group.
fn group_lane(
    leader: crate::leader::groups::GroupLeader,
    sessions: &crate::coord::share::sessions::SessionCache,
) -> crate::ctx::GroupLane {
    let (leadership, applied, proposer) =
        (&leader.duty.leadership, &leader.duty.applied, &leader.duty.proposer);
    let txns =
        Arc::new(TxnCoordinator::new(leader.group, leadership.clone(), applied.clone(), proposer.clone()));
    crate::coord::txn::duties::start(leader.duty.clone(), txns.clone());
    let coordinators = GroupCoordinators::start(&leader.duty, sessions);
    crate::ctx::GroupLane { leader, txns, coordinators }
}

/// Binds every Kafka listener, now that the node can serve.
async fn bind_kafka(
    node: &NodeSettings,
    kafka_listeners: Vec<listener::Listener>,
) -> anyhow::Result<Vec<(TcpListener, listener::Listener)>> {
    let mut bound = Vec::new();
    for (spec, kafka_listener) in node.listeners.iter().zip(kafka_listeners) {
        let socket = TcpListener::bind(resolve(&spec.endpoint.address())?)
            .await
            .with_context(|| format!("binding the Kafka listener {} (listeners)", spec.endpoint))?;
        bound.push((socket, kafka_listener));
    }
    Ok(bound)
}

/// Parses `--peers id=raft_host:port@kafka_host:port,...`.
/// The listener nodes reach each other's Kafka port on (`net::forward` speaks plain TCP): the
/// first PLAINTEXT one, else the first listener.
fn inter_broker_listener(node: &NodeSettings) -> String {
    let plaintext = node.listeners.iter().find(|l| l.protocol == SecurityProtocol::Plaintext);
    plaintext.or(node.listeners.first()).map(|l| l.endpoint.name.to_string()).unwrap_or_default()
}

fn parse_peers(peers: &[String]) -> anyhow::Result<BTreeMap<u64, NodeAddr>> {
    let mut out = BTreeMap::new();
    for peer in peers.iter().filter(|p| !p.is_empty()) {
        let (id, addrs) =
            peer.split_once('=').with_context(|| format!("--peers {peer}: expected id=raft@kafka"))?;
        let (raft, kafka) =
            addrs.split_once('@').with_context(|| format!("--peers {peer}: expected id=raft@kafka"))?;
        let id: u64 = id.parse().with_context(|| format!("--peers {peer}: bad node id"))?;
        out.insert(id, NodeAddr { raft: raft.to_string(), kafka: kafka.to_string() });
    }
    Ok(out)
}

/// Waits until a leader is known and every entry that was in the log at start is applied,
/// so the first Fetch never sees a high watermark lower than what was acknowledged before.
/// A node that is its cluster's only voter also waits until it takes writes: nothing else can
/// serve them, and a client's first Produce would otherwise meet NOT_LEADER_OR_FOLLOWER in the
/// moment between its election and applying its term's first entry. Kafka too opens its
/// listeners only once the broker has started.
async fn wait_until_caught_up(raft: &Raft, node_id: u64) {
    let mut metrics = raft.metrics();
    let target = metrics.borrow().last_log_index;
    loop {
        let ready = {
            let m = metrics.borrow();
            let sole_voter = m.membership_config.voter_ids().eq([node_id]);
            m.current_leader.is_some()
                && m.last_applied.map(|l| l.index) >= target
                && (!sole_voter || crate::raft::leads_with_own_term_applied(&m))
        };
        if ready {
            return;
        }
        if tokio::time::timeout(Duration::from_secs(10), metrics.changed()).await.is_err() {
            tracing::warn!(?target, "still waiting for a leader and for the log to be applied");
        }
    }
}

async fn shutdown_signal() {
    let mut term =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

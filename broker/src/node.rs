//! Starting and running one onelog node: storage, the Raft node, the proposer, background
//! duties, and the Kafka listener — in that order, so that no client request is served
//! before the node has applied its whole log.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use raft_store::{LogStore, LogStoreOptions};
use tokio::net::TcpListener;

use crate::config::{Args, BrokerConfig};
use crate::ctx::Ctx;
use crate::limits;
use crate::proposer::Proposer;
use crate::raft::network::Network;
use crate::raft::sm_store::{self, StateMachineStore};
use crate::raft::{NodeAddr, Raft, TypeConfig};
use crate::{duties, server};

fn raft_config() -> anyhow::Result<openraft::Config> {
    let config = openraft::Config {
        cluster_name: "onelog".to_string(),
        heartbeat_interval: 100,
        election_timeout_min: 300,
        election_timeout_max: 600,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(limits::CHECKPOINT_INTERVAL_ENTRIES),
        max_in_snapshot_log_to_keep: limits::LOG_ENTRIES_KEPT_BELOW_CHECKPOINT,
        ..Default::default()
    };
    Ok(config.validate()?)
}

/// Holds an exclusive lock on the data directory for the life of the process, so two
/// brokers can never write the same Raft log.
fn lock_data_dir(dir: &Path) -> anyhow::Result<std::fs::File> {
    use std::os::unix::io::AsRawFd;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let file = std::fs::File::create(dir.join(".lock"))?;
    // SAFETY: flock on an fd we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        anyhow::bail!("data directory {} is in use by another onelog process", dir.display());
    }
    Ok(file)
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let config = BrokerConfig::from_overrides(&args.configs)?;
    let _lock = lock_data_dir(&args.data_dir)?;
    let advertised = args.advertised_kafka.clone().unwrap_or_else(|| args.kafka_listen.to_string());
    let (host, port) = advertised.rsplit_once(':').context("--advertised-kafka must be host:port")?;
    let port: i32 = port.parse().context("--advertised-kafka port")?;
    if !args.peers.is_empty() {
        tracing::warn!(peers = ?args.peers, "multi-node clusters are not served by this build; running as one node");
    }

    let log_store =
        LogStore::<TypeConfig>::open(&args.data_dir.join("raft-log"), LogStoreOptions::default())?;
    let sm = sm_store::open(args.data_dir.join("state"), config)?;
    let state_machine = StateMachineStore { shared: sm.clone() };
    let raft =
        Raft::new(args.node_id, Arc::new(raft_config()?), Network::default(), log_store, state_machine)
            .await?;
    // A one-node cluster has no peers to hear from; the Raft listener is bound when asked for
    // (or when peers exist), so many single-node brokers can share a machine.
    let raft_addr = match args.raft_listen {
        Some(addr) => {
            let listener = TcpListener::bind(addr).await.with_context(|| format!("binding {addr}"))?;
            tokio::spawn(crate::raft::transport::serve_raft(listener, raft.clone()));
            addr.to_string()
        }
        None => String::new(),
    };
    let me = NodeAddr { raft: raft_addr, kafka: advertised.clone() };
    if !raft.is_initialized().await? {
        tracing::info!(node_id = args.node_id, "initializing a new one-node cluster");
        raft.initialize(BTreeMap::from([(args.node_id, me)])).await?;
    }
    let proposer = Proposer::start(args.node_id, raft.clone(), sm.clone());
    wait_until_caught_up(&raft).await;

    let ctx = Arc::new(Ctx {
        node_id: args.node_id,
        raft: raft.clone(),
        sm,
        proposer,
        advertised_host: host.to_string(),
        advertised_port: port,
    });
    duties::start(ctx.clone());
    let listener = TcpListener::bind(args.kafka_listen)
        .await
        .with_context(|| format!("binding {}", args.kafka_listen))?;
    tracing::info!(kafka = %args.kafka_listen, advertised = %advertised, node_id = args.node_id, "onelog ready");
    tokio::select! {
        result = server::serve(listener, ctx) => result?,
        _ = shutdown_signal() => tracing::info!("shutting down"),
    }
    raft.shutdown().await.ok();
    Ok(())
}

/// Waits until a leader is known and every entry that was in the log at start is applied,
/// so the first Fetch never sees a high watermark lower than what was acknowledged before.
async fn wait_until_caught_up(raft: &Raft) {
    let mut metrics = raft.metrics();
    let target = metrics.borrow().last_log_index;
    loop {
        let ready = {
            let m = metrics.borrow();
            m.current_leader.is_some() && m.last_applied.map(|l| l.index) >= target
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

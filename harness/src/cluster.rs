//! A multi-node onelog cluster for scenario tests that read as linear phases: start three
//! nodes, find the leader, kill it, wait for a new one, compare what every replica applied.
//!
//! Every node gets free ports (Kafka, Raft, admin) and its own directory under one temporary
//! root: `node-<id>/data` is its `--data-dir`, `node-<id>/onelog.log` receives its stdout and
//! stderr across restarts. A node keeps its ports and directory for its whole life, so
//! `kill9` + `start_node` is a restart of the same replica and `wipe` + `start_node` a replaced disk.
//!
//! [`ClusterOptions::base_port`] fixes the ports instead (data directories written by another
//! run find their peers only where they were), [`Cluster::prepare`] lays the directories out
//! without starting a node (to fill them first), and [`ClusterOptions::node_binary`] /
//! [`Cluster::set_node_binary`] run some nodes on another binary (a rolling upgrade).
//!
//! Leader and digest queries go through the admin API (`--admin-listen`, see `admin_api`).
//! A binary built without it still runs: the leader is then read from each node's Metadata
//! controller id, and `digests` fails saying the admin API is missing (never a silent pass).
//!
//! With [`ClusterOptions::link_proxies`] every directed Raft link and every Kafka listener goes
//! through a fault-injecting proxy (`links`, `netproxy`), which `partition`, `isolate`,
//! `one_way`, `delay_link`, `heal`, `raft_link` and `client_link` switch at run time; nodes
//! then advertise their client proxy, and `kafka_listen_addr` reaches a node directly.
//!
//! Like `process`, everything here blocks: call it from plain tests, or from a multi-threaded
//! tokio runtime with a worker to spare. When a test panics, `Drop` prints every node's log
//! tail and keeps the root directory.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use tempfile::TempDir;

use crate::admin_api::{self, Digest, Status};
use crate::disk::Tmpfs;
use crate::links::Links;
use crate::netproxy::ProxyHandle;
use crate::ports::free_ports;
use crate::probe::{probe_api_versions, probe_controller};
use crate::process::{onelog_binary, LOG_TAIL_LINES, READY_TIMEOUT, TERMINATE_TIMEOUT};

/// Longest `leader()` waits for every live node to name the same live leader.
pub const LEADER_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest `assert_digests_equal` waits for every live node to reach the same applied index.
pub const DIGEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The broker's `RAFT_ELECTION_TIMEOUT_MAX_MS` (broker/src/limits.rs): the harness talks to
/// processes only, so the figure is mirrored here.
pub const ELECTION_TIMEOUT_MAX: Duration = Duration::from_millis(600);
/// Pause between two polls of the cluster's state.
const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// Timeout of one Kafka probe (readiness, Metadata controller id).
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Whole-cluster start attempts when another process takes a chosen port first.
const PORT_ATTEMPTS: usize = 3;

/// The cluster's secret, in its root directory.
pub const CLUSTER_SECRET_FILE: &str = "cluster-secret";

/// How to run a cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Voters, with ids 1..=nodes.
    pub nodes: u64,
    /// `--config key=value` overrides for every node, in order.
    pub configs: Vec<(String, String)>,
    /// Extra environment variables for every node (e.g. `RUST_LOG`).
    pub env: Vec<(String, String)>,
    /// Extra environment variables for one node, after `env` (e.g. `ONELOG_FAULT` on one
    /// follower); [`Cluster::set_node_env`] changes them for the node's next start.
    pub node_env: BTreeMap<u64, Vec<(String, String)>>,
    /// The `onelog` binary; `onelog_binary(profile)` when `None`.
    pub binary: Option<PathBuf>,
    /// "debug" or "release": where to look when `binary` is `None`.
    pub profile: &'static str,
    /// Route every Raft link and Kafka listener through a fault-injecting proxy (`links`).
    pub link_proxies: bool,
    /// Nodes whose directory (data and log) is a tmpfs of this many bytes, mounted by the
    /// harness (as root) so that a run can fill one node's file system (`Cluster::data_tmpfs`).
    pub data_tmpfs: BTreeMap<u64, u64>,
    /// Kafka listeners beside the PLAINTEXT one (which readiness probes and the proxies use):
    /// (listener name, security protocol), each on its own port per node.
    pub listeners: Vec<(String, String)>,
    /// The CA file of the nodes' admin API certificate, when they serve it over HTTPS
    /// (`onelog.admin.ssl.*`): the harness's status and digest queries then use HTTPS.
    pub admin_ca: Option<PathBuf>,
    /// Fixed ports instead of free ones ([`ClusterOptions::base_port`]).
    pub base_port: Option<u16>,
    /// Another binary than `binary` for some nodes ([`ClusterOptions::node_binary`]).
    pub node_binary: BTreeMap<u64, PathBuf>,
}

impl ClusterOptions {
    /// `nodes` voters from the debug build (or `ONELOG_BIN`), no overrides.
    pub fn new(nodes: u64) -> Self {
        Self {
            nodes,
            configs: Vec::new(),
            env: Vec::new(),
            node_env: BTreeMap::new(),
            binary: None,
            profile: "debug",
            link_proxies: false,
            data_tmpfs: BTreeMap::new(),
            listeners: Vec::new(),
            admin_ca: None,
            base_port: None,
            node_binary: BTreeMap::new(),
        }
    }

    /// Fixed ports from `base`, for data directories that must find their nodes where they
    /// were (the replicated membership holds every node's Raft and Kafka addresses): node `id`
    /// serves Kafka on `base + id - 1`, Raft on `base + 100 + id - 1`, the admin API on
    /// `base + 200 + id - 1` and its `j`-th extra listener on `base + 300 + 100 * j + id - 1`,
    /// as `scripts/cluster.sh` lays them out. Starting fails, naming the port, when one is taken.
    pub fn base_port(mut self, base: u16) -> Self {
        self.base_port = Some(base);
        self
    }

    /// Node `id` runs `binary` instead of the cluster's (a mixed-version cluster);
    /// [`Cluster::set_node_binary`] changes it for the node's next start.
    pub fn node_binary(mut self, id: u64, binary: &Path) -> Self {
        self.node_binary.insert(id, binary.to_path_buf());
        self
    }

    /// The admin API speaks HTTPS with a certificate `ca` signed (the TLS configs themselves
    /// come from [`ClusterOptions::config`]).
    pub fn admin_ca(mut self, ca: &Path) -> Self {
        self.admin_ca = Some(ca.to_path_buf());
        self
    }

    /// Another Kafka listener on every node, `name` speaking `protocol` (`SSL`, `SASL_SSL`,
    /// `SASL_PLAINTEXT`, `PLAINTEXT`); its TLS and SASL configs come from [`ClusterOptions::config`].
    pub fn listener(mut self, name: &str, protocol: &str) -> Self {
        self.listeners.push((name.to_ascii_uppercase(), protocol.to_ascii_uppercase()));
        self
    }

    /// Sets an environment variable for node `id` only.
    pub fn node_env(mut self, id: u64, key: &str, value: impl ToString) -> Self {
        self.node_env.entry(id).or_default().push((key.to_owned(), value.to_string()));
        self
    }

    /// One proxy per directed Raft link and per Kafka listener, for `partition`, `isolate`,
    /// `one_way`, `delay_link` and `client_link` (see `links`). Needs the broker built with
    /// the `fault-injection` feature (`ONELOG_RAFT_DIAL`).
    pub fn link_proxies(mut self) -> Self {
        self.link_proxies = true;
        self
    }

    /// Node `id`'s directory on its own tmpfs of `bytes` (needs root; starting the cluster
    /// fails, saying so, without it).
    pub fn data_tmpfs(mut self, id: u64, bytes: u64) -> Self {
        self.data_tmpfs.insert(id, bytes);
        self
    }

    /// Adds a `--config key=value` override.
    pub fn config(mut self, key: &str, value: impl ToString) -> Self {
        self.configs.push((key.to_owned(), value.to_string()));
        self
    }
}

struct Node {
    dir: PathBuf,
    kafka: SocketAddr,
    /// What the node advertises and clients dial: its client proxy, or `kafka` without one.
    advertised: SocketAddr,
    raft: SocketAddr,
    admin: SocketAddr,
    /// The other listeners' addresses, by listener name.
    listeners: BTreeMap<String, SocketAddr>,
    /// `None` once the harness stopped it (kill9, terminate) or before the first start.
    child: Option<Child>,
    /// Stopped with SIGSTOP and not yet continued.
    paused: bool,
    /// How it ended, when it exited on its own (kept for [`Cluster::wait_exit`]).
    exited: Option<ExitStatus>,
}

/// A running cluster of onelog processes; see the module documentation.
pub struct Cluster {
    /// Dropped (unmounted) before `root` is removed, after `drop` stopped the nodes.
    tmpfs: BTreeMap<u64, Tmpfs>,
    root: Option<TempDir>,
    root_path: PathBuf,
    binary: PathBuf,
    has_admin: bool,
    options: ClusterOptions,
    nodes: BTreeMap<u64, Node>,
    links: Option<Links>,
}

impl Cluster {
    /// Starts `nodes` voters and waits until each serves Kafka requests (which a onelog node
    /// does only once it knows a leader and has applied its log).
    pub fn start(nodes: u64) -> Result<Self> {
        Self::start_with(ClusterOptions::new(nodes))
    }

    /// [`Cluster::start`] with options.
    pub fn start_with(options: ClusterOptions) -> Result<Self> {
        let (binary, has_admin) = Self::binary(&options)?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut cluster = Self::allocate(options.clone(), binary.clone(), has_admin)?;
            let ids = cluster.ids();
            match cluster.start_nodes(&ids) {
                Ok(()) => return Ok(cluster),
                Err(e)
                    if attempt < PORT_ATTEMPTS
                        && options.base_port.is_none()
                        && cluster.any_log_mentions("in use") =>
                {
                    eprintln!("cluster start attempt {attempt}: a port was taken ({e:#}); retrying");
                }
                Err(e) => return Err(e.context(format!("starting {} nodes", options.nodes))),
            }
        }
    }

    /// The cluster's directories and ports, no node started: a test puts data into
    /// [`Cluster::data_dir`] first (an old release's data directories, say), then calls
    /// [`Cluster::start_all`].
    pub fn prepare(options: ClusterOptions) -> Result<Self> {
        let (binary, has_admin) = Self::binary(&options)?;
        Self::allocate(options, binary, has_admin)
    }

    /// The cluster's binary, and whether it serves the admin API.
    fn binary(options: &ClusterOptions) -> Result<(PathBuf, bool)> {
        if options.nodes == 0 {
            bail!("a cluster needs at least one node");
        }
        let binary = match &options.binary {
            Some(b) => b.clone(),
            None => onelog_binary(options.profile)?,
        };
        let has_admin = supports_admin_listen(&binary)?;
        Ok((binary, has_admin))
    }

    fn allocate(options: ClusterOptions, binary: PathBuf, has_admin: bool) -> Result<Self> {
        let root = tempfile::Builder::new().prefix("onelog-cluster-").tempdir()?;
        let root_path = root.path().to_path_buf();
        // Every node proves this secret in its Raft handshake (`onelog.cluster.secret.file`).
        let secret: String = (0..32).map(|_| format!("{:02x}", rand::random::<u8>())).collect();
        std::fs::write(root_path.join(CLUSTER_SECRET_FILE), secret)?;
        let per_node = 3 + options.listeners.len();
        let ports = match options.base_port {
            Some(base) => fixed_ports(base, options.nodes, options.listeners.len())?,
            None => free_ports(per_node * options.nodes as usize)?,
        };
        let addr = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        let mut nodes = BTreeMap::new();
        let mut tmpfs = BTreeMap::new();
        for (i, id) in (1..=options.nodes).enumerate() {
            let dir = root_path.join(format!("node-{id}"));
            if let Some(bytes) = options.data_tmpfs.get(&id) {
                tmpfs.insert(id, Tmpfs::mount(&dir, *bytes)?);
            }
            std::fs::create_dir_all(dir.join("data"))?;
            let base = per_node * i;
            let (kafka, raft, admin) = (addr(ports[base]), addr(ports[base + 1]), addr(ports[base + 2]));
            let advertised = kafka;
            let listeners = options
                .listeners
                .iter()
                .enumerate()
                .map(|(j, (name, _))| (name.clone(), addr(ports[base + 3 + j])))
                .collect();
            nodes.insert(
                id,
                Node {
                    dir,
                    kafka,
                    advertised,
                    raft,
                    admin,
                    listeners,
                    child: None,
                    paused: false,
                    exited: None,
                },
            );
        }
        let links = match options.link_proxies {
            true => Some(Links::new(&nodes.iter().map(|(id, n)| (*id, (n.raft, n.kafka))).collect())?),
            false => None,
        };
        if let Some(links) = &links {
            for (id, node) in nodes.iter_mut() {
                node.advertised = links.client(*id)?.addr();
            }
        }
        Ok(Self { tmpfs, root: Some(root), root_path, binary, has_admin, options, nodes, links })
    }

    /// The Kafka part of a node's `--peers` entry: `host:port`, or every listener.
    fn peer_kafka(node: &Node) -> String {
        let others = node.listeners.iter().map(|(name, at)| format!(";{name}://{at}"));
        match node.listeners.is_empty() {
            true => node.advertised.to_string(),
            false => format!("PLAINTEXT://{}{}", node.advertised, others.collect::<String>()),
        }
    }

    /// Node `id`'s address on the listener `name` ([`ClusterOptions::listener`]).
    pub fn listener_addr(&self, id: u64, name: &str) -> SocketAddr {
        self.node(id).listeners[&name.to_ascii_uppercase()]
    }

    /// Every node's address on the listener `name`, comma separated (`bootstrap.servers`).
    pub fn listener_bootstrap(&self, name: &str) -> String {
        self.ids().iter().map(|id| self.listener_addr(*id, name).to_string()).collect::<Vec<_>>().join(",")
    }

    /// Node ids, ascending.
    pub fn ids(&self) -> Vec<u64> {
        self.nodes.keys().copied().collect()
    }

    /// Node `id`'s directory (its data directory and log inside), when it is a tmpfs of its own
    /// (`ClusterOptions::data_tmpfs`).
    pub fn data_tmpfs(&self, id: u64) -> Option<&Path> {
        self.tmpfs.get(&id).map(Tmpfs::path)
    }

    /// Nodes that run and are not paused: the ones that can answer.
    pub fn live_ids(&mut self) -> Vec<u64> {
        let ids = self.ids();
        ids.into_iter().filter(|id| self.is_running(*id) && !self.nodes[id].paused).collect()
    }

    /// Whether the broker was started with `--admin-listen` (the binary supports it).
    pub fn has_admin_api(&self) -> bool {
        self.has_admin
    }

    /// `host:port,...` of every node, for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        self.nodes.values().map(|n| n.advertised.to_string()).collect::<Vec<_>>().join(",")
    }

    /// `host:port,...` of the nodes that run and are not paused: a client given only these
    /// never reports a refused connection to a node the test stopped on purpose.
    pub fn live_bootstrap(&mut self) -> String {
        let live = self.live_ids();
        live.iter().map(|id| self.kafka_addr(*id).to_string()).collect::<Vec<_>>().join(",")
    }

    /// The Kafka address a node advertises and clients dial: its client proxy with
    /// [`ClusterOptions::link_proxies`], else its listener.
    pub fn kafka_addr(&self, id: u64) -> SocketAddr {
        self.node(id).advertised
    }

    /// A node's own Kafka listener, bypassing any proxy.
    pub fn kafka_listen_addr(&self, id: u64) -> SocketAddr {
        self.node(id).kafka
    }

    /// A node's Raft listener (what `POST /members/add-learner` names as `raft`).
    pub fn raft_addr(&self, id: u64) -> SocketAddr {
        self.node(id).raft
    }

    /// A node's admin API listener (bound only when [`Cluster::has_admin_api`]).
    pub fn admin_addr(&self, id: u64) -> SocketAddr {
        self.node(id).admin
    }

    /// The cluster's root directory (one `node-<id>` directory per node).
    pub fn root(&self) -> &Path {
        &self.root_path
    }

    /// A node's directory (holds `data/` and `onelog.log`).
    pub fn dir(&self, id: u64) -> &Path {
        &self.node(id).dir
    }

    /// A node's `--data-dir`.
    pub fn data_dir(&self, id: u64) -> PathBuf {
        self.dir(id).join("data")
    }

    /// The file that receives a node's stdout and stderr.
    pub fn log_path(&self, id: u64) -> PathBuf {
        self.dir(id).join("onelog.log")
    }

    /// A node's process id while it runs.
    pub fn pid(&self, id: u64) -> Option<u32> {
        self.node(id).child.as_ref().map(Child::id)
    }

    fn node(&self, id: u64) -> &Node {
        self.nodes.get(&id).unwrap_or_else(|| panic!("no node {id} in this cluster"))
    }

    fn node_mut(&mut self, id: u64) -> &mut Node {
        self.nodes.get_mut(&id).unwrap_or_else(|| panic!("no node {id} in this cluster"))
    }

    /// Whether a node's process is alive (paused counts as alive).
    pub fn is_running(&mut self, id: u64) -> bool {
        match &mut self.node_mut(id).child {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    // ---- process control -------------------------------------------------------------------

    /// Starts a stopped node on its ports and directory and waits until it serves Kafka.
    /// (Named apart from the constructor [`Cluster::start`], which Rust cannot overload.)
    pub fn start_node(&mut self, id: u64) -> Result<()> {
        self.start_nodes(&[id])
    }

    /// Starts a stopped node without waiting for it to serve: one expected to crash while it
    /// catches up, say. See [`Cluster::wait_serving`] and [`Cluster::wait_exit`].
    pub fn spawn_node(&mut self, id: u64) -> Result<()> {
        self.spawn(id)
    }

    /// Starts every stopped node at once, then waits for each (a restarted cluster needs a
    /// quorum running before any node can serve).
    pub fn start_all(&mut self) -> Result<()> {
        let ids = self.ids();
        let stopped: Vec<u64> = ids.into_iter().filter(|id| self.node(*id).child.is_none()).collect();
        self.start_nodes(&stopped)
    }

    /// Adds node `id` to the harness (free ports, its own directory) and spawns it with
    /// `--peers` listing every node already known. `id` must exceed every existing id, so the
    /// node never initializes a cluster of its own: it waits, serving its admin API but not
    /// Kafka, until the leader adds it (`POST /members/add-learner`). Does not wait; see
    /// [`Cluster::wait_serving`].
    pub fn spawn_joining_node(&mut self, id: u64) -> Result<()> {
        if let Some(highest) = self.nodes.keys().next_back().filter(|highest| id <= **highest) {
            bail!("joining node {id} must have an id above every existing one (highest: {highest})");
        }
        let dir = self.root_path.join(format!("node-{id}"));
        std::fs::create_dir_all(dir.join("data"))?;
        let ports = free_ports(3 + self.options.listeners.len())?;
        let addr = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        let (kafka, raft, admin) = (addr(ports[0]), addr(ports[1]), addr(ports[2]));
        let advertised = kafka;
        let listeners = self
            .options
            .listeners
            .iter()
            .enumerate()
            .map(|(j, (name, _))| (name.clone(), addr(ports[3 + j])))
            .collect();
        self.nodes.insert(
            id,
            Node { dir, kafka, advertised, raft, admin, listeners, child: None, paused: false, exited: None },
        );
        self.spawn(id)
    }

    /// Waits until a running node serves Kafka (at most `READY_TIMEOUT`); fails at once if it
    /// exits.
    pub fn wait_serving(&mut self, id: u64) -> Result<()> {
        self.wait_ready(id, Instant::now() + READY_TIMEOUT)
    }

    fn start_nodes(&mut self, ids: &[u64]) -> Result<()> {
        for &id in ids {
            self.spawn(id)?;
        }
        let deadline = Instant::now() + READY_TIMEOUT;
        for &id in ids {
            self.wait_ready(id, deadline)?;
        }
        Ok(())
    }

    fn spawn(&mut self, id: u64) -> Result<()> {
        if self.is_running(id) {
            bail!("start: node {id} (pid {:?}) is still running", self.pid(id));
        }
        let node = self.node(id);
        let binary = self.options.node_binary.get(&id).unwrap_or(&self.binary).clone();
        let log = File::options().create(true).append(true).open(self.log_path(id))?;
        let peers: Vec<String> = self
            .nodes
            .iter()
            .filter(|(other, _)| **other != id)
            .map(|(other, n)| format!("{other}={}@{}", n.raft, Self::peer_kafka(n)))
            .collect();
        let mut command = Command::new(&binary);
        command
            .arg("--node-id")
            .arg(id.to_string())
            .arg("--data-dir")
            .arg(self.data_dir(id))
            .arg("--kafka-listen")
            .arg(node.kafka.to_string())
            .arg("--advertised-kafka")
            .arg(node.advertised.to_string());
        if !node.listeners.is_empty() {
            let all = |first: SocketAddr| {
                let others = node.listeners.iter().map(|(name, at)| format!(",{name}://{at}"));
                format!("PLAINTEXT://{first}{}", others.collect::<String>())
            };
            let map: String =
                self.options.listeners.iter().map(|(name, protocol)| format!(",{name}:{protocol}")).collect();
            command
                .arg("--config")
                .arg(format!("listeners={}", all(node.kafka)))
                .arg("--config")
                .arg(format!("advertised.listeners={}", all(node.advertised)))
                .arg("--config")
                .arg(format!("listener.security.protocol.map=PLAINTEXT:PLAINTEXT{map}"));
        }
        command.arg("--raft-listen").arg(node.raft.to_string());
        if !peers.is_empty() {
            command.arg("--peers").arg(peers.join(","));
        }
        if self.has_admin {
            command.arg("--admin-listen").arg(node.admin.to_string());
        }
        for (key, value) in &self.options.configs {
            command.arg("--config").arg(format!("{key}={value}"));
        }
        // Plain log files: tracing-subscriber honours NO_COLOR.
        command.env("NO_COLOR", "1");
        // Through the environment, so that a test's `node_env` can give one node another.
        command.env("ONELOG_CLUSTER_SECRET_FILE", self.root_path.join(CLUSTER_SECRET_FILE));
        command.envs(self.options.env.iter().map(|(k, v)| (k, v)));
        command.envs(self.options.node_env.get(&id).into_iter().flatten().map(|(k, v)| (k, v)));
        if let Some(dial) = self.links.as_ref().and_then(|l| l.dial_env(id)) {
            command.env("ONELOG_RAFT_DIAL", dial);
        }
        command.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
        let child = command.spawn().with_context(|| format!("spawning {}", binary.display()))?;
        let node = self.node_mut(id);
        node.child = Some(child);
        node.paused = false;
        Ok(())
    }

    fn wait_ready(&mut self, id: u64, deadline: Instant) -> Result<()> {
        // The node itself, not its client proxy, which a test may have cut.
        let addr = self.kafka_listen_addr(id);
        loop {
            self.check_not_exited(id)?;
            let probe = probe_api_versions(addr, PROBE_TIMEOUT);
            if probe.is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "node {id} not serving Kafka within {READY_TIMEOUT:?}: {:#}\n{}",
                    probe.unwrap_err(),
                    self.log_tails()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Fails if a node the harness started has exited on its own (a crash, an assertion, a
    /// fatal-stop), with its exit status and log tail.
    fn check_not_exited(&mut self, id: u64) -> Result<()> {
        let node = self.node_mut(id);
        let Some(child) = &mut node.child else { return Ok(()) };
        if let Some(status) = child.try_wait()? {
            node.child = None;
            node.exited = Some(status);
            bail!(
                "node {id} exited on its own ({status}){}; log tail:\n{}",
                self.log_panics(id),
                self.log_tail(id, LOG_TAIL_LINES)
            );
        }
        Ok(())
    }

    /// Fails if any node the harness started has exited on its own.
    pub fn check_none_exited(&mut self) -> Result<()> {
        for id in self.ids() {
            self.check_not_exited(id)?;
        }
        Ok(())
    }

    /// The binary node `id` runs from its next start on (a rolling upgrade or a rollback).
    pub fn set_node_binary(&mut self, id: u64, binary: &Path) {
        self.options.node_binary.insert(id, binary.to_path_buf());
    }

    /// The binary node `id` runs (or would run at its next start).
    pub fn node_binary(&self, id: u64) -> &Path {
        self.options.node_binary.get(&id).unwrap_or(&self.binary)
    }

    /// Replaces node `id`'s own environment variables (see [`ClusterOptions::node_env`]) for
    /// its next start, e.g. to restart it without the fault it was started with.
    pub fn set_node_env(&mut self, id: u64, env: Vec<(String, String)>) {
        self.options.node_env.insert(id, env);
    }

    /// SIGKILL, then reap. The node keeps its ports and directory for [`Cluster::start_node`].
    pub fn kill9(&mut self, id: u64) -> Result<()> {
        self.check_not_exited(id)?;
        let node = self.node_mut(id);
        let mut child = node.child.take().with_context(|| format!("kill9: node {id} is not running"))?;
        node.paused = false;
        child.kill().context("SIGKILL")?;
        child.wait()?;
        Ok(())
    }

    /// SIGSTOP: the process stays, frozen, with its sockets open (peers see silence, not a
    /// closed connection).
    pub fn sigstop(&mut self, id: u64) -> Result<()> {
        self.signal(id, libc::SIGSTOP)?;
        self.node_mut(id).paused = true;
        Ok(())
    }

    /// SIGCONT after [`Cluster::sigstop`].
    pub fn sigcont(&mut self, id: u64) -> Result<()> {
        self.signal(id, libc::SIGCONT)?;
        self.node_mut(id).paused = false;
        Ok(())
    }

    /// Waits up to `timeout` for a node to exit by itself (e.g. after its removal from the
    /// cluster); `None` if it is still running.
    pub fn wait_exit(&mut self, id: u64, timeout: Duration) -> Result<Option<ExitStatus>> {
        let deadline = Instant::now() + timeout;
        loop {
            let node = self.node_mut(id);
            let Some(child) = node.child.as_mut() else {
                return node.exited.take().map(Some).context("wait_exit: not running");
            };
            if let Some(status) = child.try_wait()? {
                node.child = None;
                return Ok(Some(status));
            }
            if Instant::now() > deadline {
                return Ok(None);
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// SIGTERM, then waits for the exit and returns its status.
    pub fn terminate(&mut self, id: u64) -> Result<ExitStatus> {
        self.signal(id, libc::SIGTERM)?;
        let deadline = Instant::now() + TERMINATE_TIMEOUT;
        loop {
            let node = self.node_mut(id);
            let child = node.child.as_mut().context("terminate: not running")?;
            if let Some(status) = child.try_wait()? {
                node.child = None;
                return Ok(status);
            }
            if Instant::now() > deadline {
                bail!("node {id} still running {TERMINATE_TIMEOUT:?} after SIGTERM");
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    fn signal(&mut self, id: u64, signal: libc::c_int) -> Result<()> {
        self.check_not_exited(id)?;
        let pid = self.pid(id).with_context(|| format!("node {id} is not running"))?;
        // SAFETY: kill(2) on a pid we spawned and have not reaped, so it names our child.
        if unsafe { libc::kill(pid as libc::pid_t, signal) } != 0 {
            return Err(std::io::Error::last_os_error()).with_context(|| format!("signal {signal} to {pid}"));
        }
        Ok(())
    }

    /// Deletes a stopped node's data directory: its next start is a replica with a new disk.
    pub fn wipe(&mut self, id: u64) -> Result<()> {
        if self.is_running(id) {
            bail!("wipe: node {id} is running; kill9 or terminate it first");
        }
        let data = self.data_dir(id);
        std::fs::remove_dir_all(&data).with_context(|| format!("deleting {}", data.display()))?;
        std::fs::create_dir_all(&data)?;
        Ok(())
    }

    // ---- network faults (ClusterOptions::link_proxies; see `links`) -------------------------

    fn links(&self) -> Result<&Links> {
        self.links.as_ref().context("network faults need ClusterOptions::link_proxies()")
    }

    /// Black-holes every Raft link between nodes of different groups, both ways; links inside
    /// a group pass. A node in no group is alone. Client links are untouched.
    pub fn partition(&self, groups: &[&[u64]]) -> Result<()> {
        self.links()?.partition(groups)
    }

    /// Cuts node `id` from every peer, both ways (its clients still reach it).
    pub fn isolate(&self, id: u64) -> Result<()> {
        self.links()?.isolate(id)
    }

    /// Holds every byte `from` sends `to` (requests and answers); `to` still reaches `from`.
    pub fn one_way(&self, from: u64, to: u64) -> Result<()> {
        self.links()?.one_way(from, to)
    }

    /// Delays both directions of the Raft link `from`→`to` (the connections `from` opens).
    pub fn delay_link(&self, from: u64, to: u64, delay: Duration) -> Result<()> {
        self.links()?.delay(from, to, delay)
    }

    /// Every Raft and client link passes again.
    pub fn heal(&self) -> Result<()> {
        self.links()?.heal();
        Ok(())
    }

    /// The proxy of the directed Raft link `from`→`to`, to set any [`crate::netproxy::Mode`].
    pub fn raft_link(&self, from: u64, to: u64) -> Result<&ProxyHandle> {
        self.links()?.raft(from, to)
    }

    /// The proxy in front of node `id`'s Kafka listener (e.g. `.set(Mode::BlackHole)` or
    /// `Mode::Refuse` to cut its clients off).
    pub fn client_link(&self, id: u64) -> Result<&ProxyHandle> {
        self.links()?.client(id)
    }

    // ---- leadership -----------------------------------------------------------------------

    /// `GET /status` of one node.
    pub fn status(&self, id: u64) -> Result<Status> {
        self.require_admin("GET /status")?;
        admin_api::status_via(self.admin_addr(id), self.options.admin_ca.as_deref())
    }

    /// The leader as one node sees it: `/status`, or Metadata's controller id without the
    /// The index node `id` has applied, from its `/status`.
    pub fn last_applied(&self, id: u64) -> Result<Option<u64>> {
        Ok(self.status(id)?.last_applied.as_u64())
    }

    /// Waits until every running node has applied what the leader had applied at the call:
    /// what an admin request changed (an ACL, a config) is then what every node answers from.
    /// Kafka's brokers apply metadata asynchronously too; a test that checks on any node
    /// right after the change waits here.
    pub fn wait_all_applied(&mut self, timeout: Duration) -> Result<()> {
        let leader = self.leader()?;
        let target = self.last_applied(leader)?.context("the leader has applied nothing")?;
        let deadline = Instant::now() + timeout;
        for id in self.live_ids() {
            while self.last_applied(id)?.unwrap_or(0) < target {
                ensure!(
                    Instant::now() < deadline,
                    "node {id} did not apply index {target} within {timeout:?}"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Ok(())
    }

    /// [`Cluster::last_applied`] once the node's admin API answers (it has just been spawned),
    /// waiting up to 20 s.
    pub fn last_applied_once_up(&self, id: u64) -> Result<Option<u64>> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match self.last_applied(id) {
                Ok(applied) => return Ok(applied),
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// admin API. `Ok(None)`: the node knows no leader.
    pub fn leader_seen_by(&self, id: u64) -> Result<Option<u64>> {
        if self.has_admin {
            return Ok(self.status(id)?.leader);
        }
        let controller = probe_controller(self.kafka_addr(id), PROBE_TIMEOUT)?;
        Ok(u64::try_from(controller).ok())
    }

    /// The leader every live node names, when they all name the same live node and (with the
    /// admin API) that node says it is the leader; each node's view otherwise.
    fn agreed_leader(&mut self) -> std::result::Result<u64, String> {
        let live = self.live_ids();
        if live.is_empty() {
            return Err("no live node".into());
        }
        let mut views = BTreeMap::new();
        for &id in &live {
            views.insert(id, self.leader_seen_by(id).map_err(|e| format!("{e:#}")));
        }
        let named: BTreeSet<Option<u64>> =
            views.values().map(|v| v.as_ref().ok().copied().flatten()).collect();
        let describe = || format!("{views:?}");
        match named.into_iter().collect::<Vec<_>>().as_slice() {
            [Some(leader)] if live.contains(leader) && views.values().all(|v| v.is_ok()) => {
                // Named and leading is not yet taking writes: until the new leader has applied
                // its own term's first entry it refuses them (NOT_CONTROLLER), which a test's
                // first raw CreateTopics would not retry.
                if self.has_admin && !self.status(*leader).is_ok_and(|s| s.serving) {
                    return Err(format!("{leader} is named but does not say it serves; {}", describe()));
                }
                Ok(*leader)
            }
            _ => Err(describe()),
        }
    }

    /// Waits until every live node names the same live leader; returns it and the time taken.
    pub fn wait_for_leader(&mut self, timeout: Duration) -> Result<(u64, Duration)> {
        let started = Instant::now();
        loop {
            self.check_none_exited()?;
            let views = match self.agreed_leader() {
                Ok(leader) => return Ok((leader, started.elapsed())),
                Err(views) => views,
            };
            if started.elapsed() > timeout {
                bail!("no leader agreed on within {timeout:?}; views: {views}\n{}", self.log_tails());
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// The leader every live node agrees on (waits up to [`LEADER_TIMEOUT`]).
    pub fn leader(&mut self) -> Result<u64> {
        Ok(self.wait_for_leader(LEADER_TIMEOUT)?.0)
    }

    /// Live nodes other than the leader, ascending.
    pub fn followers(&mut self) -> Result<Vec<u64>> {
        let leader = self.leader()?;
        Ok(self.live_ids().into_iter().filter(|id| *id != leader).collect())
    }

    // ---- replicas ---------------------------------------------------------------------------

    /// `GET /digest` of every live node.
    pub fn digests(&mut self) -> Result<BTreeMap<u64, Digest>> {
        self.require_admin("GET /digest")?;
        let mut out = BTreeMap::new();
        for id in self.live_ids() {
            out.insert(
                id,
                admin_api::digest_via(self.admin_addr(id), self.options.admin_ca.as_deref())
                    .with_context(|| format!("node {id}"))?,
            );
        }
        Ok(out)
    }

    /// Digests must be equal on every live node and agree with what was read back: each
    /// partition of `topic` spans exactly `0..records read`.
    pub fn assert_digests_match_read_back(
        &mut self,
        topic: &str,
        consumed: &crate::kafka::PartitionRecords,
    ) -> Result<BTreeMap<u64, Digest>> {
        let digests = self.assert_digests_equal()?;
        for (id, digest) in &digests {
            for ((_, partition), records) in consumed.iter().filter(|((t, _), _)| t == topic) {
                let p = digest
                    .partitions
                    .iter()
                    .find(|p| p.topic == topic && p.partition == *partition)
                    .with_context(|| format!("node {id}: digest lacks {topic}/{partition}"))?;
                anyhow::ensure!(
                    (p.log_start_offset, p.log_end_offset) == (0, records.len() as i64),
                    "node {id}: {topic}/{partition} spans {}..{} but {} records were read back",
                    p.log_start_offset,
                    p.log_end_offset,
                    records.len()
                );
            }
        }
        Ok(digests)
    }

    /// Waits until every live node reports the same `last_applied`, then requires identical
    /// partitions (offsets and hash) on all of them. A mismatch must show on two reads at the
    /// same applied index, so a digest taken mid-apply cannot fail the test alone.
    pub fn assert_digests_equal(&mut self) -> Result<BTreeMap<u64, Digest>> {
        self.require_admin("GET /digest")?;
        let started = Instant::now();
        let mut mismatches = 0;
        loop {
            self.check_none_exited()?;
            // A node busy applying may miss one request's timeout: retried until the deadline.
            let seen = match self.digests() {
                Ok(digests) => {
                    let applied: BTreeSet<String> =
                        digests.values().map(|d| d.last_applied.to_string()).collect();
                    if applied.len() == 1 {
                        match digest_differences(&digests) {
                            None => return Ok(digests),
                            Some(report) if mismatches >= 1 => {
                                bail!("replicas diverge at last_applied {applied:?}:\n{report}")
                            }
                            Some(_) => mismatches += 1,
                        }
                    }
                    let applied: Vec<String> =
                        digests.iter().map(|(id, d)| format!("node {id}: {}", d.last_applied)).collect();
                    applied.join(", ")
                }
                Err(e) => format!("{e:#}"),
            };
            if started.elapsed() > DIGEST_TIMEOUT {
                bail!(
                    "replicas did not reach the same last_applied within {DIGEST_TIMEOUT:?}: {seen}\n{}",
                    self.log_tails()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn require_admin(&self, what: &str) -> Result<()> {
        if !self.has_admin {
            bail!(
                "{what} needs the admin API, but {} has no --admin-listen flag (blocked on the broker)",
                self.binary.display()
            );
        }
        Ok(())
    }

    // ---- logs -------------------------------------------------------------------------------

    /// Waits up to 10 s for node `id`'s log to contain `needle`.
    pub fn wait_for_log(&self, id: u64, needle: &str) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if std::fs::read_to_string(self.log_path(id))?.contains(needle) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("node {id}'s log never said {needle:?}")
    }

    /// The last `lines` lines of a node's log.
    pub fn log_tail(&self, id: u64, lines: usize) -> String {
        let Ok(file) = File::open(self.log_path(id)) else {
            return String::from("<no log>");
        };
        let all: Vec<String> = BufReader::new(file).lines().map_while(|l| l.ok()).collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Each panic in a node's log with its message (the line after `panicked at`), which a
    /// backtrace would push out of the tail; empty when there is none.
    pub fn log_panics(&self, id: u64) -> String {
        let Ok(file) = File::open(self.log_path(id)) else { return String::new() };
        let lines: Vec<String> = BufReader::new(file).lines().map_while(|l| l.ok()).collect();
        let mut out = String::new();
        for (i, line) in lines.iter().enumerate().filter(|(_, l)| l.contains("panicked at")) {
            let message = lines.get(i + 1).map_or("", String::as_str);
            let _ = write!(out, "\n  {line}\n  {message}");
        }
        if out.is_empty() {
            return out;
        }
        format!(" after a panic:{out}\n")
    }

    /// Every node's log tail, headed by its id and path.
    pub fn log_tails(&self) -> String {
        let mut out = String::new();
        for id in self.ids() {
            let _ = writeln!(
                out,
                "--- node {id} log tail ({}) ---\n{}",
                self.log_path(id).display(),
                self.log_tail(id, LOG_TAIL_LINES)
            );
        }
        out
    }

    /// Whether any node's whole log holds `text`: a start-up error's message comes before
    /// its backtrace, which pushes it out of the tail (a port taken was not retried so).
    fn any_log_mentions(&self, text: &str) -> bool {
        self.ids()
            .into_iter()
            .any(|id| std::fs::read_to_string(self.log_path(id)).is_ok_and(|l| l.contains(text)))
    }

    /// Returns the value, or panics with the error so that `Drop` prints every node's log tail
    /// and keeps the directories. Tests end with `cluster.unwrap_or_dump(scenario(&mut c).await)`.
    /// Keeps the cluster directory (node data and logs) when the cluster is dropped; its path.
    pub fn keep_dir(&mut self) -> Option<PathBuf> {
        self.root.take().map(|root| root.keep())
    }

    pub fn unwrap_or_dump<T>(&self, result: Result<T>) -> T {
        match result {
            Ok(value) => value,
            Err(error) => panic!("{error:?}"),
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in self.nodes.values_mut() {
            if let Some(mut child) = node.child.take() {
                // SIGKILL ends a stopped process too.
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if std::thread::panicking() {
            eprintln!("{}", self.log_tails());
            if let Some(root) = self.root.take() {
                eprintln!("kept cluster directory {}", root.keep().display());
            }
        }
    }
}

/// Describes how digests differ, or `None` when every node holds the same partitions.
fn digest_differences(digests: &BTreeMap<u64, Digest>) -> Option<String> {
    let mut all = digests.iter();
    let (first_id, first) = all.next()?;
    let mut report = String::new();
    for (id, digest) in all {
        if digest.partitions == first.partitions {
            continue;
        }
        let _ = writeln!(report, "node {id} vs node {first_id}:");
        let theirs: BTreeMap<(&str, i32), _> =
            digest.partitions.iter().map(|p| ((p.topic.as_str(), p.partition), p)).collect();
        let ours: BTreeMap<(&str, i32), _> =
            first.partitions.iter().map(|p| ((p.topic.as_str(), p.partition), p)).collect();
        let keys: BTreeSet<_> = theirs.keys().chain(ours.keys()).collect();
        for key in keys {
            if theirs.get(key) != ours.get(key) {
                let _ =
                    writeln!(report, "  {}/{}: {:?} vs {:?}", key.0, key.1, theirs.get(key), ours.get(key));
            }
        }
    }
    (!report.is_empty()).then_some(report)
}

/// The ports of [`ClusterOptions::base_port`], node by node in the order `allocate` reads
/// them (Kafka, Raft, admin, then each extra listener); fails naming a port already taken.
fn fixed_ports(base: u16, nodes: u64, listeners: usize) -> Result<Vec<u16>> {
    let mut ports = Vec::new();
    for i in 0..nodes as u32 {
        let mut offsets = vec![0, 100, 200];
        offsets.extend((0..listeners as u32).map(|j| 300 + 100 * j));
        for offset in offsets {
            let port = u32::from(base) + offset + i;
            let port = u16::try_from(port).map_err(|_| anyhow!("fixed port {port} is above 65535"))?;
            std::net::TcpListener::bind(("127.0.0.1", port))
                .with_context(|| format!("fixed port {port} (base {base}) is not free on 127.0.0.1"))?;
            ports.push(port);
        }
    }
    Ok(ports)
}

/// Whether `onelog --help` lists `--admin-listen`.
pub fn supports_admin_listen(binary: &Path) -> Result<bool> {
    let output = Command::new(binary)
        .arg("--help")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {} --help", binary.display()))?;
    if !output.status.success() {
        return Err(anyhow!("{} --help exited with {}", binary.display(), output.status));
    }
    Ok(String::from_utf8_lossy(&output.stdout).contains("--admin-listen"))
}

//! What differs per node, typed: its id, data directory and addresses, read from the
//! configs `defs::NODE_CONFIGS` names (Kafka's `node.id`, `log.dirs`, `listeners`,
//! `advertised.listeners`, and onelog's Raft, peer and admin settings).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};

use super::listeners::{self, resolve, Endpoint};
use super::security::{self, ListenerSpec, TlsSettings};
use super::Values;

/// A node's identity and addresses.
#[derive(Debug, Clone)]
pub struct NodeSettings {
    pub node_id: u64,
    /// `log.dirs`: onelog keeps one data directory.
    pub data_dir: PathBuf,
    /// `listeners`, as given (`PLAINTEXT://127.0.0.1:9092,SSL://…`), for messages.
    pub kafka_listener: String,
    /// Every Kafka listener, in the order given, with what it speaks.
    pub listeners: Vec<ListenerSpec>,
    /// `advertised.listeners`: what clients are told to connect to, per listener name.
    pub advertised: Vec<Endpoint>,
    /// The first listener's bind address (`--kafka-listen`).
    pub kafka_listen: SocketAddr,
    /// The first advertised listener's host:port (`--advertised-kafka`).
    pub advertised_kafka: String,
    pub raft_listen: Option<SocketAddr>,
    /// Other voters as id=raft_host:port@kafka_host:port.
    pub peers: Vec<String>,
    pub admin_listen: Option<SocketAddr>,
    /// `onelog.cluster.secret.file`'s content: the key of the Raft handshake; `None` when unset.
    pub cluster_secret: Option<Arc<[u8]>>,
    /// `onelog.admin.token.file`'s content: the admin API's bearer token; `None` when unset.
    pub admin_token: Option<Arc<[u8]>>,
    /// `onelog.raft.ssl.*`: mutual TLS on the Raft port and every connection to a peer.
    pub raft_tls: Option<TlsSettings>,
    /// `onelog.admin.ssl.*`: the admin API serves HTTPS only.
    pub admin_tls: Option<TlsSettings>,
}

impl NodeSettings {
    pub(super) fn parse(c: &Values) -> anyhow::Result<Self> {
        let node_id = c.int("node.id")? as u64;
        let dirs = list(c.text("log.dirs")?);
        let [dir] = dirs.as_slice() else {
            bail!(
                "log.dirs={} ({}): onelog keeps exactly one data directory",
                c.text("log.dirs")?,
                c.origin("log.dirs")
            );
        };
        let kafka_listener = c.text("listeners")?.trim().to_string();
        let map_key = "listener.security.protocol.map";
        let map = listeners::protocol_map(c.text(map_key)?)
            .with_context(|| format!("{map_key} ({})", c.origin(map_key)))?;
        let parsed = listeners::endpoints(&kafka_listener, &map)
            .with_context(|| format!("listeners={kafka_listener} ({})", c.origin("listeners")))?;
        let mut specs = Vec::new();
        for (endpoint, protocol) in parsed {
            resolve(&endpoint.address())
                .with_context(|| format!("listeners={kafka_listener} ({})", c.origin("listeners")))?;
            specs.push(ListenerSpec::parse(c, endpoint, protocol)?);
        }
        let endpoints: Vec<Endpoint> = specs.iter().map(|s| s.endpoint.clone()).collect();
        let advertised = listeners::advertised(c.text("advertised.listeners")?, &endpoints, &map)
            .with_context(|| format!("advertised.listeners ({})", c.origin("advertised.listeners")))?;
        let kafka_listen = resolve(&endpoints[0].address())?;
        let advertised_kafka = advertised.first().map(Endpoint::address).unwrap_or_default();
        Ok(NodeSettings {
            node_id,
            data_dir: PathBuf::from(dir),
            kafka_listener,
            listeners: specs,
            advertised,
            kafka_listen,
            advertised_kafka,
            raft_listen: optional_address(c, "onelog.raft.listener")?,
            peers: list(c.text("onelog.peers")?),
            admin_listen: optional_address(c, "onelog.admin.listener")?,
            cluster_secret: secret_file(c, "onelog.cluster.secret.file")?,
            admin_token: secret_file(c, "onelog.admin.token.file")?,
            raft_tls: security::port_tls(c, "onelog.raft.", true)?,
            admin_tls: security::port_tls(c, "onelog.admin.", false)?,
        })
    }
}

/// Bytes a secret (the cluster's, the admin token) needs at least: a short one could be
/// guessed offline from one recorded handshake, or online.
const SECRET_BYTES_MIN: usize = 16;

/// Reads the secret file `key` names (surrounding whitespace dropped, so `echo secret > file`
/// works).
fn secret_file(c: &Values, key: &str) -> anyhow::Result<Option<Arc<[u8]>>> {
    let path = c.text(key)?.trim();
    if path.is_empty() {
        return Ok(None);
    }
    let origin = c.origin(key);
    let bytes = std::fs::read(path).with_context(|| format!("{key}={path} ({origin}): reading it"))?;
    let secret = bytes.trim_ascii();
    if secret.len() < SECRET_BYTES_MIN {
        bail!(
            "{key}={path} ({origin}): the secret is {} bytes, at least {SECRET_BYTES_MIN} are needed \
             (e.g. `openssl rand -hex 32 > {path}`)",
            secret.len()
        );
    }
    Ok(Some(Arc::from(secret)))
}

/// A comma-separated list's non-empty items.
fn list(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

fn optional_address(c: &Values, key: &str) -> anyhow::Result<Option<SocketAddr>> {
    let text = c.text(key)?.trim();
    if text.is_empty() {
        return Ok(None);
    }
    resolve(text).map(Some).with_context(|| format!("{key}={text} ({})", c.origin(key)))
}

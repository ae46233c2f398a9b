//! What differs per node, typed: its id, data directory and addresses, read from the
//! configs `defs::NODE_CONFIGS` names (Kafka's `node.id`, `log.dirs`, `listeners`,
//! `advertised.listeners`, and onelog's Raft, peer and admin settings).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};

use super::Values;

/// The one security protocol a Kafka listener speaks until the security issue adds others.
const PLAINTEXT: &str = "PLAINTEXT";

/// A node's identity and addresses.
#[derive(Debug, Clone)]
pub struct NodeSettings {
    pub node_id: u64,
    /// `log.dirs`: onelog keeps one data directory.
    pub data_dir: PathBuf,
    /// `listeners`: the Kafka listener, as given (`PLAINTEXT://127.0.0.1:9092`), for messages.
    pub kafka_listener: String,
    pub kafka_listen: SocketAddr,
    /// host:port clients are told to connect to (Metadata).
    pub advertised_kafka: String,
    pub raft_listen: Option<SocketAddr>,
    /// Other voters as id=raft_host:port@kafka_host:port.
    pub peers: Vec<String>,
    pub admin_listen: Option<SocketAddr>,
    /// `onelog.cluster.secret.file`'s content: the key of the Raft handshake; `None` when unset.
    pub cluster_secret: Option<Arc<[u8]>>,
    /// `onelog.admin.token.file`'s content: the admin API's bearer token; `None` when unset.
    pub admin_token: Option<Arc<[u8]>>,
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
        let (_, listen_at) =
            listener(&kafka_listener).with_context(|| format!("listeners ({})", c.origin("listeners")))?;
        let kafka_listen = resolve(listen_at)
            .with_context(|| format!("listeners={kafka_listener} ({})", c.origin("listeners")))?;
        let advertised = c.text("advertised.listeners")?.trim();
        let advertised_kafka = if advertised.is_empty() {
            listen_at.to_string()
        } else {
            let (_, at) = listener(advertised)
                .with_context(|| format!("advertised.listeners ({})", c.origin("advertised.listeners")))?;
            at.to_string()
        };
        Ok(NodeSettings {
            node_id,
            data_dir: PathBuf::from(dir),
            kafka_listener,
            kafka_listen,
            advertised_kafka,
            raft_listen: optional_address(c, "onelog.raft.listener")?,
            peers: list(c.text("onelog.peers")?),
            admin_listen: optional_address(c, "onelog.admin.listener")?,
            cluster_secret: secret_file(c, "onelog.cluster.secret.file")?,
            admin_token: secret_file(c, "onelog.admin.token.file")?,
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

/// One listener, `PLAINTEXT://host:port` or just `host:port`: (protocol, host:port).
fn listener(text: &str) -> anyhow::Result<(&str, &str)> {
    let items = text.split(',').map(str::trim).filter(|s| !s.is_empty()).count();
    if items != 1 {
        bail!("{text:?}: onelog has one Kafka listener; give one PLAINTEXT://host:port");
    }
    match text.split_once("://") {
        None => Ok((PLAINTEXT, text)),
        Some((protocol, at)) if protocol.eq_ignore_ascii_case(PLAINTEXT) => Ok((PLAINTEXT, at)),
        Some((protocol, _)) => {
            bail!("{text:?}: security protocol {protocol} is not supported, only {PLAINTEXT}")
        }
    }
}

/// host:port to one address; an empty host (`:9092`, as Kafka allows) is every interface.
fn resolve(at: &str) -> anyhow::Result<SocketAddr> {
    let at = if at.starts_with(':') { format!("0.0.0.0{at}") } else { at.to_string() };
    at.to_socket_addrs()
        .with_context(|| format!("{at:?} is not host:port"))?
        .next()
        .with_context(|| format!("{at:?} resolves to no address"))
}

fn optional_address(c: &Values, key: &str) -> anyhow::Result<Option<SocketAddr>> {
    let text = c.text(key)?.trim();
    if text.is_empty() {
        return Ok(None);
    }
    resolve(text).map(Some).with_context(|| format!("{key}={text} ({})", c.origin(key)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_take_kafkas_form_or_a_bare_address() {
        assert_eq!(listener("PLAINTEXT://127.0.0.1:9092").unwrap(), (PLAINTEXT, "127.0.0.1:9092"));
        assert_eq!(listener("127.0.0.1:9092").unwrap(), (PLAINTEXT, "127.0.0.1:9092"));
        assert!(listener("SASL_SSL://h:1").unwrap_err().to_string().contains("SASL_SSL"));
        assert!(listener("PLAINTEXT://a:1,PLAINTEXT://b:2").is_err());
        assert_eq!(resolve(":9092").unwrap(), "0.0.0.0:9092".parse().unwrap());
        assert!(resolve("nonsense").is_err());
    }
}

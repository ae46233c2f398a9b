//! Kafka's listener configs, typed: `listeners`, `advertised.listeners` and
//! `listener.security.protocol.map`, validated with Kafka's rules and messages (each listener
//! name once, each port once, every name in the map, advertised names a subset of the
//! listeners). A name is a listener name, not a protocol: `INTERNAL://…` with
//! `INTERNAL:SSL` in the map is an SSL listener named INTERNAL, as in Kafka.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use anyhow::{bail, Context};

/// Kafka's `SecurityProtocol` (without the removed TRACE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub const ALL: [SecurityProtocol; 4] = [Self::Plaintext, Self::Ssl, Self::SaslPlaintext, Self::SaslSsl];

    pub fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }

    /// Kafka's `SecurityProtocol.forName`: case-insensitive.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name().eq_ignore_ascii_case(name))
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `NAME://host:port`: the name upper-cased (Kafka's `ListenerName.normalised`); the host may
/// be empty (every interface for a listener).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub name: Arc<str>,
    pub host: String,
    pub port: u16,
}

impl Endpoint {
    /// `host:port` (IPv6 hosts in brackets).
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.name, self.address())
    }
}

/// `listener.security.protocol.map`'s default: each protocol's name maps to itself.
pub const DEFAULT_PROTOCOL_MAP: &str =
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";

/// Parses `listener.security.protocol.map` (Kafka's `getMap` + `SecurityProtocol.forName`).
pub fn protocol_map(text: &str) -> anyhow::Result<BTreeMap<String, SecurityProtocol>> {
    let mut map = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((name, protocol)) = item.split_once(':') else {
            bail!("Map entry '{item}' is improperly formatted. It should be of the form NAME:PROTOCOL");
        };
        let protocol = SecurityProtocol::from_name(protocol.trim()).with_context(|| {
            format!(
                "No enum constant org.apache.kafka.common.security.auth.SecurityProtocol.{}",
                protocol.trim()
            )
        })?;
        map.insert(name.trim().to_ascii_uppercase(), protocol);
    }
    Ok(map)
}

/// One `NAME://host:port` item (Kafka's `EndPoint.createEndPoint`); a bare `host:port` is
/// PLAINTEXT, as onelog has always accepted (`--kafka-listen 127.0.0.1:9092`).
fn endpoint(
    item: &str,
    map: &BTreeMap<String, SecurityProtocol>,
) -> anyhow::Result<(Endpoint, SecurityProtocol)> {
    let (name, at) = item.split_once("://").unwrap_or(("PLAINTEXT", item));
    let name = name.to_ascii_uppercase();
    let (host, port) =
        at.rsplit_once(':').with_context(|| format!("Unable to parse {item} to a broker endpoint"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
    let port: u16 = port.parse().with_context(|| format!("Unable to parse {item} to a broker endpoint"))?;
    let protocol =
        *map.get(&name).with_context(|| format!("No security protocol defined for listener {name}"))?;
    Ok((Endpoint { name: Arc::from(name), host, port }, protocol))
}

/// A comma-separated listener list with Kafka's checks: distinct names and distinct ports
/// (`CoreUtils.listenerListToEndPoints`).
pub fn endpoints(
    text: &str,
    map: &BTreeMap<String, SecurityProtocol>,
) -> anyhow::Result<Vec<(Endpoint, SecurityProtocol)>> {
    let items: Vec<&str> = text.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if items.is_empty() {
        bail!("no listener given");
    }
    let parsed = items.iter().map(|item| endpoint(item, map)).collect::<anyhow::Result<Vec<_>>>()?;
    for (i, (a, _)) in parsed.iter().enumerate() {
        for (b, _) in &parsed[..i] {
            if a.name == b.name {
                bail!("Each listener must have a different name, listeners: {text}");
            }
            if a.port == b.port && a.port != 0 {
                bail!("Each listener must have a different port, listeners: {text}");
            }
        }
    }
    Ok(parsed)
}

/// `advertised.listeners`: defaults to `listeners`; its names must be among the listeners'
/// (Kafka's message).
pub fn advertised(
    text: &str,
    listeners: &[Endpoint],
    map: &BTreeMap<String, SecurityProtocol>,
) -> anyhow::Result<Vec<Endpoint>> {
    if text.trim().is_empty() {
        return Ok(listeners.to_vec());
    }
    let advertised: Vec<Endpoint> = endpoints(text, map)?.into_iter().map(|(e, _)| e).collect();
    for a in &advertised {
        if !listeners.iter().any(|l| l.name == a.name) {
            let valid: Vec<&str> = listeners.iter().map(|l| &*l.name).collect();
            bail!(
                "advertised.listeners listener names must be equal to or a subset of the ones defined in listeners. \
                 Found {}. The valid options based on currently configured listeners are {}",
                advertised.iter().map(|e| &*e.name).collect::<Vec<_>>().join(","),
                valid.join(",")
            );
        }
    }
    Ok(advertised)
}

/// host:port to one address; an empty host (`:9092`, as Kafka allows) is every interface.
pub fn resolve(at: &str) -> anyhow::Result<SocketAddr> {
    let at = if at.starts_with(':') { format!("0.0.0.0{at}") } else { at.to_string() };
    at.to_socket_addrs()
        .with_context(|| format!("{at:?} is not host:port"))?
        .next()
        .with_context(|| format!("{at:?} resolves to no address"))
}

/// The Kafka part of an `onelog.peers` entry and of the membership's `NodeAddr.kafka`: a bare
/// `host:port` (the listener named PLAINTEXT, as before there were several) or
/// `NAME://host:port;NAME://host:port`.
pub fn parse_peer_kafka(text: &str) -> Vec<Endpoint> {
    let items = text.split(';').map(str::trim).filter(|s| !s.is_empty());
    items
        .filter_map(|item| {
            let (name, at) = item.split_once("://").unwrap_or(("PLAINTEXT", item));
            let (host, port) = at.rsplit_once(':')?;
            let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
            Some(Endpoint { name: Arc::from(name.to_ascii_uppercase()), host, port: port.parse().ok()? })
        })
        .collect()
}

/// What this node records as its Kafka addresses in the membership: the bare `host:port`
/// when its one listener is PLAINTEXT (readable by nodes that predate listeners), else every
/// advertised listener.
pub fn peer_kafka_text(advertised: &[Endpoint]) -> String {
    match advertised {
        [only] if &*only.name == "PLAINTEXT" => only.address(),
        _ => advertised.iter().map(Endpoint::to_string).collect::<Vec<_>>().join(";"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_map() -> BTreeMap<String, SecurityProtocol> {
        protocol_map(DEFAULT_PROTOCOL_MAP).unwrap()
    }

    fn err(result: anyhow::Result<impl fmt::Debug>) -> String {
        format!("{:#}", result.unwrap_err())
    }

    #[test]
    fn several_listeners_and_names_from_the_map() {
        let map = protocol_map("INTERNAL:SSL,PLAINTEXT:PLAINTEXT").unwrap();
        let parsed = endpoints("internal://127.0.0.1:9093, PLAINTEXT://:9092", &map).unwrap();
        assert_eq!(parsed[0].0.to_string(), "INTERNAL://127.0.0.1:9093");
        assert_eq!(parsed[0].1, SecurityProtocol::Ssl);
        assert_eq!(parsed[1].0.host, "");
        assert_eq!(parsed[1].1, SecurityProtocol::Plaintext);
        let bare = endpoints("127.0.0.1:9092", &default_map()).unwrap();
        assert_eq!(bare[0].0.to_string(), "PLAINTEXT://127.0.0.1:9092");
    }

    #[test]
    fn kafkas_validation_messages() {
        let map = default_map();
        assert_eq!(
            err(endpoints("SSL://a:1,SSL://b:2", &map)),
            "Each listener must have a different name, listeners: SSL://a:1,SSL://b:2"
        );
        assert!(err(endpoints("SSL://a:1,PLAINTEXT://b:1", &map)).contains("different port"));
        assert_eq!(err(endpoints("CLIENT://a:1", &map)), "No security protocol defined for listener CLIENT");
        assert_eq!(
            err(protocol_map("CLIENT:TLS")),
            "No enum constant org.apache.kafka.common.security.auth.SecurityProtocol.TLS"
        );
        assert!(err(protocol_map("CLIENT")).contains("improperly formatted"));
        let listeners: Vec<Endpoint> =
            endpoints("SSL://a:1", &map).unwrap().into_iter().map(|e| e.0).collect();
        assert!(err(advertised("PLAINTEXT://h:1", &listeners, &map))
            .contains("subset of the ones defined in listeners"));
        assert_eq!(advertised("", &listeners, &map).unwrap(), listeners);
    }

    #[test]
    fn peer_addresses_in_both_forms() {
        let bare = parse_peer_kafka("127.0.0.1:9092");
        assert_eq!(bare[0].to_string(), "PLAINTEXT://127.0.0.1:9092");
        let several = parse_peer_kafka("SASL_SSL://127.0.0.1:19093;SSL://127.0.0.1:19094");
        assert_eq!(several.len(), 2);
        assert_eq!(peer_kafka_text(&several), "SASL_SSL://127.0.0.1:19093;SSL://127.0.0.1:19094");
        assert_eq!(peer_kafka_text(&bare), "127.0.0.1:9092");
        assert!(parse_peer_kafka("").is_empty());
    }
}

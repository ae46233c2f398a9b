//! Each listener's TLS and SASL settings, typed: the `ssl.*` and `sasl.*` configs with Kafka's
//! per-listener overrides (`listener.name.<name>.<key>` wins over `<key>`; for a mechanism's
//! JAAS config `listener.name.<name>.<mechanism>.sasl.jaas.config`). Files are checked when
//! the listener starts (`net::tls`), so a keystore can be replaced while the node runs. Also
//! the TLS of the node's own ports, in onelog's namespace: `onelog.raft.ssl.*` (mutual TLS
//! between nodes) and `onelog.admin.ssl.*` (HTTPS on the admin API).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};

use super::listeners::{Endpoint, SecurityProtocol};
use super::{jaas, Values};
use crate::security::principal_rules::PrincipalMapper;

/// Prefix of Kafka's per-listener overrides.
pub const LISTENER_PREFIX: &str = "listener.name.";

/// The SASL mechanisms onelog's listeners can serve (`sasl.enabled.mechanisms` may name only these).
pub const MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

/// An SSL or SASL_SSL listener's TLS settings.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// `ssl.keystore.location`: one PEM file, certificate chain and private key.
    pub keystore: PathBuf,
    /// `ssl.truststore.location`: the CA certificates client certificates must chain to.
    pub truststore: Option<PathBuf>,
    pub client_auth: ClientAuth,
    pub principal_mapper: Arc<PrincipalMapper>,
}

/// A SASL_PLAINTEXT or SASL_SSL listener's SASL settings.
#[derive(Debug, Clone)]
pub struct SaslSettings {
    /// `sasl.enabled.mechanisms`, as given (upper case).
    pub mechanisms: Vec<String>,
    /// PLAIN's users and passwords from the JAAS config.
    pub plain_users: Arc<BTreeMap<String, String>>,
    /// `connections.max.reauth.ms` (KIP-152); 0: sessions do not expire.
    pub reauth_ms: i64,
}

/// One Kafka listener: where it binds, what it speaks.
#[derive(Debug, Clone)]
pub struct ListenerSpec {
    pub endpoint: Endpoint,
    pub protocol: SecurityProtocol,
    pub tls: Option<TlsSettings>,
    pub sasl: Option<SaslSettings>,
}

/// Whether `key` is a per-listener override onelog knows: `listener.name.<name>.` then an
/// `ssl.`/`sasl.` config, a mechanism's `<mechanism>.sasl.jaas.config`, or
/// `connections.max.reauth.ms`.
pub fn is_listener_override(key: &str) -> bool {
    let Some(rest) = key.strip_prefix(LISTENER_PREFIX) else { return false };
    let Some((name, config)) = rest.split_once('.') else { return false };
    let mechanism_jaas = config.split_once('.').is_some_and(|(m, k)| {
        k == "sasl.jaas.config" && MECHANISMS.iter().any(|x| x.eq_ignore_ascii_case(m))
    });
    !name.is_empty()
        && (super::defs::SECURITY_CONFIGS
            .iter()
            .any(|d| d.name == config && d.name != "listener.security.protocol.map")
            || mechanism_jaas)
}

/// Configs whose values are secrets: never logged, never described.
pub fn is_sensitive(key: &str) -> bool {
    key.ends_with("sasl.jaas.config") || key.ends_with(".password")
}

/// The value of `key` for `listener`: its override, else the broker-wide value.
fn value<'a>(c: &'a Values, listener: &str, key: &str) -> anyhow::Result<(&'a str, String)> {
    let specific = format!("{LISTENER_PREFIX}{}.{key}", listener.to_ascii_lowercase());
    match c.get(&specific) {
        Some(v) => Ok((v, specific)),
        None => Ok((c.text(key)?, key.to_string())),
    }
}

impl ListenerSpec {
    pub(super) fn parse(c: &Values, endpoint: Endpoint, protocol: SecurityProtocol) -> anyhow::Result<Self> {
        let name = endpoint.name.clone();
        let tls = if protocol.uses_tls() {
            Some(tls(c, &name).with_context(|| format!("listener {name}"))?)
        } else {
            None
        };
        let sasl = if protocol.uses_sasl() {
            Some(sasl(c, &name).with_context(|| format!("listener {name}"))?)
        } else {
            None
        };
        Ok(ListenerSpec { endpoint, protocol, tls, sasl })
    }
}

/// The TLS of one of the node's own ports, from `<prefix>ssl.keystore.location`,
/// `<prefix>ssl.truststore.location` and, when `mutual` is false, `<prefix>ssl.client.auth`;
/// `None` when no keystore is set. `mutual` (the Raft port): both files or neither, and every
/// peer must present a certificate the truststore's CA signed.
pub(super) fn port_tls(c: &Values, prefix: &str, mutual: bool) -> anyhow::Result<Option<TlsSettings>> {
    let path = |key: &str| -> anyhow::Result<(Option<PathBuf>, String)> {
        let key = format!("{prefix}{key}");
        let text = c.text(&key)?.trim();
        Ok(((!text.is_empty()).then(|| PathBuf::from(text)), key))
    };
    let ((keystore, keystore_key), (truststore, truststore_key)) =
        (path("ssl.keystore.location")?, path("ssl.truststore.location")?);
    let client_auth = if mutual {
        match (&keystore, &truststore) {
            (None, None) => return Ok(None),
            (Some(_), Some(_)) => ClientAuth::Required,
            _ => bail!("{keystore_key} and {truststore_key} go together: set both (this node's certificate and the cluster's CA) or neither"),
        }
    } else {
        let key = format!("{prefix}ssl.client.auth");
        let auth = c.text(&key)?;
        let client_auth = client_auth(auth).with_context(|| format!("{key}={auth} ({})", c.origin(&key)))?;
        if client_auth != ClientAuth::None && truststore.is_none() {
            bail!("{key}={auth}: client certificates need {truststore_key} (the CA that signs them)");
        }
        client_auth
    };
    let Some(keystore) = keystore else {
        if truststore.is_some() {
            bail!("{truststore_key} is set but {keystore_key} is not: TLS needs this node's certificate and key");
        }
        return Ok(None);
    };
    let principal_mapper = Arc::new(PrincipalMapper::parse("DEFAULT")?);
    Ok(Some(TlsSettings { keystore, truststore, client_auth, principal_mapper }))
}

/// `ssl.client.auth`'s value.
fn client_auth(text: &str) -> anyhow::Result<ClientAuth> {
    Ok(match text.trim().to_ascii_lowercase().as_str() {
        "none" | "" => ClientAuth::None,
        "requested" => ClientAuth::Requested,
        "required" => ClientAuth::Required,
        _ => bail!("must be one of none, requested, required"),
    })
}

fn tls(c: &Values, listener: &str) -> anyhow::Result<TlsSettings> {
    for key in ["ssl.keystore.type", "ssl.truststore.type"] {
        let (kind, set_as) = value(c, listener, key)?;
        if !kind.eq_ignore_ascii_case("PEM") {
            bail!("{set_as}={kind} ({}): onelog reads PEM files only", c.origin(&set_as));
        }
    }
    let (keystore, set_as) = value(c, listener, "ssl.keystore.location")?;
    if keystore.trim().is_empty() {
        bail!(
            "{set_as} is not set: an SSL listener needs a PEM keystore (certificate chain and private key)"
        );
    }
    let (truststore, _) = value(c, listener, "ssl.truststore.location")?;
    let truststore = (!truststore.trim().is_empty()).then(|| PathBuf::from(truststore.trim()));
    let (auth, set_as) = value(c, listener, "ssl.client.auth")?;
    let client_auth =
        client_auth(auth).with_context(|| format!("{set_as}={auth} ({})", c.origin(&set_as)))?;
    if client_auth != ClientAuth::None && truststore.is_none() {
        bail!("{set_as}={auth}: client certificates need ssl.truststore.location (the CA that signs them)");
    }
    let (rules, set_as) = value(c, listener, "ssl.principal.mapping.rules")?;
    let principal_mapper =
        Arc::new(PrincipalMapper::parse(rules).with_context(|| format!("{set_as} ({})", c.origin(&set_as)))?);
    Ok(TlsSettings { keystore: PathBuf::from(keystore.trim()), truststore, client_auth, principal_mapper })
}

fn sasl(c: &Values, listener: &str) -> anyhow::Result<SaslSettings> {
    let (enabled, set_as) = value(c, listener, "sasl.enabled.mechanisms")?;
    let mechanisms: Vec<String> =
        enabled.split(',').map(|m| m.trim().to_ascii_uppercase()).filter(|m| !m.is_empty()).collect();
    for m in &mechanisms {
        if !MECHANISMS.contains(&m.as_str()) {
            bail!(
                "{set_as}={enabled} ({}): onelog serves {}, not {m}",
                c.origin(&set_as),
                MECHANISMS.join(", ")
            );
        }
    }
    if mechanisms.is_empty() {
        bail!("{set_as} is empty: a SASL listener needs at least one mechanism");
    }
    let plain_key = format!("{LISTENER_PREFIX}{}.plain.sasl.jaas.config", listener.to_ascii_lowercase());
    let (jaas_text, jaas_key) = match c.get(&plain_key) {
        Some(v) => (v, plain_key),
        None => value(c, listener, "sasl.jaas.config")?,
    };
    let plain_users = if jaas_text.trim().is_empty() {
        BTreeMap::new()
    } else {
        jaas::plain_users(jaas_text).with_context(|| format!("{jaas_key} ({})", c.origin(&jaas_key)))?
    };
    if mechanisms.iter().any(|m| m == "PLAIN") && plain_users.is_empty() {
        tracing::warn!(
            listener,
            "PLAIN is enabled but no JAAS config names a user_NAME=\"password\": every PLAIN login fails"
        );
    }
    let (reauth, set_as) = value(c, listener, "connections.max.reauth.ms")?;
    let reauth_ms = reauth
        .trim()
        .parse::<i64>()
        .ok()
        .filter(|v| *v >= 0)
        .with_context(|| format!("{set_as}={reauth}: must be a number of milliseconds, 0 or more"))?;
    Ok(SaslSettings { mechanisms, plain_users: Arc::new(plain_users), reauth_ms })
}

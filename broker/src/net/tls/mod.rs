//! TLS on SSL and SASL_SSL listeners (rustls, ring provider; TLS 1.2 and 1.3): the server
//! configuration built from the PEM keystore and truststore, client certificates checked
//! against the truststore when `ssl.client.auth` asks for them, and the configuration
//! rebuilt when either file changes (polled), so certificates rotate without a restart. A file
//! that does not parse leaves the configuration in force and says why, once per change.

pub mod principal;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use crate::config::security::{ClientAuth, TlsSettings};
use crate::limits;

/// One listener's TLS: the configuration new connections get, replaced when the files change.
pub struct Tls {
    settings: TlsSettings,
    current: RwLock<Arc<ServerConfig>>,
}

/// A file's identity for the reload poll: its modification time and length.
type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &Path) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

impl Tls {
    /// Reads the keystore and truststore; fails (start-up) if they do not make a configuration.
    pub fn new(settings: TlsSettings) -> anyhow::Result<Arc<Self>> {
        let config = server_config(&settings)?;
        Ok(Arc::new(Tls { settings, current: RwLock::new(config) }))
    }

    /// Polls the files for as long as the listener runs; `listener` names it in log lines.
    pub fn watch(self: &Arc<Self>, listener: Arc<str>) {
        let tls = Arc::downgrade(self);
        let files: Vec<PathBuf> =
            std::iter::once(self.settings.keystore.clone()).chain(self.settings.truststore.clone()).collect();
        tokio::spawn(async move {
            let mut seen: Vec<Stamp> = files.iter().map(|f| stamp(f)).collect();
            loop {
                tokio::time::sleep(Duration::from_millis(limits::TLS_RELOAD_POLL_MS)).await;
                let Some(tls) = tls.upgrade() else { return };
                let now: Vec<Stamp> = files.iter().map(|f| stamp(f)).collect();
                if now == seen {
                    continue;
                }
                seen = now;
                match server_config(&tls.settings) {
                    Ok(config) => {
                        *tls.current.write().unwrap_or_else(|e| e.into_inner()) = config;
                        tracing::info!(%listener, "TLS keystore or truststore changed: new connections use the new certificates");
                    }
                    Err(e) => tracing::warn!(
                        %listener,
                        error = %format!("{e:#}"),
                        "TLS keystore or truststore changed but does not load; keeping the certificates in use"
                    ),
                }
            }
        });
    }

    /// The TLS handshake of a new connection.
    pub async fn accept(&self, stream: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
        let config = self.current.read().unwrap_or_else(|e| e.into_inner()).clone();
        tokio_rustls::TlsAcceptor::from(config).accept(stream).await
    }

    pub fn settings(&self) -> &TlsSettings {
        &self.settings
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The server configuration `settings` describe, from the files as they are now.
fn server_config(settings: &TlsSettings) -> anyhow::Result<Arc<ServerConfig>> {
    let keystore = &settings.keystore;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(keystore)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| anyhow::anyhow!("{e:?}"))
        .with_context(|| format!("ssl.keystore.location {}: reading its certificates", keystore.display()))?;
    if chain.is_empty() {
        anyhow::bail!("ssl.keystore.location {}: no CERTIFICATE in the PEM file", keystore.display());
    }
    let key =
        PrivateKeyDer::from_pem_file(keystore).map_err(|e| anyhow::anyhow!("{e:?}")).with_context(|| {
            format!("ssl.keystore.location {}: no PKCS#8, PKCS#1 or SEC1 private key", keystore.display())
        })?;
    let verifier = match (settings.client_auth, &settings.truststore) {
        (ClientAuth::None, _) | (_, None) => WebPkiClientVerifier::no_client_auth(),
        (auth, Some(truststore)) => {
            let mut roots = RootCertStore::empty();
            let cas = CertificateDer::pem_file_iter(truststore)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| anyhow::anyhow!("{e:?}"))
                .with_context(|| format!("ssl.truststore.location {}", truststore.display()))?;
            for ca in cas {
                roots.add(ca).with_context(|| format!("ssl.truststore.location {}", truststore.display()))?;
            }
            let builder = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider());
            let builder =
                if auth == ClientAuth::Requested { builder.allow_unauthenticated() } else { builder };
            builder.build().with_context(|| format!("ssl.truststore.location {}", truststore.display()))?
        }
    };
    let config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .context("TLS protocol versions")?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .with_context(|| format!("ssl.keystore.location {}: certificate and key", keystore.display()))?;
    Ok(Arc::new(config))
}

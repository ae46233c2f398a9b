//! TLS on SSL and SASL_SSL listeners (rustls, ring provider; TLS 1.2 and 1.3): the server
//! configuration built from the PEM keystore and truststore, client certificates checked
//! against the truststore when `ssl.client.auth` asks for them, and the configuration
//! rebuilt when either file changes (`reload`, polled), so certificates rotate without a
//! restart. A file that does not parse leaves the configuration in force and says why, once
//! per change. The Raft port and the admin API build theirs from the same pieces.

pub mod principal;
pub mod reload;

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use self::reload::Reloading;
use crate::config::security::{ClientAuth, TlsSettings};

/// One listener's TLS: the configuration new connections get, replaced when the files change.
pub struct Tls {
    settings: TlsSettings,
    current: Arc<Reloading<ServerConfig>>,
}

impl Tls {
    /// Reads the keystore and truststore; fails (start-up) if they do not make a configuration.
    pub fn new(settings: TlsSettings) -> anyhow::Result<Arc<Self>> {
        let files = std::iter::once(settings.keystore.clone()).chain(settings.truststore.clone()).collect();
        let current = Reloading::new(files, {
            let settings = settings.clone();
            move || server_config(&settings)
        })?;
        Ok(Arc::new(Tls { settings, current }))
    }

    /// Polls the files for as long as the listener runs; `listener` names it in log lines.
    pub fn watch(self: &Arc<Self>, listener: Arc<str>) {
        self.current.watch(listener);
    }

    /// The TLS handshake of a new connection.
    pub async fn accept(&self, stream: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
        tokio_rustls::TlsAcceptor::from(self.current.current()).accept(stream).await
    }

    pub fn settings(&self) -> &TlsSettings {
        &self.settings
    }
}

/// The crypto provider every TLS configuration of the node uses.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The server configuration `settings` describe, from the files as they are now.
pub fn server_config(settings: &TlsSettings) -> anyhow::Result<Arc<ServerConfig>> {
    let keystore = &settings.keystore;
    let (chain, key) = keystore_files(keystore)?;
    let verifier = match (settings.client_auth, &settings.truststore) {
        (ClientAuth::None, _) | (_, None) => WebPkiClientVerifier::no_client_auth(),
        (auth, Some(truststore)) => {
            let roots = truststore_roots(truststore)?;
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

/// A PEM keystore's certificate chain and private key.
pub fn keystore_files(
    keystore: &Path,
) -> anyhow::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
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
    Ok((chain, key))
}

/// A PEM truststore's CA certificates.
pub fn truststore_roots(truststore: &Path) -> anyhow::Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    let cas = CertificateDer::pem_file_iter(truststore)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| anyhow::anyhow!("{e:?}"))
        .with_context(|| format!("ssl.truststore.location {}", truststore.display()))?;
    for ca in cas {
        roots.add(ca).with_context(|| format!("ssl.truststore.location {}", truststore.display()))?;
    }
    Ok(roots)
}

//! Mutual TLS on the Raft port (`onelog.raft.ssl.keystore.location`,
//! `onelog.raft.ssl.truststore.location`): the server asks every peer for a certificate the
//! cluster's CA signed, and every connection to a peer presents this node's certificate and
//! checks the peer's against the same CA. The cluster-secret handshake (`auth`) still runs
//! inside, as the proof of the node ids; TLS adds confidentiality and keeps out whoever holds
//! no certificate of the cluster. Without the keys the port is plain TCP, as before.
//!
//! Both configurations are rebuilt when the files change (`net::tls::reload`), so certificates
//! rotate without a restart; a connection already open keeps the certificates it began with.

use std::io;
use std::sync::Arc;

use anyhow::Context;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, ServerConfig, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::config::security::TlsSettings;
use crate::net::tls::reload::Reloading;
use crate::net::tls::{keystore_files, provider, server_config, truststore_roots};

/// The read half of a peer connection, TLS or not.
pub type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;
/// The write half of a peer connection, TLS or not.
pub type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;

/// The name a node dials its peers by, for rustls: peers are addressed by IP and port
/// (`127.0.0.1:…` in tests, whatever `--peers` says in production), which certificates rarely
/// name, so [`ChainOnly`] does not check it.
const PEER_NAME: &str = "onelog-raft-peer";

/// The node's two TLS configurations for the Raft port, rebuilt together.
pub struct RaftTls {
    current: Arc<Reloading<Configs>>,
}

struct Configs {
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
}

impl std::fmt::Debug for RaftTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RaftTls")
    }
}

impl RaftTls {
    /// Reads the keystore and the truststore; fails (start-up) if they do not make both
    /// configurations, and starts polling them (so it runs inside the node's runtime).
    /// `settings.client_auth` is `Required` (`config::security::port_tls`).
    pub fn new(settings: TlsSettings) -> anyhow::Result<Arc<Self>> {
        let files = std::iter::once(settings.keystore.clone()).chain(settings.truststore.clone()).collect();
        let current = Reloading::new(files, move || {
            let server = server_config(&settings)?;
            let client = client_config(&settings)?;
            Ok(Arc::new(Configs { server, client }))
        })?;
        current.watch(Arc::from("raft"));
        Ok(Arc::new(RaftTls { current }))
    }

    /// The server's TLS handshake with a peer that dialed us.
    pub async fn accept(&self, stream: TcpStream) -> io::Result<(ReadHalf, WriteHalf)> {
        let config = self.current.current().server.clone();
        let tls = tokio_rustls::TlsAcceptor::from(config).accept(stream).await?;
        let (read, write) = tokio::io::split(tls);
        Ok((Box::new(read), Box::new(write)))
    }

    /// The client's TLS handshake with a peer we dialed.
    pub async fn connect(&self, stream: TcpStream) -> io::Result<(ReadHalf, WriteHalf)> {
        let config = self.current.current().client.clone();
        let name = ServerName::try_from(PEER_NAME).map_err(io::Error::other)?;
        let tls = tokio_rustls::TlsConnector::from(config).connect(name, stream).await?;
        let (read, write) = tokio::io::split(tls);
        Ok((Box::new(read), Box::new(write)))
    }
}

/// A plain connection's halves, for a node without Raft TLS.
pub fn plain(stream: TcpStream) -> (ReadHalf, WriteHalf) {
    let (read, write) = stream.into_split();
    (Box::new(read), Box::new(write))
}

/// The client configuration: this node's certificate for the peer's check, the peer's checked
/// against the cluster's CA by [`ChainOnly`].
fn client_config(settings: &TlsSettings) -> anyhow::Result<Arc<ClientConfig>> {
    let truststore = settings.truststore.as_ref().context("the Raft port's TLS needs a truststore")?;
    let roots = Arc::new(truststore_roots(truststore)?);
    let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider())
        .build()
        .with_context(|| format!("onelog.raft.ssl.truststore.location {}", truststore.display()))?;
    let (chain, key) = keystore_files(&settings.keystore)?;
    let config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .context("TLS protocol versions")?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ChainOnly(webpki)))
        .with_client_auth_cert(chain, key)
        .with_context(|| {
            format!("onelog.raft.ssl.keystore.location {}: certificate and key", settings.keystore.display())
        })?;
    Ok(Arc::new(config))
}

/// A peer's certificate is checked as rustls checks a server's (it chains to the cluster's
/// CA, is within its validity, is meant for a server) except for its name: peers are dialed
/// by address, often a bare IP or 127.0.0.1 the certificate does not list, and the CA is the
/// cluster's own, so holding one of its certificates is what admits a node; which node it is,
/// the cluster-secret handshake (`auth`) then proves. rustls checks the name last, after the
/// chain, so only that one failure is forgiven.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

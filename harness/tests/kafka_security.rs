//! Kafka listeners with TLS and SASL against real processes: librdkafka over SSL with and
//! without a client certificate (the principal is in the broker's log line), SASL/PLAIN over
//! SASL_PLAINTEXT and SASL_SSL (right and wrong passwords, raw requests out of turn), a
//! three-node cluster whose Metadata on each listener lists every broker on that listener,
//! a rotated keystore picked up without a restart, and TLS garbage refused while the broker
//! keeps serving.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::certs::TestPki;
use harness::{Cluster, ClusterOptions, RawClient};
use kafka_compat::error_code::{ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM};
use kafka_protocol::messages::{
    ListGroupsRequest, MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::StrBytes;
use rcgen::DnType;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// The Java client's login as alice.
const ALICE_JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";"#;

const JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" user_alice="alice-secret";"#;

/// A TLS single-node-or-more cluster: the PKI in the cluster's own directory is made first,
/// so the files live in a temporary directory of the test.
struct Tls {
    dir: tempfile::TempDir,
    pki: TestPki,
}

impl Tls {
    fn new() -> Result<Self> {
        let dir = tempfile::Builder::new().prefix("onelog-tls-").tempdir()?;
        let pki = TestPki::new(dir.path(), "ca")?;
        pki.server_keystore("server.pem", "onelog-test-server")?;
        Ok(Tls { dir, pki })
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// Keystore, truststore and client authentication for every SSL listener.
    fn options(&self, options: ClusterOptions, client_auth: &str) -> ClusterOptions {
        options
            .config("ssl.keystore.location", self.path("server.pem"))
            .config("ssl.truststore.location", self.path("ca.pem"))
            .config("ssl.client.auth", client_auth)
    }
}

/// A client certificate for `CN=<cn>,OU=<ou>,O=acme` (as Java prints it), by `tls`'s CA.
fn acme_client(tls: &Tls, cn: &str, ou: &str) -> Result<harness::certs::ClientFiles> {
    let subject =
        [(DnType::OrganizationName, "acme"), (DnType::OrganizationalUnitName, ou), (DnType::CommonName, cn)];
    tls.pki.client(&cn.to_ascii_lowercase(), &subject)
}

/// librdkafka presenting `files` as its certificate.
fn with_certificate(config: &mut ClientConfig, files: &harness::certs::ClientFiles) {
    config
        .set("ssl.certificate.location", files.cert.display().to_string())
        .set("ssl.key.location", files.key.display().to_string());
}

fn ssl_client(bootstrap: &str, tls: &Tls) -> ClientConfig {
    let mut config = harness::kafka::client_config(bootstrap);
    config.set("security.protocol", "ssl").set("ssl.ca.location", tls.path("ca.pem"));
    config
}

/// Produces one record with `config` and waits for its acknowledgement.
async fn produce_one(config: &ClientConfig, topic: &str) -> Result<()> {
    let producer: FutureProducer = config.clone().set("message.timeout.ms", "15000").create()?;
    let record = FutureRecord::to(topic).key("k").payload("v");
    producer.send(record, Duration::from_secs(15)).await.map_err(|(e, _)| e).context("produce")?;
    producer.flush(Duration::from_secs(5))?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn ssl_with_and_without_a_client_certificate() {
    let tls = Tls::new().expect("test PKI");
    let options = tls
        .options(ClusterOptions::new(1).listener("SSL", "SSL").listener("MTLS", "SSL"), "requested")
        .config("listener.name.mtls.ssl.client.auth", "required")
        .config(
            "listener.name.ssl.ssl.principal.mapping.rules",
            "RULE:^CN=([^,]*),OU=ops,.*$/$1-ops/L,DEFAULT",
        );
    let cluster = Cluster::start_with(options).expect("starting the cluster");
    let result = async {
        let bootstrap = cluster.listener_bootstrap("SSL");
        // Without a certificate: served, as User:ANONYMOUS.
        produce_one(&ssl_client(&bootstrap, &tls), "tls-anonymous").await.context("without a certificate")?;
        // With one: the principal is its subject DN in RFC 2253 order, as Java prints it.
        let alice = acme_client(&tls, "alice", "eng")?;
        let mut config = ssl_client(&bootstrap, &tls);
        with_certificate(&mut config, &alice);
        produce_one(&config, "tls-alice").await.context("with alice's certificate")?;
        cluster.wait_for_log(1, "principal=User:CN=alice,OU=eng,O=acme")?;
        // ssl.client.auth=required (on one listener): no certificate, no connection.
        let mtls = cluster.listener_bootstrap("MTLS");
        let mut required = ssl_client(&mtls, &tls);
        with_certificate(&mut required, &alice);
        produce_one(&required, "tls-required").await.context("required, with a certificate")?;
        let mut without = ssl_client(&mtls, &tls);
        ensure!(
            produce_one(without.set("message.timeout.ms", "3000"), "tls-required").await.is_err(),
            "ssl.client.auth=required served a client without a certificate"
        );
        // ssl.principal.mapping.rules, per listener: the first matching rule names the user.
        let bob = acme_client(&tls, "Bob", "ops")?;
        with_certificate(&mut config, &bob);
        produce_one(&config, "tls-bob").await.context("with bob's certificate")?;
        cluster.wait_for_log(1, "principal=User:bob-ops")?;
        // A certificate from another CA never authenticates anyone (refused, or not sent since
        // the server names its CA), and the broker keeps serving.
        let other = TestPki::new(&tls.dir.path().join("other"), "other-ca")?;
        let mallory = other.client("mallory", &[(DnType::CommonName, "mallory")])?;
        let mut stranger = ssl_client(&bootstrap, &tls);
        with_certificate(&mut stranger, &mallory);
        let _ = produce_one(stranger.set("message.timeout.ms", "3000"), "tls-mallory").await;
        let log = std::fs::read_to_string(cluster.log_path(1))?;
        ensure!(!log.contains("principal=User:CN=mallory"), "a certificate from an unknown CA authenticated");
        produce_one(&ssl_client(&bootstrap, &tls), "tls-anonymous")
            .await
            .context("after the refused certificate")?;
        anyhow::Ok(())
    }
    .await;
    cluster.unwrap_or_dump(result);
}

/// SaslHandshake v1 + SaslAuthenticate with PLAIN credentials: the SaslAuthenticate response.
async fn plain_login(
    client: &mut RawClient,
    user: &str,
    password: &str,
) -> Result<kafka_protocol::messages::SaslAuthenticateResponse> {
    let handshake = client
        .request(1, &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")))
        .await?;
    ensure!(handshake.error_code == 0, "SaslHandshake: error {}", handshake.error_code);
    let token = format!("\0{user}\0{password}");
    client.request(2, &SaslAuthenticateRequest::default().with_auth_bytes(token.into_bytes().into())).await
}

fn sasl_client(bootstrap: &str, protocol: &str, user: &str, password: &str) -> ClientConfig {
    let mut config = harness::kafka::client_config(bootstrap);
    config
        .set("security.protocol", protocol)
        .set("sasl.mechanism", "PLAIN")
        .set("sasl.username", user)
        .set("sasl.password", password);
    config
}

#[tokio::test(flavor = "multi_thread")]
async fn sasl_plain_over_plaintext_and_ssl() {
    let tls = Tls::new().expect("test PKI");
    let options = tls
        .options(
            ClusterOptions::new(1)
                .listener("SASL_PLAINTEXT", "SASL_PLAINTEXT")
                .listener("SASL_SSL", "SASL_SSL"),
            "none",
        )
        .config("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS)
        .config("listener.name.sasl_ssl.plain.sasl.jaas.config", JAAS)
        .config("connections.max.reauth.ms", "600000")
        // A listener whose sessions expire after a second (KIP-152).
        .listener("SHORT", "SASL_PLAINTEXT")
        .config("listener.name.short.plain.sasl.jaas.config", JAAS)
        .config("listener.name.short.connections.max.reauth.ms", "1000");
    let cluster = Cluster::start_with(options).expect("starting the cluster");
    let result = async {
        let sasl = cluster.listener_addr(1, "SASL_PLAINTEXT");
        // librdkafka with the right password, on both listeners.
        produce_one(&sasl_client(&sasl.to_string(), "sasl_plaintext", "alice", "alice-secret"), "sasl-a")
            .await?;
        let mut over_ssl =
            sasl_client(&cluster.listener_bootstrap("SASL_SSL"), "sasl_ssl", "alice", "alice-secret");
        over_ssl.set("ssl.ca.location", tls.path("ca.pem"));
        produce_one(&over_ssl, "sasl-b").await.context("SASL_SSL")?;
        // A wrong password: SASL_AUTHENTICATION_FAILED with Kafka's message, then closed.
        let mut raw = RawClient::connect(sasl).await?;
        let failed = plain_login(&mut raw, "alice", "wrong").await?;
        ensure!(
            failed.error_code == SASL_AUTHENTICATION_FAILED,
            "wrong password: error {}",
            failed.error_code
        );
        ensure!(
            failed.error_message.as_deref() == Some("Authentication failed: Invalid username or password"),
            "{:?}",
            failed.error_message
        );
        raw.expect_closed(Duration::from_secs(5)).await?;
        let mut wrong = sasl_client(&sasl.to_string(), "sasl_plaintext", "alice", "wrong");
        ensure!(
            produce_one(wrong.set("message.timeout.ms", "3000"), "sasl-c").await.is_err(),
            "librdkafka with a wrong password produced"
        );
        // The right one on a raw connection: the session lifetime (KIP-152), then requests
        // are served; SaslAuthenticate again without a handshake is ILLEGAL_SASL_STATE.
        let mut raw = RawClient::connect(sasl).await?;
        let ok = plain_login(&mut raw, "alice", "alice-secret").await?;
        ensure!(ok.error_code == 0 && ok.session_lifetime_ms == 600_000, "{ok:?}");
        let groups = raw.request(4, &ListGroupsRequest::default()).await?;
        ensure!(groups.error_code == 0, "ListGroups after login: {}", groups.error_code);
        // Re-authentication as the same user succeeds; as another user it fails.
        ensure!(plain_login(&mut raw, "alice", "alice-secret").await?.error_code == 0, "re-authentication");
        let changed = plain_login(&mut raw, "admin", "admin-secret").await?;
        ensure!(
            changed.error_code == SASL_AUTHENTICATION_FAILED,
            "re-authentication as another principal: {changed:?}"
        );
        // A request before SaslHandshake: ILLEGAL_SASL_STATE, and the connection is closed.
        let mut early = RawClient::connect(sasl).await?;
        let refused = early.request(4, &ListGroupsRequest::default()).await?;
        ensure!(
            refused.error_code == ILLEGAL_SASL_STATE,
            "ListGroups before authentication: error {}",
            refused.error_code
        );
        early.expect_closed(Duration::from_secs(5)).await?;
        // Before authentication a frame is at most 512 KiB (Kafka's sasl.server.max.receive.size).
        let mut large = RawClient::connect(sasl).await?;
        large.write_raw(&(1024 * 1024i32).to_be_bytes()).await?;
        large.expect_closed(Duration::from_secs(5)).await.context("a 1 MiB frame before authentication")?;
        // An unknown mechanism: UNSUPPORTED_SASL_MECHANISM listing the served ones.
        let mut unknown = RawClient::connect(sasl).await?;
        let answer = unknown
            .request(1, &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("GSSAPI")))
            .await?;
        ensure!(answer.error_code == UNSUPPORTED_SASL_MECHANISM, "GSSAPI: {answer:?}");
        ensure!(answer.mechanisms.iter().any(|m| m.as_str() == "PLAIN"), "{answer:?}");
        // SaslHandshake v0: the token follows as a raw frame, answered by a raw (empty) frame.
        let mut legacy = RawClient::connect(sasl).await?;
        let answer = legacy
            .request(0, &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")))
            .await?;
        ensure!(answer.error_code == 0, "SaslHandshake v0: {answer:?}");
        legacy.send_frame(b"\0alice\0alice-secret").await?;
        ensure!(legacy.read_frame().await?.is_empty(), "legacy PLAIN: a non-empty server token");
        ensure!(
            legacy.request(4, &ListGroupsRequest::default()).await?.error_code == 0,
            "ListGroups after a v0 login"
        );
        let mut legacy = RawClient::connect(sasl).await?;
        legacy
            .request(0, &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")))
            .await?;
        legacy.send_frame(b"\0alice\0wrong").await?;
        legacy.expect_closed(Duration::from_secs(5)).await.context("legacy PLAIN with a wrong password")?;
        // An expired session: the next request closes the connection.
        let mut short = RawClient::connect(cluster.listener_addr(1, "SHORT")).await?;
        let ok = plain_login(&mut short, "alice", "alice-secret").await?;
        ensure!(ok.error_code == 0 && ok.session_lifetime_ms == 1000, "{ok:?}");
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        short.send_request(4, &ListGroupsRequest::default()).await?;
        short.expect_closed(Duration::from_secs(5)).await.context("a request after the session expired")?;
        // SaslHandshake on the PLAINTEXT listener: ILLEGAL_SASL_STATE, as Kafka.
        let mut plain = RawClient::connect(cluster.kafka_addr(1)).await?;
        let answer = plain
            .request(1, &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")))
            .await?;
        ensure!(answer.error_code == ILLEGAL_SASL_STATE, "SaslHandshake on PLAINTEXT: {answer:?}");
        anyhow::Ok(())
    }
    .await;
    cluster.unwrap_or_dump(result);
}

#[tokio::test(flavor = "multi_thread")]
async fn metadata_on_each_listener_lists_every_broker_there() {
    let options = ClusterOptions::new(3).listener("CLIENT", "PLAINTEXT");
    let cluster = Cluster::start_with(options).expect("starting the cluster");
    let result = async {
        for id in cluster.ids() {
            for listener in ["PLAINTEXT", "CLIENT"] {
                let addr = match listener {
                    "PLAINTEXT" => cluster.kafka_addr(id),
                    _ => cluster.listener_addr(id, listener),
                };
                let mut raw = RawClient::connect(addr).await?;
                let metadata = raw.request(12, &MetadataRequest::default()).await?;
                let mut seen: Vec<(i32, String)> = metadata
                    .brokers
                    .iter()
                    .map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port)))
                    .collect();
                seen.sort();
                let expected: Vec<(i32, String)> = cluster
                    .ids()
                    .iter()
                    .map(|n| {
                        let at = if listener == "PLAINTEXT" {
                            cluster.kafka_addr(*n)
                        } else {
                            cluster.listener_addr(*n, listener)
                        };
                        (*n as i32, at.to_string())
                    })
                    .collect();
                ensure!(seen == expected, "node {id}, listener {listener}: {seen:?}, expected {expected:?}");
            }
        }
        anyhow::Ok(())
    }
    .await;
    cluster.unwrap_or_dump(result);
}

/// The certificate a TLS listener presents to a new connection.
async fn presented_certificate(addr: SocketAddr, ca: &Path) -> Result<CertificateDer<'static>> {
    let mut roots = rustls::RootCertStore::empty();
    use rustls_pki_types::pem::PemObject;
    for cert in CertificateDer::pem_file_iter(ca).map_err(|e| anyhow::anyhow!("{e:?}"))? {
        roots.add(cert.map_err(|e| anyhow::anyhow!("{e:?}"))?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost")?;
    let stream = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await?;
    let chain = stream.get_ref().1.peer_certificates().context("no server certificate")?;
    Ok(chain[0].clone().into_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replaced_keystore_is_used_without_a_restart() {
    let tls = Tls::new().expect("test PKI");
    let options = tls.options(ClusterOptions::new(1).listener("SSL", "SSL"), "none");
    let cluster = Cluster::start_with(options).expect("starting the cluster");
    let result = async {
        let addr = cluster.listener_addr(1, "SSL");
        let ca = tls.dir.path().join("ca.pem");
        let before = presented_certificate(addr, &ca).await?;
        // A keystore that does not parse: the old certificate stays in use.
        std::fs::write(tls.dir.path().join("server.pem"), "not a PEM file")?;
        cluster.wait_for_log(1, "does not load; keeping the certificates in use")?;
        ensure!(
            presented_certificate(addr, &ca).await? == before,
            "a broken keystore replaced the certificate"
        );
        // A new keystore (written aside, then renamed in, as operators rotate files).
        tls.pki.server_keystore("server.pem.new", "onelog-test-server-2")?;
        std::fs::rename(tls.dir.path().join("server.pem.new"), tls.dir.path().join("server.pem"))?;
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if presented_certificate(addr, &ca).await? != before {
                break;
            }
            ensure!(Instant::now() < deadline, "the new keystore was not used within 15 s");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        anyhow::Ok(())
    }
    .await;
    cluster.unwrap_or_dump(result);
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_garbage_and_silence_are_refused_and_the_broker_keeps_serving() {
    let tls = Tls::new().expect("test PKI");
    let options = tls
        .options(ClusterOptions::new(1).listener("SSL", "SSL"), "none")
        .config("onelog.request.read.timeout.ms", "1000");
    let cluster = Cluster::start_with(options).expect("starting the cluster");
    let result = async {
        let addr = cluster.listener_addr(1, "SSL");
        // A Kafka request where a ClientHello belongs.
        // rustls answers with a TLS alert, then closes.
        let mut stream = TcpStream::connect(addr).await?;
        stream.write_all(b"\x00\x00\x00\x0a\x00\x12\x00\x03\x00\x00\x00\x01\x00\x00garbage").await?;
        let mut received = Vec::new();
        let read = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::io::AsyncReadExt::read_to_end(&mut stream, &mut received),
        )
        .await;
        ensure!(read.is_ok(), "garbage handshake: still open after 5 s");
        ensure!(received.first().is_none_or(|b| *b == 0x15), "not a TLS alert: {received:?}");

        // Silence: closed after the request read timeout.
        let mut silent = TcpStream::connect(addr).await?;
        let started = Instant::now();
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::io::AsyncReadExt::read(&mut silent, &mut buf),
        )
        .await;
        ensure!(read.is_ok(), "a silent client still connected after 5 s");
        ensure!(started.elapsed() >= Duration::from_millis(900), "closed before the read timeout");
        let _ = silent.shutdown().await;
        cluster.wait_for_log(1, "TLS handshake failed")?;
        // Still serving TLS clients.
        produce_one(&ssl_client(&addr.to_string(), &tls), "after-garbage").await?;
        anyhow::Ok(())
    }
    .await;
    cluster.unwrap_or_dump(result);
}

/// The Java client's produce driver: `count` records to `topic` with `client` configs.
fn java_produce(bootstrap: &str, topic: &str, client: &[String]) -> Result<serde_json::Value> {
    let mut args = vec![bootstrap.to_string(), format!("--topic={topic}"), "--count=5".to_string()];
    args.extend(client.iter().cloned());
    tokio::task::block_in_place(|| harness::java::run("dev.onelog.it.Produce", &args))
}

#[tokio::test(flavor = "multi_thread")]
async fn java_clients_over_ssl_and_sasl_ssl() {
    harness::java::classpath().expect("the Java scenario drivers");
    let tls = Tls::new().expect("test PKI");
    let options = tls
        .options(ClusterOptions::new(1).listener("SSL", "SSL").listener("SASL_SSL", "SASL_SSL"), "requested")
        .config("listener.name.sasl_ssl.ssl.client.auth", "none")
        .config("listener.name.sasl_ssl.plain.sasl.jaas.config", JAAS);
    let cluster = Cluster::start_with(options).expect("starting the cluster");
    let result = async {
        let trust = vec![
            "ssl.truststore.type=PEM".to_string(),
            format!("ssl.truststore.location={}", tls.path("ca.pem")),
        ];
        let ssl = cluster.listener_bootstrap("SSL");
        // Without a certificate, then with one in a PEM keystore (certificate and PKCS#8 key).
        let plain_tls = [trust.clone(), vec!["security.protocol=SSL".into()]].concat();
        let acked = java_produce(&ssl, "java-tls", &plain_tls)?;
        ensure!(acked["acked"] == 5, "{acked}");
        let carol = acme_client(&tls, "carol", "eng")?;
        let keystore = tls.dir.path().join("carol.pem");
        std::fs::write(
            &keystore,
            format!("{}{}", std::fs::read_to_string(&carol.cert)?, std::fs::read_to_string(&carol.key)?),
        )?;
        let with_cert = [
            plain_tls.clone(),
            vec!["ssl.keystore.type=PEM".into(), format!("ssl.keystore.location={}", keystore.display())],
        ]
        .concat();
        let acked = java_produce(&ssl, "java-tls-carol", &with_cert)?;
        ensure!(acked["acked"] == 5, "{acked}");
        cluster.wait_for_log(1, "principal=User:CN=carol,OU=eng,O=acme")?;
        // SASL_SSL with PLAIN.
        let sasl = [
            trust.clone(),
            vec![
                "security.protocol=SASL_SSL".into(),
                "sasl.mechanism=PLAIN".into(),
                format!("sasl.jaas.config={ALICE_JAAS}"),
            ],
        ]
        .concat();
        let acked = java_produce(&cluster.listener_bootstrap("SASL_SSL"), "java-sasl", &sasl)?;
        ensure!(acked["acked"] == 5, "{acked}");
        // A wrong password: the Java client fails with Kafka's message.
        let wrong: Vec<String> = sasl
            .iter()
            .map(|c| c.replace("alice-secret", "wrong"))
            .chain([
                "max.block.ms=5000".to_string(),
                "delivery.timeout.ms=5000".into(),
                "request.timeout.ms=4000".into(),
            ])
            .collect();
        let failed = java_produce(&cluster.listener_bootstrap("SASL_SSL"), "java-sasl", &wrong);
        let text = format!("{:#}", failed.err().context("the Java client produced with a wrong password")?);
        ensure!(text.contains("Authentication failed: Invalid username or password"), "{text}");
        anyhow::Ok(())
    }
    .await;
    cluster.unwrap_or_dump(result);
}

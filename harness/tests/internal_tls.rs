//! TLS on the node's own ports (issue 27), with real processes: three nodes whose Raft port
//! speaks mutual TLS with the cluster's CA (`onelog.raft.ssl.*`, each node its own
//! certificate). Replication, votes and forwarding work over it through a leader kill; a node
//! restarted with a certificate another CA signed is refused by its peers (and refuses them)
//! and gets no entry; a plain-text connection to the Raft port fails the TLS handshake and is
//! logged. The admin API serves HTTPS only (`onelog.admin.ssl.*`): the harness and
//! `onelog admin --admin-ca` reach it, plain HTTP gets no answer.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::admin_api;
use harness::batch::{encode_batch, TestRecord};
use harness::certs::TestPki;
use harness::process::onelog_binary;
use harness::raw_ops::{create_topics_ok, fetch_all, produce, produce_results, BatchFor};
use harness::{Cluster, ClusterOptions, RawClient};

const TOPIC: &str = "tls";
const NODES: u64 = 3;

/// The cluster's CA and a keystore per node, and a keystore of another CA.
struct Pki {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    nodes: Vec<PathBuf>,
    stranger: PathBuf,
    /// The admin API's certificate (127.0.0.1), from the cluster's CA.
    admin: PathBuf,
}

fn pki() -> Result<Pki> {
    let dir = tempfile::tempdir()?;
    let cluster_ca = TestPki::new(&dir.path().join("cluster"), "cluster-ca")?;
    let ca = cluster_ca.write_ca("ca.pem")?;
    let nodes = (1..=NODES)
        .map(|id| cluster_ca.node_keystore(&format!("node-{id}.pem"), &format!("node-{id}")))
        .collect::<Result<_>>()?;
    let other_ca = TestPki::new(&dir.path().join("other"), "other-ca")?;
    let stranger = other_ca.node_keystore("stranger.pem", "node-2")?;
    let admin = cluster_ca.server_keystore("admin.pem", "admin")?;
    Ok(Pki { _dir: dir, ca, nodes, stranger, admin })
}

const KEYSTORE_ENV: &str = "ONELOG_RAFT_SSL_KEYSTORE_LOCATION";

fn options(pki: &Pki) -> ClusterOptions {
    let mut options = ClusterOptions::new(NODES)
        .config("onelog.raft.ssl.truststore.location", pki.ca.display())
        .config("onelog.admin.ssl.keystore.location", pki.admin.display())
        .admin_ca(&pki.ca)
        .config("log.segment.bytes", 1 << 20);
    for (i, keystore) in pki.nodes.iter().enumerate() {
        options = options.node_env(i as u64 + 1, KEYSTORE_ENV, keystore.display());
    }
    options
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn raft_mutual_tls_and_admin_https() {
    let pki = pki().expect("test PKI");
    let mut cluster = Cluster::start_with(options(&pki)).expect("starting 3 nodes with Raft TLS");
    let result = scenario(&mut cluster, &pki).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster, pki: &Pki) -> Result<()> {
    let started = Instant::now();
    replication_and_forwarding_through_a_leader_kill(cluster).await?;
    println!(
        "replication, votes and forwarding over TLS through a leader kill: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    plain_text_is_refused(cluster)?;
    admin_api_over_https_only(cluster, pki)?;
    a_stranger_certificate_is_refused(cluster, pki).await?;
    println!("whole scenario: {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

async fn produce_values(client: &mut RawClient, values: std::ops::Range<usize>) -> Result<()> {
    for i in values {
        let records = encode_batch(&[TestRecord::new("k", format!("v{i}"), i as i64)])?;
        let response =
            produce(client, -1, &[BatchFor { topic: TOPIC.to_string(), partition: 0, records }]).await?;
        ensure!(produce_results(&response).iter().all(|r| r.2 == 0), "produce v{i}: {response:?}");
    }
    Ok(())
}

async fn replication_and_forwarding_through_a_leader_kill(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let follower = cluster.followers()?[0];
    // CreateTopics on a follower is forwarded to the leader over the Raft port.
    let mut on_follower = RawClient::connect_negotiated(cluster.kafka_addr(follower)).await?;
    create_topics_ok(&mut on_follower, &[(TOPIC, 1)]).await.context("CreateTopics forwarded over TLS")?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    produce_values(&mut client, 0..20).await?;
    cluster.kill9(leader)?;
    let (new_leader, took) = cluster.wait_for_leader(Duration::from_secs(20))?;
    println!("node {leader} killed; node {new_leader} leads after {:.3} s", took.as_secs_f64());
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(new_leader)).await?;
    produce_values(&mut client, 20..40).await?;
    cluster.start_node(leader)?;
    let read = fetch_all(&mut client, TOPIC, 0).await?;
    let values = read.values();
    let expected: Vec<String> = (0..40).map(|i| format!("v{i}")).collect();
    ensure!(values == expected, "read back {values:?}");
    cluster.assert_digests_equal()?;
    Ok(())
}

/// A plain-text connection to a TLS Raft port: the bytes of a handshake frame are not a TLS
/// ClientHello, the node closes the connection and logs the refusal.
fn plain_text_is_refused(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let mut stream = TcpStream::connect(cluster.raft_addr(leader))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(&[0, 0, 0, 60, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])?;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    ensure!(!answer.contains(&b'{'), "the Raft port answered plain text: {answer:?}");
    cluster.wait_for_log(leader, "TLS handshake")?;
    println!(
        "a plain-text connection to node {leader}'s Raft port: closed ({} bytes of TLS alert), logged",
        answer.len()
    );
    Ok(())
}

/// The harness has been reaching `/status` over HTTPS all along; plain HTTP gets no HTTP
/// answer and is logged; `onelog admin status --admin-ca` reads the cluster.
fn admin_api_over_https_only(cluster: &mut Cluster, pki: &Pki) -> Result<()> {
    let leader = cluster.leader()?;
    let addr = cluster.admin_addr(leader);
    let over_https = admin_api::request_via(addr, "GET", "/status", Some(&pki.ca))?;
    ensure!(over_https.status == 200, "GET /status over HTTPS: {}", over_https.status);
    let plain = admin_api::request(addr, "GET", "/status");
    ensure!(plain.is_err(), "the admin API answered plain HTTP: {:?}", plain.map(|r| r.status));
    cluster.wait_for_log(leader, "admin API TLS handshake failed")?;
    let admin: Vec<String> = cluster.ids().iter().map(|id| cluster.admin_addr(*id).to_string()).collect();
    let cli = |ca: Option<&std::path::Path>| {
        let mut command = Command::new(onelog_binary("debug")?);
        command.args(["admin", "--admin", &admin.join(","), "--json", "status"]);
        command.env_remove("ONELOG_ADMIN_CA");
        if let Some(ca) = ca {
            command.env("ONELOG_ADMIN_CA", ca);
        }
        anyhow::Ok(command.output()?)
    };
    let with_ca = cli(Some(&pki.ca))?;
    let report = String::from_utf8_lossy(&with_ca.stdout);
    ensure!(
        with_ca.status.success(),
        "onelog admin status with ONELOG_ADMIN_CA: {}",
        String::from_utf8_lossy(&with_ca.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&report).context("onelog admin status --json")?;
    ensure!(report["leader"] == leader, "onelog admin status: {report}");
    let without = cli(None)?;
    ensure!(!without.status.success(), "onelog admin status in plain HTTP succeeded against HTTPS nodes");
    println!("admin API on node {leader}: HTTPS answers, plain HTTP closed; onelog admin with ONELOG_ADMIN_CA reads the cluster");
    Ok(())
}

/// A follower restarted with a certificate another CA signed: refused both ways, it applies
/// nothing while the others write; with its own certificate again it catches up.
async fn a_stranger_certificate_is_refused(cluster: &mut Cluster, pki: &Pki) -> Result<()> {
    let leader = cluster.leader()?;
    let stranger = cluster.followers()?[0];
    cluster.kill9(stranger)?;
    cluster.set_node_env(stranger, vec![(KEYSTORE_ENV.into(), pki.stranger.display().to_string())]);
    cluster.spawn_node(stranger)?;
    let stuck_at = cluster.last_applied_once_up(stranger)?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    produce_values(&mut client, 40..60).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let now = cluster.last_applied(stranger)?;
    ensure!(now == stuck_at, "the node with a stranger's certificate applied {stuck_at:?} → {now:?}");
    // Each side names the certificate it refused: rustls' "invalid peer certificate: UnknownIssuer".
    cluster.wait_for_log(leader, "UnknownIssuer")?;
    cluster.wait_for_log(stranger, "TLS handshake")?;
    println!("node {stranger} with another CA's certificate: stuck at applied {stuck_at:?} while 20 records were written");
    cluster.kill9(stranger)?;
    cluster.set_node_env(
        stranger,
        vec![(KEYSTORE_ENV.into(), pki.nodes[stranger as usize - 1].display().to_string())],
    );
    cluster.start_node(stranger)?;
    cluster.assert_digests_equal()?;
    Ok(())
}

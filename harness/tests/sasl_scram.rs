//! SASL/SCRAM-SHA-256 and SCRAM-SHA-512 end to end: a user created with the real
//! `kafka-configs --alter --add-config 'SCRAM-SHA-…=[password=…]' --entity-type users` on a
//! three-node cluster logs in with librdkafka on every node (the credential is replicated
//! state), over SASL_PLAINTEXT and SASL_SSL; a wrong password and a deleted credential are
//! refused.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use harness::certs::TestPki;
use harness::{java, Cluster, ClusterOptions};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

fn scram_client(bootstrap: &str, protocol: &str, mechanism: &str, password: &str) -> ClientConfig {
    let mut config = harness::kafka::client_config(bootstrap);
    config
        .set("security.protocol", protocol)
        .set("sasl.mechanism", mechanism)
        .set("sasl.username", "carol")
        .set("sasl.password", password)
        .set("message.timeout.ms", "10000");
    config
}

async fn produce_one(config: &ClientConfig, topic: &str) -> Result<()> {
    let producer: FutureProducer = config.create()?;
    let record = FutureRecord::to(topic).key("k").payload("v");
    producer.send(record, Duration::from_secs(10)).await.map_err(|(e, _)| e).context("produce")?;
    producer.flush(Duration::from_secs(5))?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn scram_users_from_kafka_configs_log_in_on_every_node() {
    let dir = tempfile::Builder::new().prefix("onelog-scram-").tempdir().expect("temp dir");
    let pki = TestPki::new(dir.path(), "ca").expect("test PKI");
    pki.server_keystore("server.pem", "onelog-test-server").expect("keystore");
    let path = |name: &str| dir.path().join(name).display().to_string();
    let options = ClusterOptions::new(3)
        .listener("SASL_PLAINTEXT", "SASL_PLAINTEXT")
        .listener("SASL_SSL", "SASL_SSL")
        .config("ssl.keystore.location", path("server.pem"))
        .config("sasl.enabled.mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512");
    let cluster = Cluster::start_with(options).expect("starting the cluster");
    let result = async {
        let (ok, out) = java::config_command(
            &cluster.bootstrap(),
            &[
                "--alter",
                "--add-config",
                "SCRAM-SHA-256=[iterations=8192,password=carol-secret],SCRAM-SHA-512=[password=carol-secret]",
                "--entity-type",
                "users",
                "--entity-name",
                "carol",
            ],
        )?;
        ensure!(ok, "kafka-configs --alter: {out}");
        for id in cluster.ids() {
            let sasl = cluster.listener_addr(id, "SASL_PLAINTEXT").to_string();
            for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
                produce_one(&scram_client(&sasl, "sasl_plaintext", mechanism, "carol-secret"), "scram-a")
                    .await
                    .with_context(|| format!("{mechanism} on node {id}"))?;
            }
        }
        let ssl = cluster.listener_addr(1, "SASL_SSL").to_string();
        let mut over_ssl = scram_client(&ssl, "sasl_ssl", "SCRAM-SHA-512", "carol-secret");
        over_ssl.set("ssl.ca.location", path("ca.pem"));
        produce_one(&over_ssl, "scram-b").await.context("SCRAM-SHA-512 over SASL_SSL")?;

        let sasl = cluster.listener_addr(2, "SASL_PLAINTEXT").to_string();
        let mut wrong = scram_client(&sasl, "sasl_plaintext", "SCRAM-SHA-256", "not-carols");
        wrong.set("message.timeout.ms", "3000");
        ensure!(produce_one(&wrong, "scram-c").await.is_err(), "a wrong SCRAM password produced");

        let (ok, out) = java::config_command(
            &cluster.bootstrap(),
            &[
                "--alter",
                "--delete-config",
                "SCRAM-SHA-512",
                "--entity-type",
                "users",
                "--entity-name",
                "carol",
            ],
        )?;
        ensure!(ok, "kafka-configs --delete-config: {out}");
        // Deleted through the leader; every node refuses it once applied.
        tokio::time::sleep(Duration::from_secs(1)).await;
        for id in cluster.ids() {
            let sasl = cluster.listener_addr(id, "SASL_PLAINTEXT").to_string();
            let mut deleted = scram_client(&sasl, "sasl_plaintext", "SCRAM-SHA-512", "carol-secret");
            deleted.set("message.timeout.ms", "3000");
            ensure!(
                produce_one(&deleted, "scram-d").await.is_err(),
                "a deleted credential produced on node {id}"
            );
            let kept = scram_client(&sasl, "sasl_plaintext", "SCRAM-SHA-256", "carol-secret");
            produce_one(&kept, "scram-d").await.with_context(|| format!("SCRAM-SHA-256 kept, node {id}"))?;
        }
        anyhow::Ok(())
    }
    .await;
    cluster.unwrap_or_dump(result);
}

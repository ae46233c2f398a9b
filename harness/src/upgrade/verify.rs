//! Checks a running cluster against an upgrade fixture's manifest: first that `observe` reads
//! exactly the manifest's state, then that the security state is in force, as clients see it
//! over the SASL_PLAINTEXT listener (librdkafka): alice logs in with each of her SCRAM
//! mechanisms and reads the secured topic, a wrong password and a mechanism she lacks are
//! refused, bob logs in but the ACLs refuse him the topic, and alice may not write to it.
//! Nothing here writes (a refused produce writes nothing).

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use super::fixture::SASL_LISTENER;
use super::manifest::{differences, Manifest};
use super::observe::{observe, Names, Target};
use super::populate::{ALICE, BOB, SECURED_TOPIC};
use crate::kafka::client_config;
use crate::Cluster;

/// Lines of differences printed at most.
const DIFFERENCES_SHOWN: usize = 60;
/// How long one login attempt may take to succeed or fail.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The names `observe` needs, from the manifest.
pub fn names(manifest: &Manifest) -> Names {
    Names {
        deleted_topics: manifest.state.deleted_topics.keys().cloned().collect(),
        transactional_ids: manifest.state.transactions.keys().cloned().collect(),
    }
}

/// `observe` of `cluster` equals the manifest's state, and the logins and ACLs behave.
pub async fn verify(cluster: &mut Cluster, manifest: &Manifest) -> Result<()> {
    let state = observe(&Target::of(cluster)?, &names(manifest)).await?;
    let diff = differences(&manifest.state, &state, DIFFERENCES_SHOWN);
    ensure!(
        diff.is_empty(),
        "the cluster holds other data than the fixture's manifest (release {}):\n{}",
        manifest.release,
        diff.join("\n")
    );
    let secured = manifest.state.topics.get(SECURED_TOPIC).context("the manifest lacks fx-secured")?;
    let expected = &secured.partitions.get(&0).context("fx-secured/0")?.read_committed;
    check_logins(cluster, expected).await
}

/// A librdkafka config for `user` over SASL_PLAINTEXT with `mechanism` and `password`.
fn sasl(cluster: &Cluster, mechanism: &str, user: &str, password: &str) -> ClientConfig {
    let mut config = client_config(&cluster.listener_bootstrap(SASL_LISTENER));
    config
        .set("security.protocol", "sasl_plaintext")
        .set("sasl.mechanism", mechanism)
        .set("sasl.username", user)
        .set("sasl.password", password)
        .set("socket.timeout.ms", "5000")
        .set("message.timeout.ms", "5000");
    config
}

async fn check_logins(cluster: &Cluster, secured: &[String]) -> Result<()> {
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let read = read_as(&sasl(cluster, mechanism, ALICE.0, ALICE.1), secured.len())
            .with_context(|| format!("alice over {mechanism} reading {SECURED_TOPIC}"))?;
        ensure!(read == secured, "alice over {mechanism} read {read:?}, the manifest says {secured:?}");
    }
    let wrong = metadata(&sasl(cluster, "SCRAM-SHA-512", ALICE.0, "not-alices"));
    ensure!(wrong.is_err(), "a wrong password for alice was accepted: {wrong:?}");
    let lacking = metadata(&sasl(cluster, "SCRAM-SHA-256", BOB.0, BOB.1));
    ensure!(
        lacking.is_err(),
        "bob logged in with SCRAM-SHA-256, which he has no credential for: {lacking:?}"
    );
    let bob = metadata(&sasl(cluster, "SCRAM-SHA-512", BOB.0, BOB.1)).context("bob's login")?;
    ensure!(
        bob == Some(RDKafkaErrorCode::TopicAuthorizationFailed),
        "bob (denied everything on {SECURED_TOPIC}) saw its metadata with {bob:?}"
    );
    let write = produce_one(&sasl(cluster, "SCRAM-SHA-512", ALICE.0, ALICE.1)).await;
    ensure!(
        matches!(write, Err(KafkaError::MessageProduction(RDKafkaErrorCode::TopicAuthorizationFailed))),
        "alice (no WRITE on {SECURED_TOPIC}) produced: {write:?}"
    );
    Ok(())
}

/// Logs in and asks Metadata of the secured topic: the topic's error, or the login's failure.
fn metadata(config: &ClientConfig) -> Result<Option<RDKafkaErrorCode>> {
    let consumer: BaseConsumer = config.clone().set("group.id", "fx-secured-login").create()?;
    let metadata = consumer.fetch_metadata(Some(SECURED_TOPIC), LOGIN_TIMEOUT)?;
    let topic = metadata.topics().first().context("Metadata answered no topic")?;
    Ok(topic.error().map(RDKafkaErrorCode::from))
}

/// Reads `n` records of the secured topic from its start ("offset value" lines).
fn read_as(config: &ClientConfig, n: usize) -> Result<Vec<String>> {
    let consumer: BaseConsumer = config
        .clone()
        .set("group.id", "fx-secured-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(SECURED_TOPIC, 0, Offset::Beginning)?;
    consumer.assign(&assignment)?;
    let (mut out, deadline) = (Vec::new(), Instant::now() + LOGIN_TIMEOUT * 3);
    while out.len() < n {
        if Instant::now() > deadline {
            bail!("read {} of {n} records: {out:?}", out.len());
        }
        if let Some(m) = consumer.poll(Duration::from_millis(100)) {
            let m = m?;
            out.push(format!("{} {}", m.offset(), String::from_utf8_lossy(m.payload().unwrap_or_default())));
        }
    }
    Ok(out)
}

/// One record to the secured topic; the delivery's result.
async fn produce_one(config: &ClientConfig) -> Result<(), KafkaError> {
    let producer: FutureProducer = config.create()?;
    let record = FutureRecord::to(SECURED_TOPIC).key("k").payload("must not land");
    producer.send(record, LOGIN_TIMEOUT).await.map(|_| ()).map_err(|(e, _)| e)
}

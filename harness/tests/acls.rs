//! ACLs and the authorizer (issue 15) against three onelog nodes with
//! `authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`,
//! `super.users=User:admin` and no ACL-less default.
//!
//! Principals come from the `fault-injection` build's test mapping: a client id
//! `onelog-test-principal:<name>` on an unauthenticated connection acts as `User:<name>`
//! (`broker::security::authz`), until SASL users replace it.
//!
//! - `kafka_acls_cli_adds_lists_and_removes`: Kafka 4.1's `kafka-acls.sh`, through a follower
//!   (CreateAcls and DeleteAcls are forwarded to the leader over the Raft transport with the
//!   admin's principal), adds literal and prefixed ACLs, lists them, removes one; a principal
//!   without ALTER on the cluster is refused.
//! - `clients_are_allowed_and_denied_by_acls`: librdkafka producers and consumers as alice and
//!   bob; a transactional producer allowed on `txn-a` and refused on `txn-b`, whose records
//!   never reach the log (read_uncommitted and the log end offset show only `txn-a`'s);
//!   CreateTopics through a follower is authorized as the client's principal on the leader,
//!   and the old `onelog-forward` client id no longer passes for a forwarded request.

use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use harness::java::tool;
use harness::raw_ops::{create_topics, create_topics_ok, produce_request, produce_results, BatchFor};
use harness::txn::{transactional_config, READ_UNCOMMITTED, TXN_CALL_TIMEOUT};
use harness::{Cluster, ClusterOptions, RawClient};
use kafka_compat::error_code::{
    GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    AlterClientQuotasRequest, CreateAclsRequest, GroupId, MetadataRequest, OffsetFetchRequest,
    ProduceRequest, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

const ACLS: &str = "org.apache.kafka.tools.AclCommand";
const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";
const PRINCIPAL_PREFIX: &str = "onelog-test-principal:";

// Kafka's codes.
const TOPIC: i8 = 2;
const GROUP: i8 = 3;
const TRANSACTIONAL_ID: i8 = 5;
const LITERAL: i8 = 3;
const READ: i8 = 3;
const WRITE: i8 = 4;
const CREATE: i8 = 5;
const DESCRIBE: i8 = 8;
const ALLOW: i8 = 3;

fn cluster() -> Cluster {
    let options = ClusterOptions::new(3)
        .config("log.segment.bytes", 1024 * 1024)
        .config("authorizer.class.name", STANDARD_AUTHORIZER)
        .config("super.users", "User:admin")
        .config("auto.create.topics.enable", "false");
    Cluster::start_with(options).expect("starting three onelog nodes")
}

/// A client config whose connections act as `User:<name>`.
fn as_user(mut config: ClientConfig, name: &str) -> ClientConfig {
    config.set("client.id", format!("{PRINCIPAL_PREFIX}{name}"));
    config
}

fn client(bootstrap: &str, name: &str) -> ClientConfig {
    as_user(harness::kafka::client_config(bootstrap), name)
}

async fn admin_client(cluster: &mut Cluster) -> Result<RawClient> {
    let leader = cluster.leader()?;
    let mut admin = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    admin.set_client_id(&format!("{PRINCIPAL_PREFIX}admin"));
    Ok(admin)
}

#[tokio::test(flavor = "multi_thread")]
async fn kafka_acls_cli_adds_lists_and_removes() {
    let mut cluster = cluster();
    let result = cli(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn cli(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let follower = cluster.ids().into_iter().find(|id| *id != leader).context("a follower")?;
    let bootstrap = cluster.kafka_addr(follower).to_string();
    let admin_config = cluster.root().join("admin.properties");
    std::fs::write(&admin_config, format!("client.id={PRINCIPAL_PREFIX}admin\n"))?;
    let admin_config = admin_config.to_string_lossy().to_string();
    let acls = |args: &[&str]| {
        let mut all = vec!["--command-config", admin_config.as_str()];
        all.extend_from_slice(args);
        tool(ACLS, &bootstrap, &all)
    };

    let added = acls(&[
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--operation",
        "Write",
        "--topic",
        "orders",
    ])?;
    println!("kafka-acls --add:\n{}", added.stdout);
    acls(&[
        "--add",
        "--deny-principal",
        "User:bob",
        "--operation",
        "All",
        "--resource-pattern-type",
        "prefixed",
        "--topic",
        "logs-",
    ])?;
    let read = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)";
    let write = "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)";
    let deny = "(principal=User:bob, host=*, operation=ALL, permissionType=DENY)";
    let listed = acls(&["--list"])?.stdout;
    println!("kafka-acls --list:\n{listed}");
    ensure!(listed.contains("name=orders, patternType=LITERAL"), "{listed}");
    ensure!(listed.contains(read) && listed.contains(write), "{listed}");
    ensure!(listed.contains("name=logs-, patternType=PREFIXED") && listed.contains(deny), "{listed}");

    acls(&[
        "--remove",
        "--force",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Write",
        "--topic",
        "orders",
    ])?;
    // Every node holds the table: the leader lists what the follower's request changed.
    let on_leader = cluster.kafka_addr(leader).to_string();
    let listed =
        tool(ACLS, &on_leader, &["--command-config", &admin_config, "--list", "--topic", "orders"])?.stdout;
    println!("kafka-acls --list --topic orders after --remove:\n{listed}");
    ensure!(listed.contains(read) && !listed.contains(write), "{listed}");

    // Without ALTER on the cluster (and with no ACL-less default) the same tool is refused.
    let refused = tool(
        ACLS,
        &bootstrap,
        &["--add", "--allow-principal", "User:eve", "--operation", "All", "--topic", "x"],
    )
    .err()
    .context("an anonymous kafka-acls --add succeeded")?;
    ensure!(format!("{refused:#}").contains("ClusterAuthorizationException"), "{refused:#}");
    Ok(())
}

/// Adds ALLOW ACLs (literal, every host) as the admin.
async fn grant(admin: &mut RawClient, acls: &[(i8, &str, &str, i8)]) -> Result<()> {
    let creations = acls
        .iter()
        .map(|(resource_type, name, principal, operation)| {
            AclCreation::default()
                .with_resource_type(*resource_type)
                .with_resource_name(StrBytes::from_string(name.to_string()))
                .with_resource_pattern_type(LITERAL)
                .with_principal(StrBytes::from_string(principal.to_string()))
                .with_host(StrBytes::from_static_str("*"))
                .with_operation(*operation)
                .with_permission_type(ALLOW)
        })
        .collect();
    let version = admin.version::<CreateAclsRequest>(3)?;
    let response = admin.request(version, &CreateAclsRequest::default().with_creations(creations)).await?;
    for result in &response.results {
        ensure!(result.error_code == 0, "CreateAcls: {result:?}");
    }
    Ok(())
}

async fn send(producer: &FutureProducer, topic: &str, value: &str) -> Result<(), KafkaError> {
    let record = FutureRecord::to(topic).key("k").payload(value).partition(0);
    producer.send(record, Duration::from_secs(15)).await.map(|_| ()).map_err(|(e, _)| e)
}

fn producer(bootstrap: &str, name: &str) -> Result<FutureProducer> {
    Ok(client(bootstrap, name).set("message.timeout.ms", "15000").set("linger.ms", "0").create()?)
}

fn code_of(error: &KafkaError) -> Option<RDKafkaErrorCode> {
    error.rdkafka_error_code()
}

#[tokio::test(flavor = "multi_thread")]
async fn clients_are_allowed_and_denied_by_acls() {
    let mut cluster = cluster();
    let result = clients(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn clients(cluster: &mut Cluster) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    let mut admin = admin_client(cluster).await?;
    create_topics_ok(&mut admin, &[("orders", 1), ("secret", 1)]).await?;
    grant(
        &mut admin,
        &[
            (TOPIC, "orders", "User:alice", WRITE),
            (TOPIC, "orders", "User:alice", READ),
            (GROUP, "alice-group", "User:alice", READ),
            (TRANSACTIONAL_ID, "txn-a", "User:alice", WRITE),
        ],
    )
    .await?;
    // Regression: CI's librdkafka asked a follower that had not applied the ACLs yet for
    // Metadata, got TOPIC_AUTHORIZATION_FAILED and failed alice's first send.
    cluster.wait_all_applied(Duration::from_secs(10))?;

    // Writes: alice on orders; not on secret; bob nowhere.
    let alice = producer(&bootstrap, "alice")?;
    send(&alice, "orders", "alice-1").await.context("alice writes orders")?;
    let denied = send(&alice, "secret", "alice-2").await.err().context("alice wrote secret")?;
    ensure!(code_of(&denied) == Some(RDKafkaErrorCode::TopicAuthorizationFailed), "{denied:?}");
    let bob = producer(&bootstrap, "bob")?;
    let denied = send(&bob, "orders", "bob-1").await.err().context("bob wrote orders")?;
    ensure!(code_of(&denied) == Some(RDKafkaErrorCode::TopicAuthorizationFailed), "{denied:?}");

    // Reads: alice in her group reads what she wrote; bob's group is refused.
    let values = read(&bootstrap, "alice", "alice-group", "orders", 1)?;
    ensure!(values == vec!["alice-1".to_string()], "alice read {values:?}");
    let bob_consumer: BaseConsumer = client(&bootstrap, "bob").set("group.id", "bob-group").create()?;
    let metadata = bob_consumer.fetch_metadata(Some("orders"), Duration::from_secs(10))?;
    let topic_error = metadata.topics().first().and_then(|t| t.error()).map(RDKafkaErrorCode::from);
    ensure!(
        topic_error == Some(RDKafkaErrorCode::TopicAuthorizationFailed),
        "bob's Metadata of orders: {topic_error:?}"
    );
    // librdkafka asks FindCoordinator first, which refuses bob the group too (and librdkafka
    // retries it until its timeout): OffsetFetch is asked on the wire.
    let leader = cluster.leader()?;
    let mut raw_bob = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    raw_bob.set_client_id(&format!("{PRINCIPAL_PREFIX}bob"));
    let fetch = OffsetFetchRequest::default().with_group_id(GroupId(StrBytes::from_static_str("bob-group")));
    let fetched = raw_bob.request(raw_bob.version::<OffsetFetchRequest>(7)?, &fetch).await?;
    ensure!(fetched.error_code == GROUP_AUTHORIZATION_FAILED, "bob's OffsetFetch in bob-group: {fetched:?}");

    // Transactions: txn-a commits; txn-b is refused at init_transactions and writes nothing.
    let before = log_end_offset(&bootstrap, "orders")?;
    let txn_a: FutureProducer = as_user(transactional_config(&bootstrap, "txn-a"), "alice").create()?;
    txn_a.init_transactions(TXN_CALL_TIMEOUT).context("txn-a init")?;
    txn_a.begin_transaction()?;
    send(&txn_a, "orders", "txn-a-1").await.context("txn-a send")?;
    txn_a.commit_transaction(TXN_CALL_TIMEOUT).context("txn-a commit")?;
    let txn_b: FutureProducer = as_user(transactional_config(&bootstrap, "txn-b"), "alice").create()?;
    match txn_b.init_transactions(TXN_CALL_TIMEOUT) {
        Err(KafkaError::Transaction(e))
            if e.code() == RDKafkaErrorCode::TransactionalIdAuthorizationFailed => {}
        other => bail!("txn-b's init_transactions: {other:?}"),
    }
    // A Produce of a transactional batch for txn-b is refused whole, before the log.
    let leader = cluster.leader()?;
    let mut raw_alice = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    raw_alice.set_client_id(&format!("{PRINCIPAL_PREFIX}alice"));
    let batch = BatchFor { topic: "orders".into(), partition: 0, records: transactional_batch()? };
    let request = produce_request(-1, &[batch])
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("txn-b"))));
    let produced = raw_alice.request(raw_alice.version::<ProduceRequest>(9)?, &request).await?;
    let codes: Vec<i16> = produce_results(&produced).into_iter().map(|(_, _, code, _)| code).collect();
    ensure!(codes == vec![TRANSACTIONAL_ID_AUTHORIZATION_FAILED], "txn-b's Produce: {codes:?}");
    refused_before_the_byte_quota(cluster, &mut raw_alice, &request).await?;
    let after = log_end_offset(&bootstrap, "orders")?;
    // txn-a's record and its commit marker, nothing of txn-b.
    ensure!(after == before + 2, "orders log end offset {before} -> {after}");
    let all = read(&bootstrap, "admin", "admin-reader", "orders", after)?;
    println!("orders under read_uncommitted: {all:?} (log end offset {before} -> {after})");
    ensure!(all == vec!["alice-1".to_string(), "txn-a-1".to_string()], "{all:?}");

    // KIP-430: alice's operations on orders are READ, WRITE and the DESCRIBE they imply; an
    // all-topics Metadata of bob's leaves orders out.
    let metadata = MetadataRequest::default().with_include_topic_authorized_operations(true);
    let named =
        metadata
            .clone()
            .with_topics(Some(vec![MetadataRequestTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("orders"))))]));
    let answered = raw_alice.request(raw_alice.version::<MetadataRequest>(10)?, &named).await?;
    let operations = answered.topics.first().map(|t| (t.error_code, t.topic_authorized_operations));
    ensure!(
        operations == Some((0, (1 << READ) | (1 << WRITE) | (1 << DESCRIBE))),
        "alice's orders: {operations:?}"
    );
    let answered =
        raw_bob.request(raw_bob.version::<MetadataRequest>(10)?, &metadata.with_topics(None)).await?;
    let listed: Vec<String> =
        answered.topics.iter().filter_map(|t| t.name.as_ref().map(|n| n.0.to_string())).collect();
    ensure!(listed.is_empty(), "bob's all-topics Metadata lists {listed:?}");

    // Forwarding carries the principal: alice's CreateTopics through a follower reaches the
    // leader as alice (allowed CREATE on her topic), bob's as bob; the client id a follower
    // once marked forwarded requests with buys an anonymous client nothing.
    grant(&mut admin, &[(TOPIC, "alice-topic", "User:alice", CREATE)]).await?;
    let leader = cluster.leader()?;
    let follower = cluster.ids().into_iter().find(|id| *id != leader).context("a follower")?;
    let create = |name: &'static str, client_id: String, node: u64| {
        let addr = cluster.kafka_addr(node);
        async move {
            let mut raw = RawClient::connect_negotiated(addr).await?;
            raw.set_client_id(&client_id);
            let results = create_topics(&mut raw, &[(name, 1)]).await?;
            anyhow::Ok(results.first().map(|(_, code)| *code))
        }
    };
    let by_bob = create("alice-topic", format!("{PRINCIPAL_PREFIX}bob"), follower).await?;
    ensure!(by_bob == Some(TOPIC_AUTHORIZATION_FAILED), "bob's CreateTopics via a follower: {by_bob:?}");
    let by_alice = create("alice-topic", format!("{PRINCIPAL_PREFIX}alice"), follower).await?;
    ensure!(by_alice == Some(0), "alice's CreateTopics via node {follower}: {by_alice:?}");
    let spoofed = create("spoofed", "onelog-forward".to_string(), leader).await?;
    ensure!(
        spoofed == Some(TOPIC_AUTHORIZATION_FAILED),
        "an anonymous `onelog-forward` CreateTopics: {spoofed:?}"
    );
    Ok(())
}

/// The partition's high watermark, asked as the admin.
fn log_end_offset(bootstrap: &str, topic: &str) -> Result<i64> {
    let consumer: BaseConsumer = client(bootstrap, "admin").create()?;
    Ok(consumer.fetch_watermarks(topic, 0, Duration::from_secs(10))?.1)
}

/// Every value of partition 0 of `topic` read as `name` in `group` (read_uncommitted), until
/// the position reaches `end`; a consumer error (an authorization failure) is returned.
fn read(bootstrap: &str, name: &str, group: &str, topic: &str, end: i64) -> Result<Vec<String>> {
    let consumer: BaseConsumer = client(bootstrap, name)
        .set("group.id", group)
        .set("enable.auto.commit", "true")
        .set("isolation.level", READ_UNCOMMITTED)
        .create()?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(topic, 0, Offset::Beginning)?;
    consumer.assign(&assignment)?;
    let mut values = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            let message = message.map_err(|e| anyhow::anyhow!("consumer error: {e}"))?;
            values.push(String::from_utf8_lossy(message.payload().unwrap_or_default()).into_owned());
            continue;
        }
        let position = consumer.position()?;
        let at = position.find_partition(topic, 0).map(|e| e.offset());
        if matches!(at, Some(Offset::Offset(o)) if o >= end) {
            // A committed offset makes the group's READ check run too (OffsetCommit).
            consumer.commit_consumer_state(rdkafka::consumer::CommitMode::Sync)?;
            return Ok(values);
        }
    }
    bail!("{name} read {values:?} and stopped short of {end}")
}

/// Regression (issue 27): Produce authorizes the transactional id before anything else, as
/// Kafka's `handleProduceRequest` does, so a refused request is not counted against the
/// principal's `producer_byte_rate` either: with a quota of one byte per second, the refusal
/// carries no throttle (it carried one while the quota was recorded first).
async fn refused_before_the_byte_quota(
    cluster: &mut Cluster,
    alice: &mut RawClient,
    request: &ProduceRequest,
) -> Result<()> {
    let mut admin = admin_client(cluster).await?;
    let alice_entity = || {
        vec![EntityData::default()
            .with_entity_type(StrBytes::from_static_str("user"))
            .with_entity_name(Some(StrBytes::from_static_str("alice")))]
    };
    let quota = |op: OpData| {
        AlterClientQuotasRequest::default()
            .with_entries(vec![EntryData::default().with_entity(alice_entity()).with_ops(vec![op])])
    };
    let rate = OpData::default().with_key(StrBytes::from_static_str("producer_byte_rate")).with_value(1.0);
    let set = admin.request(admin.version::<AlterClientQuotasRequest>(1)?, &quota(rate)).await?;
    ensure!(set.entries.iter().all(|e| e.error_code == 0), "setting alice's quota: {set:?}");
    for _ in 0..3 {
        let produced = alice.request(alice.version::<ProduceRequest>(9)?, request).await?;
        let codes: Vec<i16> = produce_results(&produced).into_iter().map(|(_, _, code, _)| code).collect();
        ensure!(codes == vec![TRANSACTIONAL_ID_AUTHORIZATION_FAILED], "txn-b's Produce: {codes:?}");
        ensure!(
            produced.throttle_time_ms == 0,
            "a refused Produce was throttled {} ms",
            produced.throttle_time_ms
        );
    }
    let removed =
        OpData::default().with_key(StrBytes::from_static_str("producer_byte_rate")).with_remove(true);
    admin.request(admin.version::<AlterClientQuotasRequest>(1)?, &quota(removed)).await?;
    Ok(())
}

/// One transactional record batch (producer 1000, epoch 0), as a transactional producer that
/// skipped InitProducerId would send it.
fn transactional_batch() -> Result<bytes::Bytes> {
    let record = Record {
        transactional: true,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: 1000,
        producer_epoch: 0,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: 0,
        timestamp: 0,
        key: None,
        value: Some(bytes::Bytes::from_static(b"txn-b-1")),
        headers: Default::default(),
    };
    let mut buf = bytes::BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, [record].iter(), &options)?;
    Ok(buf.freeze())
}

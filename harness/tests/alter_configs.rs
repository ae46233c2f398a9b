//! Config changes and DeleteRecords with real clients against real onelog processes:
//! - librdkafka's AdminClient (`alter_configs`, AlterConfigs key 33, and `describe_configs`):
//!   a topic override set, Kafka's INVALID_CONFIG for unknown names and bad values,
//!   `validate_only` changing nothing, the lowered `max.message.bytes` rejecting a bigger
//!   record, the value surviving a kill -9 of the leader (read back from the new leader), and
//!   AlterConfigs replacing a topic's whole set of overrides;
//! - `kafka-configs.sh` (kafka.admin.ConfigCommand, IncrementalAlterConfigs key 44):
//!   `--add-config` / `--delete-config` / `--describe` on a topic and on the brokers' default,
//!   the dynamic default `message.max.bytes` taking effect, a read-only broker config refused
//!   with Kafka's message, group and client-metrics configs described (group configs in full:
//!   group_configs.rs);
//! - DeleteRecords (key 21) from `kafka-delete-records.sh` with an offsets JSON file and from
//!   librdkafka: the low watermark moves, ListOffsets EARLIEST and a consumer from earliest
//!   start there, a fetch below it is OFFSET_OUT_OF_RANGE, -1 means the high watermark, an
//!   offset above it is OFFSET_OUT_OF_RANGE and a follower answers NOT_LEADER_OR_FOLLOWER.
//!
//! Kafka's answers these compare with were taken from `scripts/kafka-reference.sh` (4.1.1).

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use harness::java;
use harness::raw_ops::{delete_records, fetch_request, fetch_results};
use harness::{Cluster, ClusterOptions, RawClient};
use kafka_compat::error_code::{INVALID_CONFIG, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE};
use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{AlterConfigsRequest, DescribeConfigsRequest};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AdminClient, AdminOptions, AlterConfig, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Message, Offset, TopicPartitionList};

const SEGMENT_BYTES: u64 = 1 << 20;
const TIMEOUT: Duration = Duration::from_secs(30);
const SOURCE_DYNAMIC_TOPIC: i8 = 1;

type Admin = AdminClient<DefaultClientContext>;

fn config(bootstrap: &str) -> ClientConfig {
    let mut config = harness::kafka::client_config(bootstrap);
    config.set("message.max.bytes", "100000");
    config
}

fn options() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(TIMEOUT)).request_timeout(Some(TIMEOUT))
}

async fn create_topic(admin: &Admin, name: &str, replication: i32) -> Result<()> {
    let topic = NewTopic::new(name, 1, TopicReplication::Fixed(replication));
    for result in admin.create_topics([&topic], &options()).await? {
        result.map_err(|(name, code)| anyhow::anyhow!("create {name}: {code:?}"))?;
    }
    Ok(())
}

/// librdkafka's alter_configs (AlterConfigs) of one topic. The rdkafka crate drops
/// per-resource errors (its AlterConfigsFuture reports every resource as a success), so
/// refusals are checked with [`alter_raw`] and by describing the value afterwards.
async fn alter_topic(
    admin: &Admin,
    topic: &str,
    entries: &[(&str, &str)],
    validate_only: bool,
) -> Result<()> {
    let mut alter = AlterConfig::new(ResourceSpecifier::Topic(topic));
    for (k, v) in entries {
        alter = alter.set(k, v);
    }
    let results = admin.alter_configs([&alter], &options().validate_only(validate_only)).await?;
    results.into_iter().next().context("no result")?.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    Ok(())
}

/// AlterConfigs v1 of one topic on one node: the error code.
async fn alter_raw(cluster: &Cluster, id: u64, topic: &str, name: &str, value: &str) -> Result<i16> {
    let mut client = RawClient::connect(cluster.kafka_addr(id)).await?;
    let config = AlterableConfig::default()
        .with_name(StrBytes::from_string(name.into()))
        .with_value(Some(StrBytes::from_string(value.into())));
    let resource = AlterConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(StrBytes::from_string(topic.into()))
        .with_configs(vec![config]);
    let response = client.request(1, &AlterConfigsRequest::default().with_resources(vec![resource])).await?;
    Ok(response.responses.first().context("no result")?.error_code)
}

/// The topic's value and source of `name` as librdkafka's describe_configs reports them.
async fn describe_topic(admin: &Admin, topic: &str, name: &str) -> Result<(Option<String>, String)> {
    let results = admin.describe_configs([&ResourceSpecifier::Topic(topic)], &options()).await?;
    let resource = results.into_iter().next().context("no result")?.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let entry = resource.get(name).with_context(|| format!("{name} not described"))?;
    Ok((entry.value.clone(), format!("{:?}", entry.source)))
}

/// The value and source of a topic config as one node answers DescribeConfigs.
async fn describe_on(cluster: &Cluster, id: u64, topic: &str, name: &str) -> Result<(String, i8)> {
    let mut client = RawClient::connect(cluster.kafka_addr(id)).await?;
    let resource = DescribeConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(StrBytes::from_string(topic.into()))
        .with_configuration_keys(Some(vec![StrBytes::from_string(name.into())]));
    let response =
        client.request(4, &DescribeConfigsRequest::default().with_resources(vec![resource])).await?;
    let result = response.results.first().context("no result")?;
    ensure!(result.error_code == 0, "DescribeConfigs on node {id}: {:?}", result.error_message);
    let entry = result.configs.first().with_context(|| format!("{name} not described"))?;
    Ok((entry.value.as_ref().map(|v| v.to_string()).unwrap_or_default(), entry.config_source))
}

async fn send(producer: &FutureProducer, topic: &str, bytes: usize) -> Result<i64, KafkaError> {
    let payload = vec![b'x'; bytes];
    // Keyed: the "tool" topic is compacted (cleanup.policy=delete,compact), which refuses
    // records without a key.
    let record = FutureRecord::to(topic).key("k").payload(&payload);
    producer.send(record, TIMEOUT).await.map(|delivery| delivery.offset).map_err(|(e, _)| e)
}

fn new_producer(bootstrap: &str) -> Result<FutureProducer> {
    Ok(config(bootstrap).set("linger.ms", "0").set("message.timeout.ms", "30000").create()?)
}

/// One DeleteRecords request on one node: (error code, low watermark).
async fn delete_records_on(cluster: &Cluster, id: u64, topic: &str, offset: i64) -> Result<(i16, i64)> {
    let mut client = RawClient::connect(cluster.kafka_addr(id)).await?;
    delete_records(&mut client, topic, offset).await
}

#[tokio::test(flavor = "multi_thread")]
async fn topic_configs_are_validated_replicated_and_enforced() {
    let options = ClusterOptions::new(3).config("log.segment.bytes", SEGMENT_BYTES);
    let mut cluster = Cluster::start_with(options).expect("starting cluster");
    let result = topic_config_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn topic_config_scenario(cluster: &mut Cluster) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    let admin: Admin = config(&bootstrap).create()?;
    create_topic(&admin, "cfg", 3).await?;
    let producer = new_producer(&bootstrap)?;
    send(&producer, "cfg", 5000).await.context("a 5000-byte record under the default limit")?;

    // Unknown names and bad values: INVALID_CONFIG (on a follower too, which forwards), and
    // nothing changes.
    let leader = cluster.leader()?;
    let follower = cluster.followers()?[0];
    for (id, name, value) in [
        (leader, "no.such.config", "1"),
        (leader, "retention.ms", "soon"),
        (follower, "max.message.bytes", "big"),
    ] {
        let code = alter_raw(cluster, id, "cfg", name, value).await?;
        ensure!(code == INVALID_CONFIG, "{name}={value} on node {id}: {code}");
    }
    alter_topic(&admin, "cfg", &[("max.message.bytes", "big")], false).await?;
    // validate_only: accepted, not applied.
    alter_topic(&admin, "cfg", &[("max.message.bytes", "1000")], true).await?;
    let (value, _) = describe_topic(&admin, "cfg", "max.message.bytes").await?;
    ensure!(value.as_deref() == Some("1048588"), "validate_only changed the value to {value:?}");
    ensure!(send(&producer, "cfg", 5000).await.is_ok(), "validate_only lowered the limit");

    // Through a follower: it forwards, and answers once it has applied the change itself.
    ensure!(alter_raw(cluster, follower, "cfg", "retention.ms", "3600000").await? == 0);
    let on_follower = describe_on(cluster, follower, "cfg", "retention.ms").await?;
    ensure!(on_follower == ("3600000".into(), SOURCE_DYNAMIC_TOPIC), "follower {follower}: {on_follower:?}");

    // The change: described with its source, enforced on the next produce.
    alter_topic(&admin, "cfg", &[("max.message.bytes", "1000"), ("retention.ms", "3600000")], false).await?;
    let described = describe_topic(&admin, "cfg", "max.message.bytes").await?;
    ensure!(described == (Some("1000".into()), "DynamicTopic".into()), "described {described:?}");
    let refused = send(&producer, "cfg", 5000).await;
    ensure!(
        matches!(refused, Err(KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge))),
        "a 5000-byte record against max.message.bytes=1000: {refused:?}"
    );
    send(&producer, "cfg", 100).await.context("a small record")?;

    // It is in the log: after kill -9 of the leader, the new leader describes and enforces it.
    let old = cluster.leader()?;
    cluster.kill9(old)?;
    let new = cluster.wait_for_leader(TIMEOUT)?.0;
    ensure!(new != old, "leader still {old}");
    let on_new = describe_on(cluster, new, "cfg", "max.message.bytes").await?;
    ensure!(on_new == ("1000".into(), SOURCE_DYNAMIC_TOPIC), "new leader {new} describes {on_new:?}");
    let producer = new_producer(&cluster.live_bootstrap())?;
    let refused = send(&producer, "cfg", 5000).await;
    ensure!(
        matches!(refused, Err(KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge))),
        "after failover: {refused:?}"
    );

    // AlterConfigs replaces the whole set: max.message.bytes falls back to the default.
    let admin: Admin = config(&cluster.live_bootstrap()).create()?;
    alter_topic(&admin, "cfg", &[("retention.ms", "7200000")], false).await?;
    let limit = describe_on(cluster, new, "cfg", "max.message.bytes").await?;
    ensure!(limit.0 == "1048588" && limit.1 != SOURCE_DYNAMIC_TOPIC, "after replace: {limit:?}");
    ensure!(describe_on(cluster, new, "cfg", "retention.ms").await?.0 == "7200000");
    send(&producer, "cfg", 5000).await.context("the default limit again")?;
    // The killed node, restarted, catches up from the log (it serves before it has heard
    // from the new leader, so poll).
    cluster.start_node(old)?;
    cluster.wait_serving(old)?;
    let deadline = std::time::Instant::now() + TIMEOUT;
    while describe_on(cluster, old, "cfg", "retention.ms").await?.0 != "7200000" {
        ensure!(std::time::Instant::now() < deadline, "restarted node {old} never saw the change");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Regression (sarama's alter_config cell in issue 17's CI run): a topic config change the
/// leader had answered was described by a follower that had not applied it yet, so the
/// describe showed the old value. The follower's Raft link is delayed here so that it lags
/// for certain (250 ms, under the election timeout); it must answer with the new value.
#[tokio::test(flavor = "multi_thread")]
async fn a_follower_describes_a_config_change_the_leader_just_answered() {
    let options = ClusterOptions::new(3).config("log.segment.bytes", SEGMENT_BYTES).link_proxies();
    let mut cluster = Cluster::start_with(options).expect("starting cluster");
    let result = read_your_config_write(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn read_your_config_write(cluster: &mut Cluster) -> Result<()> {
    let (leader, _) = cluster.wait_for_leader(Duration::from_secs(30))?;
    let admin: Admin = config(&cluster.bootstrap()).create()?;
    create_topic(&admin, "lagging", 3).await?;
    let follower = cluster.followers()?[0];
    cluster.delay_link(leader, follower, Duration::from_millis(250))?;
    for (round, value) in ["3600000", "7200000", "10800000"].into_iter().enumerate() {
        let code = alter_raw(cluster, leader, "lagging", "retention.ms", value).await?;
        ensure!(code == 0, "AlterConfigs on the leader: error {code}");
        let (described, _) = describe_on(cluster, follower, "lagging", "retention.ms").await?;
        ensure!(
            described == value,
            "round {round}: follower {follower} described retention.ms = {described} right after the \
             leader answered {value}"
        );
    }
    cluster.heal()?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn delete_records_moves_the_low_watermark() {
    let options = ClusterOptions::new(3).config("log.segment.bytes", SEGMENT_BYTES);
    let mut cluster = Cluster::start_with(options).expect("starting cluster");
    let result = delete_records_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn delete_records_scenario(cluster: &mut Cluster) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    let admin: Admin = config(&bootstrap).create()?;
    create_topic(&admin, "dr", 3).await?;
    let producer = new_producer(&bootstrap)?;
    for _ in 0..10 {
        send(&producer, "dr", 10).await?;
    }

    // kafka-delete-records.sh with an offsets JSON file.
    let json = cluster.root().join("offsets.json");
    std::fs::write(&json, r#"{"version":1,"partitions":[{"topic":"dr","partition":0,"offset":4}]}"#)?;
    let args = ["--bootstrap-server", &bootstrap, "--offset-json-file", &json.to_string_lossy()];
    let out = java::run_text("org.apache.kafka.tools.DeleteRecordsCommand", &args.map(String::from))?;
    ensure!(out.stdout.contains("low_watermark: 4"), "kafka-delete-records printed {}", out.stdout);

    // ListOffsets EARLIEST and a consumer from earliest start at the new low watermark.
    let consumer: BaseConsumer =
        config(&bootstrap).set("group.id", "dr-reader").set("enable.auto.commit", "false").create()?;
    let (low, high) = consumer.fetch_watermarks("dr", 0, TIMEOUT)?;
    ensure!((low, high) == (4, 10), "watermarks {low}..{high}");
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset("dr", 0, Offset::Beginning)?;
    consumer.assign(&assignment)?;
    let first = consumer.poll(TIMEOUT).context("no record from earliest")??;
    ensure!(first.offset() == 4, "first record read from earliest: {}", first.offset());

    // Below the log start: OFFSET_OUT_OF_RANGE.
    let leader = cluster.leader()?;
    let mut client = RawClient::connect(cluster.kafka_addr(leader)).await?;
    let fetched = fetch_results(&client.request(11, &fetch_request(&[("dr", 0, 2)], 1 << 20)).await?);
    ensure!(fetched[0].error_code == OFFSET_OUT_OF_RANGE, "fetch at 2: {:?}", fetched[0].error_code);

    // librdkafka's delete_records: -1 is the high watermark.
    let mut offsets = TopicPartitionList::new();
    offsets.add_partition_offset("dr", 0, Offset::End)?;
    let deleted = admin.delete_records(&offsets, &options()).await?;
    let element = deleted.elements_for_topic("dr").into_iter().next().context("no partition")?;
    ensure!(element.error().is_ok() && element.offset() == Offset::Offset(10), "-1: {element:?}");

    // Above the high watermark, and on a follower.
    ensure!(delete_records_on(cluster, leader, "dr", 11).await? == (OFFSET_OUT_OF_RANGE, -1));
    let follower = cluster.followers()?[0];
    ensure!(delete_records_on(cluster, follower, "dr", 10).await?.0 == NOT_LEADER_OR_FOLLOWER);
    cluster.assert_digests_equal()?;
    Ok(())
}

/// `kafka-configs.sh`: exit status and everything it printed.
fn kafka_configs(bootstrap: &str, args: &[&str]) -> Result<(bool, String)> {
    java::config_command(bootstrap, args)
}

#[tokio::test(flavor = "multi_thread")]
async fn kafka_configs_alters_topics_and_the_broker_default() {
    let options = ClusterOptions::new(1).config("log.segment.bytes", SEGMENT_BYTES);
    let cluster = Cluster::start_with(options).expect("starting cluster");
    let result = kafka_configs_scenario(&cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn kafka_configs_scenario(cluster: &Cluster) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    let admin: Admin = config(&bootstrap).create()?;
    create_topic(&admin, "tool", 1).await?;
    let topic = ["--entity-type", "topics", "--entity-name", "tool"];
    let run = |extra: &[&str], base: &[&str]| kafka_configs(&bootstrap, &[base, extra].concat());

    let (ok, out) =
        run(&["--alter", "--add-config", "retention.ms=5000,cleanup.policy=[delete,compact]"], &topic)?;
    ensure!(ok, "topic --add-config: {out}");
    let (_, out) = run(&["--describe"], &topic)?;
    ensure!(out.contains("retention.ms=5000") && out.contains("cleanup.policy=delete,compact"), "{out}");
    ensure!(out.contains("DYNAMIC_TOPIC_CONFIG:retention.ms=5000"), "{out}");
    let (ok, out) = run(&["--alter", "--delete-config", "retention.ms"], &topic)?;
    ensure!(ok, "topic --delete-config: {out}");
    let (_, out) = run(&["--describe"], &topic)?;
    ensure!(!out.contains("retention.ms=") && out.contains("cleanup.policy"), "after delete: {out}");
    let (ok, out) = run(&["--alter", "--add-config", "no.such.config=1"], &topic)?;
    ensure!(!ok && out.contains("InvalidConfigurationException"), "unknown topic config: {out}");

    // The brokers' default: DYNAMIC_DEFAULT_BROKER_CONFIG, and it takes effect.
    let default = ["--entity-type", "brokers", "--entity-default"];
    let (ok, out) = run(&["--alter", "--add-config", "message.max.bytes=2000"], &default)?;
    ensure!(ok, "broker default --add-config: {out}");
    let (_, out) = run(&["--describe"], &default)?;
    ensure!(out.contains("DYNAMIC_DEFAULT_BROKER_CONFIG:message.max.bytes=2000"), "{out}");
    let (_, out) = run(&["--describe", "--all"], &["--entity-type", "brokers", "--entity-name", "1"])?;
    ensure!(out.contains("message.max.bytes=2000"), "broker 1: {out}");
    let producer = new_producer(&bootstrap)?;
    let refused = send(&producer, "tool", 5000).await;
    ensure!(
        matches!(refused, Err(KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge))),
        "5000 bytes against message.max.bytes=2000: {refused:?}"
    );
    let described = admin.describe_configs([&ResourceSpecifier::Broker(1)], &options()).await?;
    let broker = described.into_iter().next().context("no result")?.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let read_only = |name: &str| broker.get(name).map(|e| e.is_read_only);
    ensure!(read_only("num.partitions") == Some(true), "num.partitions: {:?}", read_only("num.partitions"));
    ensure!(read_only("message.max.bytes") == Some(false), "message.max.bytes is dynamic");
    let (ok, out) = run(&["--alter", "--add-config", "num.partitions=3"], &default)?;
    ensure!(!ok && out.contains("Cannot update these configs dynamically: Set(num.partitions)"), "{out}");
    let (ok, out) = run(&["--alter", "--delete-config", "message.max.bytes"], &default)?;
    ensure!(ok, "broker default --delete-config: {out}");
    send(&producer, "tool", 5000).await.context("the static limit again")?;

    // Groups and client metrics, as Kafka 4.1 describes them.
    let group = ["--entity-type", "groups", "--entity-name", "g1"];
    let (_, out) = run(&["--describe", "--all"], &group)?;
    ensure!(
        out.contains("consumer.session.timeout.ms=45000") && out.contains("share.isolation.level"),
        "{out}"
    );
    let (ok, out) = run(&["--alter", "--add-config", "consumer.session.timeout.ms=50000"], &group)?;
    ensure!(ok, "group --add-config: {out}");
    // Without --all, kafka-configs 4.1 lists groups first (ListConfigResources, not served).
    let (_, out) = run(&["--describe", "--all"], &group)?;
    ensure!(out.contains("DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000"), "{out}");
    let metrics = ["--entity-type", "client-metrics", "--entity-name", "m1"];
    let (ok, out) = run(&["--alter", "--add-config", "metrics=org.apache,interval.ms=60000"], &metrics)?;
    ensure!(ok, "client-metrics --add-config: {out}");
    let (_, out) = run(&["--describe", "--all"], &metrics)?;
    ensure!(out.contains("interval.ms=60000") && out.contains("metrics=org.apache"), "{out}");
    Ok(())
}

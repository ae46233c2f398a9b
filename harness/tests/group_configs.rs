//! Group configs (ConfigResource GROUP = 32) that KIP-848 consumer groups obey, against one
//! onelog process whose `group.consumer.*` bounds are not Kafka's defaults:
//! - `kafka-configs.sh --entity-type groups`: `--describe --all` shows each key's default as
//!   the broker's current `group.consumer.*` value with its source (DEFAULT_CONFIG, or
//!   STATIC_BROKER_CONFIG when set), Kafka's internal keys not at all while unset, `--add-config` stores an override (GROUP_CONFIG), and a
//!   value outside the broker's bounds or a session timeout not above the heartbeat interval
//!   is refused with Kafka 4.4's message;
//! - IncrementalAlterConfigs on the wire: INVALID_CONFIG (40) for those and for an unknown
//!   key, INVALID_REQUEST (42) for the empty group name, `validate_only` storing nothing;
//! - ConsumerGroupHeartbeat on the wire: HeartbeatIntervalMs is the group's override, and a
//!   change shows at the next heartbeat; a group's own `consumer.session.timeout.ms` is the
//!   session its silent member is fenced after, while a member of another group stays.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use harness::java;
use harness::kafka::create_topics;
use harness::{Broker, BrokerOptions, RawClient};
use kafka_compat::error_code::{INVALID_CONFIG, INVALID_REQUEST};
use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, GroupId,
    IncrementalAlterConfigsRequest,
};
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "gc-topic";
const RESOURCE_GROUP: i8 = 32;
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

#[tokio::test(flavor = "multi_thread")]
async fn group_configs_are_checked_against_the_broker_and_obeyed() {
    let options = BrokerOptions::default()
        .config("group.consumer.assignment.interval.ms", 0)
        .config("group.consumer.min.session.timeout.ms", 2_000)
        .config("group.consumer.max.session.timeout.ms", 90_000)
        .config("group.consumer.min.heartbeat.interval.ms", 500);
    let broker = Broker::start(options).expect("starting onelog");
    let result = scenario(&broker).await;
    broker.unwrap_or_dump(result);
}

async fn scenario(broker: &Broker) -> Result<()> {
    let bootstrap = broker.bootstrap();
    create_topics(&bootstrap, &[(TOPIC, 2)]).await?;
    kafka_configs(&bootstrap)?;
    let mut c = RawClient::connect_negotiated(broker.addr()).await?;
    refusals(&mut c).await?;
    heartbeat_interval(&mut c).await?;
    session_timeout(&mut c).await
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// `kafka-configs.sh` (Kafka's ConfigCommand) on group `gc`.
fn kafka_configs(bootstrap: &str) -> Result<()> {
    let run = |extra: &[&str]| {
        java::config_command(
            bootstrap,
            &[&["--entity-type", "groups", "--entity-name", "gc"], extra].concat(),
        )
    };
    let (_, out) = run(&["--describe", "--all"])?;
    println!("described:\n{out}");
    // Defaults are the broker's current values: Kafka's (DEFAULT_CONFIG) or its own (STATIC).
    for expected in [
        "consumer.session.timeout.ms=45000 sensitive=false synonyms={DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}",
        "consumer.assignment.interval.ms=0 sensitive=false synonyms={STATIC_BROKER_CONFIG:group.consumer.assignment.interval.ms=0, DEFAULT_CONFIG:group.consumer.assignment.interval.ms=1000}",
        "streams.num.standby.replicas=0",
        "share.isolation.level=read_uncommitted",
        "share.record.lock.duration.ms=30000 sensitive=false synonyms={DEFAULT_CONFIG:group.share.record.lock.duration.ms=30000}",
    ] {
        ensure!(out.contains(expected), "missing {expected:?} in {out}");
    }
    // Kafka's internal keys show only when set (regression: onelog listed them all).
    for internal in
        ["consumer.assignor.offload.enable", "share.assignor.offload.enable", "streams.num.warmup.replicas"]
    {
        ensure!(!out.contains(internal), "internal {internal} described although unset: {out}");
    }
    let (ok, out) = run(&["--alter", "--add-config", "consumer.session.timeout.ms=50000"])?;
    ensure!(ok, "--add-config: {out}");
    let (_, out) = run(&["--describe", "--all"])?;
    let expected = "consumer.session.timeout.ms=50000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000, DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}";
    ensure!(out.contains(expected), "after --add-config: {out}");
    // Bounds are this broker's (90000 here, not Kafka's 60000).
    let (ok, out) = run(&["--alter", "--add-config", "consumer.session.timeout.ms=100000"])?;
    println!("refused: {out}");
    ensure!(
        !ok && out.contains("InvalidConfigurationException")
            && out.contains("consumer.session.timeout.ms must be in the range 2000 to 90000 inclusive."),
        "out of bounds: {out}"
    );
    let (ok, out) = run(&["--alter", "--add-config", "consumer.session.timeout.ms=80000"])?;
    ensure!(ok, "within this broker's bounds: {out}");
    let (ok, out) = run(&[
        "--alter",
        "--add-config",
        "consumer.session.timeout.ms=8000,consumer.heartbeat.interval.ms=10000",
    ])?;
    ensure!(
        !ok && out
            .contains("consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"),
        "session not above heartbeat: {out}"
    );
    let (ok, out) = run(&["--alter", "--delete-config", "consumer.session.timeout.ms"])?;
    ensure!(ok, "--delete-config: {out}");
    Ok(())
}

/// IncrementalAlterConfigs of `configs` on group `group`: the resource's code and message.
async fn alter(
    c: &mut RawClient,
    group: &str,
    configs: &[(&str, Option<&str>)],
    validate_only: bool,
) -> Result<(i16, String)> {
    let configs = configs
        .iter()
        .map(|(name, value)| {
            AlterableConfig::default()
                .with_name(text(name))
                .with_config_operation(if value.is_some() { OP_SET } else { OP_DELETE })
                .with_value(value.map(text))
        })
        .collect();
    let resource = AlterConfigsResource::default()
        .with_resource_type(RESOURCE_GROUP)
        .with_resource_name(text(group))
        .with_configs(configs);
    let request = IncrementalAlterConfigsRequest::default()
        .with_resources(vec![resource])
        .with_validate_only(validate_only);
    let response = c.request(1, &request).await?;
    let answer = response.responses.first().context("one resource")?;
    Ok((answer.error_code, answer.error_message.as_ref().map_or_else(String::new, |m| m.to_string())))
}

async fn refusals(c: &mut RawClient) -> Result<()> {
    let refused = alter(c, "gc", &[("consumer.heartbeat.interval.ms", Some("20000"))], false).await?;
    ensure!(
        refused
            == (
                INVALID_CONFIG,
                "consumer.heartbeat.interval.ms must be in the range 500 to 15000 inclusive.".into()
            ),
        "{refused:?}"
    );
    let unknown = alter(c, "gc", &[("consumer.colour", Some("red"))], false).await?;
    ensure!(unknown == (INVALID_CONFIG, "Unknown group config name: consumer.colour".into()), "{unknown:?}");
    let empty = alter(c, "", &[("consumer.session.timeout.ms", Some("50000"))], false).await?;
    ensure!(empty == (INVALID_REQUEST, "Default group resources are not allowed.".into()), "{empty:?}");
    // validate_only answers as the change would, and stores nothing.
    let validated = alter(c, "hb", &[("consumer.heartbeat.interval.ms", Some("7000"))], true).await?;
    ensure!(validated.0 == 0, "{validated:?}");
    let bad = alter(c, "hb", &[("consumer.heartbeat.interval.ms", Some("50000"))], true).await?;
    ensure!(bad.0 == INVALID_CONFIG, "{bad:?}");
    Ok(())
}

fn join(group: &str, member: &str) -> ConsumerGroupHeartbeatRequest {
    harness::raw_ops::consumer_join(group, member, TOPIC)
}

fn beat(group: &str, member: &str, epoch: i32) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_member_id(text(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(-1)
}

async fn heartbeat(
    c: &mut RawClient,
    request: &ConsumerGroupHeartbeatRequest,
) -> Result<ConsumerGroupHeartbeatResponse> {
    let answer = c.request(1, request).await?;
    ensure!(answer.error_code == 0, "heartbeat {request:?}: {answer:?}");
    Ok(answer)
}

/// HeartbeatIntervalMs follows the group's override, from the next heartbeat on.
async fn heartbeat_interval(c: &mut RawClient) -> Result<()> {
    let nothing_stored = heartbeat(c, &join("hb", "hb-a")).await?;
    ensure!(nothing_stored.heartbeat_interval_ms == 5_000, "validate_only stored it: {nothing_stored:?}");
    ensure!(alter(c, "hb", &[("consumer.heartbeat.interval.ms", Some("7000"))], false).await?.0 == 0);
    let epoch = nothing_stored.member_epoch;
    let answer = heartbeat(c, &beat("hb", "hb-a", epoch)).await?;
    ensure!(answer.heartbeat_interval_ms == 7_000, "override 7000: {answer:?}");
    let other = heartbeat(c, &join("plain", "plain-a")).await?;
    ensure!(other.heartbeat_interval_ms == 5_000, "another group keeps the broker's: {other:?}");
    ensure!(alter(c, "hb", &[("consumer.heartbeat.interval.ms", Some("9000"))], false).await?.0 == 0);
    let answer = heartbeat(c, &beat("hb", "hb-a", epoch)).await?;
    ensure!(answer.heartbeat_interval_ms == 9_000, "override 9000: {answer:?}");
    ensure!(alter(c, "hb", &[("consumer.heartbeat.interval.ms", None)], false).await?.0 == 0);
    let answer = heartbeat(c, &beat("hb", "hb-a", epoch)).await?;
    ensure!(answer.heartbeat_interval_ms == 5_000, "override deleted: {answer:?}");
    println!("HeartbeatIntervalMs: 5000, 7000, 9000, then 5000 again");
    Ok(())
}

async fn members(c: &mut RawClient, group: &str) -> Result<usize> {
    let request = ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(group))]);
    let answer = c.request(1, &request).await?;
    let described = answer.groups.first().context("one group")?;
    ensure!(described.error_code == 0, "describe {group}: {described:?}");
    Ok(described.members.len())
}

/// A silent member of a group with a 2 s session is fenced after it; the member of `plain`
/// (the broker's 45 s), silent as long, stays.
async fn session_timeout(c: &mut RawClient) -> Result<()> {
    let short =
        [("consumer.session.timeout.ms", Some("2000")), ("consumer.heartbeat.interval.ms", Some("1000"))];
    ensure!(alter(c, "short", &short, false).await?.0 == 0);
    let joined = heartbeat(c, &join("short", "short-a")).await?;
    ensure!(joined.heartbeat_interval_ms == 1_000, "{joined:?}");
    ensure!(members(c, "short").await? == 1 && members(c, "plain").await? == 1);
    let started = std::time::Instant::now();
    while members(c, "short").await? == 1 {
        ensure!(started.elapsed() < Duration::from_secs(10), "short's member was never fenced");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let fenced_after = started.elapsed();
    ensure!(fenced_after >= Duration::from_millis(1_500), "fenced too early: {fenced_after:?}");
    ensure!(members(c, "plain").await? == 1, "plain's member is within its 45 s session");
    println!("short's member fenced {fenced_after:?} after its last heartbeat; plain's still there");
    Ok(())
}

//! Client quotas (KIP-546 AlterClientQuotas / DescribeClientQuotas, and the byte-rate
//! enforcement of KIP-13 / KIP-219) on a three-node cluster.
//!
//! - Alterations sent to a follower are forwarded to the leader and reach every node's
//!   describe; bad ones get Kafka's INVALID_REQUEST with Kafka's messages (fractional byte
//!   rate, unknown key, ip combined with client-id, empty entity, duplicate entity), an unknown
//!   filter type UNSUPPORTED_VERSION; `validate_only` stores nothing.
//! - A client id over its `producer_byte_rate` gets a Produce response with a throttle time
//!   (X = (O - T) / T · W, Kafka's formula: two 600 KB batches against 100 KB/s over Kafka's
//!   minimum 10 s window make 120 KB/s, 2 s), and the connection reads nothing more until the
//!   throttle has passed; another client id producing the same is not throttled.
//! - Over `consumer_byte_rate`, a fetch gets an empty response with a throttle time (Kafka's
//!   `getThrottledResponse`), while another client id reads the same data.
//! - The quotas survive a kill -9 of the leader; removing them ends the throttling.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::batch::{encode_batch, TestRecord};
use harness::raw_ops::{create_topics_ok, fetch_request, fetch_results, produce, produce_results, BatchFor};
use harness::{Cluster, ClusterOptions, RawClient};
use kafka_compat::error_code::{INVALID_REQUEST, NONE, UNSUPPORTED_VERSION};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, ApiVersionsRequest, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse, FetchRequest,
};
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "quotas";
const THROTTLED: &str = "throttled-app";
const FREE: &str = "free-app";
/// Bytes per second allowed to THROTTLED, producing and fetching.
const RATE: f64 = 100_000.0;
const BATCH_VALUE_BYTES: usize = 600_000;
const APPLY_TIMEOUT: Duration = Duration::from_secs(10);

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn entity(pairs: &[(&str, Option<&str>)]) -> Vec<EntityData> {
    pairs
        .iter()
        .map(|(t, n)| EntityData::default().with_entity_type(s(t)).with_entity_name(n.map(s)))
        .collect()
}

fn set(key: &str, value: f64) -> OpData {
    OpData::default().with_key(s(key)).with_value(value)
}

fn remove(key: &str) -> OpData {
    OpData::default().with_key(s(key)).with_remove(true)
}

async fn alter(
    client: &mut RawClient,
    entries: Vec<EntryData>,
    validate_only: bool,
) -> Result<AlterClientQuotasResponse> {
    let version = client.version::<AlterClientQuotasRequest>(1)?;
    let request = AlterClientQuotasRequest::default().with_entries(entries).with_validate_only(validate_only);
    client.request(version, &request).await
}

async fn describe(
    client: &mut RawClient,
    components: Vec<ComponentData>,
    strict: bool,
) -> Result<DescribeClientQuotasResponse> {
    let version = client.version::<DescribeClientQuotasRequest>(1)?;
    client
        .request(
            version,
            &DescribeClientQuotasRequest::default().with_components(components).with_strict(strict),
        )
        .await
}

fn exact_client(name: &str) -> ComponentData {
    ComponentData::default().with_entity_type(s("client-id")).with_match_type(0).with_match(Some(s(name)))
}

/// The values described for the exact client-id entity `name`, sorted by key.
async fn client_values(client: &mut RawClient, name: &str) -> Result<Vec<(String, f64)>> {
    let response = describe(client, vec![exact_client(name)], true).await?;
    ensure!(response.error_code == NONE, "describe failed: {response:?}");
    let mut values: Vec<(String, f64)> = response
        .entries
        .unwrap_or_default()
        .iter()
        .flat_map(|e| e.values.iter().map(|v| (v.key.to_string(), v.value)))
        .collect();
    values.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(values)
}

/// Waits until node `id` describes `expected` for the client id `name`.
async fn await_described(cluster: &Cluster, id: u64, name: &str, expected: &[(String, f64)]) -> Result<()> {
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(id)).await?;
    let deadline = Instant::now() + APPLY_TIMEOUT;
    loop {
        let values = client_values(&mut client, name).await?;
        if values == expected {
            return Ok(());
        }
        ensure!(Instant::now() < deadline, "node {id} describes {values:?} for {name}, not {expected:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn batch(seq: u8) -> Result<BatchFor> {
    // Incompressible-looking bytes, so the batch is as large on the wire as its value.
    let value: Vec<u8> =
        (0..BATCH_VALUE_BYTES).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seq)).collect();
    let records = encode_batch(&[TestRecord::new(vec![seq], value, 1_700_000_000_000)])?;
    Ok(BatchFor { topic: TOPIC.into(), partition: 0, records })
}

/// Produces one batch as `client_id`; returns the response's throttle time.
async fn produce_as(client: &mut RawClient, seq: u8) -> Result<i32> {
    let response = produce(client, -1, &[batch(seq)?]).await?;
    for (topic, partition, code, _) in produce_results(&response) {
        ensure!(code == NONE, "produce to {topic}-{partition} failed with {code}");
    }
    Ok(response.throttle_time_ms)
}

/// One fetch of partition 0 from `offset`: (throttle time, record bytes returned).
async fn fetch_as(client: &mut RawClient, offset: i64) -> Result<(i32, usize)> {
    let version = client.version::<FetchRequest>(12)?;
    let response = client.request(version, &fetch_request(&[(TOPIC, 0, offset)], 4 * 1024 * 1024)).await?;
    let bytes = fetch_results(&response).iter().map(|r| r.records.len()).sum();
    Ok((response.throttle_time_ms, bytes))
}

#[tokio::test(flavor = "multi_thread")]
async fn client_quotas_are_replicated_validated_and_enforced() {
    let options = ClusterOptions::new(3).config("log.segment.bytes", 8 * 1024 * 1024);
    let mut cluster = Cluster::start_with(options).expect("starting the cluster");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let follower = cluster.ids().into_iter().find(|id| *id != leader).context("a follower")?;
    let mut on_follower = RawClient::connect_negotiated(cluster.kafka_addr(follower)).await?;
    create_topics_ok(&mut RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?, &[(TOPIC, 1)])
        .await?;

    // Bad alterations, each refused on its own with Kafka's message; the good one in the same
    // request is not held back by them.
    let throttled = || entity(&[("client-id", Some(THROTTLED))]);
    let bad = vec![
        EntryData::default()
            .with_entity(entity(&[("client-id", Some("frac"))]))
            .with_ops(vec![set("producer_byte_rate", 10.5)]),
        EntryData::default()
            .with_entity(entity(&[("client-id", Some("key"))]))
            .with_ops(vec![set("no_such_quota", 1.0)]),
        EntryData::default()
            .with_entity(entity(&[("ip", Some("10.0.0.1")), ("client-id", Some("x"))]))
            .with_ops(vec![set("connection_creation_rate", 1.0)]),
        EntryData::default().with_entity(vec![]).with_ops(vec![set("producer_byte_rate", 1.0)]),
        EntryData::default()
            .with_entity(entity(&[("client-id", Some("neg"))]))
            .with_ops(vec![set("consumer_byte_rate", -1.0)]),
    ];
    let response = alter(&mut on_follower, bad, false).await?;
    let expected = [
        "producer_byte_rate cannot be a fractional value.",
        "Invalid configuration key no_such_quota",
        "Invalid quota entity combination",
        "Invalid empty client quota entity",
        "Quota consumer_byte_rate must be greater than 0",
    ];
    ensure!(response.entries.len() == expected.len(), "{response:?}");
    for (entry, message) in response.entries.iter().zip(expected) {
        ensure!(entry.error_code == INVALID_REQUEST, "expected INVALID_REQUEST for {message:?}: {entry:?}");
        let got = entry.error_message.as_ref().map(|m| m.to_string()).unwrap_or_default();
        ensure!(got.contains(message), "message {got:?} lacks {message:?}");
    }

    // validate_only checks and stores nothing.
    let entry = EntryData::default().with_entity(throttled()).with_ops(vec![set("producer_byte_rate", RATE)]);
    let response = alter(&mut on_follower, vec![entry], true).await?;
    ensure!(response.entries[0].error_code == NONE, "{response:?}");
    ensure!(client_values(&mut on_follower, THROTTLED).await?.is_empty(), "validate_only stored a quota");

    // The real change, through the follower.
    let entry = EntryData::default().with_entity(throttled()).with_ops(vec![
        set("producer_byte_rate", RATE),
        set("consumer_byte_rate", RATE),
        set("request_percentage", 12.5),
    ]);
    let response = alter(&mut on_follower, vec![entry], false).await?;
    ensure!(response.entries[0].error_code == NONE, "{response:?}");
    let stored = vec![
        ("consumer_byte_rate".to_string(), RATE),
        ("producer_byte_rate".to_string(), RATE),
        ("request_percentage".to_string(), 12.5),
    ];
    // Regression: the follower relayed the leader's answer before applying the change itself,
    // so a Describe sent to it right after could miss the change it had just acknowledged.
    let at_once = client_values(&mut on_follower, THROTTLED).await?;
    ensure!(at_once == stored, "the follower answered before it applied the change: {at_once:?}");
    for id in cluster.ids() {
        await_described(cluster, id, THROTTLED, &stored).await?;
    }
    let any = ComponentData::default().with_entity_type(s("client-id")).with_match_type(2);
    let listed = describe(&mut on_follower, vec![any], false).await?;
    ensure!(listed.entries.as_ref().map(Vec::len) == Some(1), "{listed:?}");
    let unknown = ComponentData::default().with_entity_type(s("group")).with_match_type(2);
    let refused = describe(&mut on_follower, vec![unknown], false).await?;
    ensure!(refused.error_code == UNSUPPORTED_VERSION, "unknown entity type: {refused:?}");

    // Produce: the free client is never throttled; the throttled one is, once over its rate.
    let mut free = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    free.set_client_id(FREE);
    let mut quota = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    quota.set_client_id(THROTTLED);
    ensure!(produce_as(&mut free, 1).await? == 0, "an unquoted client was throttled");
    ensure!(produce_as(&mut free, 2).await? == 0, "an unquoted client was throttled");
    let first = produce_as(&mut quota, 3).await?;
    ensure!(first == 0, "60 KB/s against 100 KB/s was throttled for {first} ms");
    let throttle_ms = produce_as(&mut quota, 4).await?;
    ensure!(
        (1_500..=2_500).contains(&throttle_ms),
        "120 KB/s against 100 KB/s: throttle {throttle_ms} ms, not about 2000"
    );
    // Muted: the connection's next request is read only after the throttle time.
    let sent = Instant::now();
    quota.request(3, &ApiVersionsRequest::default()).await?;
    let muted = sent.elapsed();
    ensure!(
        muted >= Duration::from_millis(throttle_ms as u64 * 9 / 10),
        "the throttled connection answered after {muted:?}, within its {throttle_ms} ms throttle"
    );

    // Fetch: 1.2 MB for the throttled client id is over 100 KB/s; the free one reads it all.
    let (free_throttle, free_bytes) = fetch_as(&mut free, 0).await?;
    ensure!(free_throttle == 0 && free_bytes > 0, "free fetch: throttle {free_throttle}, {free_bytes} bytes");
    let mut fetcher = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    fetcher.set_client_id(THROTTLED);
    let mut throttled_fetch = None;
    for offset in 0..4 {
        let (throttle, bytes) = fetch_as(&mut fetcher, offset).await?;
        if throttle > 0 {
            throttled_fetch = Some((throttle, bytes));
            break;
        }
        ensure!(bytes > 0, "an unthrottled fetch at {offset} returned nothing");
    }
    let (throttle, bytes) =
        throttled_fetch.context("four 600 KB fetches against 100 KB/s were never throttled")?;
    ensure!(bytes == 0, "a throttled fetch carried {bytes} bytes (Kafka sends none)");
    ensure!(throttle > 0, "throttle {throttle}");

    // The table survives the leader's kill -9.
    cluster.kill9(leader)?;
    let (new_leader, _) = cluster.wait_for_leader(Duration::from_secs(20))?;
    await_described(cluster, new_leader, THROTTLED, &stored).await?;

    // Removing the quotas ends the throttling.
    let mut on_leader = RawClient::connect_negotiated(cluster.kafka_addr(new_leader)).await?;
    let entry = EntryData::default().with_entity(throttled()).with_ops(vec![
        remove("producer_byte_rate"),
        remove("consumer_byte_rate"),
        remove("request_percentage"),
    ]);
    let response = alter(&mut on_leader, vec![entry], false).await?;
    ensure!(response.entries[0].error_code == NONE, "{response:?}");
    await_described(cluster, new_leader, THROTTLED, &[]).await?;
    let mut quota = RawClient::connect_negotiated(cluster.kafka_addr(new_leader)).await?;
    quota.set_client_id(THROTTLED);
    for seq in 5..8 {
        ensure!(produce_as(&mut quota, seq).await? == 0, "throttled after its quota was removed");
    }
    Ok(())
}

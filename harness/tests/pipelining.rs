//! Requests pipelined on one connection: a client may send many Produce requests before reading
//! any response (librdkafka does, up to `max.in.flight`). Kafka appends them, and answers them,
//! in the order they arrived; a non-idempotent client's per-partition order depends on it.

use anyhow::{ensure, Result};
use harness::batch::{encode_batch, TestRecord};
use harness::raw_ops::{
    create_topics_ok, fetch_all, produce_request, produce_results, BatchFor, PRODUCE_VERSION_CAP,
};
use harness::{Broker, BrokerOptions, RawClient};
use kafka_protocol::messages::ProduceRequest;

const TOPIC: &str = "pipelined";
const REQUESTS: usize = 200;

#[tokio::test(flavor = "multi_thread")]
async fn pipelined_produce_appends_in_request_order() {
    let mut broker = Broker::start(BrokerOptions::default()).expect("starting onelog");
    let result = pipelined_produce_appends_in_request_order_scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn pipelined_produce_appends_in_request_order_scenario(broker: &mut Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    create_topics_ok(&mut client, &[(TOPIC, 1)]).await?;
    let version = client.version::<ProduceRequest>(PRODUCE_VERSION_CAP)?;

    let mut correlation_ids = Vec::with_capacity(REQUESTS);
    for seq in 0..REQUESTS {
        let record = TestRecord::new(format!("{seq:04}"), format!("request {seq}"), 1_700_000_000_000);
        let batch = BatchFor { topic: TOPIC.to_owned(), partition: 0, records: encode_batch(&[record])? };
        correlation_ids.push(client.send_request(version, &produce_request(-1, &[batch])).await?);
    }
    let mut base_offsets = Vec::with_capacity(REQUESTS);
    for (seq, correlation_id) in correlation_ids.into_iter().enumerate() {
        // Fails unless the responses come back in request order.
        let response = client.receive_response::<ProduceRequest>(correlation_id, version).await?;
        let results = produce_results(&response);
        ensure!(results.len() == 1 && results[0].2 == 0, "request {seq}: {results:?}");
        base_offsets.push(results[0].3);
    }
    let expected: Vec<i64> = (0..REQUESTS as i64).collect();
    ensure!(
        base_offsets == expected,
        "request i must get offset i; first (request, offset) mismatches: {:?}",
        first_mismatches(&base_offsets)
    );

    let stored = fetch_all(&mut client, TOPIC, 0).await?;
    let keys: Vec<String> = stored
        .records
        .iter()
        .map(|r| String::from_utf8_lossy(r.record.key.as_deref().unwrap_or_default()).into_owned())
        .collect();
    let expected: Vec<String> = (0..REQUESTS).map(|seq| format!("{seq:04}")).collect();
    ensure!(keys == expected, "stored key order {:?}", &keys[..keys.len().min(20)]);
    Ok(())
}

/// The first few (request, offset) pairs where request i did not get offset i.
fn first_mismatches(offsets: &[i64]) -> Vec<(usize, i64)> {
    offsets.iter().enumerate().filter(|(i, &o)| o != *i as i64).take(10).map(|(i, &o)| (i, o)).collect()
}

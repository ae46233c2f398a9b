//! Inputs no well-behaved client sends: malformed frames, unknown APIs, versions out of range,
//! corrupt or oversized record batches, invalid topic names. The broker must answer with the
//! documented error or close that one connection, and keep serving everyone else.

use anyhow::{ensure, Context, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use harness::batch::{encode_batch, with_flipped_crc, with_flipped_tail_byte, TestRecord};
use harness::check::{assert_closes, assert_serving};
use harness::raw_client::frame_with_header;
use harness::raw_ops::{create_topics, create_topics_ok, produce, produce_results, BatchFor};
use harness::{Broker, BrokerOptions, RawClient};
use kafka_compat::error_code::{
    CORRUPT_MESSAGE, INVALID_TOPIC_EXCEPTION, MESSAGE_TOO_LARGE, UNSUPPORTED_VERSION,
};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

const API_KEY_PRODUCE: i16 = 0;
const API_KEY_API_VERSIONS: i16 = 18;

fn records(count: usize, value_bytes: usize) -> Vec<TestRecord> {
    (0..count)
        .map(|i| TestRecord::new(format!("key-{i}"), vec![b'v'; value_bytes], 1_700_000_000_000))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_frames_close_only_their_connection() {
    let mut broker = Broker::start(BrokerOptions::default()).expect("starting onelog");
    let result = malformed_frames_close_only_their_connection_scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn malformed_frames_close_only_their_connection_scenario(broker: &mut Broker) -> Result<()> {
    assert_serving(broker, "start").await?;

    // Shorter than api_key + api_version + correlation_id.
    assert_closes(broker, "3-byte header", &frame(&[0xde, 0xad, 0xbe])).await?;

    // ApiVersions v0 header whose client_id claims 1000 bytes but carries 2.
    let mut header = BytesMut::new();
    header.put_i16(API_KEY_API_VERSIONS);
    header.put_i16(0);
    header.put_i32(7);
    header.put_i16(1000);
    header.put_slice(b"ab");
    assert_closes(broker, "client_id longer than frame", &frame(&header)).await?;

    assert_closes(broker, "unknown api key 999", &frame_with_header(999, 0, 1, &[])).await?;

    // The broker must not wait for (or allocate) 2 GiB that will never come.
    let mut huge = BytesMut::new();
    huge.put_i32(i32::MAX);
    huge.put_slice(&[0u8; 16]);
    assert_closes(broker, "length prefix 2^31-1", &huge).await?;

    let mut negative = BytesMut::new();
    negative.put_i32(-1);
    negative.put_slice(&[0u8; 16]);
    assert_closes(broker, "negative length prefix", &negative).await?;

    assert_closes(broker, "zero length frame", &frame(&[])).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn produce_v2_is_advertised_but_answered_unsupported_version() {
    let mut broker = Broker::start(BrokerOptions::default()).expect("starting onelog");
    let result = produce_v2_is_advertised_but_answered_unsupported_version_scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn produce_v2_is_advertised_but_answered_unsupported_version_scenario(
    broker: &mut Broker,
) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    create_topics_ok(&mut client, &[("v2-topic", 1)]).await?;
    let batch = encode_batch(&records(1, 10))?;

    // Produce v2 body: acks, timeout, [topic name, [partition, records]] (no transactional_id).
    let mut body = BytesMut::new();
    body.put_i16(-1);
    body.put_i32(30_000);
    body.put_i32(1);
    put_string(&mut body, "v2-topic");
    body.put_i32(1);
    body.put_i32(0);
    body.put_i32(batch.len() as i32);
    body.put_slice(&batch);
    // Answered, not closed (api_version_sweep found the close): the partition gets
    // UNSUPPORTED_VERSION in a v2 response, the connection stays open, nothing is written.
    let request = frame_with_header(API_KEY_PRODUCE, 2, 41, &body);
    client.write_raw(&request).await?;
    let mut response = client.read_frame().await.context("Produce v2: no response")?;
    ensure!(response.get_i32() == 41, "Produce v2: correlation id");
    ensure!(response.get_i32() == 1, "one topic");
    let name_len = response.get_i16() as usize;
    response.advance(name_len);
    ensure!(response.get_i32() == 1 && response.get_i32() == 0, "partition 0");
    let code = response.get_i16();
    ensure!(code == UNSUPPORTED_VERSION, "Produce v2: error {code}, want UNSUPPORTED_VERSION");
    let (end, _) = harness::raw_ops::end_offsets(&mut client, "v2-topic", 0).await?;
    ensure!(end == 0, "Produce v2 wrote: log end {end}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn api_versions_above_ours_gets_v0_reply_with_error_35() {
    let mut broker = Broker::start(BrokerOptions::default()).expect("starting onelog");
    let result = api_versions_above_ours_gets_v0_reply_with_error_35_scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn api_versions_above_ours_gets_v0_reply_with_error_35_scenario(broker: &mut Broker) -> Result<()> {
    let mut client = RawClient::connect(broker.addr()).await?;
    // A future client sends its newest body format; the v3 body stands in for it.
    let mut body = BytesMut::new();
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("future-client"))
        .with_client_software_version(StrBytes::from_static_str("99.0"))
        .encode(&mut body, 3)?;
    client.write_raw(&frame_with_header(API_KEY_API_VERSIONS, 127, 42, &body)).await?;
    let mut reply = client.read_frame().await.context("ApiVersions v127 reply")?;
    let header = ResponseHeader::decode(&mut reply, 0)?;
    ensure!(header.correlation_id == 42, "correlation id {}", header.correlation_id);
    let response = ApiVersionsResponse::decode(&mut reply, 0).context("decoding as v0")?;
    ensure!(reply.is_empty(), "{} bytes after the v0 body", reply.len());
    ensure!(response.error_code == UNSUPPORTED_VERSION, "error code {}", response.error_code);
    let keys: Vec<i16> = response.api_keys.iter().map(|k| k.api_key).collect();
    ensure!(
        keys.contains(&API_KEY_API_VERSIONS) && keys.contains(&API_KEY_PRODUCE),
        "v0 reply key list {keys:?} lacks ApiVersions or Produce"
    );
    assert_serving(broker, "ApiVersions v127").await
}

#[tokio::test(flavor = "multi_thread")]
async fn corrupt_batches_get_corrupt_message_and_store_nothing() {
    let mut broker = Broker::start(BrokerOptions::default()).expect("starting onelog");
    let result = corrupt_batches_get_corrupt_message_and_store_nothing_scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn corrupt_batches_get_corrupt_message_and_store_nothing_scenario(broker: &mut Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    create_topics_ok(&mut client, &[("corrupt", 1)]).await?;
    let good = encode_batch(&records(5, 100))?;
    let cases: Vec<(&str, Bytes)> = vec![
        ("flipped CRC byte", with_flipped_crc(&good)),
        ("flipped byte in the last value", with_flipped_tail_byte(&good, 5)),
        ("batch cut 20 bytes short", good.slice(..good.len() - 20)),
        ("only the first 30 bytes", good.slice(..30)),
    ];
    for (case, batch) in cases {
        let code = produce_one(&mut client, "corrupt", batch).await?;
        ensure!(code == CORRUPT_MESSAGE, "{case}: error code {code}, expected 2");
        assert_serving(broker, case).await?;
    }
    // Nothing of the rejected batches was stored: the good batch lands at offset 0.
    let results = produce_results(&produce(&mut client, -1, &[batch_for("corrupt", good)]).await?);
    ensure!(results == vec![("corrupt".into(), 0, 0, 0)], "good batch after corrupt ones: {results:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn batch_over_message_max_bytes_gets_message_too_large() {
    let mut broker = Broker::start(BrokerOptions::default().config("message.max.bytes", 100_000))
        .expect("starting onelog");
    let result = batch_over_message_max_bytes_gets_message_too_large_scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn batch_over_message_max_bytes_gets_message_too_large_scenario(broker: &mut Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    create_topics_ok(&mut client, &[("sized", 1)]).await?;

    let small = encode_batch(&records(10, 1_000))?;
    let code = produce_one(&mut client, "sized", small).await?;
    ensure!(code == 0, "10 KB batch under a 100 KB limit: error code {code}");

    let big = encode_batch(&records(200, 1_000))?;
    let code = produce_one(&mut client, "sized", big).await?;
    ensure!(code == MESSAGE_TOO_LARGE, "200 KB batch over a 100 KB limit: error code {code}");
    assert_serving(broker, "oversized batch").await
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_topic_names_get_invalid_topic_exception() {
    let mut broker = Broker::start(BrokerOptions::default()).expect("starting onelog");
    let result = invalid_topic_names_get_invalid_topic_exception_scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn invalid_topic_names_get_invalid_topic_exception_scenario(broker: &mut Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    let long = "a".repeat(250);
    let names = ["bad/name", "..", "", long.as_str()];
    for name in names {
        // One request per name: a broker may reject a whole request for one bad entry.
        let results = create_topics(&mut client, &[(name, 1)]).await?;
        ensure!(
            results.len() == 1 && results[0].1 == INVALID_TOPIC_EXCEPTION,
            "CreateTopics {:?}: {results:?}, expected error 17",
            abbreviate(name)
        );
        assert_serving(broker, &format!("CreateTopics {:?}", abbreviate(name))).await?;
    }
    // A legal name of the maximum length (249) is accepted.
    create_topics_ok(&mut client, &[(&"a".repeat(249), 1)]).await
}

async fn produce_one(client: &mut RawClient, topic: &str, batch: Bytes) -> Result<i16> {
    let response = produce(client, -1, &[batch_for(topic, batch)]).await?;
    let results = produce_results(&response);
    ensure!(results.len() == 1, "one partition result expected: {results:?}");
    Ok(results[0].2)
}

fn batch_for(topic: &str, records: Bytes) -> BatchFor {
    BatchFor { topic: topic.to_owned(), partition: 0, records }
}

fn frame(payload: &[u8]) -> Bytes {
    harness::codec::length_prefixed(payload)
}

fn put_string(buf: &mut BytesMut, s: &str) {
    buf.put_i16(s.len() as i16);
    buf.put_slice(s.as_bytes());
}

fn abbreviate(name: &str) -> String {
    if name.len() > 20 {
        format!("{}…({} bytes)", &name[..10], name.len())
    } else {
        name.to_owned()
    }
}

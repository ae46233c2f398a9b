//! librdkafka round trip for every compression codec: 10,000 messages per codec over three
//! topics (acks=all, distinct keys, headers, explicit timestamps), then every partition read back
//! from the beginning and compared record by record: offsets contiguous, per-partition order,
//! key, value, headers, timestamp, exact counts.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use harness::kafka::{client_config, create_topics, read_partitions, ConsumedRecord};
use harness::{Broker, BrokerOptions};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::Timestamp;

const CODECS: [&str; 5] = ["none", "gzip", "snappy", "lz4", "zstd"];
const MESSAGES_PER_CODEC: usize = 10_000;
const TOPICS: [(&str, i32); 3] = [("pc-three", 3), ("pc-two", 2), ("pc-one", 1)];
const BASE_TIMESTAMP_MS: i64 = 1_700_000_000_000;

/// What the producer sent and where the broker said it put it.
#[derive(Debug, Clone)]
struct Sent {
    codec: usize,
    seq: usize,
    record: ConsumedRecord,
}

fn message(codec: usize, seq: usize) -> (String, ConsumedRecord) {
    let topic = TOPICS[seq % TOPICS.len()].0.to_owned();
    let key = format!("{}-{seq:05}", CODECS[codec]).into_bytes();
    // Compressible, of varying length (30 to ~600 bytes).
    let value = format!("value of {} message {seq};", CODECS[codec]).repeat(1 + seq % 20).into_bytes();
    let mut headers = vec![("seq".to_owned(), seq.to_string().into_bytes())];
    if seq % 2 == 0 {
        headers.push(("codec".to_owned(), CODECS[codec].as_bytes().to_vec()));
    }
    let timestamp = BASE_TIMESTAMP_MS + (codec * MESSAGES_PER_CODEC + seq) as i64;
    let record = ConsumedRecord {
        offset: -1,
        key: Some(key),
        value: Some(value),
        headers,
        timestamp: Timestamp::CreateTime(timestamp),
    };
    (topic, record)
}

async fn produce_codec(bootstrap: &str, codec: usize) -> Result<Vec<(String, i32, Sent)>> {
    let producer: FutureProducer = client_config(bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "false")
        .set("compression.type", CODECS[codec])
        .set("linger.ms", "5")
        .set("message.timeout.ms", "60000")
        .create()?;
    let mut pending = Vec::with_capacity(MESSAGES_PER_CODEC);
    for seq in 0..MESSAGES_PER_CODEC {
        let (topic, record) = message(codec, seq);
        let headers = record
            .headers
            .iter()
            .fold(OwnedHeaders::new(), |hs, (k, v)| hs.insert(Header { key: k, value: Some(v) }));
        let Timestamp::CreateTime(ts) = record.timestamp else { unreachable!() };
        let future = producer
            .send_result(
                FutureRecord::to(&topic)
                    .key(record.key.as_deref().unwrap_or_default())
                    .payload(record.value.as_deref().unwrap_or_default())
                    .headers(headers)
                    .timestamp(ts),
            )
            .map_err(|(e, _)| e)
            .with_context(|| format!("enqueueing {} #{seq}", CODECS[codec]))?;
        pending.push((topic, seq, record, future));
    }
    let mut sent = Vec::with_capacity(MESSAGES_PER_CODEC);
    for (topic, seq, mut record, future) in pending {
        let delivery = future
            .await?
            .map_err(|(e, _)| e)
            .with_context(|| format!("delivery of {} #{seq}", CODECS[codec]))?;
        record.offset = delivery.offset;
        sent.push((topic, delivery.partition, Sent { codec, seq, record }));
    }
    Ok(sent)
}

#[tokio::test(flavor = "multi_thread")]
async fn every_codec_round_trips_exactly() {
    let mut broker = Broker::start(BrokerOptions::default()).expect("starting onelog");
    let result = every_codec_round_trips_exactly_scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn every_codec_round_trips_exactly_scenario(broker: &mut Broker) -> Result<()> {
    let bootstrap = broker.bootstrap();
    create_topics(&bootstrap, &TOPICS).await?;

    let mut expected: BTreeMap<(String, i32), BTreeMap<i64, Sent>> = BTreeMap::new();
    for (name, partitions) in TOPICS {
        for p in 0..partitions {
            expected.insert((name.to_owned(), p), BTreeMap::new());
        }
    }
    for codec in 0..CODECS.len() {
        for (topic, partition, sent) in produce_codec(&bootstrap, codec).await? {
            let slot = expected
                .get_mut(&(topic.clone(), partition))
                .with_context(|| format!("delivered to unknown partition {topic}/{partition}"))?;
            let offset = sent.record.offset;
            if let Some(earlier) = slot.insert(offset, sent) {
                anyhow::bail!("{topic}/{partition} offset {offset} acknowledged twice (first {earlier:?})");
            }
        }
    }

    let partitions: Vec<(String, i32)> = expected.keys().cloned().collect();
    let read_bootstrap = bootstrap.clone();
    let consumed = tokio::task::spawn_blocking(move || {
        read_partitions(&read_bootstrap, &partitions, Duration::from_secs(180))
    })
    .await??;

    let mut total = 0;
    for (tp, sent) in &expected {
        let got = &consumed[tp];
        check_partition(tp, sent, got)?;
        total += got.len();
        println!("{}/{}: {} records", tp.0, tp.1, got.len());
    }
    ensure!(total == CODECS.len() * MESSAGES_PER_CODEC, "consumed {total} records in all");
    Ok(())
}

fn check_partition(tp: &(String, i32), sent: &BTreeMap<i64, Sent>, got: &[ConsumedRecord]) -> Result<()> {
    let name = format!("{}/{}", tp.0, tp.1);
    ensure!(got.len() == sent.len(), "{name}: consumed {} records, {} acknowledged", got.len(), sent.len());
    let mut previous: Option<(usize, usize)> = None;
    for (i, record) in got.iter().enumerate() {
        ensure!(record.offset == i as i64, "{name}: record #{i} has offset {}", record.offset);
        let expected = sent
            .get(&record.offset)
            .with_context(|| format!("{name}: offset {} was never acknowledged", record.offset))?;
        ensure!(
            *record == expected.record,
            "{name} offset {}: consumed {record:?}, sent {:?}",
            record.offset,
            expected.record
        );
        // Per-partition order is send order: (codec round, sequence) strictly increases.
        let order = (expected.codec, expected.seq);
        ensure!(
            previous.map_or(true, |p| p < order),
            "{name}: offset {} holds {order:?} after {previous:?}",
            record.offset
        );
        previous = Some(order);
    }
    Ok(())
}

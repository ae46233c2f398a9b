//! Issue 13, reproductions 1–3: record data within every default limit that took a node down
//! or blew its memory. Each scenario: the node stays up, the client gets the Kafka error code
//! named, and another client is served during and after.
//!
//! 1. 70 partitions × ~1 MB in one Produce (70 MB, under the 100 MiB request limit) became one
//!    Raft entry above raft-store's 64 MiB entry limit; the log write failed and the node
//!    exited. Now a non-transactional request is split across entries; a transactional one
//!    gets RECORD_LIST_TOO_LARGE; a topic cannot allow batches larger than an entry.
//! 2. Compressed batches whose body does not decompress, or whose record count lies, were
//!    stored; consumers failed at that offset forever and the count pushed offsets past 2^32.
//!    Now CORRUPT_MESSAGE and nothing stored.
//! 3. ListOffsets by timestamp inflated the whole stored batch into memory per request. Now
//!    the batch is walked as a stream: the node's peak RSS does not grow with the batch.

use std::collections::BTreeMap;

use anyhow::{ensure, Context, Result};
use bytes::{Bytes, BytesMut};
use harness::raw_ops::{
    create_topics_ok, end_offsets, fetch_all, produce, produce_results, topic_name, BatchFor,
};
use harness::{Broker, BrokerOptions, RawClient};
use kafka_compat::error_code::{CORRUPT_MESSAGE, INVALID_CONFIG, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    CreateTopicsRequest, InitProducerIdRequest, ListOffsetsRequest, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

const MAX_TIMESTAMP: i64 = -3;
/// Partitions and bytes per partition of reproduction 1's request.
const WIDE_PARTITIONS: i32 = 70;
const WIDE_VALUE_BYTES: usize = 1_000_000;
/// Record-set layout offsets (KIP-98) the hostile batches rewrite.
const OFFSET_BATCH_LENGTH: usize = 8;
const OFFSET_CRC: usize = 17;
const OFFSET_ATTRIBUTES: usize = 21;
const OFFSET_LAST_OFFSET_DELTA: usize = 23;
const OFFSET_RECORD_COUNT: usize = 57;
const BATCH_HEADER_BYTES: usize = 61;

/// A broker whose partitions preallocate 2 MiB segments (a 1 MB batch fits; 70 partitions cost
/// 140 MiB, not 9 GiB).
fn broker() -> Broker {
    Broker::start(BrokerOptions::default().config("log.segment.bytes", 2 * 1024 * 1024))
        .expect("starting onelog")
}

/// A record of `value` at `timestamp`; `producer` = (id, epoch, transactional).
fn record(offset: i64, timestamp: i64, value: Bytes, producer: (i64, i16, bool)) -> Record {
    Record {
        transactional: producer.2,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: producer.0,
        producer_epoch: producer.1,
        timestamp_type: TimestampType::Creation,
        offset,
        // The encoder starts a new batch where offset minus sequence changes: keep them in step.
        sequence: offset as i32,
        timestamp,
        key: Some(Bytes::from_static(b"k")),
        value: Some(value),
        headers: IndexMap::new(),
    }
}

const NO_PRODUCER: (i64, i16, bool) = (-1, -1, false);

fn encode(records: &[Record], compression: Compression) -> Result<Bytes> {
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, records, &RecordEncodeOptions { version: 2, compression })?;
    Ok(buf.freeze())
}

fn small_batch() -> Result<Bytes> {
    encode(&[record(0, 1_700_000_000_000, Bytes::from_static(b"small"), NO_PRODUCER)], Compression::None)
}

fn batch_for(topic: &str, partition: i32, records: Bytes) -> BatchFor {
    BatchFor { topic: topic.to_owned(), partition, records }
}

/// `batch` with its records section replaced by `body`, `record_count` records declared, and
/// length and CRC fixed up: a batch only the validator's walk can tell from a good one.
fn rewritten(batch: &[u8], body: &[u8], record_count: i32) -> Bytes {
    let mut b = BytesMut::from(&batch[..BATCH_HEADER_BYTES]);
    b.extend_from_slice(body);
    let length = (b.len() - 12) as i32;
    b[OFFSET_BATCH_LENGTH..OFFSET_BATCH_LENGTH + 4].copy_from_slice(&length.to_be_bytes());
    b[OFFSET_LAST_OFFSET_DELTA..OFFSET_LAST_OFFSET_DELTA + 4]
        .copy_from_slice(&(record_count - 1).to_be_bytes());
    b[OFFSET_RECORD_COUNT..OFFSET_RECORD_COUNT + 4].copy_from_slice(&record_count.to_be_bytes());
    let crc = crc32c::crc32c(&b[OFFSET_ATTRIBUTES..]);
    b[OFFSET_CRC..OFFSET_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    b.freeze()
}

fn record_count(batch: &[u8]) -> i32 {
    i32::from_be_bytes(batch[OFFSET_RECORD_COUNT..OFFSET_RECORD_COUNT + 4].try_into().expect("4 bytes"))
}

/// One small produce on its own connection: another client being served.
async fn normal_client_served(broker: &Broker, topic: &str, case: &str) -> Result<i64> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    let results = produce_results(&produce(&mut client, -1, &[batch_for(topic, 0, small_batch()?)]).await?);
    ensure!(results.len() == 1 && results[0].2 == 0, "{case}: a normal produce got {results:?}");
    Ok(results[0].3)
}

fn ensure_running(broker: &mut Broker, case: &str) -> Result<()> {
    ensure!(broker.is_running(), "the node exited after {case}:\n{}", broker.log_tail(40));
    Ok(())
}

/// Reproduction 1, non-transactional: the 70 MB request is split across entries; every
/// partition is appended, twice, and a normal client is served while it commits and after.
#[tokio::test(flavor = "multi_thread")]
async fn seventy_one_megabyte_batches_in_one_produce_are_split_and_the_node_stays_up() {
    let mut broker = broker();
    let result = split_scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn split_scenario(broker: &mut Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    create_topics_ok(&mut client, &[("wide", WIDE_PARTITIONS), ("side", 1)]).await?;
    let value = Bytes::from(vec![b'x'; WIDE_VALUE_BYTES]);
    let batch = encode(&[record(0, 1_700_000_000_000, value, NO_PRODUCER)], Compression::None)?;
    let request: Vec<BatchFor> = (0..WIDE_PARTITIONS).map(|p| batch_for("wide", p, batch.clone())).collect();
    for round in 0..2i64 {
        let (wide, side) =
            tokio::join!(produce(&mut client, -1, &request), normal_client_served(broker, "side", "during"));
        let results = produce_results(&wide.with_context(|| format!("round {round}: the 70 MB produce"))?);
        ensure!(results.len() == WIDE_PARTITIONS as usize, "round {round}: {} results", results.len());
        for (_, partition, code, base_offset) in &results {
            ensure!(
                *code == 0 && *base_offset == round,
                "round {round}, partition {partition}: {code} at {base_offset}"
            );
        }
        ensure!(side? == round, "the side client's record lands once per round");
        ensure_running(broker, "the 70 MB produce")?;
    }
    for partition in [0, WIDE_PARTITIONS / 2, WIDE_PARTITIONS - 1] {
        ensure!(
            end_offsets(&mut client, "wide", partition).await?.0 == 2,
            "wide/{partition} holds both rounds"
        );
    }
    normal_client_served(broker, "side", "after").await?;
    Ok(())
}

/// Reproduction 1, transactional: one proposal whatever its size, so a 70 MB transactional
/// request gets RECORD_LIST_TOO_LARGE on every partition and nothing is stored.
#[tokio::test(flavor = "multi_thread")]
async fn a_transactional_produce_larger_than_one_entry_gets_record_list_too_large() {
    let mut broker = broker();
    let result = transactional_scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn transactional_scenario(broker: &mut Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    create_topics_ok(&mut client, &[("wide-txn", WIDE_PARTITIONS), ("side", 1)]).await?;
    let init = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("wide-txn"))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let init = client.request(4, &init).await?;
    ensure!(init.error_code == 0, "InitProducerId: error {}", init.error_code);
    let producer = (init.producer_id.0, init.producer_epoch, true);
    let value = Bytes::from(vec![b'x'; WIDE_VALUE_BYTES]);
    let batch = encode(&[record(0, 1_700_000_000_000, value, producer)], Compression::None)?;
    let request: Vec<BatchFor> =
        (0..WIDE_PARTITIONS).map(|p| batch_for("wide-txn", p, batch.clone())).collect();
    // Produce v12 adds each partition to the transaction itself (KIP-890 part 2). The request
    // names its transactional id, as Kafka requires of transactional records (without one it
    // is TRANSACTIONAL_ID_AUTHORIZATION_FAILED before any other check).
    let results = produce_results(
        &harness::raw_ops::produce_transactional(&mut client, -1, "wide-txn", &request).await?,
    );
    ensure!(results.len() == WIDE_PARTITIONS as usize, "{} results", results.len());
    for (_, partition, code, _) in &results {
        ensure!(*code == RECORD_LIST_TOO_LARGE, "partition {partition}: error {code}, expected 18");
    }
    ensure_running(broker, "the 70 MB transactional produce")?;
    for partition in [0, WIDE_PARTITIONS - 1] {
        ensure!(
            end_offsets(&mut client, "wide-txn", partition).await?.0 == 0,
            "wide-txn/{partition} stored nothing"
        );
    }
    normal_client_served(broker, "side", "after").await?;
    Ok(())
}

/// Reproduction 1, one batch: a topic may not allow batches larger than one entry holds
/// (INVALID_CONFIG), a 70 MiB batch gets MESSAGE_TOO_LARGE, the largest allowed batch is
/// appended, and one partition's records larger than an entry get RECORD_LIST_TOO_LARGE.
#[tokio::test(flavor = "multi_thread")]
async fn a_seventy_megabyte_batch_is_refused_and_so_is_a_topic_allowing_it() {
    let mut broker = broker();
    let result = one_batch_scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn create_with_max_message_bytes(client: &mut RawClient, name: &str, max: i64) -> Result<i16> {
    let config = CreatableTopicConfig::default()
        .with_name(StrBytes::from_static_str("max.message.bytes"))
        .with_value(Some(StrBytes::from_string(max.to_string())));
    let topic = CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(1)
        .with_replication_factor(-1)
        .with_configs(vec![config]);
    let request = CreateTopicsRequest::default().with_timeout_ms(30_000).with_topics(vec![topic]);
    let response = client.request(5, &request).await?;
    Ok(response.topics[0].error_code)
}

async fn one_batch_scenario(broker: &mut Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    let code = create_with_max_message_bytes(&mut client, "hundred-mib", 100 << 20).await?;
    ensure!(code == INVALID_CONFIG, "max.message.bytes=100 MiB: error {code}, expected 40");
    let code = create_with_max_message_bytes(&mut client, "largest", 48 << 20).await?;
    ensure!(code == 0, "max.message.bytes=48 MiB (the cap): error {code}");
    create_topics_ok(&mut client, &[("side", 1)]).await?;
    let huge = encode(&[record(0, 1, Bytes::from(vec![b'x'; 70 << 20]), NO_PRODUCER)], Compression::None)?;
    let results = produce_results(&produce(&mut client, -1, &[batch_for("largest", 0, huge)]).await?);
    ensure!(results.len() == 1 && results[0].2 == MESSAGE_TOO_LARGE, "70 MiB batch: {results:?}");
    ensure_running(broker, "the 70 MiB batch")?;
    // The largest batch allowed fits one entry.
    let largest = encode(&[record(0, 1, Bytes::from(vec![b'x'; 47 << 20]), NO_PRODUCER)], Compression::None)?;
    let results = produce_results(&produce(&mut client, -1, &[batch_for("largest", 0, largest)]).await?);
    ensure!(results == vec![("largest".into(), 0, 0, 0)], "47 MiB batch: {results:?}");
    ensure_running(broker, "the 47 MiB batch")?;
    // One partition's records are appended as one unit: two 35 MiB batches cannot be one entry.
    let half = encode(&[record(0, 1, Bytes::from(vec![b'x'; 35 << 20]), NO_PRODUCER)], Compression::None)?;
    let mut two = BytesMut::from(&half[..]);
    two.extend_from_slice(&half);
    let results = produce_results(&produce(&mut client, -1, &[batch_for("largest", 0, two.freeze())]).await?);
    ensure!(
        results.len() == 1 && results[0].2 == RECORD_LIST_TOO_LARGE,
        "2 x 35 MiB in one partition: {results:?}"
    );
    ensure_running(broker, "2 x 35 MiB in one partition")?;
    ensure!(end_offsets(&mut client, "largest", 0).await?.0 == 1, "nothing of the 2 x 35 MiB was stored");
    normal_client_served(broker, "side", "after").await?;
    Ok(())
}

/// Reproduction 2: a compressed batch whose body does not decompress, in every codec, and one
/// whose record count lies, get CORRUPT_MESSAGE; nothing is stored, the offsets do not move,
/// and a consumer reads the good batch produced afterwards from offset 0.
#[tokio::test(flavor = "multi_thread")]
async fn garbage_compressed_batches_and_lying_record_counts_get_corrupt_message() {
    let mut broker = broker();
    let result = garbage_scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn garbage_scenario(broker: &mut Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    create_topics_ok(&mut client, &[("garbage", 1)]).await?;
    let records: Vec<Record> =
        (0..4).map(|i| record(i, 1_700_000_000_000 + i, Bytes::from_static(b"value"), NO_PRODUCER)).collect();
    let mut cases: Vec<(String, Bytes)> = Vec::new();
    for codec in [Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd] {
        let good = encode(&records, codec)?;
        ensure!(record_count(&good) == 4, "the encoder made one {codec:?} batch of the four records");
        cases.push((format!("{codec:?} garbage body"), rewritten(&good, &[0x5a; 100], 1_000)));
        let body = good[BATCH_HEADER_BYTES..].to_vec();
        // Four such requests pushed a partition's offsets past 2^32 before.
        cases.push((format!("{codec:?} count 2^30"), rewritten(&good, &body, 1 << 30)));
        cases.push((format!("{codec:?} count 5 of 4"), rewritten(&good, &body, 5)));
    }
    let good = encode(&records, Compression::None)?;
    cases.push(("uncompressed count 2^30".into(), rewritten(&good, &good[BATCH_HEADER_BYTES..], 1 << 30)));
    for (case, batch) in &cases {
        let results =
            produce_results(&produce(&mut client, -1, &[batch_for("garbage", 0, batch.clone())]).await?);
        ensure!(results.len() == 1 && results[0].2 == CORRUPT_MESSAGE, "{case}: {results:?}, expected 2");
        ensure_running(broker, case)?;
        ensure!(end_offsets(&mut client, "garbage", 0).await?.0 == 0, "{case}: the offsets moved");
    }
    let results = produce_results(
        &produce(&mut client, -1, &[batch_for("garbage", 0, encode(&records, Compression::Gzip)?)]).await?,
    );
    ensure!(results == vec![("garbage".into(), 0, 0, 0)], "good gzip batch after the garbage: {results:?}");
    let fetched = fetch_all(&mut client, "garbage", 0).await?;
    let offsets: Vec<i64> = fetched.records.iter().map(|r| r.offset).collect();
    ensure!(offsets == [0, 1, 2, 3], "a consumer reads the good batch only: {offsets:?}");
    Ok(())
}

/// Peak resident memory of `pid` (VmHWM), in KiB.
fn peak_rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).context("no VmHWM")?;
    Ok(line.split_whitespace().nth(1).context("VmHWM value")?.parse()?)
}

async fn lookup(broker: &Broker, timestamp: i64) -> Result<(i64, i64)> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    let partition = ListOffsetsPartition::default().with_timestamp(timestamp);
    let request = ListOffsetsRequest::default().with_replica_id((-1).into()).with_topics(vec![
        ListOffsetsTopic::default().with_name(topic_name("inflating")).with_partitions(vec![partition]),
    ]);
    let response = client.request(7, &request).await?;
    let answer = &response.topics[0].partitions[0];
    ensure!(answer.error_code == 0, "ListOffsets {timestamp}: error {}", answer.error_code);
    Ok((answer.offset, answer.timestamp))
}

/// Inflated bytes of reproduction 3's gzip batch, and how much the node's peak RSS may grow
/// while four lookups walk it at once: a quarter of one inflated copy.
const INFLATED_BYTES: usize = 64 << 20;
const PEAK_GROWTH_KIB_MAX: u64 = (INFLATED_BYTES as u64 / 4) >> 10;

/// Reproduction 3: four concurrent ListOffsets by timestamp (and MAX_TIMESTAMP) into a gzip
/// batch of 64 MiB inflated answer the exact records, and the node's peak RSS grows by less
/// than a quarter of one inflated copy.
#[tokio::test(flavor = "multi_thread")]
async fn list_offsets_by_timestamp_on_a_gzip_batch_does_not_inflate_it_into_memory() {
    let mut broker = broker();
    let result = inflating_scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn inflating_scenario(broker: &mut Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    create_topics_ok(&mut client, &[("inflating", 1), ("side", 1)]).await?;
    let value = Bytes::from(vec![0u8; INFLATED_BYTES / 4]);
    let timestamps = [1_000, 4_000, 3_000, 4_000];
    let records: Vec<Record> = timestamps
        .iter()
        .enumerate()
        .map(|(i, t)| record(i as i64, *t, value.clone(), NO_PRODUCER))
        .collect();
    let batch = encode(&records, Compression::Gzip)?;
    ensure!(record_count(&batch) == 4, "the encoder made one batch of the four records");
    let results = produce_results(&produce(&mut client, -1, &[batch_for("inflating", 0, batch)]).await?);
    ensure!(results == vec![("inflating".into(), 0, 0, 0)], "the gzip batch: {results:?}");
    let pid = broker.pid().context("the broker runs")?;
    let before = peak_rss_kib(pid)?;
    let mut expected = BTreeMap::new();
    expected.insert(2_000, (1, 4_000));
    expected.insert(3_500, (1, 4_000));
    expected.insert(MAX_TIMESTAMP, (1, 4_000));
    expected.insert(500, (0, 1_000));
    let (a, b, c, d) = tokio::join!(
        lookup(broker, 2_000),
        lookup(broker, 3_500),
        lookup(broker, MAX_TIMESTAMP),
        lookup(broker, 500)
    );
    for (asked, answer) in [(2_000, a), (3_500, b), (MAX_TIMESTAMP, c), (500, d)] {
        let answer = answer?;
        ensure!(
            answer == expected[&asked],
            "ListOffsets {asked}: {answer:?}, expected {:?}",
            expected[&asked]
        );
    }
    ensure_running(broker, "four lookups")?;
    let growth = peak_rss_kib(pid)?.saturating_sub(before);
    eprintln!("peak RSS {before} KiB before the lookups, grew by {growth} KiB");
    ensure!(growth < PEAK_GROWTH_KIB_MAX, "peak RSS grew by {growth} KiB (limit {PEAK_GROWTH_KIB_MAX} KiB)");
    normal_client_served(broker, "side", "after").await?;
    Ok(())
}

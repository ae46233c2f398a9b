//! Idempotent producers (KIP-98) end to end.
//!
//! librdkafka with `enable.idempotence=true` must get a producer id (InitProducerId) and write
//! 10,000 messages with acks=all, each read back exactly once, in send order per partition, at
//! the offset it was acknowledged with. A raw client then checks the rules on the wire: a
//! resent batch gets its original offset back and is stored once, also after kill -9 and
//! restart (producer state is replicated state); a gap gets OUT_OF_ORDER_SEQUENCE_NUMBER (45);
//! an older epoch gets INVALID_PRODUCER_EPOCH (47). In a three-node cluster, followers
//! forward InitProducerId to the leader, and a batch resent after the leader is killed gets its
//! original offset from the new leader.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use bytes::{Bytes, BytesMut};
use harness::kafka::{client_config, create_topics, read_partitions};
use harness::raw_ops::{create_topics_ok, fetch_all, produce, produce_results, BatchFor};
use harness::{Broker, BrokerOptions, Cluster, RawClient};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::{InitProducerIdRequest, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use rdkafka::producer::{FutureProducer, FutureRecord};

const MESSAGES: usize = 10_000;
const TOPIC: &str = "idempotent";
const PARTITIONS: i32 = 3;

#[tokio::test(flavor = "multi_thread")]
async fn librdkafka_idempotent_producer_writes_each_message_once_in_order() {
    let mut broker = Broker::start(BrokerOptions::default()).expect("starting onelog");
    let result = librdkafka_scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn librdkafka_scenario(broker: &mut Broker) -> Result<()> {
    let bootstrap = broker.bootstrap();
    create_topics(&bootstrap, &[(TOPIC, PARTITIONS)]).await?;
    let producer: FutureProducer = client_config(&bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("max.in.flight.requests.per.connection", "5")
        .set("linger.ms", "2")
        .set("batch.num.messages", "50")
        .set("message.timeout.ms", "60000")
        .create()?;
    let mut pending = Vec::with_capacity(MESSAGES);
    for seq in 0..MESSAGES {
        let key = format!("k{seq:05}");
        let future = producer
            .send_result(FutureRecord::to(TOPIC).key(&key).payload(&format!("value {seq}")))
            .map_err(|(e, _)| e)
            .with_context(|| format!("enqueueing #{seq}"))?;
        pending.push((seq, future));
    }
    // (partition, offset) → the message acknowledged there.
    let mut acked: BTreeMap<(i32, i64), usize> = BTreeMap::new();
    for (seq, future) in pending {
        let delivery = future.await?.map_err(|(e, _)| e).with_context(|| format!("delivery of #{seq}"))?;
        let previous = acked.insert((delivery.partition, delivery.offset), seq);
        ensure!(
            previous.is_none(),
            "{}/{} acknowledged for #{seq} and #{previous:?}",
            delivery.partition,
            delivery.offset
        );
    }

    let partitions: Vec<(String, i32)> = (0..PARTITIONS).map(|p| (TOPIC.to_owned(), p)).collect();
    let read_bootstrap = bootstrap.clone();
    let consumed = tokio::task::spawn_blocking(move || {
        read_partitions(&read_bootstrap, &partitions, Duration::from_secs(120))
    })
    .await??;
    let mut seen = vec![false; MESSAGES];
    for ((_, partition), records) in &consumed {
        let mut previous = None;
        for (i, record) in records.iter().enumerate() {
            ensure!(record.offset == i as i64, "{partition}: record #{i} at offset {}", record.offset);
            let seq = acked[&(*partition, record.offset)];
            ensure!(
                record.key.as_deref() == Some(format!("k{seq:05}").as_bytes()),
                "{partition}/{i}: wrong key"
            );
            ensure!(!seen[seq], "#{seq} stored twice");
            ensure!(previous < Some(seq), "{partition}: #{seq} after #{previous:?}");
            seen[seq] = true;
            previous = Some(seq);
        }
    }
    let stored = seen.iter().filter(|s| **s).count();
    println!("{MESSAGES} messages sent with idempotence, {stored} stored once each, in order");
    ensure!(stored == MESSAGES, "{stored} of {MESSAGES} messages stored");
    Ok(())
}

/// One uncompressed batch of `count` records from producer `pid` at `epoch`, first sequence
/// `seq`.
fn idempotent_batch(pid: i64, epoch: i16, seq: i32, count: i32) -> Result<Bytes> {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i64::from(i),
            sequence: seq + i,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::from(format!("{pid}/{epoch}/{}", seq + i))),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options)?;
    Ok(buf.freeze())
}

/// (error code, base offset) of a one-partition produce.
async fn send(client: &mut RawClient, pid: i64, epoch: i16, seq: i32, count: i32) -> Result<(i16, i64)> {
    let batch =
        BatchFor { topic: TOPIC.into(), partition: 0, records: idempotent_batch(pid, epoch, seq, count)? };
    let response = produce(client, -1, &[batch]).await?;
    let (_, _, code, offset) = produce_results(&response).pop().context("no partition in the response")?;
    Ok((code, offset))
}

async fn init_producer_id(
    client: &mut RawClient,
    version: i16,
    transactional_id: Option<&str>,
) -> Result<(i16, i64)> {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(transactional_id.map(|t| TransactionalId(StrBytes::from_string(t.into()))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id((-1).into())
        .with_producer_epoch(-1);
    let response = client.request(version, &request).await?;
    Ok((response.error_code, response.producer_id.0))
}

#[tokio::test(flavor = "multi_thread")]
async fn duplicates_gaps_and_stale_epochs_on_the_wire_and_across_restart() {
    let mut broker = Broker::start(BrokerOptions::default()).expect("starting onelog");
    let result = raw_scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn raw_scenario(broker: &mut Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    create_topics_ok(&mut client, &[(TOPIC, 1)]).await?;
    let (code, first) = init_producer_id(&mut client, 0, None).await?;
    ensure!(code == 0, "InitProducerId v0: error {code}");
    let (code, pid) = init_producer_id(&mut client, 4, None).await?;
    ensure!(code == 0 && pid == first + 1, "InitProducerId v4: error {code}, id {pid} after {first}");
    // A transactional id takes the next id too: ids come from one counter.
    let (code, txn_pid) = init_producer_id(&mut client, 4, Some("txn")).await?;
    ensure!(code == 0 && txn_pid == pid + 1, "transactional InitProducerId: error {code}, id {txn_pid}");

    ensure!(send(&mut client, pid, 0, 0, 3).await? == (0, 0), "first batch at 0");
    ensure!(send(&mut client, pid, 0, 3, 2).await? == (0, 3), "second batch at 3");
    ensure!(send(&mut client, pid, 0, 0, 3).await? == (0, 0), "a resent batch gets its original offset");
    ensure!(send(&mut client, pid, 0, 9, 1).await?.0 == 45, "a gap is OUT_OF_ORDER_SEQUENCE_NUMBER");
    ensure!(send(&mut client, pid, 1, 0, 1).await? == (0, 5), "a new epoch starts at sequence 0");
    ensure!(send(&mut client, pid, 0, 5, 1).await?.0 == 47, "an older epoch is INVALID_PRODUCER_EPOCH");

    // Producer state is replicated state: it survives kill -9 and a restart from the log.
    broker.kill9()?;
    broker.restart()?;
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    ensure!(
        send(&mut client, pid, 1, 0, 1).await? == (0, 5),
        "after restart, a resent batch gets its offset"
    );
    ensure!(send(&mut client, pid, 1, 1, 1).await? == (0, 6), "after restart, the sequence continues");
    let fetched = fetch_all(&mut client, TOPIC, 0).await?;
    ensure!(
        fetched.records.len() == 7,
        "stored {} records, expected 7 (no duplicates)",
        fetched.records.len()
    );
    let (code, next) = init_producer_id(&mut client, 3, None).await?;
    ensure!(code == 0 && next == txn_pid + 1, "the id counter survives restart: error {code}, id {next}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn followers_forward_init_producer_id_and_producer_state_survives_failover() {
    let mut cluster = Cluster::start(3).expect("starting three nodes");
    let result = failover_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn failover_scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let mut ids = Vec::new();
    for follower in cluster.followers()? {
        let mut client = RawClient::connect_negotiated(cluster.kafka_addr(follower)).await?;
        let (code, pid) = init_producer_id(&mut client, 4, None).await?;
        ensure!(code == 0, "InitProducerId on follower {follower}: error {code}");
        ids.push(pid);
    }
    ensure!(ids.len() == 2 && ids[0] != ids[1], "two followers handed out ids {ids:?}");
    let pid = ids[0];
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    create_topics_ok(&mut client, &[(TOPIC, 1)]).await?;
    ensure!(send(&mut client, pid, 0, 0, 2).await? == (0, 0), "first batch at 0");

    cluster.kill9(leader)?;
    let (new_leader, took) = cluster.wait_for_leader(Duration::from_secs(15))?;
    println!("leader {leader} killed; node {new_leader} leads after {:.3} s", took.as_secs_f64());
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(new_leader)).await?;
    // The new leader answers NOT_LEADER_OR_FOLLOWER (6) until its lease is valid.
    let deadline = Instant::now() + Duration::from_secs(10);
    let resent = loop {
        let answer = send(&mut client, pid, 0, 0, 2).await?;
        if answer.0 != 6 || Instant::now() > deadline {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    ensure!(resent == (0, 0), "after failover a resent batch gets its original offset, got {resent:?}");
    ensure!(send(&mut client, pid, 0, 2, 1).await? == (0, 2), "after failover the sequence continues");
    ensure!(send(&mut client, pid, 0, 7, 1).await?.0 == 45, "after failover a gap is still a gap");
    Ok(())
}

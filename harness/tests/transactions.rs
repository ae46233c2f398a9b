//! Kafka transactions (KIP-98) with librdkafka against a three-node cluster.
//!
//! The "13 physical, 10 logical" run of the EOS article (shared/seeds/kafka-eos-live-run-ru):
//! one transactional producer sends batch A (5 records) and commits; batch B fails after
//! three synchronous sends and is aborted; batch B is sent again (5) and committed. A
//! read_committed consumer must see exactly the 10 committed records, a read_uncommitted one
//! all 13 — the aborted three are on disk, hidden by the abort marker, not erased.
//!
//! Then zombie fencing (issue #5, acceptance 3): a second producer with the same
//! transactional.id fences the first; the first's offsets, writes and commit are refused and
//! none of them becomes visible. On the wire, every version of AddOffsetsToTxn,
//! TxnOffsetCommit and EndTxn carrying the fenced epoch gets the fencing error that version
//! knows.
//!
//! Then the transaction timeout: a producer that stalls past its `transaction.timeout.ms` has
//! its transaction (records on two partitions, a group offset) aborted by the broker, which
//! frees read_committed readers and drops the offset; the producer's commit then fails with an
//! error it aborts from (librdkafka's EndTxn v1 gets UNKNOWN_PRODUCER_ID), and its next
//! transaction commits.

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use harness::kafka::{client_config, create_topics};
use harness::raw_ops::{end_offsets, topic_name};
use harness::txn::{
    committed_offset, describe_transactions, read_values, send_sync, transactional_config,
    transactional_producer, READ_COMMITTED, READ_UNCOMMITTED, TXN_CALL_TIMEOUT,
};
use harness::{Broker, BrokerOptions, Cluster, ClusterOptions, RawClient};
use kafka_compat::error_code::{CONCURRENT_TRANSACTIONS, INVALID_PRODUCER_EPOCH, PRODUCER_FENCED};
use kafka_protocol::messages::describe_transactions_response::TransactionState as Described;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, EndTxnRequest, GroupId, InitProducerIdRequest, ProducerId, TransactionalId,
    TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::{Request, StrBytes};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

const TIMEOUT: Duration = TXN_CALL_TIMEOUT;

#[tokio::test(flavor = "multi_thread")]
async fn librdkafka_thirteen_physical_ten_logical() {
    let mut cluster = Cluster::start_with(ClusterOptions::new(3)).expect("starting cluster");
    let result = thirteen_ten(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn thirteen_ten(cluster: &mut Cluster) -> Result<()> {
    cluster.wait_for_leader(Duration::from_secs(30))?;
    let bootstrap = cluster.bootstrap();
    let topic = "eos-live-run";
    create_topics(&bootstrap, &[(topic, 1)]).await?;
    let producer = transactional_producer(&bootstrap, "eos-live-run-txn")?;

    producer.begin_transaction()?;
    for i in 0..5 {
        send_sync(&producer, topic, None, &format!("A{i}"), &format!("batchA-{i}")).await?;
    }
    producer.commit_transaction(TIMEOUT).context("commit batch A")?;

    producer.begin_transaction()?;
    for i in 0..3 {
        send_sync(&producer, topic, None, &format!("B{i}"), &format!("batchB-try1-{i}")).await?;
    }
    // The simulated processing failure on the third record.
    producer.abort_transaction(TIMEOUT).context("abort batch B")?;

    producer.begin_transaction()?;
    for i in 0..5 {
        send_sync(&producer, topic, None, &format!("B{i}"), &format!("batchB-{i}")).await?;
    }
    producer.commit_transaction(TIMEOUT).context("commit batch B")?;

    let committed = read_values(&bootstrap, topic, 1, READ_COMMITTED)?;
    let uncommitted = read_values(&bootstrap, topic, 1, READ_UNCOMMITTED)?;
    println!("read_committed={} read_uncommitted={}", committed.len(), uncommitted.len());
    let expected: Vec<String> =
        (0..5).map(|i| format!("batchA-{i}")).chain((0..5).map(|i| format!("batchB-{i}"))).collect();
    ensure!(committed == expected, "read_committed saw {committed:?}");
    ensure!(uncommitted.len() == 13, "read_uncommitted saw {} records: {uncommitted:?}", uncommitted.len());
    ensure!(uncommitted.iter().filter(|v| v.starts_with("batchB-try1")).count() == 3);
    Ok(())
}

const ZOMBIE_TXN: &str = "fenced-txn";
/// The topic the zombie's transaction "consumed": it commits an offset of it for `ZOMBIE_GROUP`.
const ZOMBIE_INPUT: &str = "zombie-input";
const ZOMBIE_GROUP: &str = "zombie-group";
const ZOMBIE_OFFSET: i64 = 7;

#[tokio::test(flavor = "multi_thread")]
async fn librdkafka_zombie_is_fenced_and_its_writes_stay_invisible() {
    let mut cluster = Cluster::start_with(ClusterOptions::new(3)).expect("starting cluster");
    let result = zombie(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn zombie(cluster: &mut Cluster) -> Result<()> {
    cluster.wait_for_leader(Duration::from_secs(30))?;
    let bootstrap = cluster.bootstrap();
    let topic = "zombie";
    create_topics(&bootstrap, &[(topic, 2), (ZOMBIE_INPUT, 1)]).await?;
    let old = transactional_producer(&bootstrap, ZOMBIE_TXN)?;
    old.begin_transaction()?;
    send_sync(&old, topic, None, "z0", "zombie-0").await?;

    // The new instance fences the old one and aborts its open transaction.
    let new = transactional_producer(&bootstrap, ZOMBIE_TXN)?;
    new.begin_transaction()?;
    send_sync(&new, topic, None, "n0", "new-0").await?;
    new.commit_transaction(TIMEOUT).context("new instance commits")?;

    // The zombie carries on: the offsets of what it consumed, one more record, its commit.
    let sent_offsets = send_offsets(&old, &bootstrap, ZOMBIE_GROUP, ZOMBIE_INPUT, ZOMBIE_OFFSET);
    let late = send_sync(&old, topic, None, "z1", "zombie-1").await;
    let commit = old.commit_transaction(TIMEOUT);
    println!(
        "zombie send_offsets_to_transaction: {sent_offsets:?}; zombie send: {:?}; zombie commit: {commit:?}",
        late.as_ref().map_err(ToString::to_string)
    );
    match &sent_offsets {
        Err(KafkaError::Transaction(e)) if e.is_fatal() && e.code() == RDKafkaErrorCode::Fenced => {}
        other => bail!("the zombie's send_offsets_to_transaction must fail as fenced: {other:?}"),
    }
    ensure!(late.is_err(), "the zombie's late record was acknowledged: {late:?}");
    ensure!(commit.is_err(), "the zombie's commit must fail");
    if let Err(KafkaError::Transaction(e)) = &commit {
        ensure!(e.is_fatal() || e.txn_requires_abort(), "zombie commit error {e:?}");
    }

    // On the wire: the zombie's epoch is the one before the new instance's.
    let leader = cluster.leader()?;
    let mut raw = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    let described = describe(&mut raw, ZOMBIE_TXN).await?;
    ensure!(described.transaction_state.as_str() == "CompleteCommit", "{described:?}");
    ensure!(described.producer_epoch >= 1, "the new instance bumped the epoch: {described:?}");
    fenced_on_the_wire(&mut raw, described.producer_id.0, described.producer_epoch - 1).await?;

    let group_offset = committed_offset(&bootstrap, ZOMBIE_GROUP, ZOMBIE_INPUT, 0)?;
    println!("{ZOMBIE_GROUP} committed offset of {ZOMBIE_INPUT}/0: {group_offset:?}");
    ensure!(group_offset == Offset::Invalid, "the zombie's offset was committed: {group_offset:?}");
    let committed = read_values(&bootstrap, topic, 2, READ_COMMITTED)?;
    ensure!(committed == vec!["new-0".to_string()], "read_committed saw {committed:?}");
    let uncommitted = read_values(&bootstrap, topic, 2, READ_UNCOMMITTED)?;
    ensure!(
        uncommitted.contains(&"zombie-0".to_string()),
        "the zombie's first write is on disk: {uncommitted:?}"
    );
    Ok(())
}

/// `send_offsets_to_transaction` of `offset` for `topic`/0, with the group metadata of a
/// consumer of `group` (one that assigns its partitions itself: no generation, no member id).
fn send_offsets(
    producer: &FutureProducer,
    bootstrap: &str,
    group: &str,
    topic: &str,
    offset: i64,
) -> Result<(), KafkaError> {
    let consumer: BaseConsumer =
        client_config(bootstrap).set("group.id", group).set("enable.auto.commit", "false").create()?;
    let group_metadata = consumer.group_metadata().expect("a consumer with a group.id has group metadata");
    let mut offsets = TopicPartitionList::new();
    offsets.add_partition_offset(topic, 0, Offset::Offset(offset))?;
    producer.send_offsets_to_transaction(&offsets, &group_metadata, TIMEOUT)
}

/// The one DescribeTransactions answer for `transactional_id`, which must be known.
async fn describe(client: &mut RawClient, transactional_id: &str) -> Result<Described> {
    let described = describe_transactions(client, &[transactional_id]).await?;
    let one = described.into_iter().next().context("no DescribeTransactions answer")?;
    ensure!(one.error_code == 0, "DescribeTransactions {transactional_id}: {one:?}");
    Ok(one)
}

/// The code a fenced request gets at `version`: PRODUCER_FENCED from the version that knows it
/// (KIP-588; the broker's handlers/txn_errors.rs), INVALID_PRODUCER_EPOCH before.
fn fenced_code(version: i16, producer_fenced_since: i16) -> i16 {
    if version >= producer_fenced_since {
        PRODUCER_FENCED
    } else {
        INVALID_PRODUCER_EPOCH
    }
}

/// Every version the broker and kafka-protocol both allow for `R`, from the lowest.
fn versions<R: Request>(client: &RawClient) -> Result<std::ops::RangeInclusive<i16>> {
    Ok(R::VERSIONS.min..=client.version::<R>(i16::MAX)?)
}

/// AddOffsetsToTxn, TxnOffsetCommit and EndTxn (commit and abort) of the zombie's
/// `producer_id`/`epoch`, at every version: each is refused with the fencing error the version
/// knows. None of them may change anything (the caller checks the group offset and the data).
async fn fenced_on_the_wire(client: &mut RawClient, producer_id: i64, epoch: i16) -> Result<()> {
    let tid = || TransactionalId(StrBytes::from_static_str(ZOMBIE_TXN));
    let group = || GroupId(StrBytes::from_static_str(ZOMBIE_GROUP));
    let mut seen = Vec::new();
    for version in versions::<AddOffsetsToTxnRequest>(client)? {
        let request = AddOffsetsToTxnRequest::default()
            .with_transactional_id(tid())
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch)
            .with_group_id(group());
        let code = client.request(version, &request).await?.error_code;
        seen.push(format!("AddOffsetsToTxn v{version}: {code}"));
        ensure!(code == fenced_code(version, 2), "AddOffsetsToTxn v{version}: error {code}");
    }
    for version in versions::<TxnOffsetCommitRequest>(client)? {
        let partition = TxnOffsetCommitRequestPartition::default()
            .with_partition_index(0)
            .with_committed_offset(ZOMBIE_OFFSET);
        let request = TxnOffsetCommitRequest::default()
            .with_transactional_id(tid())
            .with_group_id(group())
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch)
            .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                .with_name(topic_name(ZOMBIE_INPUT))
                .with_partitions(vec![partition])]);
        let response = client.request(version, &request).await?;
        let codes: Vec<i16> =
            response.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect();
        seen.push(format!("TxnOffsetCommit v{version}: {codes:?}"));
        ensure!(codes == vec![fenced_code(version, 3)], "TxnOffsetCommit v{version}: errors {codes:?}");
    }
    for version in versions::<EndTxnRequest>(client)? {
        for committed in [true, false] {
            let request = EndTxnRequest::default()
                .with_transactional_id(tid())
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch)
                .with_committed(committed);
            let code = client.request(version, &request).await?.error_code;
            seen.push(format!("EndTxn v{version} committed={committed}: {code}"));
            ensure!(code == fenced_code(version, 2), "EndTxn v{version} committed={committed}: error {code}");
        }
    }
    println!("fenced epoch {epoch} of producer {producer_id} on the wire: {}", seen.join(", "));
    Ok(())
}

const TIMEOUT_TXN: &str = "timeout-txn";
/// The stalled transaction also commits an offset of this topic for `TIMEOUT_GROUP`.
const TIMEOUT_INPUT: &str = "timeout-input";
const TIMEOUT_GROUP: &str = "timeout-group";
/// The producer's `transaction.timeout.ms`.
const TXN_TIMEOUT_MS: u64 = 1_000;
/// How long the producer stalls with its transaction open: well past its timeout plus one
/// round of the broker's cleanup duty.
const STALL: Duration = Duration::from_secs(3);
/// How long the broker may take to show the abort once the stall is over.
const ABORT_SEEN_TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread")]
async fn librdkafka_transaction_past_its_timeout_is_aborted_by_the_broker() {
    let options =
        ClusterOptions::new(3).config("transaction.abort.timed.out.transaction.cleanup.interval.ms", 200);
    let mut cluster = Cluster::start_with(options).expect("starting cluster");
    let result = timed_out(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn timed_out(cluster: &mut Cluster) -> Result<()> {
    cluster.wait_for_leader(Duration::from_secs(30))?;
    let bootstrap = cluster.bootstrap();
    let topic = "timeout";
    create_topics(&bootstrap, &[(topic, 2), (TIMEOUT_INPUT, 1)]).await?;
    let leader = cluster.leader()?;
    let mut raw = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;

    let producer: FutureProducer = transactional_config(&bootstrap, TIMEOUT_TXN)
        .set("transaction.timeout.ms", TXN_TIMEOUT_MS.to_string())
        .set("message.timeout.ms", TXN_TIMEOUT_MS.to_string())
        .create()?;
    producer.init_transactions(TIMEOUT).context("init_transactions")?;
    let initial = describe(&mut raw, TIMEOUT_TXN).await?;
    ensure!(initial.transaction_timeout_ms == TXN_TIMEOUT_MS as i32, "{initial:?}");

    // The three records go out together, with an input offset, so that all are written well
    // inside the timeout; the producer knows where the partitions are first (its sends may
    // wait no longer than the transaction timeout, metadata lookup included).
    let metadata = producer.client().fetch_metadata(Some(topic), TIMEOUT)?;
    let partitions =
        metadata.topics().iter().flat_map(|t| t.partitions()).filter(|p| p.leader() >= 0).count();
    ensure!(partitions == 2, "{topic}: {partitions} partitions with a leader in the producer's metadata");
    producer.begin_transaction()?;
    let mut pending = Vec::new();
    for (i, partition) in [0, 0, 1].into_iter().enumerate() {
        let (key, value) = (format!("k{i}"), format!("stalled-{i}"));
        let record = FutureRecord::to(topic).partition(partition).key(&key).payload(&value);
        pending.push(producer.send_result(record).map_err(|(e, _)| anyhow::anyhow!("send {key}: {e}"))?);
    }
    send_offsets(&producer, &bootstrap, TIMEOUT_GROUP, TIMEOUT_INPUT, 3).context("stalled offsets")?;
    let mut ends = [0i64; 2];
    for delivery in pending {
        let delivery = delivery.await?.map_err(|(e, _)| anyhow::anyhow!("delivery: {e}"))?;
        let end = &mut ends[delivery.partition as usize];
        *end = (*end).max(delivery.offset + 1);
    }
    tokio::time::sleep(STALL).await;

    // The broker aborted the transaction: its markers are written and the epoch moved on.
    let deadline = Instant::now() + ABORT_SEEN_TIMEOUT;
    let aborted = loop {
        let d = describe(&mut raw, TIMEOUT_TXN).await?;
        if d.transaction_state.as_str() != "Ongoing" || Instant::now() > deadline {
            break d;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    println!("after the stall: {aborted:?}");
    ensure!(aborted.transaction_state.as_str() == "CompleteAbort", "not aborted by the broker: {aborted:?}");
    ensure!(aborted.producer_id == initial.producer_id, "{aborted:?}");
    ensure!(aborted.producer_epoch == initial.producer_epoch + 1, "the abort bumps the epoch: {aborted:?}");
    ensure!(aborted.topics.is_empty() && aborted.transaction_start_time_ms == -1, "{aborted:?}");

    // read_committed is no longer held back: the last stable offset is past the abort marker.
    for (partition, end) in ends.into_iter().enumerate() {
        let (high_watermark, last_stable) = end_offsets(&mut raw, topic, partition as i32).await?;
        println!(
            "{topic}/{partition}: last written {}, high watermark {high_watermark}, LSO {last_stable}",
            end - 1
        );
        ensure!(high_watermark == end + 1, "{topic}/{partition}: one abort marker after the data");
        ensure!(last_stable == high_watermark, "{topic}/{partition}: LSO {last_stable} held back");
    }
    let committed = read_values(&bootstrap, topic, 2, READ_COMMITTED)?;
    ensure!(committed.is_empty(), "read_committed saw the aborted records: {committed:?}");
    let uncommitted = read_values(&bootstrap, topic, 2, READ_UNCOMMITTED)?;
    ensure!(uncommitted.len() == 3, "the aborted records are on disk: {uncommitted:?}");
    let group_offset = committed_offset(&bootstrap, TIMEOUT_GROUP, TIMEOUT_INPUT, 0)?;
    ensure!(group_offset == Offset::Invalid, "the aborted offset was committed: {group_offset:?}");

    // The producer learns of it at commit, aborts and carries on.
    let commit = producer.commit_transaction(TIMEOUT);
    println!("commit after the broker's abort: {commit:?}");
    match &commit {
        Err(KafkaError::Transaction(e)) if e.txn_requires_abort() && !e.is_fatal() => {}
        other => bail!("commit after the broker's abort must fail with an abortable error: {other:?}"),
    }
    producer.abort_transaction(TIMEOUT).context("abort after the broker's abort")?;
    producer.begin_transaction()?;
    for partition in [0, 1] {
        send_sync(&producer, topic, Some(partition), "again", &format!("again-{partition}")).await?;
    }
    send_offsets(&producer, &bootstrap, TIMEOUT_GROUP, TIMEOUT_INPUT, 4).context("next offsets")?;
    producer.commit_transaction(TIMEOUT).context("the next transaction")?;

    let done = describe(&mut raw, TIMEOUT_TXN).await?;
    println!("after the next transaction: {done:?}");
    ensure!(done.transaction_state.as_str() == "CompleteCommit", "{done:?}");
    let mut committed = read_values(&bootstrap, topic, 2, READ_COMMITTED)?;
    committed.sort();
    ensure!(
        committed == vec!["again-0".to_string(), "again-1".to_string()],
        "read_committed saw {committed:?}"
    );
    let uncommitted = read_values(&bootstrap, topic, 2, READ_UNCOMMITTED)?;
    ensure!(uncommitted.len() == 5, "read_uncommitted saw {uncommitted:?}");
    let group_offset = committed_offset(&bootstrap, TIMEOUT_GROUP, TIMEOUT_INPUT, 0)?;
    ensure!(group_offset == Offset::Offset(4), "the next transaction's offset: {group_offset:?}");
    Ok(())
}

/// EndTxn v5 (transactions v2) with nothing of the transaction in the log. kafka-clients 4.x
/// can send its commit before the transaction's batches (its Sender reads whether batches are
/// pending before it takes the transaction manager's lock, so a commit enqueued in between goes
/// out first; seen at 10 producers in TxWritesBench). A commit then gets the retriable
/// CONCURRENT_TRANSACTIONS, not success (which would report a transaction committed without
/// its records, whose batch then waited in the client until delivery.timeout.ms) and not
/// Kafka's fatal INVALID_TXN_STATE. An abort bumps the epoch as every v5 EndTxn does, and its
/// retry gets the same answer.
#[tokio::test(flavor = "multi_thread")]
async fn v2_commit_before_the_writes_is_retriable() {
    let broker = Broker::start(BrokerOptions::default()).expect("starting onelog");
    let result = commit_before_writes(&broker).await;
    broker.unwrap_or_dump(result);
}

async fn commit_before_writes(broker: &Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    let tid = || TransactionalId(StrBytes::from_static_str("commit-before-writes"));
    let init = InitProducerIdRequest::default()
        .with_transactional_id(Some(tid()))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let init = client.request(4, &init).await?;
    ensure!(init.error_code == 0, "InitProducerId: error {}", init.error_code);
    let (producer_id, epoch) = (init.producer_id, init.producer_epoch);
    let end = |epoch: i16, committed: bool| {
        EndTxnRequest::default()
            .with_transactional_id(tid())
            .with_producer_id(producer_id)
            .with_producer_epoch(epoch)
            .with_committed(committed)
    };
    let commit = client.request(5, &end(epoch, true)).await?;
    ensure!(
        commit.error_code == CONCURRENT_TRANSACTIONS,
        "v5 commit with nothing written: error {}",
        commit.error_code
    );
    let abort = client.request(5, &end(epoch, false)).await?;
    ensure!(
        abort.error_code == 0 && abort.producer_id == producer_id && abort.producer_epoch == epoch + 1,
        "v5 abort with nothing written: error {}, epoch {} after {epoch}",
        abort.error_code,
        abort.producer_epoch
    );
    let retry = client.request(5, &end(epoch, false)).await?;
    ensure!(
        retry.error_code == 0 && retry.producer_epoch == epoch + 1,
        "the abort's retry: error {}, epoch {}",
        retry.error_code,
        retry.producer_epoch
    );
    let commit = client.request(5, &end(epoch + 1, true)).await?;
    ensure!(
        commit.error_code == CONCURRENT_TRANSACTIONS,
        "v5 commit after the abort: error {}",
        commit.error_code
    );
    Ok(())
}

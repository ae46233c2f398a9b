//! rdkafka (librdkafka) helpers for transactional scenarios: a transactional producer, reading
//! a topic back under an isolation level, and a group's committed offset; and the raw
//! DescribeTransactions that shows a transaction's state as the broker holds it.
//!
//! Reading back stops at the consumer's position, not at the last record's offset: a
//! transactional partition ends with a control batch (the commit or abort marker), which the
//! client skips but which still moves its position up to the end (`fetch_watermarks` answers the
//! last stable offset under read_committed, the high watermark under read_uncommitted).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kafka_protocol::messages::describe_transactions_response::TransactionState;
use kafka_protocol::messages::{DescribeTransactionsRequest, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::kafka::client_config;
use crate::RawClient;

/// Timeout of one transactional call (init, commit, abort) and of one read-back.
pub const TXN_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// librdkafka's `isolation.level` values.
pub const READ_COMMITTED: &str = "read_committed";
pub const READ_UNCOMMITTED: &str = "read_uncommitted";

/// A producer config with `transactional.id` set: sends are acknowledged one by one
/// (`linger.ms=0`) and a transaction may stay open for a minute.
pub fn transactional_config(bootstrap: &str, transactional_id: &str) -> ClientConfig {
    let mut config = client_config(bootstrap);
    config
        .set("transactional.id", transactional_id)
        .set("transaction.timeout.ms", "60000")
        .set("message.timeout.ms", "30000")
        .set("linger.ms", "0");
    config
}

/// A transactional producer after `init_transactions`, which fences any earlier instance with
/// the same `transactional.id` and aborts its open transaction.
pub fn transactional_producer(bootstrap: &str, transactional_id: &str) -> Result<FutureProducer> {
    let producer: FutureProducer = transactional_config(bootstrap, transactional_id).create()?;
    producer.init_transactions(TXN_CALL_TIMEOUT).context("init_transactions")?;
    Ok(producer)
}

/// The value of every data record of `topic` (all `partitions`) under `isolation`, read from
/// the beginning until the consumer's position reaches each partition's end.
pub fn read_values(bootstrap: &str, topic: &str, partitions: i32, isolation: &str) -> Result<Vec<String>> {
    let consumer: BaseConsumer = client_config(bootstrap)
        .set("group.id", format!("reader-{isolation}"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation)
        .set("enable.partition.eof", "false")
        .create()?;
    let mut ends = BTreeMap::new();
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        // Retried while the leader is moving or still being elected (a read right after every
        // node restarted failed here with NotLeaderForPartition in CI, journaled_segments).
        let high = crate::kafka::high_watermark(&consumer, topic, p)?;
        ends.insert(p, high);
        assignment.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;
    let mut values = Vec::new();
    let deadline = Instant::now() + TXN_CALL_TIMEOUT;
    loop {
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            if message.as_ref().is_err_and(crate::kafka::is_connection_lost) {
                continue;
            }
            let message = message.map_err(|e| anyhow::anyhow!("consumer error: {e}"))?;
            values.push(String::from_utf8_lossy(message.payload().unwrap_or_default()).into_owned());
            continue;
        }
        let position = consumer.position()?;
        let done = ends.iter().all(|(p, high)| {
            matches!(position.find_partition(topic, *p).map(|e| e.offset()), Some(Offset::Offset(o)) if o >= *high)
                || *high == 0
        });
        if done {
            return Ok(values);
        }
        if Instant::now() > deadline {
            bail!("{isolation} reader stuck at {position:?}, ends {ends:?}, read {}", values.len());
        }
    }
}

/// The offset `group` has committed for `topic`/`partition` (`Offset::Invalid` for none), asked
/// without `require_stable`: librdkafka sets it only for read_committed consumers and then
/// retries UNSTABLE_OFFSET_COMMIT until the open transaction ends, so this answers even while
/// a transaction holds a pending offset for the partition.
pub fn committed_offset(bootstrap: &str, group: &str, topic: &str, partition: i32) -> Result<Offset> {
    let consumer: BaseConsumer = client_config(bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("isolation.level", READ_UNCOMMITTED)
        .create()?;
    let mut wanted = TopicPartitionList::new();
    wanted.add_partition(topic, partition);
    let committed = consumer.committed_offsets(wanted, TXN_CALL_TIMEOUT).context("committed_offsets")?;
    let elem = committed.find_partition(topic, partition).context("partition missing from OffsetFetch")?;
    Ok(elem.offset())
}

/// Sends one record (to `partition`, or where the partitioner puts it) and waits for its
/// acknowledgement, so the record is on the broker before the caller goes on (the EOS
/// article's lesson: async sends may be dropped by an abort); returns its (partition, offset).
pub async fn send_sync(
    producer: &FutureProducer,
    topic: &str,
    partition: Option<i32>,
    key: &str,
    value: &str,
) -> Result<(i32, i64)> {
    let mut record = FutureRecord::to(topic).key(key).payload(value);
    if let Some(partition) = partition {
        record = record.partition(partition);
    }
    let delivery =
        producer.send(record, TXN_CALL_TIMEOUT).await.map_err(|(e, _)| anyhow::anyhow!("send {key}: {e}"))?;
    Ok((delivery.partition, delivery.offset))
}

/// A transaction held open on partitions 0 and 1 of `topic` (two records on 0, one on 1) by a
/// new producer of `transactional_id`, after that producer committed one record on partition 0:
/// the open transaction therefore starts past the committed record and its marker there. The
/// tooling tests look at it. Returns the producer and the open transaction's first offset on
/// partitions 0 and 1.
pub async fn open_after_commit(
    bootstrap: &str,
    topic: &str,
    transactional_id: &str,
) -> Result<(FutureProducer, [i64; 2])> {
    let producer = transactional_producer(bootstrap, transactional_id)?;
    producer.begin_transaction()?;
    send_sync(&producer, topic, Some(0), "k", "earlier").await?;
    producer.commit_transaction(TXN_CALL_TIMEOUT).context("earlier commit")?;
    producer.begin_transaction()?;
    let (_, first_0) = send_sync(&producer, topic, Some(0), "k0", "open-0").await?;
    send_sync(&producer, topic, Some(0), "k1", "open-1").await?;
    let (_, first_1) = send_sync(&producer, topic, Some(1), "k2", "open-2").await?;
    Ok((producer, [first_0, first_1]))
}

/// DescribeTransactions v0 of `ids`, one answer per id in order (the transaction leader answers;
/// another node says NOT_COORDINATOR).
pub async fn describe_transactions(client: &mut RawClient, ids: &[&str]) -> Result<Vec<TransactionState>> {
    let request = DescribeTransactionsRequest::default().with_transactional_ids(
        ids.iter().map(|id| TransactionalId(StrBytes::from_string((*id).to_owned()))).collect(),
    );
    let version = client.version::<DescribeTransactionsRequest>(0)?;
    Ok(client.request(version, &request).await?.transaction_states)
}

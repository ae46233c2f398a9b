//! The read-process-write loop of BaseStreamingBench and TxStreamingBench (Java `Streaming`).
//! The source topic (topic1, partition 0) is filled first ([`fill_source`]); each worker then
//! reads its own slice of it (a consumer of its group, assigned the partition at the slice's
//! first offset, polled without being measured) and, for each record, forwards the value to
//! topic2 and commits the next source offset for its group. Only that write path is measured:
//! - without a transactional id: send, a synchronous consumer commit, wait for the delivery;
//! - with one: begin, send, send_offsets_to_transaction, commit, wait for the delivery.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerGroupMetadata};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use tokio::runtime::Handle;

use super::clients::BenchProducer;
use super::config::{value, BenchConfig};
use super::runner::Worker;
use crate::kafka::CLIENT_REQUEST_TIMEOUT;

const SOURCE_PARTITION: i32 = 0;
const POLL_TIMEOUT: Duration = Duration::from_millis(100);

pub struct Streaming {
    consumer: BaseConsumer,
    producer: BenchProducer,
    group: ConsumerGroupMetadata,
    /// topic1 (the source) and topic2 (`TOPICS`).
    topics: (String, String),
}

impl Streaming {
    /// A worker of `group` reading the source from `from_offset`; `transactional_id`: `None`
    /// for BaseStreamingBench.
    pub fn open(
        cfg: &BenchConfig,
        group: &str,
        transactional_id: Option<&str>,
        from_offset: i64,
        runtime: Handle,
    ) -> Result<Self> {
        let consumer: BaseConsumer = cfg.consumer(Some(group)).create().context("creating consumer")?;
        consumer.assign(&source_at(&cfg.topic1, from_offset)?).context("assigning the source")?;
        let group = consumer.group_metadata().context("the consumer's group metadata")?;
        let producer = BenchProducer::open(cfg, transactional_id, runtime)?;
        let topics = (cfg.topic1.clone(), cfg.topic2.clone());
        Ok(Self { consumer, producer, group, topics })
    }

    /// The next source record's offset and value; polls until there is one.
    fn next(&self) -> Result<(i64, Vec<u8>)> {
        loop {
            match self.consumer.poll(POLL_TIMEOUT) {
                None => {}
                Some(Ok(message)) => {
                    return Ok((message.offset(), message.payload().unwrap_or_default().to_vec()))
                }
                // Java's poll retries transient errors (a dropped connection) by itself.
                Some(Err(e)) => eprintln!("consumer: {e}"),
            }
        }
    }
}

impl Worker for Streaming {
    fn iteration(&mut self, _: u64) -> Result<Duration> {
        let (offset, value) = self.next()?;
        let offsets = source_at(&self.topics.0, offset + 1)?;
        let p = &self.producer;
        let start = Instant::now();
        p.begin()?;
        let sent = p.send(&self.topics.1, None, &value)?;
        if p.transactional() {
            p.send_offsets(&offsets, &self.group)?;
            p.commit()?;
        } else {
            self.consumer.commit(&offsets, CommitMode::Sync).context("commit (sync)")?;
        }
        p.delivered(sent)?;
        Ok(start.elapsed())
    }
}

/// The source's (topic1's) partition 0 at `offset`.
fn source_at(topic1: &str, offset: i64) -> Result<TopicPartitionList> {
    let mut list = TopicPartitionList::new();
    list.add_partition_offset(topic1, SOURCE_PARTITION, Offset::Offset(offset))?;
    Ok(list)
}

/// Appends `count` records to the source (non-transactionally, acks=all) and returns the
/// offset of the first; worker i of a concurrent run starts at first + i * iterations.
pub fn fill_source(cfg: &BenchConfig, count: u64, runtime: Handle) -> Result<i64> {
    let probe: BaseConsumer = cfg.consumer(None).create().context("creating consumer")?;
    let (_, first) = probe
        .fetch_watermarks(&cfg.topic1, SOURCE_PARTITION, CLIENT_REQUEST_TIMEOUT)
        .context("end offset of topic1/0")?;
    let producer = BenchProducer::open(cfg, None, runtime)?;
    let fixed = cfg.fixed_payload();
    let mut pending = VecDeque::new();
    for i in 0..count {
        let value = value(fixed.as_deref(), i);
        loop {
            match producer.send(&cfg.topic1, Some(SOURCE_PARTITION), &value) {
                Ok(delivery) => break pending.push_back(delivery),
                // As Java's send blocks while its buffer is full: wait for the oldest.
                Err(e) if BenchProducer::queue_full(&e) && !pending.is_empty() => {
                    producer.delivered(pending.pop_front().expect("not empty"))?
                }
                Err(e) => return Err(e).context("filling topic1/0"),
            }
        }
    }
    for delivery in pending {
        producer.delivered(delivery).context("filling topic1/0")?;
    }
    Ok(first)
}

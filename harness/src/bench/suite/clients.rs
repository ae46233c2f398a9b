//! The producer side shared by the four benches (Java `KafkaProducer` as the benches use it):
//! a librdkafka producer, transactional when given an id, whose calls avoid rust-rdkafka's
//! 100 ms poll steps — `send` hands back the delivery future (resolved by the producer's
//! polling thread as soon as librdkafka reports), and `commit` calls librdkafka's commit
//! directly ([`crate::bench::txn::commit`]) instead of the wrapper that flushes first.

use std::time::Duration;

use anyhow::{Context, Result};
use rdkafka::consumer::ConsumerGroupMetadata;
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};
use rdkafka::TopicPartitionList;
use tokio::runtime::Handle;

use super::config::BenchConfig;
use crate::bench::txn;

/// Timeout of one transaction call (kafka-clients' max.block.ms is 60 s).
const TIMEOUT: Duration = Duration::from_secs(60);

pub struct BenchProducer {
    producer: FutureProducer,
    transactional: bool,
    /// Awaits delivery futures from this blocking thread; they need no I/O driver.
    runtime: Handle,
}

impl BenchProducer {
    /// A producer with the suite's settings; with a transactional id, its transactions are
    /// initialised before it is returned.
    pub fn open(cfg: &BenchConfig, transactional_id: Option<&str>, runtime: Handle) -> Result<Self> {
        let producer: FutureProducer =
            cfg.producer(transactional_id).create().context("creating producer")?;
        if transactional_id.is_some() {
            producer.init_transactions(TIMEOUT).context("init_transactions")?;
        }
        Ok(Self { producer, transactional: transactional_id.is_some(), runtime })
    }

    pub fn transactional(&self) -> bool {
        self.transactional
    }

    /// begin_transaction when transactional, else nothing.
    pub fn begin(&self) -> Result<()> {
        if self.transactional {
            self.producer.begin_transaction().context("begin_transaction")?;
        }
        Ok(())
    }

    /// Queues `value` for `topic`, partition chosen by the client, and returns its delivery.
    pub fn send(&self, topic: &str, partition: Option<i32>, value: &[u8]) -> Result<DeliveryFuture> {
        let mut record = FutureRecord::<(), [u8]>::to(topic).payload(value);
        record.partition = partition;
        self.producer.send_result(record).map_err(|(e, _)| e).with_context(|| format!("send to {topic}"))
    }

    /// sendOffsetsToTransaction for the consumer group of `group`.
    pub fn send_offsets(&self, offsets: &TopicPartitionList, group: &ConsumerGroupMetadata) -> Result<()> {
        self.producer
            .send_offsets_to_transaction(offsets, group, TIMEOUT)
            .context("send_offsets_to_transaction")
    }

    /// commit_transaction when transactional, else nothing.
    pub fn commit(&self) -> Result<()> {
        if self.transactional {
            txn::commit(&self.producer)?;
        }
        Ok(())
    }

    /// Waits for a delivery, as `Future.get()` on a send does.
    pub fn delivered(&self, delivery: DeliveryFuture) -> Result<()> {
        match self.runtime.block_on(delivery) {
            Ok(Ok(_)) => Ok(()),
            Ok(Err((e, _))) => Err(e).context("delivery"),
            Err(_) => anyhow::bail!("delivery: the producer went away"),
        }
    }

    /// Whether librdkafka's queue is full (the caller should wait for a delivery first).
    pub fn queue_full(error: &anyhow::Error) -> bool {
        matches!(
            error.downcast_ref::<rdkafka::error::KafkaError>(),
            Some(rdkafka::error::KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull))
        )
    }
}

//! `txn-worker`: one consume-process-produce transaction with librdkafka (KIP-98, KIP-447), the
//! client of the EOS article's SIGKILL run (shared/seeds/kafka-eos-live-run-ru).
//!
//! It first initializes its transactional producer, which fences any earlier instance with the
//! same transactional.id and aborts that instance's open transaction. Then it joins group
//! `--group` on `--input` (read_committed, no auto-commit), reads `--count` records from the
//! group's committed position, and in ONE transaction writes one output per input and sends the
//! consumed offsets with the consumer's group metadata. Then it commits — or, given
//! `--hang-before-commit FILE`, it writes FILE and sleeps with the transaction open, so that a
//! test can SIGKILL it strictly between produce and commit.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use harness::kafka::client_config;
use harness::txn::{transactional_producer, READ_COMMITTED, TXN_CALL_TIMEOUT};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

/// Longest the worker waits for its group assignment and the input records.
const CONSUME_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a hanging worker sleeps before giving up on being killed.
const HANG_MAX: Duration = Duration::from_secs(600);
/// Kafka's minimum session timeout: a killed worker leaves the group this soon.
const SESSION_TIMEOUT_MS: &str = "6000";

#[derive(Parser)]
#[command(about = "One consume-process-produce transaction; optionally hangs before the commit")]
struct Args {
    #[arg(long)]
    bootstrap: String,
    #[arg(long)]
    input: String,
    #[arg(long)]
    output: String,
    #[arg(long)]
    group: String,
    #[arg(long)]
    transactional_id: String,
    /// Input records to process in the transaction.
    #[arg(long, default_value_t = 10)]
    count: usize,
    /// Write this file (READY-TO-COMMIT) and sleep instead of committing.
    #[arg(long, value_name = "FILE")]
    hang_before_commit: Option<PathBuf>,
}

/// One consumed input record.
struct Input {
    partition: i32,
    offset: i64,
    key: Vec<u8>,
    value: String,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let producer = transactional_producer(&args.bootstrap, &args.transactional_id)?;
    println!("[txn={}] init_transactions done", args.transactional_id);
    let consumer = group_consumer(&args)?;
    let inputs = consume(&consumer, &args.input, args.count)?;
    println!("[txn={}] read {} records from {}", args.transactional_id, inputs.len(), args.input);

    producer.begin_transaction()?;
    for input in &inputs {
        let value = format!("processed-{}", input.value);
        producer
            .send(FutureRecord::to(&args.output).key(&input.key).payload(&value), TXN_CALL_TIMEOUT)
            .await
            .map_err(|(e, _)| anyhow::anyhow!("sending {value}: {e}"))?;
    }
    let offsets = next_offsets(&args.input, &inputs)?;
    let group = consumer.group_metadata().context("consumer has no group metadata")?;
    producer.send_offsets_to_transaction(&offsets, &group, TXN_CALL_TIMEOUT).context("send_offsets")?;
    println!(
        "[txn={}] wrote {} records to {}; transaction open",
        args.transactional_id,
        inputs.len(),
        args.output
    );

    if let Some(marker) = &args.hang_before_commit {
        std::fs::write(marker, format!("READY-TO-COMMIT n={}\n", inputs.len()))
            .with_context(|| format!("writing {}", marker.display()))?;
        println!("READY-TO-COMMIT n={}", inputs.len());
        std::thread::sleep(HANG_MAX);
        bail!("hung for {HANG_MAX:?} and nobody killed me");
    }
    producer.commit_transaction(TXN_CALL_TIMEOUT).context("commit_transaction")?;
    println!("[txn={}] committed n={}", args.transactional_id, inputs.len());
    Ok(())
}

fn group_consumer(args: &Args) -> Result<BaseConsumer> {
    let consumer: BaseConsumer = client_config(&args.bootstrap)
        .set("group.id", &args.group)
        .set("enable.auto.commit", "false")
        .set("isolation.level", READ_COMMITTED)
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", SESSION_TIMEOUT_MS)
        .set("enable.partition.eof", "false")
        .create()?;
    consumer.subscribe(&[&args.input])?;
    Ok(consumer)
}

/// Polls until `count` records arrived (the group assignment comes first).
fn consume(consumer: &BaseConsumer, topic: &str, count: usize) -> Result<Vec<Input>> {
    let deadline = Instant::now() + CONSUME_TIMEOUT;
    let mut inputs = Vec::with_capacity(count);
    while inputs.len() < count {
        if Instant::now() > deadline {
            bail!("read {} of {count} records from {topic} within {CONSUME_TIMEOUT:?}", inputs.len());
        }
        let Some(message) = consumer.poll(Duration::from_millis(100)) else { continue };
        let message = message.map_err(|e| anyhow::anyhow!("consumer error: {e}"))?;
        inputs.push(Input {
            partition: message.partition(),
            offset: message.offset(),
            key: message.key().unwrap_or_default().to_vec(),
            value: String::from_utf8_lossy(message.payload().unwrap_or_default()).into_owned(),
        });
    }
    Ok(inputs)
}

/// The offsets the group commits: one past the last record consumed, per partition.
fn next_offsets(topic: &str, inputs: &[Input]) -> Result<TopicPartitionList> {
    let mut next = BTreeMap::new();
    for input in inputs {
        let entry = next.entry(input.partition).or_insert(0);
        *entry = (*entry).max(input.offset + 1);
    }
    let mut offsets = TopicPartitionList::new();
    for (partition, offset) in next {
        offsets.add_partition_offset(topic, partition, Offset::Offset(offset))?;
    }
    Ok(offsets)
}

//! The transaction benchmark of `onelog-bench txn`: transactional against idempotent produce at
//! equal batch sizes, side by side in one run (issue #5).
//!
//! Each producer is its own librdkafka instance (a transactional id belongs to one producer).
//! One unit of work writes one record to each of two partitions and waits for both:
//! - idempotent: two sends with `enable.idempotence=true`, acks=all, awaited together;
//! - transactional: begin, the same two sends, commit — the commit is the one durable round.
//!
//! The latency of a unit is from its first send (or begin) to the last acknowledgement (or
//! the commit's return). Producers run closed loops on blocking threads, since librdkafka's
//! transaction calls block. The commit calls librdkafka directly (see [`commit`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use std::ffi::CStr;

use anyhow::{bail, Result};
use rdkafka::bindings as rdsys;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

use super::stats::Percentiles;
use crate::kafka::client_config;

/// Which kind of producer a row measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Idempotent,
    Transactional,
}

pub struct RowOptions {
    pub bootstrap: String,
    pub topic: String,
    pub record_bytes: usize,
    pub duration: Duration,
    pub producers: usize,
    pub mode: Mode,
}

pub struct Row {
    pub units_per_s: f64,
    pub records_per_s: f64,
    pub latency: Percentiles,
}

const TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `producers` closed loops for the duration and reports units (two records each).
pub async fn run(options: RowOptions) -> Result<Row> {
    let options = Arc::new(options);
    let mut producers = Vec::with_capacity(options.producers);
    for index in 0..options.producers {
        producers.push(create(&options, index)?);
    }
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(producers.len());
    for (index, producer) in producers.into_iter().enumerate() {
        let options = options.clone();
        let handle = tokio::runtime::Handle::current();
        tasks.push(tokio::task::spawn_blocking(move || {
            closed_loop(&handle, &options, &producer, index, start)
        }));
    }
    let mut samples = Vec::new();
    for task in tasks {
        samples.extend(task.await??);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let units = samples.len() as f64;
    Ok(Row {
        units_per_s: units / elapsed,
        records_per_s: 2.0 * units / elapsed,
        latency: Percentiles::of(samples),
    })
}

fn create(options: &RowOptions, index: usize) -> Result<FutureProducer> {
    let mut config = client_config(&options.bootstrap);
    config.set("acks", "all").set("linger.ms", "0").set("message.timeout.ms", "30000");
    match options.mode {
        Mode::Idempotent => {
            config.set("enable.idempotence", "true");
        }
        Mode::Transactional => {
            config.set("transactional.id", format!("onelog-bench-{index}"));
        }
    }
    let producer: FutureProducer = config.create()?;
    if options.mode == Mode::Transactional {
        producer.init_transactions(TIMEOUT)?;
    }
    Ok(producer)
}

fn closed_loop(
    handle: &tokio::runtime::Handle,
    options: &RowOptions,
    producer: &FutureProducer,
    index: usize,
    start: Instant,
) -> Result<Vec<Duration>> {
    let payload: Vec<u8> = (0..options.record_bytes).map(|i| (i * 31 % 251) as u8).collect();
    let mut samples = Vec::new();
    let mut n = 0u64;
    while start.elapsed() < options.duration {
        let began = Instant::now();
        if options.mode == Mode::Transactional {
            producer.begin_transaction()?;
        }
        let key = format!("{index}-{n}");
        let sends = (0..2).map(|partition| {
            let record = FutureRecord::to(&options.topic).partition(partition).key(&key).payload(&payload);
            producer.send(record, TIMEOUT)
        });
        let results = handle.block_on(futures_join(sends.collect()));
        for result in results {
            result.map_err(|(e, _)| e)?;
        }
        if options.mode == Mode::Transactional {
            commit(producer)?;
        }
        samples.push(began.elapsed());
        n += 1;
    }
    Ok(samples)
}

/// Awaits every future, in order (both sends are in flight together).
async fn futures_join<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut out = Vec::with_capacity(futures.len());
    let handles: Vec<_> = futures.into_iter().map(Box::pin).collect();
    for f in handles {
        out.push(f.await);
    }
    out
}

/// `rd_kafka_commit_transaction`, without rust-rdkafka's wrapper: the wrapper first runs its
/// own `flush`, which polls in fixed 100 ms steps whenever an event is still counted in the
/// producer's queue — and a delivery report is, for a moment after its future resolves — so
/// about one commit in ten waited 100 ms for nothing (a p99 of 100–200 ms that a Python
/// librdkafka loop against the same cluster did not show). librdkafka's own commit flushes as
/// long as needed and no longer. Shared with the Rust port of the Java suite ([`super::suite`]).
pub fn commit(producer: &FutureProducer) -> Result<()> {
    let timeout_ms = TIMEOUT.as_millis() as i32;
    // SAFETY: the pointer is the live producer's handle; the returned error, if any, is read
    // and destroyed here exactly once.
    unsafe {
        let error = rdsys::rd_kafka_commit_transaction(producer.client().native_ptr(), timeout_ms);
        if error.is_null() {
            return Ok(());
        }
        let message = CStr::from_ptr(rdsys::rd_kafka_error_string(error)).to_string_lossy().into_owned();
        rdsys::rd_kafka_error_destroy(error);
        bail!("commit_transaction: {message}")
    }
}

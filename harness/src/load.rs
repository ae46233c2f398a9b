//! A producer load that keeps running through faults, and the check of what it got
//! acknowledged: every acknowledged record read back exactly once, at the offset it was
//! acknowledged with, in send order per partition.
//!
//! Each of `senders` closed-loop senders writes keys `s<sender>-<seq>` round-robin over the
//! partitions and awaits each delivery before the next send, so its records in one partition
//! must appear in `seq` order. A send that fails or times out is an unknown outcome (the
//! record may be present or absent), never counted as absent (openraft's client oracle).
//!
//! With idempotence off, librdkafka's retries can write a record twice; the check then counts
//! duplicates instead of failing, and `max.in.flight=1` keeps retries from reordering.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use tokio::task::JoinHandle;

use crate::kafka::{client_config, PartitionRecords};
use crate::probe::probe_api_versions;

/// Kafka API key of InitProducerId, which idempotent producers need.
const INIT_PRODUCER_ID_KEY: i16 = 22;
/// How long librdkafka keeps retrying one record before reporting it failed (ms).
pub const MESSAGE_TIMEOUT_MS: u64 = 20_000;
/// How long librdkafka waits for one Produce response, so a paused leader costs this, not
/// the 30 s default (ms).
pub const REQUEST_TIMEOUT_MS: u64 = 3_000;

/// What to produce.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub topic: String,
    pub partitions: i32,
    pub senders: usize,
    /// `enable.idempotence`; see [`broker_supports_idempotence`].
    pub idempotence: bool,
}

/// One acknowledged record.
#[derive(Debug, Clone)]
pub struct Acked {
    pub sender: usize,
    pub seq: u64,
    pub partition: i32,
    pub offset: i64,
    pub sent: Instant,
    pub acked: Instant,
}

impl Acked {
    pub fn key(&self) -> String {
        key_of(self.sender, self.seq)
    }
}

/// The key of `sender`'s `seq`-th record.
pub fn key_of(sender: usize, seq: u64) -> String {
    format!("s{sender:02}-{seq:08}")
}

/// The value stored with `key`: derived from it, so a record read back proves its own
/// integrity.
pub fn value_of(key: &str) -> Vec<u8> {
    format!("value-of-{key};").repeat(6).into_bytes()
}

fn parse_key(key: &[u8]) -> Option<(usize, u64)> {
    let key = std::str::from_utf8(key).ok()?;
    let (sender, seq) = key.strip_prefix('s')?.split_once('-')?;
    Some((sender.parse().ok()?, seq.parse().ok()?))
}

/// Whether the broker at `addr` advertises InitProducerId (so `enable.idempotence` can work).
pub fn broker_supports_idempotence(addr: SocketAddr) -> Result<bool> {
    let versions = probe_api_versions(addr, Duration::from_secs(5))?;
    Ok(versions.api_keys.iter().any(|k| k.api_key == INIT_PRODUCER_ID_KEY))
}

/// A running producer load; see the module documentation.
pub struct ProduceLoad {
    options: LoadOptions,
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<Acked>>>,
    failures: Arc<AtomicUsize>,
    last_failure: Arc<Mutex<Option<String>>>,
    tasks: Vec<JoinHandle<()>>,
}

/// What a stopped load got.
#[derive(Debug, Clone)]
pub struct LoadReport {
    pub acked: Vec<Acked>,
    /// Sends that failed or timed out: unknown outcomes.
    pub failures: usize,
    pub last_failure: Option<String>,
}

/// How long a sender waits after a failed send before its next.
const FAILED_SEND_PAUSE: Duration = Duration::from_millis(20);

/// A load dropped without [`ProduceLoad::stop`] (a test that failed first) stops its senders.
impl Drop for ProduceLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl ProduceLoad {
    /// Starts the senders on the current tokio runtime.
    pub fn start(bootstrap: &str, options: LoadOptions) -> Result<Self> {
        let producer = producer(bootstrap, options.idempotence)?;
        let mut load = Self {
            options,
            stop: Arc::new(AtomicBool::new(false)),
            acked: Arc::new(Mutex::new(Vec::new())),
            failures: Arc::new(AtomicUsize::new(0)),
            last_failure: Arc::new(Mutex::new(None)),
            tasks: Vec::new(),
        };
        for sender in 0..load.options.senders {
            let task = load.sender_task(producer.clone(), sender);
            load.tasks.push(tokio::spawn(task));
        }
        Ok(load)
    }

    fn sender_task(&self, producer: FutureProducer, sender: usize) -> impl std::future::Future<Output = ()> {
        let (stop, acked, failures) = (self.stop.clone(), self.acked.clone(), self.failures.clone());
        let last_failure = self.last_failure.clone();
        let (topic, partitions) = (self.options.topic.clone(), self.options.partitions);
        async move {
            let mut seq = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let key = key_of(sender, seq);
                let value = value_of(&key);
                let partition = ((seq + sender as u64) % partitions as u64) as i32;
                let record = FutureRecord::to(&topic).key(&key).payload(&value).partition(partition);
                let sent = Instant::now();
                match producer.send(record, Timeout::After(Duration::from_secs(5))).await {
                    Ok(d) => acked.lock().expect("acked lock").push(Acked {
                        sender,
                        seq,
                        partition: d.partition,
                        offset: d.offset,
                        sent,
                        acked: Instant::now(),
                    }),
                    Err((e, _)) => {
                        failures.fetch_add(1, Ordering::SeqCst);
                        *last_failure.lock().expect("failure lock") = Some(e.to_string());
                        // A producer in a fatal state fails every send at once, and a send
                        // that is ready at once never yields: without this pause the sender
                        // spins on its worker thread, and a failed test's runtime can never
                        // shut down (it hung CI's cluster_failover for an hour).
                        tokio::time::sleep(FAILED_SEND_PAUSE).await;
                    }
                }
                seq += 1;
            }
        }
    }

    /// Acknowledged records so far.
    pub fn acked_len(&self) -> usize {
        self.acked.lock().expect("acked lock").len()
    }

    /// Failed or timed-out sends so far.
    pub fn failures(&self) -> usize {
        self.failures.load(Ordering::SeqCst)
    }

    /// The highest acknowledged offset per partition so far.
    pub fn max_acked_offsets(&self) -> BTreeMap<i32, i64> {
        let mut out = BTreeMap::new();
        for a in self.acked.lock().expect("acked lock").iter() {
            let max = out.entry(a.partition).or_insert(a.offset);
            *max = (*max).max(a.offset);
        }
        out
    }

    /// Waits until `count` records in all are acknowledged.
    pub async fn wait_for_acks(&self, count: usize, timeout: Duration) -> Result<()> {
        self.wait_for(timeout, |acked| acked.len() >= count, &format!("{count} acknowledgements")).await
    }

    /// Waits until `count` records SENT after `since` are acknowledged (production goes on
    /// after a fault); returns how long after `since` the first of them was acknowledged.
    pub async fn wait_for_acks_sent_after(
        &self,
        since: Instant,
        count: usize,
        timeout: Duration,
    ) -> Result<Duration> {
        let after = |acked: &[Acked]| acked.iter().filter(|a| a.sent >= since).count();
        let what = format!("{count} acknowledgements of records sent after the fault");
        self.wait_for(timeout, |acked| after(acked) >= count, &what).await?;
        let acked = self.acked.lock().expect("acked lock");
        let first = acked.iter().filter(|a| a.sent >= since).map(|a| a.acked).min().expect("count > 0");
        Ok(first - since)
    }

    async fn wait_for(&self, timeout: Duration, done: impl Fn(&[Acked]) -> bool, what: &str) -> Result<()> {
        let started = Instant::now();
        loop {
            if done(&self.acked.lock().expect("acked lock")) {
                return Ok(());
            }
            if let Some(finished) = self.tasks.iter().position(JoinHandle::is_finished) {
                bail!("sender {finished} ended early while waiting for {what}");
            }
            if started.elapsed() > timeout {
                bail!(
                    "no {what} within {timeout:?}: {} acknowledged, {} failed (last: {:?})",
                    self.acked_len(),
                    self.failures(),
                    self.last_failure.lock().expect("failure lock")
                );
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Stops the senders (each finishes its send in flight) and returns what they got.
    pub async fn stop(mut self) -> Result<LoadReport> {
        self.stop.store(true, Ordering::SeqCst);
        for task in std::mem::take(&mut self.tasks) {
            task.await.context("sender task")?;
        }
        let acked = std::mem::take(&mut *self.acked.lock().expect("acked lock"));
        let last_failure = self.last_failure.lock().expect("failure lock").clone();
        Ok(LoadReport { acked, failures: self.failures.load(Ordering::SeqCst), last_failure })
    }
}

fn producer(bootstrap: &str, idempotence: bool) -> Result<FutureProducer> {
    let mut config = client_config(bootstrap);
    config
        .set("acks", "all")
        .set("enable.idempotence", idempotence.to_string())
        .set("linger.ms", "0")
        .set("message.timeout.ms", MESSAGE_TIMEOUT_MS.to_string())
        .set("request.timeout.ms", REQUEST_TIMEOUT_MS.to_string())
        .set("retry.backoff.ms", "50")
        .set("reconnect.backoff.max.ms", "500")
        .set("topic.metadata.refresh.interval.ms", "1000");
    if !idempotence {
        // Without sequence numbers, a retry overtaking a later request would reorder records.
        config.set("max.in.flight.requests.per.connection", "1");
    }
    Ok(config.create()?)
}

/// What [`check_acked_exactly_once`] found.
#[derive(Debug, Clone, Default)]
pub struct ReadBackReport {
    /// Records read back in all.
    pub records: usize,
    pub acked: usize,
    /// Extra copies of a record (at-least-once delivery without idempotence).
    pub duplicates: usize,
    /// Records present although their send failed or timed out (unknown outcomes).
    pub unacked_present: usize,
}

/// Checks `consumed` (every partition of the load's topic, read from the start) against what
/// was acknowledged: offsets contiguous from 0; every record one the load sent, byte for
/// byte; every acknowledged record at its acknowledged offset; each sender's acknowledged
/// records in send order per partition; duplicates only when `duplicates_allowed`.
pub fn check_acked_exactly_once(
    acked: &[Acked],
    consumed: &PartitionRecords,
    duplicates_allowed: bool,
) -> Result<ReadBackReport> {
    let mut report = ReadBackReport { acked: acked.len(), ..ReadBackReport::default() };
    let mut copies: BTreeMap<(usize, u64), usize> = BTreeMap::new();
    for ((topic, partition), records) in consumed {
        for (i, record) in records.iter().enumerate() {
            let at = format!("{topic}/{partition} offset {}", record.offset);
            ensure!(
                record.offset == i as i64,
                "{topic}/{partition}: record #{i} has offset {}",
                record.offset
            );
            let key = record.key.as_deref().unwrap_or_default();
            let id = parse_key(key)
                .with_context(|| format!("{at}: key {:?} was never sent", String::from_utf8_lossy(key)))?;
            let expected = value_of(&key_of(id.0, id.1));
            ensure!(
                record.value.as_deref() == Some(expected.as_slice()),
                "{at}: value does not match its key"
            );
            *copies.entry(id).or_default() += 1;
            report.records += 1;
        }
    }
    check_acked_positions(acked, consumed)?;
    check_send_order(acked)?;
    let acked_ids: std::collections::BTreeSet<(usize, u64)> =
        acked.iter().map(|a| (a.sender, a.seq)).collect();
    for (id, n) in &copies {
        if *n > 1 && !duplicates_allowed {
            bail!("{} read back {n} times with idempotence on", key_of(id.0, id.1));
        }
        report.duplicates += n - 1;
        if !acked_ids.contains(id) {
            report.unacked_present += 1;
        }
    }
    Ok(report)
}

fn check_acked_positions(acked: &[Acked], consumed: &PartitionRecords) -> Result<()> {
    let mut by_position: BTreeMap<(i32, i64), &Acked> = BTreeMap::new();
    for a in acked {
        if let Some(other) = by_position.insert((a.partition, a.offset), a) {
            bail!("offset {}/{} acknowledged for {} and {}", a.partition, a.offset, other.key(), a.key());
        }
        let records =
            consumed.iter().find(|((_, p), _)| *p == a.partition).map(|(_, r)| r).with_context(|| {
                format!("acknowledged {} in partition {} that was not read", a.key(), a.partition)
            })?;
        let record = records.get(a.offset as usize).with_context(|| {
            format!(
                "acknowledged {} at {}/{} missing: partition holds {}",
                a.key(),
                a.partition,
                a.offset,
                records.len()
            )
        })?;
        ensure!(
            record.key.as_deref() == Some(a.key().as_bytes()),
            "acknowledged {} at {}/{} but that offset holds {:?}",
            a.key(),
            a.partition,
            a.offset,
            record.key.as_deref().map(String::from_utf8_lossy)
        );
    }
    Ok(())
}

/// A closed-loop sender's acknowledged records in one partition sit at increasing offsets.
fn check_send_order(acked: &[Acked]) -> Result<()> {
    let mut by_stream: BTreeMap<(i32, usize), Vec<&Acked>> = BTreeMap::new();
    for a in acked {
        by_stream.entry((a.partition, a.sender)).or_default().push(a);
    }
    for ((partition, sender), mut stream) in by_stream {
        stream.sort_by_key(|a| a.seq);
        for pair in stream.windows(2) {
            ensure!(
                pair[0].offset < pair[1].offset,
                "partition {partition}, sender {sender}: {} at offset {} but the later {} at {}",
                pair[0].key(),
                pair[0].offset,
                pair[1].key(),
                pair[1].offset
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::ConsumedRecord;
    use rdkafka::Timestamp;

    fn record(offset: i64, sender: usize, seq: u64) -> ConsumedRecord {
        let key = key_of(sender, seq);
        ConsumedRecord {
            offset,
            value: Some(value_of(&key)),
            key: Some(key.into_bytes()),
            headers: Vec::new(),
            timestamp: Timestamp::NotAvailable,
        }
    }

    fn acked(sender: usize, seq: u64, offset: i64) -> Acked {
        let now = Instant::now();
        Acked { sender, seq, partition: 0, offset, sent: now, acked: now }
    }

    #[test]
    fn duplicates_fail_only_with_idempotence() {
        let consumed: PartitionRecords =
            [(("t".to_owned(), 0), vec![record(0, 1, 0), record(1, 1, 0), record(2, 1, 1)])].into();
        let acks = [acked(1, 0, 1), acked(1, 1, 2)];
        let report = check_acked_exactly_once(&acks, &consumed, true).unwrap();
        assert_eq!((report.records, report.duplicates, report.unacked_present), (3, 1, 0));
        assert!(check_acked_exactly_once(&acks, &consumed, false).is_err());
    }

    #[test]
    fn missing_and_reordered_records_fail() {
        let consumed: PartitionRecords =
            [(("t".to_owned(), 0), vec![record(0, 1, 1), record(1, 1, 0)])].into();
        let reordered = [acked(1, 0, 1), acked(1, 1, 0)];
        assert!(check_acked_exactly_once(&reordered, &consumed, true).is_err());
        let missing = [acked(1, 2, 2)];
        assert!(check_acked_exactly_once(&missing, &consumed, true).is_err());
    }
}

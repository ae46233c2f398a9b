//! The queue workload: transactional writers and read_committed readers, all librdkafka.
//!
//! Each writer owns a `transactional.id` and loops: begin, send one to three unique values to
//! random partitions (all at once, or one by one waiting for each delivery), then commit — or, one time in `abort_one_in`, abort on purpose. What it
//! was told is recorded as the transaction's outcome (see `history::Outcome`). Writers also
//! carry out the client-side faults: a crash (the producer is dropped mid-transaction and a new
//! instance initialises) and a hijack (a second producer with the same id initialises while
//! the writer is in a transaction, and the writer then tries to commit).
//!
//! Each reader assigns itself every partition from the beginning under read_committed and
//! records what it polls; every so often it closes and starts a new session (a new consumer
//! instance), so the same offsets are read again and compared.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

use super::checker::{FinalRead, Unstable};
use super::history::{FaultWindow, History, Outcome, Poll, Txn};
use crate::kafka::client_config;

#[derive(Debug, Clone)]
pub struct QueueConfig {
    pub bootstrap: String,
    pub topic: String,
    pub partitions: i32,
    pub writers: usize,
    /// Idempotent producers outside transactions (acks=all): each value is its own
    /// one-record "transaction", committed when its delivery is acknowledged, unknown when the
    /// delivery failed or timed out.
    pub plain_writers: usize,
    pub readers: usize,
    /// One transaction in this many is aborted on purpose.
    pub abort_one_in: u32,
    /// The run's operation bound: writers stop after this many committed transactions.
    pub max_committed: usize,
    pub seed: u64,
}

/// Client-side faults requested by the scheduler; the first writer to look takes each.
#[derive(Default)]
pub struct ClientFaults {
    crash: AtomicBool,
    hijack: AtomicBool,
}

impl ClientFaults {
    pub fn request_crash(&self) {
        self.crash.store(true, Ordering::SeqCst);
    }

    pub fn request_hijack(&self) {
        self.hijack.store(true, Ordering::SeqCst);
    }

    /// True once per requested crash: the caller carries it out.
    pub(super) fn take_crash(&self) -> bool {
        self.crash.swap(false, Ordering::SeqCst)
    }

    /// True once per requested hijack: the caller carries it out.
    pub(super) fn take_hijack(&self) -> bool {
        self.hijack.swap(false, Ordering::SeqCst)
    }
}

/// The running workload.
pub struct Queue {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    pub faults: Arc<ClientFaults>,
}

/// Bounds every transactional call (begin, commit, abort, send offsets) of every workload.
pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(20);
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);
/// A reader starts a new session after this long (drawn up to twice it).
const SESSION: Duration = Duration::from_secs(8);

impl Queue {
    pub fn start(config: QueueConfig, history: History) -> Queue {
        let stop = Arc::new(AtomicBool::new(false));
        let faults = Arc::new(ClientFaults::default());
        let sessions = Arc::new(AtomicU64::new(0));
        let mut threads = Vec::new();
        for w in 0..config.writers {
            let (config, history, stop, faults) =
                (config.clone(), history.clone(), stop.clone(), faults.clone());
            threads.push(std::thread::spawn(move || writer(w, &config, &history, &stop, &faults)));
        }
        for w in 0..config.plain_writers {
            let (config, history, stop) = (config.clone(), history.clone(), stop.clone());
            threads.push(std::thread::spawn(move || plain_writer(w, &config, &history, &stop)));
        }
        for r in 0..config.readers {
            let (config, history, stop, sessions) =
                (config.clone(), history.clone(), stop.clone(), sessions.clone());
            threads.push(std::thread::spawn(move || reader(r, &config, &history, &stop, &sessions)));
        }
        Queue { stop, threads, faults }
    }

    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

pub fn transactional_producer(bootstrap: &str, transactional_id: &str) -> Result<FutureProducer, KafkaError> {
    let producer: FutureProducer = client_config(bootstrap)
        .set("transactional.id", transactional_id)
        .set("transaction.timeout.ms", "30000")
        .set("message.timeout.ms", "25000")
        .set("socket.timeout.ms", "10000")
        .set("linger.ms", "1")
        .create()?;
    producer.init_transactions(CALL_TIMEOUT)?;
    Ok(producer)
}

/// A producer for `tid`, retrying until it initialises or the run stops.
pub(crate) fn init_until_ready(
    bootstrap: &str,
    tid: &str,
    history: &History,
    stop: &AtomicBool,
) -> Option<FutureProducer> {
    while !stop.load(Ordering::SeqCst) {
        match transactional_producer(bootstrap, tid) {
            Ok(p) => return Some(p),
            Err(_) => {
                history.client_error();
                std::thread::sleep(Duration::from_millis(300));
            }
        }
    }
    None
}

fn writer(w: usize, config: &QueueConfig, history: &History, stop: &AtomicBool, faults: &ClientFaults) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut rng = StdRng::seed_from_u64(config.seed.wrapping_add(w as u64 * 7919));
    let tid = super::placement::queue_transactional_id(w);
    let name = format!("w{w}");
    let mut producer: Option<FutureProducer> = None;
    let mut seq = 0u64;
    while !stop.load(Ordering::SeqCst) && history.committed() < config.max_committed {
        let Some(p) = producer.take().or_else(|| init_until_ready(&config.bootstrap, &tid, history, stop))
        else {
            return;
        };
        if p.begin_transaction().is_err() {
            history.client_error();
            continue; // dropped: the next instance fences this one
        }
        let started = history.now();
        let n = rng.gen_range(1..=3);
        let values: Vec<(i32, String)> = (0..n)
            .map(|_| {
                seq += 1;
                (rng.gen_range(0..config.partitions), format!("{name}-{seq}"))
            })
            .collect();
        // Half the transactions send value by value, each delivery awaited: a transaction is
        // then open in the log while its later writes are in flight, the case a leader change
        // must carry on (issue 17) and `--bug ack-txn-before-commit` breaks.
        let one_by_one = rng.gen_bool(0.5);
        let delivered = if one_by_one {
            values.iter().all(|v| rt.block_on(send_all(&p, &config.topic, std::slice::from_ref(v))))
        } else {
            rt.block_on(send_all(&p, &config.topic, &values))
        };
        let record = |outcome: Outcome, deliberate_abort: bool| Txn {
            writer: name.clone(),
            values: values.clone(),
            outcome,
            deliberate_abort,
            started,
            ended: history.now(),
        };

        if faults.take_crash() {
            let (outcome, next) = crash(p, &config.bootstrap, &tid, history, stop);
            history.txn(record(outcome, false));
            producer = next;
            continue;
        }
        if faults.take_hijack() {
            let (outcome, hijacker) = hijack(&p, &config.bootstrap, &tid, history, stop);
            history.txn(record(outcome, false));
            producer = hijacker;
            continue;
        }

        let deliberate = rng.gen_ratio(1, config.abort_one_in.max(1));
        let (outcome, keep) = end_transaction(&p, history, delivered && !deliberate);
        history.txn(record(outcome, deliberate));
        producer = keep.then_some(p);
    }
    // A producer dropped after an unknown commit may leave its transaction open: a last
    // instance fences it, so the final read does not wait for the transaction timeout.
    if producer.is_none() {
        let _ = transactional_producer(&config.bootstrap, &tid);
    }
}

/// Every partition of `topic` read under read_committed from the beginning to its end, once
/// no transaction is open (the last stable offset equals the high watermark everywhere; a
/// transaction left open ends by its timeout within `wait`). A partition still unstable after
/// `wait` is returned for the checker (a hanging transaction) and read to its last stable
/// offset, as far as read_committed goes.
pub fn final_read(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    wait: Duration,
) -> anyhow::Result<(FinalRead, Vec<Unstable>)> {
    let (ends, unstable) = stable_ends(bootstrap, topic, partitions, Instant::now() + wait)?;
    Ok((read_to(bootstrap, topic, &ends, wait)?, unstable))
}

/// The ends [`final_read`] reads `topic` to: each partition's last stable offset once it equals
/// the high watermark everywhere, or at `deadline`, with the partitions still unstable then.
pub fn stable_ends(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    deadline: Instant,
) -> anyhow::Result<(Vec<i64>, Vec<Unstable>)> {
    let consumer: BaseConsumer = client_config(bootstrap)
        .set("group.id", "chaos-final-read")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "false")
        .create()?;
    let uncommitted: BaseConsumer = client_config(bootstrap)
        .set("group.id", "chaos-final-read")
        .set("isolation.level", "read_uncommitted")
        .create()?;
    loop {
        let (mut ends, mut unstable) = (Vec::new(), Vec::new());
        for p in 0..partitions {
            let (_, lso) = consumer.fetch_watermarks(topic, p, CALL_TIMEOUT)?;
            let (_, high) = uncommitted.fetch_watermarks(topic, p, CALL_TIMEOUT)?;
            ends.push(lso);
            if lso != high {
                unstable.push(Unstable { partition: p, last_stable_offset: lso, high_watermark: high });
            }
        }
        if unstable.is_empty() || Instant::now() >= deadline {
            return Ok((ends, unstable));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// An idempotent producer sending a few values at a time, each acknowledged on its own.
fn plain_writer(w: usize, config: &QueueConfig, history: &History, stop: &AtomicBool) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut rng = StdRng::seed_from_u64(config.seed.wrapping_add(77_777 + w as u64));
    let name = format!("p{w}");
    let create = || idempotent_producer(&config.bootstrap, 1);
    let Ok(mut producer) = create() else { return history.client_error() };
    let mut seq = 0u64;
    while !stop.load(Ordering::SeqCst) && history.committed() < config.max_committed {
        let started = history.now();
        let values: Vec<(i32, String)> = (0..rng.gen_range(1..=4))
            .map(|_| {
                seq += 1;
                (rng.gen_range(0..config.partitions), format!("{name}-{seq}"))
            })
            .collect();
        let acks = send_each(&rt, &producer, &config.topic, &values);
        let mut failed = false;
        for ((partition, value), acked) in values.into_iter().zip(acks) {
            let outcome = if acked { Outcome::Committed } else { Outcome::Unknown };
            if !acked {
                history.client_error();
                failed = true;
            }
            let ended = history.now();
            let values = vec![(partition, value)];
            history.txn(Txn {
                writer: name.clone(),
                values,
                outcome,
                deliberate_abort: false,
                started,
                ended,
            });
        }
        if failed {
            // An idempotent producer whose delivery failed may be stuck in a fatal state (an
            // out-of-order sequence after a lost write): a new one, after a pause.
            std::thread::sleep(Duration::from_millis(200));
            match create() {
                Ok(p) => producer = p,
                Err(_) => history.client_error(),
            }
        }
    }
}

/// Sends every value and waits for every delivery report; false if any failed.
pub(crate) async fn send_all(p: &FutureProducer, topic: &str, values: &[(i32, String)]) -> bool {
    send_records(p, values.iter().map(|(partition, value)| (topic, *partition, value.as_str()))).await
}

/// Sends every (topic, partition, value) and waits for every delivery report; false if any failed.
pub(crate) async fn send_records<'a>(
    p: &FutureProducer,
    records: impl IntoIterator<Item = (&'a str, i32, &'a str)>,
) -> bool {
    let mut pending = Vec::new();
    for (topic, partition, value) in records {
        let record = FutureRecord::to(topic).partition(partition).key(value).payload(value);
        match p.send_result(record) {
            Ok(delivery) => pending.push(delivery),
            Err(_) => return false,
        }
    }
    let mut ok = true;
    for delivery in pending {
        ok &= matches!(tokio::time::timeout(DELIVERY_TIMEOUT, delivery).await, Ok(Ok(Ok(_))));
    }
    ok
}

/// Commits the open transaction (`commit`), or aborts it when it is not to be committed (a
/// deliberate abort, or a send that failed): returns what the writer knows of it and whether
/// the producer may go on.
pub(crate) fn end_transaction(p: &FutureProducer, history: &History, commit_it: bool) -> (Outcome, bool) {
    if commit_it {
        return commit(p, history);
    }
    // Never asked to commit, so it can only be aborted: by this call, or by the next
    // instance's init if the call fails.
    (Outcome::Aborted, p.abort_transaction(CALL_TIMEOUT).is_ok())
}

/// commit_transaction with librdkafka's error classes: retriable → again; abortable → abort
/// (the commit did not happen); anything else → unknown, and the producer is dropped.
pub(super) fn commit(p: &FutureProducer, history: &History) -> (Outcome, bool) {
    let deadline = Instant::now() + CALL_TIMEOUT * 3;
    loop {
        match p.commit_transaction(CALL_TIMEOUT) {
            Ok(()) => return (Outcome::Committed, true),
            Err(KafkaError::Transaction(e)) if e.txn_requires_abort() => {
                history.client_error();
                let kept = p.abort_transaction(CALL_TIMEOUT).is_ok();
                return (Outcome::Aborted, kept);
            }
            Err(KafkaError::Transaction(e)) if e.is_retriable() && Instant::now() < deadline => {
                history.client_error();
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(_) => {
                history.client_error();
                return (Outcome::Unknown, false);
            }
        }
    }
}

/// `client-crash` on a transactional producer in the middle of its transaction: dropped, no
/// commit, no abort; the next instance with its id initialises at once and must fence it.
/// Returns the dropped transaction's outcome (aborted by that fencing, unknown if no instance
/// came up before the run stopped) and the next instance; records the fault's window.
pub(super) fn crash(
    p: FutureProducer,
    bootstrap: &str,
    tid: &str,
    history: &History,
    stop: &AtomicBool,
) -> (Outcome, Option<FutureProducer>) {
    let began = history.now();
    drop(p);
    let next = init_until_ready(bootstrap, tid, history, stop);
    history.fault(FaultWindow::client("client-crash", began, history.now()));
    (if next.is_some() { Outcome::Aborted } else { Outcome::Unknown }, next)
}

/// `txn-hijack`: another process takes the transactional id while `p` is in a transaction, so
/// `p`'s commit must fail; returns what the commit was told (checked like any outcome) and the
/// hijacker; records the fault's window.
pub(super) fn hijack(
    p: &FutureProducer,
    bootstrap: &str,
    tid: &str,
    history: &History,
    stop: &AtomicBool,
) -> (Outcome, Option<FutureProducer>) {
    let began = history.now();
    let hijacker = init_until_ready(bootstrap, tid, history, stop);
    let outcome = match p.commit_transaction(CALL_TIMEOUT) {
        Ok(()) => Outcome::Committed,
        Err(_) => Outcome::Aborted,
    };
    history.fault(FaultWindow::client("txn-hijack", began, history.now()));
    (outcome, hijacker)
}

/// An idempotent producer (acks=all) outside transactions, as the plain writer and the
/// copier's feeder use.
pub(super) fn idempotent_producer(bootstrap: &str, linger_ms: u32) -> Result<FutureProducer, KafkaError> {
    client_config(bootstrap)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("message.timeout.ms", "25000")
        .set("linger.ms", linger_ms.to_string())
        .create()
}

/// Sends every value at once; the iterator then waits for each delivery report in turn, as it
/// is advanced (so a caller can note when each one was acknowledged): whether it was (false
/// for a refused send, a failed delivery or one not reported in time).
pub(super) fn send_each<'a>(
    rt: &'a tokio::runtime::Runtime,
    p: &FutureProducer,
    topic: &str,
    values: &[(i32, String)],
) -> impl Iterator<Item = bool> + 'a {
    let pending: Vec<_> = values
        .iter()
        .map(|(partition, value)| {
            let record =
                FutureRecord::to(topic).partition(*partition).key(value.as_str()).payload(value.as_str());
            p.send_result(record).ok()
        })
        .collect();
    pending.into_iter().map(move |delivery| {
        delivery.is_some_and(|d| {
            rt.block_on(async { matches!(tokio::time::timeout(DELIVERY_TIMEOUT, d).await, Ok(Ok(Ok(_)))) })
        })
    })
}

/// Where readers start: offset 0 itself (nothing is deleted in a run), not the logical
/// `Offset::Beginning`. librdkafka 2.12 resolves a logical start with ListOffsets, and when a
/// reply to such a request comes back outdated (sent to a leader that was then killed, it
/// timed out after the partition had moved and was being fetched) it puts the partition back
/// into "offset query" for that logical start: a consumer that had read to offset 1,765 read
/// from 0 again, in one session (seen with `debug=fetch,topic`: "outdated offset response:
/// (re)starting offset query timer for offset BEGINNING"). A client bug, not the broker's;
/// the checker reported it as non-monotonic polls.
pub const FROM_START: Offset = Offset::Offset(0);

fn reader(r: usize, config: &QueueConfig, history: &History, stop: &AtomicBool, sessions: &AtomicU64) {
    let mut rng = StdRng::seed_from_u64(config.seed.wrapping_add(1_000_003 + r as u64));
    while !stop.load(Ordering::SeqCst) {
        let session = sessions.fetch_add(1, Ordering::SeqCst);
        let length = SESSION + Duration::from_millis(rng.gen_range(0..SESSION.as_millis() as u64));
        if read_session(config, history, stop, session, length).is_err() {
            history.client_error();
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

fn read_session(
    config: &QueueConfig,
    history: &History,
    stop: &AtomicBool,
    session: u64,
    length: Duration,
) -> Result<(), KafkaError> {
    let consumer: BaseConsumer = client_config(&config.bootstrap)
        .set("group.id", format!("chaos-reader-{session}"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "false")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    for p in 0..config.partitions {
        assignment.add_partition_offset(&config.topic, p, FROM_START)?;
    }
    consumer.assign(&assignment)?;
    let ends = Instant::now() + length;
    let mut batch = Vec::new();
    while Instant::now() < ends && !stop.load(Ordering::SeqCst) {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => batch.push(Poll {
                session,
                partition: m.partition(),
                offset: m.offset(),
                value: String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
                at: history.now(),
            }),
            Some(Err(_)) => history.client_error(),
            None => {}
        }
        if batch.len() >= 256 {
            history.polls(std::mem::take(&mut batch));
        }
    }
    history.polls(batch);
    Ok(())
}

/// Every record of `topic` under read_committed below `ends` (one end per partition).
pub fn read_to(bootstrap: &str, topic: &str, ends: &[i64], wait: Duration) -> anyhow::Result<FinalRead> {
    let consumer: BaseConsumer = client_config(bootstrap)
        .set("group.id", "chaos-reader-to")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "false")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    for p in 0..ends.len() as i32 {
        assignment.add_partition_offset(topic, p, FROM_START)?;
    }
    consumer.assign(&assignment)?;
    let mut out = FinalRead::new();
    let deadline = Instant::now() + wait;
    loop {
        if let Some(m) = consumer.poll(Duration::from_millis(100)) {
            let m = m?;
            if m.offset() < ends[m.partition() as usize] {
                let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
                out.entry(m.partition()).or_default().push((m.offset(), value));
            }
            continue;
        }
        let position = consumer.position()?;
        let done = ends.iter().enumerate().all(|(p, end)| {
            *end == 0
                || matches!(position.find_partition(topic, p as i32).map(|e| e.offset()), Some(Offset::Offset(o)) if o >= *end)
        });
        if done {
            return Ok(out);
        }
        if Instant::now() > deadline {
            anyhow::bail!("read to {ends:?} incomplete after {wait:?}");
        }
    }
}

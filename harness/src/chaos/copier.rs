//! The copier workload: a consume-process-produce application built as Kafka Streams builds an
//! exactly-once one (KIP-98, KIP-447), on stock librdkafka, and its checker.
//!
//! - A feeder (idempotent, acks=all) writes `<p>-<seq>` (after the run's value prefix, empty
//!   in chaos runs) to each partition `p` of the input topic; every acknowledged value is
//!   recorded as input.
//! - Copier instances, one per slot, share one consumer group (read_committed, no auto
//!   commit; eager assignment, or KIP-848's consumer protocol with `--group-protocol consumer`). Each owns a transactional producer (`chaos-copier-<slot>`;
//!   topics, group and ids are a [`CopierNames`], so `demo::pipeline` runs this copier too):
//!   poll a batch, begin, produce every record (through the config's transform: unchanged in
//!   chaos runs) to the same partition of the output topic (order per partition is kept), `send_offsets_to_transaction` with the consumer's group
//!   metadata, commit. An abortable error (or one transaction in `ABORT_ONE_IN`, on purpose)
//!   aborts and rewinds the consumer to the group's committed offsets, as Streams does; a
//!   fenced or fatal producer ends the instance and a new one starts in its slot.
//! - With churn (chaos runs), instances stop and start on their own every few seconds, so the
//!   group rebalances all through the run; an observer member (subscribed to a topic of its own in the same group)
//!   counts the group's generations. The client-side faults land here: `client-crash` drops
//!   an instance mid-transaction without abort (its slot's next instance fences it);
//!   `txn-hijack` initialises a second producer with the instance's transactional.id before
//!   its commit.
//! - With `--groups N` the input, the output and the slots' transactional ids are placed in
//!   different Raft groups while the consumer group stays in group 0 (`placement`), so each
//!   transaction writes its output in one group and commits its offsets in another.
//! - At the end the feeder stops, the copiers drain the input (bounded), stop, and the checker
//!   (`copier_check`) compares: output equals input exactly once (`copier lost`, `copier duplicate`, `copier
//!   phantom`), in input order per partition (`copier order`), and the group's committed
//!   offsets equal the input's end offsets (`copier offsets`).
//!
//! Every transaction a copier attempts is a [`Txn`] of the history (what it copied, and what it
//! was told), so the report's counts and plot read as the queue's.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, Producer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use serde::Serialize;

use super::copier_check::{committed_offsets, input_ends, offsets_match};
use super::group_protocol::GroupProtocol;
use super::history::{History, Outcome, Txn};
use super::queue::{
    commit, crash, hijack, idempotent_producer, init_until_ready, send_all, send_each,
    transactional_producer, ClientFaults, CALL_TIMEOUT,
};
use crate::kafka::client_config;

/// The topics, group and transactional ids one copier deployment uses: the chaos run's, or
/// the exactly-once demo's (`demo::pipeline`), which runs this same copier under its own names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopierNames {
    pub input: &'static str,
    pub output: &'static str,
    /// The observer's own topic (one partition, never written): its subscription puts it in
    /// the copiers' group without taking any of their partitions.
    pub observer: &'static str,
    pub group: &'static str,
    /// Slot `s`'s producer has `transactional.id` `<prefix>-<s>`.
    pub transactional_id_prefix: &'static str,
}

impl CopierNames {
    pub const CHAOS: CopierNames = CopierNames {
        input: "chaos-copier-in",
        output: "chaos-copier-out",
        observer: "chaos-copier-observer",
        group: "chaos-copier",
        transactional_id_prefix: "chaos-copier",
    };

    /// Slot `slot`'s `transactional.id`.
    pub fn transactional_id(&self, slot: usize) -> String {
        format!("{}-{slot}", self.transactional_id_prefix)
    }
}

/// The chaos copier copies values unchanged.
pub fn copy_unchanged(value: &str) -> String {
    value.to_owned()
}

/// One transaction in this many is aborted on purpose: the abort-and-rewind path runs in every
/// run, faults or not.
const ABORT_ONE_IN: u32 = 8;
/// A batch: at most this many records, polled for at most this long.
const BATCH_RECORDS_MAX: usize = 100;
const BATCH_WINDOW: Duration = Duration::from_millis(200);
/// An instance lives this long (ms, drawn) before it closes cleanly; its slot waits the pause
/// (ms, drawn) before the next one joins. Three slots give a rebalance every few seconds.
const LIFETIME_MS: std::ops::Range<u64> = 5_000..15_000;
const PAUSE_MS: std::ops::Range<u64> = 300..1_500;
/// An instance's lifetime without churn: longer than any run.
const NO_CHURN_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);
/// The feeder's pause between two rounds (one value per partition each).
const FEED_PAUSE: Duration = Duration::from_millis(10);
/// A deliberately broken copier (`--copier-bug`), to show the checker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopierBug {
    /// Offsets committed by the consumer (OffsetCommit) where they should go into the
    /// transaction: an aborted transaction's input is then skipped.
    CommitOffsetsOutsideTxn,
    /// No rewind after an abort: the consumer goes on after the aborted records.
    SkipRewind,
}

impl CopierBug {
    pub const NAMES: &'static [&'static str] = &["commit-offsets-outside-txn", "skip-rewind"];

    pub fn name(self) -> &'static str {
        match self {
            CopierBug::CommitOffsetsOutsideTxn => Self::NAMES[0],
            CopierBug::SkipRewind => Self::NAMES[1],
        }
    }
}

impl FromStr for CopierBug {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "commit-offsets-outside-txn" => Ok(CopierBug::CommitOffsetsOutsideTxn),
            "skip-rewind" => Ok(CopierBug::SkipRewind),
            _ => Err(format!("unknown copier bug {s:?}; one of {}", Self::NAMES.join(", "))),
        }
    }
}

#[derive(Debug, Clone)]
pub struct CopierConfig {
    pub bootstrap: String,
    pub names: CopierNames,
    pub partitions: i32,
    /// Copier slots (at least 2).
    pub instances: usize,
    pub seed: u64,
    pub bug: Option<CopierBug>,
    /// Instances close and restart every few seconds (`LIFETIME_MS`), so the group rebalances
    /// all through the run; without churn an instance lives until the run stops (or breaks).
    pub churn: bool,
    /// Starts every input value (`<prefix><p>-<seq>`): a run's records told apart from an
    /// earlier run's in the same topics.
    pub value_prefix: String,
    /// The output value of an input value (the "process" of consume-process-produce).
    pub transform: fn(&str) -> String,
    /// The consumers' group protocol: classic (eager assignment) or KIP-848's.
    pub group_protocol: GroupProtocol,
}

/// What the copiers did besides their transactions, for the report.
#[derive(Debug, Default, Clone, Serialize)]
pub struct CopierCounts {
    pub input_acknowledged: usize,
    pub input_records: usize,
    pub output_records: usize,
    pub instance_starts: usize,
    /// Instances that closed at the end of their lifetime (the planned churn).
    pub instance_stops: usize,
    pub crashes: usize,
    pub hijacks: usize,
    /// Assignments the copier instances received (each member gets one per generation).
    pub assignments: usize,
    /// The group's generations after the observer's first: rebalances while it was a member.
    pub rebalances: usize,
    /// How long the copiers took to commit the whole input once the feeder stopped; None if
    /// they had not within the drain bound.
    pub drained_ms: Option<u128>,
}

#[derive(Default)]
struct Stats {
    starts: AtomicUsize,
    stops: AtomicUsize,
    crashes: AtomicUsize,
    hijacks: AtomicUsize,
    assignments: AtomicUsize,
    generations: AtomicUsize,
}

struct Shared {
    config: CopierConfig,
    history: History,
    faults: Arc<ClientFaults>,
    stop: AtomicBool,
    stats: Stats,
}

/// The running workload.
pub struct Copier {
    shared: Arc<Shared>,
    feeder_stop: Arc<AtomicBool>,
    feeder: Option<JoinHandle<()>>,
    threads: Vec<JoinHandle<()>>,
    pub faults: Arc<ClientFaults>,
}

impl Copier {
    /// Starts the feeder, the observer and the copier slots; the topics exist already.
    pub fn start(config: CopierConfig, history: History) -> Copier {
        let faults = Arc::new(ClientFaults::default());
        let shared = Arc::new(Shared {
            config,
            history,
            faults: faults.clone(),
            stop: AtomicBool::new(false),
            stats: Stats::default(),
        });
        let feeder_stop = Arc::new(AtomicBool::new(false));
        let feeder = {
            let (shared, stop) = (shared.clone(), feeder_stop.clone());
            std::thread::spawn(move || feed(&shared.config, &shared.history, &stop))
        };
        let mut threads = Vec::new();
        {
            let shared = shared.clone();
            threads.push(std::thread::spawn(move || observe(&shared)));
        }
        for slot in 0..shared.config.instances.max(2) {
            let shared = shared.clone();
            threads.push(std::thread::spawn(move || run_slot(slot, &shared)));
        }
        Copier { shared, feeder_stop, feeder: Some(feeder), threads, faults }
    }

    /// Stops the feeder: the input is final from here on.
    pub fn stop_feeder(&mut self) {
        self.feeder_stop.store(true, Ordering::SeqCst);
        if let Some(f) = self.feeder.take() {
            let _ = f.join();
        }
    }

    /// Lets the copiers commit the whole input (at most `wait`), then stops them.
    pub fn drain_and_stop(mut self, wait: Duration) -> CopierCounts {
        self.stop_feeder();
        let config = &self.shared.config;
        let (bootstrap, names, partitions) = (&config.bootstrap, &config.names, config.partitions);
        let started = Instant::now();
        let drained_ms = loop {
            let done = matches!(
                (input_ends(bootstrap, names, partitions), committed_offsets(bootstrap, names, partitions)),
                (Ok(ends), Ok(committed)) if offsets_match(&committed, &ends)
            );
            if done {
                break Some(started.elapsed().as_millis());
            }
            if started.elapsed() > wait {
                break None;
            }
            std::thread::sleep(Duration::from_millis(500));
        };
        self.shared.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            let _ = t.join();
        }
        let s = &self.shared.stats;
        CopierCounts {
            instance_starts: s.starts.load(Ordering::SeqCst),
            instance_stops: s.stops.load(Ordering::SeqCst),
            crashes: s.crashes.load(Ordering::SeqCst),
            hijacks: s.hijacks.load(Ordering::SeqCst),
            assignments: s.assignments.load(Ordering::SeqCst),
            rebalances: s.generations.load(Ordering::SeqCst).saturating_sub(1),
            drained_ms,
            ..Default::default()
        }
    }
}

/// Counts the rebalance events a consumer serves (inside `poll`), and the assignments.
struct Tracking {
    shared: Arc<Shared>,
    observer: bool,
    events: AtomicU64,
}

impl ClientContext for Tracking {}

impl ConsumerContext for Tracking {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        self.events.fetch_add(1, Ordering::SeqCst);
        if matches!(rebalance, Rebalance::Assign(_)) {
            let stats = &self.shared.stats;
            let counter = if self.observer { &stats.generations } else { &stats.assignments };
            counter.fetch_add(1, Ordering::SeqCst);
        }
    }
}

type GroupConsumer = BaseConsumer<Tracking>;

fn group_consumer(shared: &Arc<Shared>, topic: &str, observer: bool) -> Result<GroupConsumer, KafkaError> {
    let context = Tracking { shared: shared.clone(), observer, events: AtomicU64::new(0) };
    let mut config = client_config(&shared.config.bootstrap);
    config
        .set("group.id", shared.config.names.group)
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "false");
    shared.config.group_protocol.configure(&mut config);
    let consumer: GroupConsumer = config.create_with_context(context)?;
    consumer.subscribe(&[topic])?;
    Ok(consumer)
}

/// An idempotent producer writing one value to every partition per round, each value recorded
/// once acknowledged. A failed delivery leaves its value unknown (it may be in the input).
fn feed(config: &CopierConfig, history: &History, stop: &AtomicBool) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let create = || idempotent_producer(&config.bootstrap, 5);
    let Ok(mut producer) = create() else { return history.client_error() };
    let mut seq = vec![0u64; config.partitions.max(0) as usize];
    while !stop.load(Ordering::SeqCst) {
        let values: Vec<(i32, String)> = seq
            .iter_mut()
            .enumerate()
            .map(|(p, next)| {
                *next += 1;
                (p as i32, format!("{}{p}-{next}", config.value_prefix))
            })
            .collect();
        let mut failed = false;
        for ((p, value), acked) in values.iter().zip(send_each(&rt, &producer, config.names.input, &values)) {
            if acked {
                history.input(*p, value.clone());
            } else {
                failed = true;
            }
        }
        if failed {
            // As the queue's plain writer: a failed idempotent producer may be stuck in a fatal
            // state, so a new one, after a pause.
            history.client_error();
            std::thread::sleep(Duration::from_millis(200));
            match create() {
                Ok(p) => producer = p,
                Err(_) => history.client_error(),
            }
        }
        std::thread::sleep(FEED_PAUSE);
    }
}

/// A member of the copiers' group that owns no input partition and counts generations.
fn observe(shared: &Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        let Ok(consumer) = group_consumer(shared, shared.config.names.observer, true) else {
            shared.history.client_error();
            std::thread::sleep(Duration::from_millis(300));
            continue;
        };
        while !shared.stop.load(Ordering::SeqCst) {
            if let Some(Err(_)) = consumer.poll(Duration::from_millis(100)) {
                shared.history.client_error();
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Closed cleanly at the end of its lifetime, or because the run stops.
    Closed,
    /// Fenced, failed fatally or after an unknown commit: dropped, a new instance follows.
    Broken,
    /// Crashed on request: the returned producer is the slot's next instance, which fenced it.
    Crashed,
}

/// One slot: instance after instance until the run stops.
fn run_slot(slot: usize, shared: &Arc<Shared>) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut rng = StdRng::seed_from_u64(shared.config.seed.wrapping_add(0xc0 + slot as u64 * 6_151));
    let tid = shared.config.names.transactional_id(slot);
    let (history, stop) = (&shared.history, &shared.stop);
    let mut producer: Option<FutureProducer> = None;
    let mut last = End::Closed;
    while !stop.load(Ordering::SeqCst) {
        let Some(p) =
            producer.take().or_else(|| init_until_ready(&shared.config.bootstrap, &tid, history, stop))
        else {
            break;
        };
        let consumer = match group_consumer(shared, shared.config.names.input, false) {
            Ok(c) => c,
            Err(_) => {
                history.client_error();
                producer = Some(p);
                std::thread::sleep(Duration::from_millis(300));
                continue;
            }
        };
        shared.stats.starts.fetch_add(1, Ordering::SeqCst);
        let instance = Instance { slot, tid: &tid, shared, rt: &rt, consumer, producer: p };
        let lifetime = if shared.config.churn {
            Duration::from_millis(rng.gen_range(LIFETIME_MS))
        } else {
            NO_CHURN_LIFETIME
        };
        let (end, next) = instance.run(lifetime, &mut rng);
        last = end;
        producer = next;
        if end == End::Closed && !stop.load(Ordering::SeqCst) {
            shared.stats.stops.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(rng.gen_range(PAUSE_MS)));
        }
    }
    // A producer dropped after an unknown commit may leave its transaction open: a last
    // instance fences it, so the final read does not wait for the transaction timeout.
    if last == End::Broken {
        let _ = transactional_producer(&shared.config.bootstrap, &tid);
    }
}

/// One polled input record.
struct Record {
    partition: i32,
    offset: i64,
    value: String,
}

/// What one transaction left the instance to do.
enum Step {
    Next,
    Broken,
    /// Crash requested mid-transaction: its values and start, for the history.
    Crash(Vec<(i32, String)>, Duration),
}

struct Instance<'a> {
    slot: usize,
    tid: &'a str,
    shared: &'a Arc<Shared>,
    rt: &'a tokio::runtime::Runtime,
    consumer: GroupConsumer,
    producer: FutureProducer,
}

impl Instance<'_> {
    /// Transactions until the lifetime ends, the run stops, or the producer breaks. Returns
    /// how it ended, and after a crash the slot's next (fencing) producer.
    fn run(self, lifetime: Duration, rng: &mut StdRng) -> (End, Option<FutureProducer>) {
        let ends = Instant::now() + lifetime;
        while !self.shared.stop.load(Ordering::SeqCst) && Instant::now() < ends {
            let Some(batch) = self.poll_batch() else { return (End::Broken, None) };
            if batch.is_empty() {
                continue;
            }
            match self.transaction(&batch, rng) {
                Step::Next => {}
                Step::Broken => return (End::Broken, None),
                Step::Crash(values, started) => return self.crash(values, started),
            }
        }
        (End::Closed, None)
    }

    /// Records polled since the last rebalance event: a batch begun under an earlier
    /// assignment is dropped (eager assignment restarts every partition from its committed
    /// offset, see `group_protocol`; with KIP-848's incremental assignment the partitions
    /// kept are rewound to it). A rebalance is served inside `poll`, which then returns no
    /// message, so the record a poll returns is always of the current assignment. None: the
    /// rewind failed and the instance must end.
    fn poll_batch(&self) -> Option<Vec<Record>> {
        let mut batch = Vec::new();
        let window = Instant::now() + BATCH_WINDOW;
        while batch.len() < BATCH_RECORDS_MAX && Instant::now() < window {
            let before = self.consumer.context().events.load(Ordering::SeqCst);
            let polled = self.consumer.poll(Duration::from_millis(50));
            if self.consumer.context().events.load(Ordering::SeqCst) != before {
                let incremental = self.shared.config.group_protocol == GroupProtocol::Consumer;
                if incremental && !batch.is_empty() && matches!(self.rewind(), Step::Broken) {
                    return None;
                }
                batch.clear();
            }
            match polled {
                Some(Ok(m)) => batch.push(Record {
                    partition: m.partition(),
                    offset: m.offset(),
                    value: String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
                }),
                Some(Err(_)) => self.shared.history.client_error(),
                None if !batch.is_empty() => break,
                None => {}
            }
        }
        Some(batch)
    }

    /// begin, produce, offsets in the transaction, commit — or abort and rewind.
    fn transaction(&self, batch: &[Record], rng: &mut StdRng) -> Step {
        let (history, faults) = (&self.shared.history, &self.shared.faults);
        if self.producer.begin_transaction().is_err() {
            history.client_error();
            return Step::Broken;
        }
        let started = history.now();
        let transform = self.shared.config.transform;
        let values: Vec<(i32, String)> = batch.iter().map(|r| (r.partition, transform(&r.value))).collect();
        let record = |outcome: Outcome, deliberate_abort: bool| Txn {
            writer: format!("c{}", self.slot),
            values: values.clone(),
            outcome,
            deliberate_abort,
            started,
            ended: history.now(),
        };
        let delivered = self.rt.block_on(send_all(&self.producer, self.shared.config.names.output, &values));
        let offsets = if delivered { self.send_offsets(batch) } else { Err(true) };
        if faults.take_crash() {
            return Step::Crash(values, started);
        }
        if faults.take_hijack() {
            self.hijack(|outcome| history.txn(record(outcome, false)));
            return Step::Broken;
        }
        let deliberate = rng.gen_ratio(1, ABORT_ONE_IN);
        match offsets {
            Err(false) => {
                // Fenced or fatal before the commit was asked for: it can only be aborted.
                history.txn(record(Outcome::Aborted, false));
                Step::Broken
            }
            Err(true) => self.abort(|| history.txn(record(Outcome::Aborted, false))),
            Ok(()) if deliberate => self.abort(|| history.txn(record(Outcome::Aborted, true))),
            Ok(()) => {
                let (outcome, keep) = commit(&self.producer, history);
                history.txn(record(outcome, false));
                match (outcome, keep) {
                    (_, false) => Step::Broken,
                    (Outcome::Aborted, true) => self.rewind(),
                    _ => Step::Next,
                }
            }
        }
    }

    /// The batch's next offsets into the transaction (or, with the bug, committed by the
    /// consumer). Err(true): abortable; Err(false): the producer is fenced or failed fatally.
    fn send_offsets(&self, batch: &[Record]) -> Result<(), bool> {
        let mut next: BTreeMap<i32, i64> = BTreeMap::new();
        for r in batch {
            let end = next.entry(r.partition).or_insert(0);
            *end = (*end).max(r.offset + 1);
        }
        let mut offsets = TopicPartitionList::new();
        for (p, o) in &next {
            offsets
                .add_partition_offset(self.shared.config.names.input, *p, Offset::Offset(*o))
                .map_err(|_| true)?;
        }
        let history = &self.shared.history;
        if self.shared.config.bug == Some(CopierBug::CommitOffsetsOutsideTxn) {
            return self.consumer.commit(&offsets, CommitMode::Sync).map_err(|_| {
                history.client_error();
                true
            });
        }
        let Some(group) = self.consumer.group_metadata() else {
            history.client_error();
            return Err(true);
        };
        match self.producer.send_offsets_to_transaction(&offsets, &group, CALL_TIMEOUT) {
            Ok(()) => Ok(()),
            Err(KafkaError::Transaction(e)) => {
                history.client_error();
                Err(e.txn_requires_abort() || e.is_retriable())
            }
            Err(_) => {
                history.client_error();
                Err(false)
            }
        }
    }

    /// Aborts (recording it), then rewinds; a failed abort ends the instance.
    fn abort(&self, record: impl FnOnce()) -> Step {
        let kept = self.producer.abort_transaction(CALL_TIMEOUT).is_ok();
        record();
        if kept {
            self.rewind()
        } else {
            Step::Broken
        }
    }

    /// Every assigned partition back to the group's committed offset (the beginning where
    /// nothing is committed), so the aborted records are read again — as Streams does.
    fn rewind(&self) -> Step {
        if self.shared.config.bug == Some(CopierBug::SkipRewind) {
            return Step::Next;
        }
        let rewound = (|| -> Result<(), KafkaError> {
            let assignment = self.consumer.assignment()?;
            if assignment.count() == 0 {
                return Ok(());
            }
            let committed = self.consumer.committed_offsets(assignment, CALL_TIMEOUT)?;
            let mut seek = TopicPartitionList::new();
            for e in committed.elements() {
                let offset = match e.offset() {
                    Offset::Offset(o) => Offset::Offset(o),
                    // Offset 0 itself, not the logical beginning (see `queue::FROM_START`).
                    _ => Offset::Offset(0),
                };
                seek.add_partition_offset(self.shared.config.names.input, e.partition(), offset)?;
            }
            for e in self.consumer.seek_partitions(seek, CALL_TIMEOUT)?.elements() {
                e.error()?;
            }
            Ok(())
        })();
        match rewound {
            Ok(()) => Step::Next,
            Err(_) => {
                // A new instance starts from the committed offsets: the rewind by other means.
                self.shared.history.client_error();
                Step::Broken
            }
        }
    }

    /// `client-crash`: the instance is dropped mid-transaction, no commit, no abort; the
    /// slot's next producer initialises at once and must fence it (`queue::crash`).
    fn crash(self, values: Vec<(i32, String)>, started: Duration) -> (End, Option<FutureProducer>) {
        let shared = self.shared;
        let history = &shared.history;
        shared.stats.crashes.fetch_add(1, Ordering::SeqCst);
        drop(self.consumer);
        let (outcome, next) = crash(self.producer, &shared.config.bootstrap, self.tid, history, &shared.stop);
        history.txn(Txn {
            writer: format!("c{}", self.slot),
            values,
            outcome,
            deliberate_abort: false,
            started,
            ended: history.now(),
        });
        (End::Crashed, next)
    }

    /// `txn-hijack`: a second producer takes the transactional.id; this instance's commit must
    /// then fail (`queue::hijack`). What it is told is recorded; the instance ends either way.
    fn hijack(&self, record: impl FnOnce(Outcome)) {
        let shared = self.shared;
        shared.stats.hijacks.fetch_add(1, Ordering::SeqCst);
        let (outcome, _hijacker) =
            hijack(&self.producer, &shared.config.bootstrap, self.tid, &shared.history, &shared.stop);
        record(outcome);
    }
}

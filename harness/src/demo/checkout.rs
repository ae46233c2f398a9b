//! The checkout demo: each order is written to `orders` together with its stock decrement in
//! `inventory`, both or neither, by one of two writers (or both at once):
//!
//! - `atomic-produce`: both records in ONE Produce request (`atomic::send_atomic`, the raw
//!   client: a stock client groups records by broker, not by the caller's intent). onelog
//!   makes one Raft entry of one request, so the pair is written all or nothing (DESIGN §3).
//!   A failed request (a follower's refusal, a leader killed with the answer unsent) is
//!   counted unknown and the writer goes on with the next order on the next node: that order
//!   is never sent twice, so it cannot be there twice (no producer id: the raw request is not
//!   idempotent).
//! - `transactional`: a librdkafka transactional producer; begin, send both, commit. One order
//!   in `abort_one_in` is aborted on purpose on its first attempt, and an attempt that ends
//!   aborted (on purpose, or after an abortable error) is tried again as the order's next
//!   attempt; a fenced or fatal producer is replaced (its successor's `init_transactions`
//!   aborts what it left open). An attempt whose commit answer is unknown is not retried.
//!
//! The writers go at a steady pace (`per_second`), so that a run lasts long enough for a
//! leader to be killed under it; then `checkout_check` reads both topics back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rdkafka::producer::{FutureProducer, Producer};

use super::checkout_check::{check_checkout, CheckoutSeen, Order};
use super::{ensure_topics, pace};
use crate::atomic::{send_atomic, Slice, ATOMIC_PARTITION};
use crate::chaos::checker::{check_stable, txn_counts, QueueCounts, Violations};
use crate::chaos::history::{History, Outcome, Snapshot, Txn};
use crate::chaos::queue::{self, end_transaction, init_until_ready, send_all, transactional_producer};
use crate::RawClient;

pub const ORDERS: &str = "orders";
pub const INVENTORY: &str = "inventory";
/// The transactional writer's id: the same in every run, so a run fences what a killed
/// earlier run left open.
const TRANSACTIONAL_ID: &str = "demo-checkout";
/// Attempts of one order after which the transactional writer gives up on it (each attempt
/// ended aborted, so nothing of the order is there).
const ATTEMPTS_MAX: u32 = 20;
/// The atomic writer's pause after a failed request, before it tries the next node.
const REFUSED_PAUSE: Duration = Duration::from_millis(250);
/// How long the final read may wait for open transactions to end (the writer fences its
/// own at the end, so this is a bound, not a wait).
const FINAL_READ_WAIT: Duration = Duration::from_secs(60);
/// How much longer than their paced length the writers may take before the run stops them
/// (a cluster that never comes back must not hang the demo).
const OVERRUN: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    AtomicProduce,
    Transactional,
    /// Both writers at once, each placing `orders` orders.
    Both,
}

/// One of the two writers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    AtomicProduce,
    Transactional,
}

impl Writer {
    pub fn name(self) -> &'static str {
        match self {
            Writer::AtomicProduce => "atomic-produce",
            Writer::Transactional => "transactional",
        }
    }

    /// The letter in its order ids.
    fn letter(self) -> char {
        match self {
            Writer::AtomicProduce => 'a',
            Writer::Transactional => 't',
        }
    }
}

impl Mode {
    pub fn writers(self) -> &'static [Writer] {
        match self {
            Mode::AtomicProduce => &[Writer::AtomicProduce],
            Mode::Transactional => &[Writer::Transactional],
            Mode::Both => &[Writer::AtomicProduce, Writer::Transactional],
        }
    }
}

#[derive(Debug, Clone)]
pub struct CheckoutConfig {
    pub bootstrap: String,
    pub mode: Mode,
    /// Orders each writer places.
    pub orders: u64,
    /// Orders each writer places per second at most.
    pub per_second: f64,
    /// The transactional writer aborts one order in this many on purpose (0: none).
    pub abort_one_in: u64,
    /// Partitions of both topics (the transactional writer spreads orders over them; an atomic
    /// write goes to partition 0, as the atomic API names topics, not partitions).
    pub partitions: i32,
    pub run_id: String,
}

/// What one writer did.
#[derive(Debug, Clone)]
pub struct WriterRun {
    pub writer: Writer,
    pub placed: u64,
    /// Orders given up after `ATTEMPTS_MAX` aborted attempts.
    pub given_up: u64,
    pub counts: QueueCounts,
    pub finished: Instant,
}

impl WriterRun {
    /// A writer that has just placed its last order (its counts come from the history).
    fn new(writer: Writer, placed: u64, given_up: u64) -> WriterRun {
        WriterRun { writer, placed, given_up, counts: QueueCounts::default(), finished: Instant::now() }
    }
}

#[derive(Debug, Clone)]
pub struct CheckoutReport {
    pub config: CheckoutConfig,
    pub writers: Vec<WriterRun>,
    pub seen: CheckoutSeen,
    pub violations: Violations,
    pub elapsed: Duration,
}

impl CheckoutReport {
    pub fn passed(&self) -> bool {
        self.violations.total() == 0
    }

    /// When the last writer placed its last order.
    pub fn writing_ended(&self) -> Option<Instant> {
        self.writers.iter().map(|w| w.finished).max()
    }

    /// The one-line summary with the figures.
    pub fn summary(&self) -> String {
        let writers: Vec<String> = self
            .writers
            .iter()
            .map(|w| {
                let c = &w.counts;
                match w.writer {
                    Writer::AtomicProduce => format!(
                        "atomic-produce {} orders: {} acknowledged, {} unknown",
                        w.placed, c.committed, c.unknown
                    ),
                    Writer::Transactional => format!(
                        "transactional {} orders in {} transactions: {} committed, {} aborted ({} on purpose), {} unknown{}",
                        w.placed,
                        c.txns,
                        c.committed,
                        c.aborted,
                        c.aborted_on_purpose,
                        c.unknown,
                        if w.given_up > 0 { format!(", {} given up after {ATTEMPTS_MAX} aborts", w.given_up) } else { String::new() }
                    ),
                }
            })
            .collect();
        let s = &self.seen;
        format!(
            "checkout {}: run {}; {}; read_committed: {} orders, {} inventory records, {} matched pairs ({} of unknown outcome); {} violations; {:.1}s",
            if self.passed() { "PASS" } else { "FAIL" },
            self.config.run_id,
            writers.join("; "),
            s.orders,
            s.inventory,
            s.matched,
            s.unknown_visible,
            self.violations.total(),
            self.elapsed.as_secs_f64()
        )
    }
}

/// Creates the topics, runs the writers, reads both topics back and checks them.
pub fn run(config: &CheckoutConfig) -> Result<CheckoutReport> {
    let started = Instant::now();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(ensure_topics(
        &config.bootstrap,
        &[(ORDERS, config.partitions), (INVENTORY, config.partitions)],
    ))?;
    let history = History::new();
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = config
        .mode
        .writers()
        .iter()
        .map(|&writer| {
            let (config, history, stop) = (config.clone(), history.clone(), stop.clone());
            std::thread::spawn(move || match writer {
                Writer::AtomicProduce => atomic_writer(&config, &history, &stop),
                Writer::Transactional => transactional_writer(&config, &history, &stop),
            })
        })
        .collect();
    let paced = Duration::from_secs_f64(config.orders as f64 / config.per_second.max(0.001));
    let deadline = started + paced + OVERRUN;
    while threads.iter().any(|t| !t.is_finished()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::SeqCst);
    let mut writers = Vec::new();
    for t in threads {
        writers.push(t.join().map_err(|_| anyhow::anyhow!("a writer panicked"))?);
    }
    check(config, &history.snapshot(), writers, started)
}

fn check(
    config: &CheckoutConfig,
    snapshot: &Snapshot,
    mut writers: Vec<WriterRun>,
    started: Instant,
) -> Result<CheckoutReport> {
    let (orders, unstable_orders) =
        queue::final_read(&config.bootstrap, ORDERS, config.partitions, FINAL_READ_WAIT)
            .context("reading orders")?;
    let (inventory, unstable_inventory) =
        queue::final_read(&config.bootstrap, INVENTORY, config.partitions, FINAL_READ_WAIT)
            .context("reading inventory")?;
    let (mut violations, seen) = check_checkout(&config.run_id, &snapshot.txns, &orders, &inventory);
    violations.merge(check_stable(&unstable_orders, FINAL_READ_WAIT));
    violations.merge(check_stable(&unstable_inventory, FINAL_READ_WAIT));
    for w in &mut writers {
        let txns: Vec<Txn> = snapshot.txns.iter().filter(|t| t.writer == w.writer.name()).cloned().collect();
        w.counts = txn_counts(&Snapshot { txns, ..Default::default() });
        if w.placed < config.orders {
            let wanted = config.orders;
            violations
                .add("incomplete", format!("{}: {} of {wanted} orders placed", w.writer.name(), w.placed));
        }
    }
    Ok(CheckoutReport { config: config.clone(), writers, seen, violations, elapsed: started.elapsed() })
}

/// Records one attempt with what the writer was told.
fn record(
    history: &History,
    writer: Writer,
    order: &Order,
    partition: i32,
    outcome: Outcome,
    started: Duration,
    deliberate: bool,
) {
    history.txn(Txn {
        writer: writer.name().into(),
        values: vec![(partition, order.order_value()), (partition, order.inventory_value())],
        outcome,
        deliberate_abort: deliberate,
        started,
        ended: history.now(),
    });
}

/// Places the orders by atomic multi-topic produce.
fn atomic_writer(config: &CheckoutConfig, history: &History, stop: &AtomicBool) -> WriterRun {
    let writer = Writer::AtomicProduce;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let nodes: Vec<String> = config.bootstrap.split(',').map(|s| s.trim().to_string()).collect();
    let mut client: Option<RawClient> = None;
    let (mut node, mut placed) = (0, 0);
    let start = Instant::now();
    while placed < config.orders && !stop.load(Ordering::SeqCst) {
        if client.is_none() {
            node = (node + 1) % nodes.len();
            client = rt.block_on(connect(&nodes[node]));
            if client.is_none() {
                history.client_error();
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        }
        pace(start, placed, config.per_second);
        let order = Order::new(&config.run_id, writer.letter(), placed, 0);
        let (order_value, inventory_value) = (order.order_value(), order.inventory_value());
        let slices = [
            Slice { topic: ORDERS, key: order.id.as_bytes(), value: order_value.as_bytes() },
            Slice { topic: INVENTORY, key: order.id.as_bytes(), value: inventory_value.as_bytes() },
        ];
        let started = history.now();
        let sent = rt.block_on(send_atomic(client.as_mut().expect("connected"), &slices));
        let outcome = if sent.is_ok() { Outcome::Committed } else { Outcome::Unknown };
        if sent.is_err() {
            // Another node may lead now; this order is not sent again (see the module header).
            // A pause first: during an election every node refuses, and each refusal would
            // cost an order of unknown outcome.
            history.client_error();
            client = None;
            std::thread::sleep(REFUSED_PAUSE);
        }
        record(history, writer, &order, ATOMIC_PARTITION, outcome, started, false);
        placed += 1;
    }
    WriterRun::new(writer, placed, 0)
}

/// A connection to `host:port`, resolved now (in Docker a restarted broker may come back
/// under a new address).
async fn connect(node: &str) -> Option<RawClient> {
    let addr = tokio::net::lookup_host(node).await.ok()?.next()?;
    RawClient::connect_negotiated(addr).await.ok()
}

/// Places the orders in transactions.
fn transactional_writer(config: &CheckoutConfig, history: &History, stop: &AtomicBool) -> WriterRun {
    let writer = Writer::Transactional;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut producer: Option<FutureProducer> = None;
    let (mut placed, mut given_up) = (0, 0);
    let start = Instant::now();
    while placed < config.orders && !stop.load(Ordering::SeqCst) {
        pace(start, placed, config.per_second);
        let on_purpose = config.abort_one_in > 0 && (placed + 1) % config.abort_one_in == 0;
        let mut attempt = 0;
        let done = loop {
            let Some(p) = producer
                .take()
                .or_else(|| init_until_ready(&config.bootstrap, TRANSACTIONAL_ID, history, stop))
            else {
                break false; // stopped
            };
            let order = Order::new(&config.run_id, writer.letter(), placed, attempt);
            let partition = (placed % config.partitions.max(1) as u64) as i32;
            let deliberate = on_purpose && attempt == 0;
            let started = history.now();
            let (outcome, keep) = place(&rt, &p, history, &order, partition, deliberate);
            record(history, writer, &order, partition, outcome, started, deliberate);
            producer = keep.then_some(p);
            attempt += 1;
            if outcome != Outcome::Aborted {
                break true;
            }
            if attempt == ATTEMPTS_MAX {
                given_up += 1;
                break true;
            }
        };
        if !done {
            break;
        }
        placed += 1;
    }
    // A producer dropped after an unknown commit may leave its transaction open: a new
    // instance fences it, so the final read does not wait for the transaction timeout.
    if producer.is_none() {
        let _ = transactional_producer(&config.bootstrap, TRANSACTIONAL_ID);
    }
    WriterRun::new(writer, placed, given_up)
}

/// One attempt: begin, both records (each delivery awaited), then commit, or abort when it
/// is deliberate or a send failed. Returns what the writer knows and whether `p` goes on.
fn place(
    rt: &tokio::runtime::Runtime,
    p: &FutureProducer,
    history: &History,
    order: &Order,
    partition: i32,
    deliberate: bool,
) -> (Outcome, bool) {
    if p.begin_transaction().is_err() {
        history.client_error();
        return (Outcome::Aborted, false); // nothing sent; the next instance fences this one
    }
    let delivered = rt.block_on(async {
        send_all(p, ORDERS, &[(partition, order.order_value())]).await
            && send_all(p, INVENTORY, &[(partition, order.inventory_value())]).await
    });
    if !delivered {
        history.client_error();
    }
    end_transaction(p, history, delivered && !deliberate)
}

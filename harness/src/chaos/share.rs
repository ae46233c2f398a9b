//! The share workload (issue 29): KIP-932 share groups under faults. Producers
//! (`share_writers`: idempotent, and transactional with aborts on purpose) write unique values;
//! `--readers` share consumers (`crate::share_consumer`, default 3) in one read_committed group
//! consume them with a mix of acknowledgements, and every delivery and acknowledgement goes to
//! the [`ShareHistory`] for the checker (`share_check`).
//!
//! - The group: `share.auto.offset.reset=earliest`, `share.isolation.level=read_committed`,
//!   `share.delivery.count.limit` [`DELIVERY_COUNT_LIMIT`] and `share.record.lock.duration.ms`
//!   [`LOCK_MS`] (Kafka's minimum), set with IncrementalAlterConfigs before anyone joins.
//! - Acknowledgements: most records are accepted, some released (redelivered with a higher
//!   count), a few rejected, a few never acknowledged (their lock expires); one value in
//!   [`POISON_ONE_IN`] is released at every delivery, so it is archived at the limit. They go
//!   out with the next ShareFetch, or one round in five by ShareAcknowledge.
//! - Consumer instances live 10–30 s, then close (their session and membership) and a new
//!   member takes the slot; `client-crash` drops one instead (no close, no leave).
//! - At the end the writers stop, the cluster is made whole, and the consumers drain the topic
//!   until every acknowledged value is settled and the group has no lag (or, since a trailing
//!   control batch is never acquired, no delivery came for a lock's length), or until the group
//!   has no lag and no delivery came for a lock's length, within the drain's wait.

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::history::{FaultWindow, History, Outcome};
use super::queue::ClientFaults;
use super::share_check::ShareRules;
use super::share_history::{ShareDelivery, ShareHistory};
use super::share_writers::{plain_writer, txn_writer, WriterConfig};
use crate::share_consumer::{self, AckType, Fetched, ShareConsumer, ShareConsumerConfig};

pub const GROUP: &str = "chaos-share";
/// `share.delivery.count.limit`: below Kafka's default 5, so poison values are archived soon.
pub const DELIVERY_COUNT_LIMIT: i16 = 4;
/// `share.record.lock.duration.ms`: Kafka's minimum, so an unacknowledged record comes back soon.
pub const LOCK_MS: i64 = 15_000;
/// Kafka's default (and minimum) `share.session.timeout.ms`, which the run keeps.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(45);
/// One value in this many is released at every delivery.
pub const POISON_ONE_IN: u64 = 37;
/// A consumer instance's life (ms, drawn), and its slot's pause before the next one.
const LIFETIME_MS: std::ops::Range<u64> = 10_000..30_000;
const PAUSE_MS: std::ops::Range<u64> = 200..1_000;
/// A writer's pause between two rounds.
const WRITE_PAUSE: Duration = Duration::from_millis(20);
/// Acknowledgements go by ShareAcknowledge one round in this many (else with the next fetch).
const ACKNOWLEDGE_ONE_IN: u32 = 5;

/// What the checker judges the run by.
pub fn rules() -> ShareRules {
    ShareRules {
        delivery_count_limit: DELIVERY_COUNT_LIMIT,
        session_timeout: SESSION_TIMEOUT,
        read_committed: true,
    }
}

/// A deliberately broken consumer (`--share-bug`), to show the checker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareBug {
    /// The consumer hands out every record of the batches a ShareFetch returns, not only the
    /// acquired offsets (`ShareConsumerConfig::keep_unacquired`).
    KeepUnacquired,
}

impl ShareBug {
    pub const NAMES: &'static [&'static str] = &["keep-unacquired"];

    pub fn name(self) -> &'static str {
        match self {
            ShareBug::KeepUnacquired => Self::NAMES[0],
        }
    }
}

impl FromStr for ShareBug {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "keep-unacquired" => Ok(ShareBug::KeepUnacquired),
            _ => Err(format!("unknown share bug {s:?}; one of {}", Self::NAMES.join(", "))),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ShareConfig {
    pub bootstrap: String,
    pub topic: String,
    pub partitions: i32,
    /// Transactional writers.
    pub writers: usize,
    pub plain_writers: usize,
    pub consumers: usize,
    pub seed: u64,
    pub bug: Option<ShareBug>,
}

struct Shared {
    config: ShareConfig,
    history: History,
    share: ShareHistory,
    stop_consumers: AtomicBool,
    faults: Arc<ClientFaults>,
}

/// The running workload.
pub struct ShareWorkload {
    shared: Arc<Shared>,
    stop_writers: Arc<AtomicBool>,
    writers: Vec<JoinHandle<()>>,
    consumers: Vec<JoinHandle<()>>,
    pub faults: Arc<ClientFaults>,
}

/// How the drain went.
#[derive(Debug, Clone, Copy, Default)]
pub struct Drain {
    /// From the drain's start to every acknowledged value settled, if it came.
    pub drained_ms: Option<u128>,
    pub final_lag: Option<i64>,
}

impl ShareWorkload {
    /// Configures the group, then starts the writers and the consumers.
    pub fn start(config: ShareConfig, history: History, share: ShareHistory) -> Result<ShareWorkload> {
        configure_group(&config)?;
        let faults = Arc::new(ClientFaults::default());
        let stop_writers = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            config: config.clone(),
            history,
            share,
            stop_consumers: AtomicBool::new(false),
            faults: faults.clone(),
        });
        let writers = start_writers(&shared, &stop_writers);
        let consumers = (0..config.consumers)
            .map(|slot| {
                let shared = shared.clone();
                std::thread::spawn(move || consumer_slot(slot, &shared))
            })
            .collect();
        Ok(ShareWorkload { shared, stop_writers, writers, consumers, faults })
    }

    pub fn stop_writers(&mut self) {
        self.stop_writers.store(true, Ordering::SeqCst);
        for t in self.writers.drain(..) {
            let _ = t.join();
        }
    }

    /// Lets the consumers settle every acknowledged value (within `wait`), then stops them.
    pub fn drain_and_stop(mut self, wait: Duration) -> Drain {
        self.stop_writers();
        let started = Instant::now();
        let history = &self.shared.history;
        let committed: Vec<String> = history
            .snapshot()
            .txns
            .into_iter()
            .filter(|t| t.outcome == Outcome::Committed)
            .flat_map(|t| t.values.into_iter().map(|(_, v)| v))
            .collect();
        let mut drain = Drain::default();
        loop {
            let (unsettled, last_delivery) = self.shared.share.unsettled(&committed);
            let lag = self.lag();
            let quiet =
                history.now().saturating_sub(last_delivery) > Duration::from_millis(LOCK_MS as u64 + 5_000);
            // No lag and quiet also ends it: a value archived at the delivery limit after
            // deliveries whose answers were lost is settled though no consumer saw it settle
            // (the checker counts it from the leader's figures).
            let no_lag = lag == Some(0);
            if (unsettled == 0 && (no_lag || quiet)) || (no_lag && quiet) {
                drain.drained_ms = Some(started.elapsed().as_millis());
                break;
            }
            if started.elapsed() > wait {
                println!("chaos: share drain: {unsettled} values unsettled, lag {lag:?} after {wait:?}");
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        self.shared.stop_consumers.store(true, Ordering::SeqCst);
        for t in self.consumers.drain(..) {
            let _ = t.join();
        }
        drain.final_lag = self.lag();
        drain
    }

    /// The group's lag summed over partitions, None if the leader did not say.
    fn lag(&self) -> Option<i64> {
        let c = &self.shared.config;
        let bootstrap = addrs(&c.bootstrap).ok()?;
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
        let lags = rt.block_on(share_consumer::share_lag(&bootstrap, &c.topic, GROUP)).ok()?;
        Some(lags.values().map(|(_, lag)| lag.max(&0)).sum())
    }
}

fn addrs(bootstrap: &str) -> Result<Vec<SocketAddr>> {
    bootstrap.split(',').map(|a| a.trim().parse().with_context(|| format!("address {a:?}"))).collect()
}

/// The group's configs, set before any member joins (retried while the cluster settles).
fn configure_group(config: &ShareConfig) -> Result<()> {
    let limit = DELIVERY_COUNT_LIMIT.to_string();
    let lock = LOCK_MS.to_string();
    let configs = [
        ("share.auto.offset.reset", "earliest"),
        ("share.isolation.level", "read_committed"),
        ("share.delivery.count.limit", limit.as_str()),
        ("share.record.lock.duration.ms", lock.as_str()),
    ];
    let bootstrap = addrs(&config.bootstrap)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match rt.block_on(share_consumer::set_group_configs(&bootstrap, &config.topic, GROUP, &configs)) {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() > deadline => return Err(e.context("configuring the share group")),
            Err(_) => std::thread::sleep(Duration::from_millis(300)),
        }
    }
}

fn start_writers(shared: &Arc<Shared>, stop: &Arc<AtomicBool>) -> Vec<JoinHandle<()>> {
    let c = &shared.config;
    let config = WriterConfig {
        bootstrap: c.bootstrap.clone(),
        topic: c.topic.clone(),
        partitions: c.partitions,
        seed: c.seed,
        pause: WRITE_PAUSE,
    };
    let mut threads = Vec::new();
    for w in 0..c.plain_writers {
        let (config, shared, stop) = (config.clone(), shared.clone(), stop.clone());
        threads.push(std::thread::spawn(move || plain_writer(w, &config, &shared.history, &stop)));
    }
    for w in 0..c.writers {
        let (config, shared, stop) = (config.clone(), shared.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            txn_writer(w, &config, (&shared.history, &shared.share), &stop, &shared.faults)
        }));
    }
    threads
}

/// One consumer slot: instance after instance until the run stops.
fn consumer_slot(slot: usize, shared: &Arc<Shared>) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut rng = StdRng::seed_from_u64(shared.config.seed.wrapping_add(31_337 + slot as u64));
    let mut n = 0;
    while !shared.stop_consumers.load(Ordering::SeqCst) {
        n += 1;
        let name = format!("c{slot}.{n}");
        let Ok(mut config) = ShareConsumerConfig::new(&shared.config.bootstrap, GROUP, &shared.config.topic)
        else {
            return shared.history.client_error();
        };
        let history = shared.history.clone();
        config.clock = Arc::new(move || history.now());
        config.keep_unacquired = shared.config.bug == Some(ShareBug::KeepUnacquired);
        let lifetime = Duration::from_millis(rng.gen_range(LIFETIME_MS));
        rt.block_on(async {
            let mut consumer = ShareConsumer::start(config);
            let crashed = run_instance(&mut consumer, &name, lifetime, shared, &mut rng).await;
            let events = if crashed { consumer.crash() } else { consumer.close().await };
            shared.share.events(&name, events);
            shared.share.instance(crashed);
        });
        std::thread::sleep(Duration::from_millis(rng.gen_range(PAUSE_MS)));
    }
}

/// Polls and acknowledges until the instance's life ends; true if it crashed.
async fn run_instance(
    consumer: &mut ShareConsumer,
    name: &str,
    lifetime: Duration,
    shared: &Shared,
    rng: &mut StdRng,
) -> bool {
    let ends = Instant::now() + lifetime;
    loop {
        if shared.stop_consumers.load(Ordering::SeqCst) || Instant::now() >= ends {
            return false;
        }
        if shared.faults.take_crash() {
            let at = shared.history.now();
            shared.history.fault(FaultWindow::client("client-crash", at, at));
            return true;
        }
        match consumer.poll().await {
            Ok(fetched) => take(consumer, name, fetched, shared, rng).await,
            Err(_) => {
                shared.history.client_error();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        shared.share.events(name, consumer.take_events());
    }
}

/// Records what a fetch delivered and chooses each record's acknowledgement.
async fn take(consumer: &mut ShareConsumer, name: &str, f: Fetched, shared: &Shared, rng: &mut StdRng) {
    let value = |d: &share_consumer::Delivery| {
        String::from_utf8_lossy(d.value.as_deref().unwrap_or_default()).into_owned()
    };
    let deliveries = f
        .deliveries
        .iter()
        .map(|d| ShareDelivery {
            member: name.to_string(),
            partition: d.partition,
            offset: d.offset,
            value: value(d),
            delivery_count: d.delivery_count,
            sent: f.sent,
            received: f.received,
            leader_epoch: f.leader_epoch,
            lock_ms: i64::from(f.lock_ms),
        })
        .collect();
    shared.share.deliveries(deliveries, DELIVERY_COUNT_LIMIT);
    shared.share.gaps(f.gaps);
    for d in &f.deliveries {
        if let Some(kind) = choose(&value(d), rng) {
            consumer.acknowledge(d.partition, d.offset, kind);
        }
    }
    if rng.gen_ratio(1, ACKNOWLEDGE_ONE_IN) && consumer.commit().await.is_err() {
        shared.history.client_error();
    }
}

/// A record's acknowledgement: poison values are always released; the rest mostly accepted,
/// some released, a few rejected, a few left to their lock (None).
fn choose(value: &str, rng: &mut StdRng) -> Option<AckType> {
    let seq = value.rsplit('-').next().and_then(|s| s.parse::<u64>().ok());
    if seq.is_some_and(|s| s % POISON_ONE_IN == 0) {
        return Some(AckType::Release);
    }
    match rng.gen_range(0..1_000) {
        0..850 => Some(AckType::Accept),
        850..950 => Some(AckType::Release),
        950..990 => Some(AckType::Reject),
        _ => None,
    }
}

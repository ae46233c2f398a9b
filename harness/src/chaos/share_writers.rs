//! The share workload's producers (librdkafka, as the queue workload's): idempotent writers
//! whose every value is acknowledged on its own, and transactional writers of which one
//! transaction in `ABORT_ONE_IN` aborts on purpose, so that a read_committed share group has
//! aborted and still-open records to leave alone. Each value is unique (`<writer>-<seq>`) and
//! recorded as a `Txn` of the history with what its writer was told; a transactional writer
//! also records when it asked to commit (the checker's "open transaction delivered"), and
//! carries out `txn-hijack`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rdkafka::producer::{FutureProducer, Producer};

use super::history::{History, Outcome, Txn};
use super::queue::{
    end_transaction, hijack, idempotent_producer, init_until_ready, send_all, send_each,
    transactional_producer, ClientFaults,
};
use super::share_history::ShareHistory;

/// One transaction in this many is aborted on purpose.
const ABORT_ONE_IN: u32 = 4;

#[derive(Debug, Clone)]
pub struct WriterConfig {
    pub bootstrap: String,
    pub topic: String,
    pub partitions: i32,
    pub seed: u64,
    /// Between two rounds of a writer: the share consumers (three debug-build members, each
    /// fetch and acknowledgement a Raft entry) must keep up with the writers.
    pub pause: Duration,
}

/// An idempotent producer sending one to four values a round, each acknowledged on its own.
pub fn plain_writer(w: usize, config: &WriterConfig, history: &History, stop: &AtomicBool) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut rng = StdRng::seed_from_u64(config.seed.wrapping_add(88_001 + w as u64));
    let name = format!("p{w}");
    let Ok(mut producer) = idempotent_producer(&config.bootstrap, 1) else { return history.client_error() };
    let mut seq = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let started = history.now();
        let values = draw(&mut rng, &name, &mut seq, 1..=4, config.partitions);
        let acks: Vec<bool> = send_each(&rt, &producer, &config.topic, &values).collect();
        let failed = acks.iter().any(|ok| !ok);
        for ((partition, value), acked) in values.into_iter().zip(acks) {
            let outcome = if acked { Outcome::Committed } else { Outcome::Unknown };
            let (writer, ended) = (name.clone(), history.now());
            let values = vec![(partition, value)];
            history.txn(Txn { writer, values, outcome, deliberate_abort: false, started, ended });
        }
        if failed {
            // A failed delivery may leave an idempotent producer fatally out of sequence.
            history.client_error();
            std::thread::sleep(Duration::from_millis(200));
            match idempotent_producer(&config.bootstrap, 1) {
                Ok(p) => producer = p,
                Err(_) => history.client_error(),
            }
        }
        std::thread::sleep(config.pause);
    }
}

/// A transactional producer: begin, one to three values, then commit (recording when it asked)
/// or abort on purpose.
pub fn txn_writer(
    w: usize,
    config: &WriterConfig,
    (history, share): (&History, &ShareHistory),
    stop: &AtomicBool,
    faults: &ClientFaults,
) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut rng = StdRng::seed_from_u64(config.seed.wrapping_add(99_991 + w as u64));
    let (tid, name) = (format!("chaos-share-writer-{w}"), format!("t{w}"));
    let mut producer: Option<FutureProducer> = None;
    let mut seq = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let Some(p) = producer.take().or_else(|| init_until_ready(&config.bootstrap, &tid, history, stop))
        else {
            return;
        };
        if p.begin_transaction().is_err() {
            history.client_error();
            continue; // dropped: the next instance fences it
        }
        let started = history.now();
        let values = draw(&mut rng, &name, &mut seq, 1..=3, config.partitions);
        let delivered = rt.block_on(send_all(&p, &config.topic, &values));
        let deliberate = rng.gen_ratio(1, ABORT_ONE_IN);
        let commit = delivered && !deliberate;
        // A hijacked writer still asks to commit (and must be refused).
        let hijacked = faults.take_hijack();
        if commit || hijacked {
            share.commit_began(&values, history.now());
        }
        let record = |outcome, ended| Txn {
            writer: name.clone(),
            values: values.clone(),
            outcome,
            deliberate_abort: deliberate,
            started,
            ended,
        };
        if hijacked {
            let (outcome, hijacker) = hijack(&p, &config.bootstrap, &tid, history, stop);
            history.txn(record(outcome, history.now()));
            producer = hijacker;
            continue;
        }
        let (outcome, keep) = end_transaction(&p, history, commit);
        history.txn(record(outcome, history.now()));
        producer = keep.then_some(p);
        std::thread::sleep(config.pause);
    }
    // A producer dropped with its transaction in doubt: a last instance fences it, so no
    // transaction stays open past the run.
    if producer.is_none() {
        let _ = transactional_producer(&config.bootstrap, &tid);
    }
}

/// `n` new values of `name`, each to a random partition.
fn draw(
    rng: &mut StdRng,
    name: &str,
    seq: &mut u64,
    n: std::ops::RangeInclusive<usize>,
    partitions: i32,
) -> Vec<(i32, String)> {
    (0..rng.gen_range(n))
        .map(|_| {
            *seq += 1;
            (rng.gen_range(0..partitions), format!("{name}-{seq}"))
        })
        .collect()
}

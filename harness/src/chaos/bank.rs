//! The bank workload: each partition is an account, each transaction moves an amount from one
//! account to another (a debit record in one partition, a credit in the other), and one in
//! `abort_one_in` is aborted on purpose. The invariant: the read_committed sum of all accounts
//! is zero at every consistent cut a reader observes, and at the end.
//!
//! A consistent cut: two rounds of ListOffsets (last stable offset and high watermark of every
//! partition) that agree, with the two equal everywhere. Offsets only grow, so at any instant
//! between the rounds no transaction was open and nothing was written: the reader then reads
//! every partition under read_committed up to those ends and sums. Records are
//! `<writer>-<seq>:<amount>` values, so the queue checker runs on the same history too.
//!
//! Writers are the queue's writers with a different transaction body; readers poll the log.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use kafka_compat::isolation_level::{READ_COMMITTED, READ_UNCOMMITTED};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::ListOffsetsRequest;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rdkafka::producer::{FutureProducer, Producer};

use super::checker::{FinalRead, Violations};
use super::history::{Cut, History, Outcome, Txn};
use super::queue::{
    commit, init_until_ready, read_to, send_all, transactional_producer, QueueConfig, CALL_TIMEOUT,
};
use crate::raw_ops::topic_name;
use crate::RawClient;

const CUT_EVERY: Duration = Duration::from_millis(1_500);

pub struct Bank {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Bank {
    /// `kafka_addrs`: every node's Kafka address, for the cut reader's ListOffsets.
    pub fn start(config: QueueConfig, kafka_addrs: Vec<std::net::SocketAddr>, history: History) -> Bank {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for w in 0..config.writers {
            let (config, history, stop) = (config.clone(), history.clone(), stop.clone());
            threads.push(std::thread::spawn(move || writer(w, &config, &history, &stop)));
        }
        for _ in 0..config.readers.max(1) {
            let (config, history, stop, addrs) =
                (config.clone(), history.clone(), stop.clone(), kafka_addrs.clone());
            threads.push(std::thread::spawn(move || cut_reader(&config, &addrs, &history, &stop)));
        }
        Bank { stop, threads }
    }

    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// The amount a bank record carries.
pub fn amount(value: &str) -> Option<i64> {
    value.rsplit_once(':')?.1.parse().ok()
}

fn writer(w: usize, config: &QueueConfig, history: &History, stop: &AtomicBool) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut rng = StdRng::seed_from_u64(config.seed.wrapping_add(31 + w as u64 * 104_729));
    let tid = format!("chaos-bank-{w}");
    let name = format!("b{w}");
    let mut producer: Option<FutureProducer> = None;
    let mut seq = 0u64;
    while !stop.load(Ordering::SeqCst) && history.committed() < config.max_committed {
        let Some(p) = producer.take().or_else(|| init_until_ready(&config.bootstrap, &tid, history, stop))
        else {
            return;
        };
        if p.begin_transaction().is_err() {
            history.client_error();
            continue;
        }
        let started = history.now();
        let from = rng.gen_range(0..config.partitions);
        let to = (from + rng.gen_range(1..config.partitions)) % config.partitions;
        let x: i64 = rng.gen_range(1..=100);
        seq += 1;
        let values = vec![(from, format!("{name}-{seq}a:{}", -x)), (to, format!("{name}-{seq}b:{x}"))];
        let delivered = rt.block_on(send_all(&p, &config.topic, &values));
        let deliberate = rng.gen_ratio(1, config.abort_one_in.max(1));
        let (outcome, keep) = if deliberate || !delivered {
            if !deliberate {
                history.client_error();
            }
            (Outcome::Aborted, p.abort_transaction(CALL_TIMEOUT).is_ok())
        } else {
            commit(&p, history)
        };
        history.txn(Txn {
            writer: name.clone(),
            values,
            outcome,
            deliberate_abort: deliberate,
            started,
            ended: history.now(),
        });
        producer = keep.then_some(p);
    }
    if producer.is_none() {
        let _ = transactional_producer(&config.bootstrap, &tid);
    }
}

fn cut_reader(config: &QueueConfig, addrs: &[std::net::SocketAddr], history: &History, stop: &AtomicBool) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(CUT_EVERY);
        let ends = match rt.block_on(stable_ends(addrs, &config.topic, config.partitions)) {
            Ok(Some(ends)) => ends,
            Ok(None) => continue,
            Err(_) => {
                history.client_error();
                continue;
            }
        };
        let at = history.now();
        match read_to(&config.bootstrap, &config.topic, &ends, Duration::from_secs(30)) {
            Ok(read) => {
                let sum = read.values().flatten().filter_map(|(_, v)| amount(v)).sum();
                history.cut(Cut { at, ends, sum });
            }
            Err(_) => history.client_error(),
        }
    }
}

/// The partitions' ends if two rounds of ListOffsets agree and every last stable offset equals
/// its high watermark (a consistent cut, see the module header); None otherwise.
async fn stable_ends(
    addrs: &[std::net::SocketAddr],
    topic: &str,
    partitions: i32,
) -> Result<Option<Vec<i64>>> {
    for addr in addrs {
        let Ok(mut client) = RawClient::connect(*addr).await else { continue };
        let mut rounds = Vec::new();
        for _ in 0..2 {
            let committed = list_ends(&mut client, topic, partitions, READ_COMMITTED).await;
            let high = list_ends(&mut client, topic, partitions, READ_UNCOMMITTED).await;
            match (committed, high) {
                (Ok(c), Ok(h)) => rounds.push((c, h)),
                _ => break,
            }
        }
        if rounds.len() < 2 {
            continue; // not the leader, or it failed meanwhile: ask the next node
        }
        let (c1, h1) = &rounds[0];
        let (c2, h2) = &rounds[1];
        return Ok((c1 == h1 && c1 == c2 && h1 == h2).then(|| c1.clone()));
    }
    bail!("no node answered ListOffsets")
}

async fn list_ends(client: &mut RawClient, topic: &str, partitions: i32, isolation: i8) -> Result<Vec<i64>> {
    let request = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_isolation_level(isolation)
        .with_topics(vec![ListOffsetsTopic::default().with_name(topic_name(topic)).with_partitions(
            (0..partitions)
                .map(|p| ListOffsetsPartition::default().with_partition_index(p).with_timestamp(-1))
                .collect(),
        )]);
    let response = client.request(5, &request).await?;
    let mut ends = vec![-1; partitions as usize];
    for p in response.topics.iter().flat_map(|t| t.partitions.iter()) {
        if p.error_code != 0 {
            bail!("ListOffsets {topic}/{}: error {}", p.partition_index, p.error_code);
        }
        *ends.get_mut(p.partition_index as usize).context("partition")? = p.offset;
    }
    Ok(ends)
}

/// The bank invariant: every observed cut and the final read sum to zero.
pub fn check_bank(cuts: &[Cut], final_read: &FinalRead) -> Violations {
    let mut v = Violations::default();
    for cut in cuts {
        if cut.sum != 0 {
            v.add("bank sum", format!("cut at {:?} (ends {:?}) sums to {}", cut.at, cut.ends, cut.sum));
        }
    }
    let total: i64 = final_read.values().flatten().filter_map(|(_, value)| amount(value)).sum();
    if total != 0 {
        v.add("bank sum", format!("the final read sums to {total}"));
    }
    v
}

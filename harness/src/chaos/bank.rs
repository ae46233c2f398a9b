//! The bank workload: each partition is an account, each transaction moves an amount from one
//! account to another (a debit record in one partition, a credit in the other), and one in
//! `abort_one_in` is aborted on purpose. The invariant: the read_committed sum of all accounts
//! is zero at every consistent cut a reader observes, and at the end.
//!
//! With `--groups N` the accounts are the partitions of N topics, one in each Raft group
//! (`placement::Accounts`), and the writers' transactions are coordinated in different groups:
//! most transfers then debit an account of one group and credit one of another, and commit as
//! one decision of the coordinator's group delivered to both (docs/SCALING.md §3). The checks
//! are the same over all the accounts: a transfer torn across groups, lost, or visible after
//! its abort is a violation of the queue checker, money made or lost one of the sums.
//!
//! A consistent cut: two rounds of ListOffsets (last stable offset and high watermark of every
//! partition of every topic) that agree, with the two equal everywhere. Every topic's first
//! round is asked before any topic's second, and offsets only grow, so at any instant between
//! the rounds no transaction was open and nothing was written; in particular no decision was
//! still on its way to a participant group, whose last stable offset it holds back. The reader
//! then reads every partition under read_committed up to those ends and sums. Records are
//! `<writer>-<seq>:<amount>` values, so the queue checker runs on the same history too.
//!
//! Writers are the queue's writers with a different transaction body; readers poll the log.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kafka_compat::isolation_level::{READ_COMMITTED, READ_UNCOMMITTED};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::ListOffsetsRequest;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rdkafka::producer::{FutureProducer, Producer};

use super::checker::{FinalRead, Unstable, Violations};
use super::history::{Cut, History, Outcome, Txn};
use super::placement::{bank_transactional_id, Accounts};
use super::queue::{
    self, commit, init_until_ready, read_to, send_records, transactional_producer, QueueConfig, CALL_TIMEOUT,
};
use crate::raw_ops::topic_name;
use crate::RawClient;

const CUT_EVERY: Duration = Duration::from_millis(1_500);

pub struct Bank {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// What every bank thread shares: the queue's settings (its topic and partitions unused: the
/// accounts name them), the accounts and the history.
#[derive(Clone)]
struct Shared {
    config: QueueConfig,
    accounts: Accounts,
    history: History,
    stop: Arc<AtomicBool>,
}

impl Bank {
    /// `kafka_addrs`: every node's Kafka address, for the cut reader's ListOffsets.
    pub fn start(
        config: QueueConfig,
        accounts: Accounts,
        kafka_addrs: Vec<std::net::SocketAddr>,
        history: History,
    ) -> Bank {
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Shared { config, accounts, history, stop: stop.clone() };
        let mut threads = Vec::new();
        for w in 0..shared.config.writers {
            let shared = shared.clone();
            threads.push(std::thread::spawn(move || writer(w, &shared)));
        }
        for _ in 0..shared.config.readers.max(1) {
            let (shared, addrs) = (shared.clone(), kafka_addrs.clone());
            threads.push(std::thread::spawn(move || cut_reader(&shared, &addrs)));
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

fn writer(w: usize, shared: &Shared) {
    let Shared { config, accounts, history, stop } = shared;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut rng = StdRng::seed_from_u64(config.seed.wrapping_add(31 + w as u64 * 104_729));
    let tid = bank_transactional_id(w, accounts.groups());
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
        // Any two accounts: with several groups, most pairs are in two of them.
        let n = accounts.count();
        let from = rng.gen_range(0..n);
        let to = (from + rng.gen_range(1..n)) % n;
        let x: i64 = rng.gen_range(1..=100);
        seq += 1;
        let values = vec![(from, format!("{name}-{seq}a:{}", -x)), (to, format!("{name}-{seq}b:{x}"))];
        let records = values.iter().map(|(account, value)| {
            let (topic, partition) = accounts.locate(*account);
            (topic, partition, value.as_str())
        });
        let delivered = rt.block_on(send_records(&p, records));
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

fn cut_reader(shared: &Shared, addrs: &[std::net::SocketAddr]) {
    let Shared { config, accounts, history, stop } = shared;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(CUT_EVERY);
        let ends = match rt.block_on(stable_ends(addrs, accounts)) {
            Ok(Some(ends)) => ends,
            Ok(None) => continue,
            Err(_) => {
                history.client_error();
                continue;
            }
        };
        let at = history.now();
        match read_accounts(&config.bootstrap, accounts, &ends, Duration::from_secs(30)) {
            Ok(read) => {
                let sum = read.values().flatten().filter_map(|(_, v)| amount(v)).sum();
                history.cut(Cut { at, ends, sum });
            }
            Err(_) => history.client_error(),
        }
    }
}

/// Every account under read_committed below its end (`ends`, one per account).
fn read_accounts(bootstrap: &str, accounts: &Accounts, ends: &[i64], wait: Duration) -> Result<FinalRead> {
    let mut read = FinalRead::new();
    let per_topic = ends.chunks(accounts.partitions.max(1) as usize);
    for (t, (topic, ends)) in accounts.topics.iter().zip(per_topic).enumerate() {
        let of_topic = read_to(bootstrap, topic, ends, wait)?;
        read.extend(of_topic.into_iter().map(|(p, records)| (accounts.account(t, p), records)));
    }
    Ok(read)
}

/// The accounts' ends if two rounds of ListOffsets agree and every last stable offset equals
/// its high watermark (a consistent cut, see the module header); None otherwise. Each topic is
/// asked of one node in both rounds, the first that answers (its group's leader). A node that
/// fails a topic's second round is passed over for that topic and both rounds start again,
/// since every first round must come before every second.
async fn stable_ends(addrs: &[std::net::SocketAddr], accounts: &Accounts) -> Result<Option<Vec<i64>>> {
    let mut clients: Vec<Option<RawClient>> = addrs.iter().map(|_| None).collect();
    // The node each topic is asked of: the first not passed over.
    let mut node = vec![0usize; accounts.topics.len()];
    'rounds: loop {
        let mut first = Vec::new();
        for (t, topic) in accounts.topics.iter().enumerate() {
            loop {
                let Some(addr) = addrs.get(node[t]) else {
                    bail!("no node answered ListOffsets for {topic}")
                };
                if let Some(ends) = ends_on(&mut clients[node[t]], *addr, topic, accounts.partitions).await {
                    first.push(ends);
                    break;
                }
                node[t] += 1; // not the leader, or it failed meanwhile: ask the next node
            }
        }
        let mut second = Vec::new();
        for (t, topic) in accounts.topics.iter().enumerate() {
            let addr = addrs[node[t]];
            match ends_on(&mut clients[node[t]], addr, topic, accounts.partitions).await {
                Some(ends) => second.push(ends),
                None => {
                    node[t] += 1;
                    continue 'rounds;
                }
            }
        }
        let (c1, h1): (Vec<i64>, Vec<i64>) = first.into_iter().flatten().unzip();
        let (c2, h2): (Vec<i64>, Vec<i64>) = second.into_iter().flatten().unzip();
        return Ok((c1 == h1 && c1 == c2 && h1 == h2).then_some(c1));
    }
}

/// One round for `topic` on one node: each partition's (last stable offset, high watermark),
/// or None if the node did not answer both (its connection is then dropped).
async fn ends_on(
    client: &mut Option<RawClient>,
    addr: std::net::SocketAddr,
    topic: &str,
    partitions: i32,
) -> Option<Vec<(i64, i64)>> {
    if client.is_none() {
        *client = Some(RawClient::connect(addr).await.ok()?);
    }
    let c = client.as_mut()?;
    let committed = list_ends(c, topic, partitions, READ_COMMITTED).await;
    let high = list_ends(c, topic, partitions, READ_UNCOMMITTED).await;
    match (committed, high) {
        (Ok(c), Ok(h)) => Some(c.into_iter().zip(h).collect()),
        _ => {
            *client = None;
            None
        }
    }
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

/// Every account read under read_committed once no transaction is open, as
/// `queue::final_read` reads one topic: each topic waits for its partitions to be stable until
/// one deadline `wait` away, then every topic is read to its ends. Keyed and reported
/// (`Unstable::partition`) by account.
pub fn final_read(
    bootstrap: &str,
    accounts: &Accounts,
    wait: Duration,
) -> Result<(FinalRead, Vec<Unstable>)> {
    let deadline = Instant::now() + wait;
    let (mut ends, mut unstable) = (Vec::new(), Vec::new());
    for (t, topic) in accounts.topics.iter().enumerate() {
        let (of_topic, still_open) = queue::stable_ends(bootstrap, topic, accounts.partitions, deadline)?;
        ends.extend(of_topic);
        unstable.extend(
            still_open.into_iter().map(|u| Unstable { partition: accounts.account(t, u.partition), ..u }),
        );
    }
    Ok((read_accounts(bootstrap, accounts, &ends, wait)?, unstable))
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

#[cfg(test)]
#[path = "bank_tests.rs"]
mod tests;

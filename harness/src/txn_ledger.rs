//! A transactional producer's attempts as its client saw them end, checked against what
//! read_committed shows (the Raft-group transaction tests, issue 32): every attempt the client
//! saw commit is in every target partition exactly once, none it aborted is anywhere, and one
//! of unknown outcome is in all or none of them.
//!
//! Each attempt writes the record `{transactional id}:t{txn}-a{attempt}@{target}` to each
//! target (its index in the ledger's targets), so several ledgers can share topics. [`kill_leader_mid_run`] kills a Raft group's leader in the
//! middle of a ledger's transactions.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

use crate::raft_groups::{group_row, preferred_of_three, settle};
use crate::txn::{read_values, transactional_config, READ_COMMITTED};
use crate::Cluster;

const CALL_TIMEOUT: Duration = Duration::from_secs(30);
const RUN_TIMEOUT: Duration = Duration::from_secs(180);
const SETTLE_TIMEOUT: Duration = Duration::from_secs(40);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Committed,
    Aborted,
    /// The commit failed without a verdict: read_committed may show it whole or not at all.
    Unknown,
}

/// One transactional id's attempts, each writing one record to every (topic, partition) of
/// `targets`.
pub struct TxnLedger {
    transactional_id: String,
    targets: Vec<(String, i32)>,
    outcomes: Mutex<BTreeMap<(usize, usize), Outcome>>,
    pub committed: AtomicUsize,
}

impl TxnLedger {
    pub fn new(transactional_id: &str, targets: Vec<(String, i32)>) -> TxnLedger {
        let (outcomes, committed) = (Mutex::default(), AtomicUsize::new(0));
        TxnLedger { transactional_id: transactional_id.to_string(), targets, outcomes, committed }
    }

    pub fn init(&self, bootstrap: &str) -> Result<FutureProducer> {
        let producer: FutureProducer = transactional_config(bootstrap, &self.transactional_id).create()?;
        producer.init_transactions(CALL_TIMEOUT).context("init_transactions")?;
        Ok(producer)
    }

    /// Attempts that did not end committed.
    pub fn not_committed(&self) -> usize {
        self.outcomes.lock().unwrap().values().filter(|o| **o != Outcome::Committed).count()
    }

    /// Commits each of `txns` (a new producer instance after a fatal error), until `stop`.
    pub fn until_committed(&self, bootstrap: &str, txns: Range<usize>, stop: &AtomicBool) -> Result<()> {
        let mut p = self.reinit(bootstrap, stop)?;
        for txn in txns {
            while !stop.load(Ordering::SeqCst) {
                match self.attempt(&p, txn, false) {
                    Ok(true) => break,
                    Ok(false) => {}
                    // A fatal error: a new instance fences the old one and aborts what it left.
                    Err(_) => p = self.reinit(bootstrap, stop)?,
                }
            }
        }
        Ok(())
    }

    /// A new producer instance, retried while coordinators move (until `stop`).
    fn reinit(&self, bootstrap: &str, stop: &AtomicBool) -> Result<FutureProducer> {
        loop {
            match self.init(bootstrap) {
                Ok(p) => return Ok(p),
                Err(e) if stop.load(Ordering::SeqCst) => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// One attempt of transaction `txn`, aborted when asked: Ok(whether it committed); Err
    /// when the producer cannot go on.
    pub fn attempt(&self, p: &FutureProducer, txn: usize, abort: bool) -> Result<bool> {
        let key = {
            let outcomes = self.outcomes.lock().unwrap();
            (txn, outcomes.range((txn, 0)..(txn + 1, 0)).count())
        };
        let outcome = self.attempt_once(p, key, abort);
        let recorded = *outcome.as_ref().unwrap_or(&Outcome::Unknown);
        self.outcomes.lock().unwrap().insert(key, recorded);
        if recorded == Outcome::Committed {
            self.committed.fetch_add(1, Ordering::SeqCst);
        }
        outcome.map(|o| o == Outcome::Committed)
    }

    fn attempt_once(
        &self,
        p: &FutureProducer,
        (txn, attempt): (usize, usize),
        abort: bool,
    ) -> Result<Outcome> {
        p.begin_transaction()?;
        for (target, (topic, partition)) in self.targets.iter().enumerate() {
            let value = format!("{}:t{txn}-a{attempt}@{target}", self.transactional_id);
            let record = FutureRecord::to(topic).partition(*partition).key("k").payload(&value);
            if let Err((e, _)) = p.send_result(record) {
                p.abort_transaction(CALL_TIMEOUT)?;
                anyhow::bail!("send: {e}");
            }
        }
        if abort {
            p.abort_transaction(CALL_TIMEOUT)?;
            return Ok(Outcome::Aborted);
        }
        match p.commit_transaction(CALL_TIMEOUT) {
            Ok(()) => Ok(Outcome::Committed),
            Err(KafkaError::Transaction(e)) if e.txn_requires_abort() => {
                p.abort_transaction(CALL_TIMEOUT)?;
                Ok(Outcome::Aborted)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// read_committed on every target, for the transactions below `txns`. The reads end at
    /// each partition's end, so a last stable offset held back (an undelivered decision, a
    /// hanging transaction) fails them. Returns how many committed.
    pub fn verify(&self, bootstrap: &str, txns: usize) -> Result<usize> {
        let seen = self.read_committed(bootstrap)?;
        let outcomes = self.outcomes.lock().unwrap();
        let every: Vec<usize> = (0..self.targets.len()).collect();
        for (key, targets) in &seen {
            let outcome =
                outcomes.get(key).with_context(|| format!("{key:?} visible but never attempted"))?;
            ensure!(
                *targets == every,
                "{key:?} ({outcome:?}) visible in targets {targets:?} of {:?}",
                self.targets
            );
            ensure!(*outcome != Outcome::Aborted, "{key:?} visible, and the client aborted it");
        }
        let committed: Vec<_> = outcomes
            .iter()
            .filter(|(k, o)| **o == Outcome::Committed && k.0 < txns)
            .map(|(k, _)| *k)
            .collect();
        for key in &committed {
            ensure!(seen.contains_key(key), "{key:?} committed but not visible");
        }
        Ok(committed.len())
    }

    /// (transaction, attempt) → the targets showing it, once per record.
    fn read_committed(&self, bootstrap: &str) -> Result<BTreeMap<(usize, usize), Vec<usize>>> {
        let mut by_topic: BTreeMap<&str, i32> = BTreeMap::new();
        for (topic, partition) in &self.targets {
            let count = by_topic.entry(topic).or_default();
            *count = (*count).max(partition + 1);
        }
        let mut seen: BTreeMap<(usize, usize), Vec<usize>> = BTreeMap::new();
        for (topic, partitions) in by_topic {
            for value in read_values(bootstrap, topic, partitions, READ_COMMITTED)? {
                let Some((key, target)) = self.parse(&value) else { continue };
                let (in_topic, _) = self.targets.get(target).context("a record of no target")?;
                ensure!(in_topic == topic, "{value} of {in_topic} read in {topic}");
                seen.entry(key).or_default().push(target);
            }
        }
        seen.values_mut().for_each(|targets| targets.sort_unstable());
        Ok(seen)
    }

    /// ((transaction, attempt), target) of one of this ledger's records; `None` for another's.
    fn parse(&self, value: &str) -> Option<((usize, usize), usize)> {
        let (_, rest) = value.split_once(':').filter(|(id, _)| *id == self.transactional_id)?;
        let (txn, rest) = rest.split_once('-')?;
        let (attempt, target) = rest.split_once('@')?;
        let key = (txn.strip_prefix('t')?.parse().ok()?, attempt.strip_prefix('a')?.parse().ok()?);
        Some((key, target.parse().ok()?))
    }
}

/// What [`kill_leader_mid_run`] saw.
#[derive(Debug)]
pub struct KillReport {
    pub victim: u64,
    /// Commits of the run before the kill.
    pub at_kill: usize,
    /// From the kill to the next commit.
    pub resumed: Duration,
    /// Commits of the ledger in all, each verified.
    pub committed: usize,
}

impl std::fmt::Display for KillReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "node {} killed -9 after {} commits: the next commit {:.1} s later; {} transactions committed in all, each whole",
            self.victim,
            self.at_kill,
            self.resumed.as_secs_f64(),
            self.committed
        )
    }
}

/// Group `group`'s leader killed -9 after `kill_after` of transactions `txns` (committed one
/// by one by a producer thread), restarted once they are done; the three nodes of `groups`
/// groups settle, then the ledger is verified.
pub async fn kill_leader_mid_run(
    cluster: &mut Cluster,
    ledger: &Arc<TxnLedger>,
    (group, groups): (u64, u64),
    txns: Range<usize>,
    kill_after: usize,
) -> Result<KillReport> {
    let bootstrap = cluster.bootstrap();
    let before_kill = ledger.committed.load(Ordering::SeqCst);
    let stop = Arc::new(AtomicBool::new(false));
    let (thread_ledger, thread_stop, end) = (ledger.clone(), stop.clone(), txns.end);
    let producer = std::thread::spawn(move || thread_ledger.until_committed(&bootstrap, txns, &thread_stop));
    let started = Instant::now();
    while ledger.committed.load(Ordering::SeqCst) < before_kill + kill_after && !producer.is_finished() {
        ensure!(started.elapsed() < RUN_TIMEOUT, "{kill_after} commits not reached");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let victim = group_row(cluster, preferred_of_three(0), group)?["leader"].as_u64().context("no leader")?;
    cluster.kill9(victim)?;
    let killed_at = Instant::now();
    let at_kill = ledger.committed.load(Ordering::SeqCst) - before_kill;
    while ledger.committed.load(Ordering::SeqCst) == before_kill + at_kill && !producer.is_finished() {
        ensure!(killed_at.elapsed() < RUN_TIMEOUT, "no transaction committed after the kill");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let resumed = killed_at.elapsed();
    while !producer.is_finished() {
        if started.elapsed() > RUN_TIMEOUT {
            stop.store(true, Ordering::SeqCst);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    producer.join().expect("producer thread panicked")?;
    ensure!(!stop.load(Ordering::SeqCst), "the transactions were not done within {RUN_TIMEOUT:?}");
    cluster.start_node(victim)?;
    let nodes: Vec<u64> = cluster.ids();
    settle(cluster, &nodes, groups, SETTLE_TIMEOUT).await?;
    let committed = tokio::task::block_in_place(|| ledger.verify(&cluster.bootstrap(), end))?;
    Ok(KillReport { victim, at_kill, resumed, committed })
}

//! Transactions across Raft groups (issue 32, docs/SCALING.md §3), on three nodes running
//! three groups (group g led by node g + 1), topics `xg0-…`, `xg1-…` and `ruled-…` placed in
//! groups 0, 1 and 2:
//!
//! 1. a librdkafka producer (transactions v1: AddPartitionsToTxn) whose id is placed in group 2
//!    writes one record to a topic of each group per transaction, one in four aborted: its
//!    commits are one decision entry in group 2, delivered to groups 0 and 1; read_committed
//!    shows each committed transaction whole in all three topics and no aborted one, and no
//!    partition's last stable offset is left behind;
//! 2. a producer coordinated in group 0 writes to groups 1 and 2 only;
//! 3. the leader of a participant group (1) is killed -9 in the middle of transactions, then
//!    the coordinator group's (2): no transaction is lost or torn, and each group's replicas end
//!    with equal digests;
//! 4. offsets in a transaction coordinated in group 2 (`send_offsets_to_transaction`), whose
//!    consumer group lives in group 0: committed with the transaction, dropped with an abort;
//! 5. the Java client's "13 physical, 10 logical" run (`TxnLiveRun`) on a topic of group 1 with
//!    a transactional id of group 2, with kafka-clients 4.x (transactions v2) and 3.9 (v1).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::java::Clients;
use harness::kafka::create_topics;
use harness::raft_groups::{
    digests_agree, group_row, java_live_run, preferred_of_three, settle, GROUP0_PREFIX, GROUP1_PREFIX,
    RULED_PREFIX,
};
use harness::txn::{read_values, transactional_config, READ_COMMITTED};
use harness::Cluster;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

const GROUPS: u64 = 3;
const TXNS: usize = 150;
const KILL_AFTER: usize = 40;
const SETTLE_TIMEOUT: Duration = Duration::from_secs(40);
const RUN_TIMEOUT: Duration = Duration::from_secs(180);
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transactions_span_raft_groups() {
    let mut cluster = harness::raft_groups::start_three_groups().expect("starting 3 nodes with 3 groups");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

/// The topics of groups 0, 1 and 2.
fn topics() -> [String; 3] {
    [format!("{GROUP0_PREFIX}xout"), format!("{GROUP1_PREFIX}xout"), format!("{RULED_PREFIX}xout")]
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    settle(cluster, &[1, 2, 3], GROUPS, SETTLE_TIMEOUT).await?;
    let topics = topics();
    create_topics(&cluster.bootstrap(), &topics.iter().map(|t| (t.as_str(), 1)).collect::<Vec<_>>()).await?;
    let all = Arc::new(Run::new(&format!("{RULED_PREFIX}xapp"), topics.to_vec()));
    transactions(cluster, &all, 0..TXNS, "coordinated in group 2, writing to groups 0, 1 and 2").await?;
    let from_0 = Arc::new(Run::new(&format!("{GROUP0_PREFIX}xapp"), topics[1..].to_vec()));
    transactions(cluster, &from_0, 0..TXNS / 3, "coordinated in group 0, writing to groups 1 and 2").await?;
    leader_kill_mid_transactions(cluster, &all, 1, TXNS).await?;
    leader_kill_mid_transactions(cluster, &all, 2, 2 * TXNS).await?;
    offsets_in_transactions(cluster).await?;
    for clients in [Clients::Kafka4, Clients::Kafka3] {
        java_live_run_across_groups(cluster, clients).await?;
    }
    for g in 0..GROUPS {
        digests_agree(cluster, &[1, 2, 3], g, Duration::from_secs(30)).await?;
    }
    Ok(())
}

/// Transactions `txns` of `run`'s producer, one after the other.
async fn transactions(cluster: &Cluster, run: &Run, txns: std::ops::Range<usize>, what: &str) -> Result<()> {
    let started = Instant::now();
    let count = txns.len();
    let producer = run.init(&cluster.bootstrap())?;
    for txn in txns.clone() {
        run.attempt(&producer, txn, txn % 4 == 3)?;
    }
    let elapsed = started.elapsed();
    drop(producer);
    let committed = tokio::task::block_in_place(|| run.verify(&cluster.bootstrap(), txns.end))?;
    println!(
        "{count} transactions {what}: {committed} committed in all, {:.2} ms per transaction; \
         read_committed shows each whole and no aborted one",
        elapsed.as_secs_f64() * 1000.0 / count as f64
    );
    Ok(())
}

/// Group `group`'s leader killed -9 after `KILL_AFTER` of transactions `first` … `first` +
/// `TXNS`, restarted once they are done.
async fn leader_kill_mid_transactions(
    cluster: &mut Cluster,
    run: &Arc<Run>,
    group: u64,
    first: usize,
) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    let before_kill = run.committed.load(Ordering::SeqCst);
    let stop = Arc::new(AtomicBool::new(false));
    let (thread_run, thread_stop) = (run.clone(), stop.clone());
    let producer =
        std::thread::spawn(move || thread_run.until_committed(&bootstrap, first..first + TXNS, &thread_stop));
    let started = Instant::now();
    while run.committed.load(Ordering::SeqCst) < before_kill + KILL_AFTER && !producer.is_finished() {
        ensure!(started.elapsed() < RUN_TIMEOUT, "{KILL_AFTER} commits not reached");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let victim = group_row(cluster, preferred_of_three(0), group)?["leader"].as_u64().context("no leader")?;
    cluster.kill9(victim)?;
    let killed_at = Instant::now();
    let at_kill = run.committed.load(Ordering::SeqCst) - before_kill;
    while run.committed.load(Ordering::SeqCst) == before_kill + at_kill && !producer.is_finished() {
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
    ensure!(!stop.load(Ordering::SeqCst), "{TXNS} transactions not done within {RUN_TIMEOUT:?}");
    cluster.start_node(victim)?;
    settle(cluster, &[1, 2, 3], GROUPS, SETTLE_TIMEOUT).await?;
    let committed = tokio::task::block_in_place(|| run.verify(&cluster.bootstrap(), first + TXNS))?;
    let role = if group == 2 { "coordinator" } else { "participant" };
    println!(
        "group {group}'s leader (the {role}, node {victim}) killed -9 after {at_kill} commits: the next commit \
         {:.1} s later; {committed} transactions committed in all, each whole, {} aborted or unknown",
        resumed.as_secs_f64(),
        run.outcomes.lock().unwrap().values().filter(|o| **o != Outcome::Committed).count()
    );
    Ok(())
}

/// `send_offsets_to_transaction` of a consumer group (group 0's) from a transaction of group 2:
/// the committed offset appears with a commit and not with an abort.
async fn offsets_in_transactions(cluster: &Cluster) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    let [_, input, output] = topics();
    let consumer_group = "xg-offsets";
    let consumer: BaseConsumer =
        harness::kafka::client_config(&bootstrap).set("group.id", consumer_group).create()?;
    let producer: FutureProducer =
        transactional_config(&bootstrap, &format!("{RULED_PREFIX}xoffsets")).create()?;
    tokio::task::block_in_place(|| -> Result<()> {
        producer.init_transactions(CALL_TIMEOUT)?;
        for (offset, commit) in [(5, true), (9, false), (7, true)] {
            producer.begin_transaction()?;
            let record = FutureRecord::to(&output).partition(0).key("k").payload("offsets");
            producer.send_result(record).map_err(|(e, _)| e)?;
            let mut offsets = TopicPartitionList::new();
            offsets.add_partition_offset(&input, 0, Offset::Offset(offset))?;
            let metadata = consumer.group_metadata().context("group metadata")?;
            producer.send_offsets_to_transaction(&offsets, &metadata, CALL_TIMEOUT)?;
            if commit {
                producer.commit_transaction(CALL_TIMEOUT)?;
            } else {
                producer.abort_transaction(CALL_TIMEOUT)?;
            }
            let want = if commit { offset } else { 5 };
            let committed = committed_offset(&bootstrap, consumer_group, &input)?;
            ensure!(committed == want, "after offset {offset} (commit {commit}): committed {committed}");
        }
        Ok(())
    })?;
    println!("offsets of group 0's consumer group in transactions of group 2: committed with a commit, dropped with an abort");
    Ok(())
}

/// The offset `group` has committed for `topic`-0, asked as a read_committed consumer asks
/// (librdkafka sets require_stable then): while group 0 has not applied the decision yet the
/// answer is UNSTABLE_OFFSET_COMMIT, which the client retries, never the old value.
fn committed_offset(bootstrap: &str, group: &str, topic: &str) -> Result<i64> {
    let consumer: BaseConsumer = harness::kafka::client_config(bootstrap)
        .set("group.id", group)
        .set("isolation.level", READ_COMMITTED)
        .create()?;
    let mut wanted = TopicPartitionList::new();
    wanted.add_partition(topic, 0);
    let list = consumer.committed_offsets(wanted, CALL_TIMEOUT)?;
    let offset = list.find_partition(topic, 0).context("no partition")?.offset();
    Ok(offset.to_raw().unwrap_or(-1))
}

/// `TxnLiveRun` (harness/java) on a topic of group 1 with a transactional id of group 2.
async fn java_live_run_across_groups(cluster: &Cluster, clients: Clients) -> Result<()> {
    let (topic, id) =
        (format!("{GROUP1_PREFIX}java-{clients:?}"), format!("{RULED_PREFIX}xjava-{clients:?}"));
    java_live_run(cluster, clients, &topic, &id).await?;
    println!("TxnLiveRun ({clients:?}), topic in group 1, coordinator in group 2: 13 physical, 10 logical, read_committed reads the 10");
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Committed,
    Aborted,
    /// The commit failed without a verdict: read_committed may show it whole or not at all.
    Unknown,
}

/// One transactional id's attempts, each writing one record to every topic of `topics`.
struct Run {
    transactional_id: String,
    topics: Vec<String>,
    outcomes: std::sync::Mutex<BTreeMap<(usize, usize), Outcome>>,
    committed: AtomicUsize,
}

impl Run {
    fn new(transactional_id: &str, topics: Vec<String>) -> Run {
        let (outcomes, committed) = (Default::default(), AtomicUsize::new(0));
        Run { transactional_id: transactional_id.to_string(), topics, outcomes, committed }
    }

    fn init(&self, bootstrap: &str) -> Result<FutureProducer> {
        let producer: FutureProducer = transactional_config(bootstrap, &self.transactional_id).create()?;
        producer.init_transactions(CALL_TIMEOUT).context("init_transactions")?;
        Ok(producer)
    }

    /// Commits each of `txns` (a new producer instance after a fatal error), until `stop`.
    fn until_committed(
        &self,
        bootstrap: &str,
        txns: std::ops::Range<usize>,
        stop: &AtomicBool,
    ) -> Result<()> {
        let mut p = self.reinit(bootstrap, stop)?;
        for txn in txns {
            while !stop.load(Ordering::SeqCst) {
                match self.attempt(&p, txn, false) {
                    Ok(true) => break,
                    Ok(false) => {}
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

    /// One attempt of transaction `txn`: Ok(whether it committed); Err when the producer
    /// cannot go on.
    fn attempt(&self, p: &FutureProducer, txn: usize, abort: bool) -> Result<bool> {
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

    /// One attempt, whose records name it: `{transactional id}:t{txn}-a{attempt}`, one per topic.
    fn attempt_once(
        &self,
        p: &FutureProducer,
        (txn, attempt): (usize, usize),
        abort: bool,
    ) -> Result<Outcome> {
        p.begin_transaction()?;
        let value = format!("{}:t{txn}-a{attempt}", self.transactional_id);
        for topic in &self.topics {
            let record = FutureRecord::to(topic).partition(0).key("k").payload(&value);
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

    /// read_committed on every topic, for the transactions below `txns`: every attempt the
    /// client saw commit is in each topic exactly once, none it aborted is in any, one of
    /// unknown outcome is in all or none. The reads end at each partition's end, so a last
    /// stable offset held back by an undelivered decision fails them. Returns how many
    /// committed.
    fn verify(&self, bootstrap: &str, txns: usize) -> Result<usize> {
        let mut seen: BTreeMap<(usize, usize), Vec<usize>> = BTreeMap::new();
        for (index, topic) in self.topics.iter().enumerate() {
            for value in read_values(bootstrap, topic, 1, READ_COMMITTED)? {
                let Some(key) = self.parse(&value) else { continue };
                seen.entry(key).or_default().push(index);
            }
        }
        let outcomes = self.outcomes.lock().unwrap();
        let every: Vec<usize> = (0..self.topics.len()).collect();
        for (key, topics) in &seen {
            let Some(outcome) = outcomes.get(key) else { continue };
            ensure!(
                *topics == every,
                "{key:?} ({outcome:?}) visible in topics {topics:?} of {:?}",
                self.topics
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
}

impl Run {
    /// (transaction, attempt) of one of this run's records; `None` for another run's.
    fn parse(&self, value: &str) -> Option<(usize, usize)> {
        let (id, attempt) = value.split_once(':')?;
        let (txn, attempt) = attempt.split_once('-').filter(|_| id == self.transactional_id)?;
        Some((txn.strip_prefix('t')?.parse().ok()?, attempt.strip_prefix('a')?.parse().ok()?))
    }
}

//! kill -9 of the Raft leader in the middle of 1,000 transactions from 4 producers (issue #5,
//! acceptance test 5).
//!
//! Four librdkafka transactional producers (distinct transactional.ids) each run 250
//! transactions; every transaction writes one record to each of two partitions, with a value
//! naming (producer, transaction, attempt, part). After ~300 commits the leader is killed with
//! SIGKILL, and restarted once 100 more transactions have committed. The producers behave like
//! an EOS application: an abortable error aborts the transaction and retries it (a new attempt);
//! a fatal error or a commit whose outcome stays unknown (timeouts) recreates the producer
//! (init_transactions fences the old instance and aborts whatever it left open) and retries.
//! Each attempt is recorded as committed, aborted or unknown.
//!
//! Under read_committed (DESIGN §5): every attempt the client saw commit is present exactly
//! once with both parts; no attempt appears with one part only; no attempt the client saw
//! aborted appears; an attempt of unknown outcome appears whole or not at all. The replicas end
//! with identical digests.
//!
//! And (issue 17) the leader kill aborts nothing: every attempt commits, none is aborted and
//! none ends unknown, and no producer is recreated. Before issue 17 the new leader aborted the
//! transactions open at takeover, and their producers saw abortable errors.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::kafka::create_topics;
use harness::txn::{read_values, transactional_config, READ_COMMITTED, READ_UNCOMMITTED};
use harness::{Cluster, ClusterOptions};
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

const TOPIC: &str = "txn-leader-kill";
/// Each transaction writes one record to each partition.
const PARTS: i32 = 2;
const PRODUCERS: usize = 4;
const TXNS_PER_PRODUCER: usize = 250;
/// Committed transactions (all producers) before the leader is killed.
const KILL_AFTER_COMMITS: usize = 300;
/// Committed transactions after the kill before the killed node is started again.
const RESTART_AFTER_COMMITS: usize = 100;
/// Timeout of one init, commit or abort call.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Calls of commit (or abort) that time out before the outcome counts as unknown.
const CALL_TRIES: usize = 3;
/// Longest the whole run may take before the producers are stopped and the test fails.
const RUN_TIMEOUT: Duration = Duration::from_secs(100);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Committed,
    Aborted,
    Unknown,
}

/// (producer, transaction, attempt): one try of one logical transaction.
type AttemptKey = (usize, usize, usize);

#[derive(Debug, Clone)]
struct Attempt {
    key: AttemptKey,
    outcome: Outcome,
    began: Instant,
    ended: Instant,
    /// The error that ended the attempt, if any.
    error: Option<String>,
}

/// What one producer thread did.
#[derive(Debug, Default)]
struct ProducerRun {
    attempts: Vec<Attempt>,
    /// Producers created (init_transactions succeeded), the first one included.
    inits: usize,
    /// init_transactions failures (retried).
    init_errors: Vec<String>,
}

/// Progress shared between the producer threads and the test.
#[derive(Default)]
struct Progress {
    committed: AtomicUsize,
    stop: AtomicBool,
}

fn value(key: AttemptKey, part: i32) -> String {
    format!("p{}-t{}-a{}-part{part}", key.0, key.1, key.2)
}

fn parse(value: &str) -> Option<(AttemptKey, i32)> {
    let mut fields = value.split('-');
    let mut next = |prefix: &str| fields.next()?.strip_prefix(prefix)?.parse::<usize>().ok();
    let key = (next("p")?, next("t")?, next("a")?);
    Some((key, i32::try_from(next("part")?).ok()?))
}

#[tokio::test(flavor = "multi_thread")]
async fn leader_kill9_during_a_thousand_transactions_from_four_producers() {
    let mut cluster = Cluster::start_with(ClusterOptions::new(3)).expect("starting cluster");
    let result = leader_kill(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn leader_kill(cluster: &mut Cluster) -> Result<()> {
    cluster.wait_for_leader(Duration::from_secs(30))?;
    let bootstrap = cluster.bootstrap();
    create_topics(&bootstrap, &[(TOPIC, PARTS)]).await?;
    let progress = Arc::new(Progress::default());
    let threads: Vec<JoinHandle<ProducerRun>> = (0..PRODUCERS)
        .map(|producer| {
            let (bootstrap, progress) = (bootstrap.clone(), progress.clone());
            std::thread::spawn(move || run_producer(&bootstrap, producer, &progress))
        })
        .collect();
    let faults = inject_faults(cluster, &progress);
    progress.stop.store(true, Ordering::SeqCst);
    let runs: Vec<ProducerRun> =
        threads.into_iter().map(|t| t.join().expect("producer thread panicked")).collect();
    let faults = faults.with_context(|| summary(&runs))?;
    let attempts: Vec<&Attempt> = runs.iter().flat_map(|r| r.attempts.iter()).collect();
    let logical = attempts.iter().filter(|a| a.outcome == Outcome::Committed).count();
    ensure!(
        logical == PRODUCERS * TXNS_PER_PRODUCER,
        "only {logical} transactions committed within {RUN_TIMEOUT:?}; {}",
        summary(&runs)
    );
    cluster.assert_digests_equal()?;
    verify(&bootstrap, &runs, &faults)?;
    let not_committed = attempts.iter().filter(|a| a.outcome != Outcome::Committed).count();
    let inits: usize = runs.iter().map(|r| r.inits).sum();
    ensure!(
        not_committed == 0 && inits == PRODUCERS,
        "the leader kill ended {not_committed} transactions without a commit and {} producers were          recreated: a leader change must abort nothing; {}",
        inits - PRODUCERS,
        summary(&runs)
    );
    Ok(())
}

/// Kills the leader after `KILL_AFTER_COMMITS` commits and restarts it after
/// `RESTART_AFTER_COMMITS` more, then waits for the producers to finish.
fn inject_faults(cluster: &mut Cluster, progress: &Progress) -> Result<Faults> {
    let started = Instant::now();
    let wait_commits = |target: usize| -> Result<()> {
        while progress.committed.load(Ordering::SeqCst) < target {
            ensure!(started.elapsed() < RUN_TIMEOUT, "{target} commits not reached within {RUN_TIMEOUT:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    };
    wait_commits(KILL_AFTER_COMMITS)?;
    let victim = cluster.leader()?;
    let killed_at = Instant::now();
    cluster.kill9(victim)?;
    let committed_at_kill = progress.committed.load(Ordering::SeqCst);
    let (new_leader, election) = cluster.wait_for_leader(Duration::from_secs(30))?;
    println!("killed leader {victim} after {committed_at_kill} commits; node {new_leader} leads after {election:?}");
    wait_commits(committed_at_kill + RESTART_AFTER_COMMITS)?;
    cluster.start_node(victim)?;
    println!("restarted node {victim} {:?} after the kill", killed_at.elapsed());
    wait_commits(PRODUCERS * TXNS_PER_PRODUCER)?;
    Ok(Faults { killed_at, committed_at_kill, election })
}

struct Faults {
    killed_at: Instant,
    committed_at_kill: usize,
    election: Duration,
}

/// One producer's 250 transactions, each retried until the client sees it commit.
fn run_producer(bootstrap: &str, producer: usize, progress: &Progress) -> ProducerRun {
    let transactional_id = format!("leader-kill-{producer}");
    let mut run = ProducerRun::default();
    let mut client: Option<FutureProducer> = None;
    for txn in 0..TXNS_PER_PRODUCER {
        let mut attempt = 0;
        loop {
            if progress.stop.load(Ordering::SeqCst) {
                return run;
            }
            let p = match client.take() {
                Some(p) => p,
                None => match init(bootstrap, &transactional_id) {
                    Ok(p) => {
                        run.inits += 1;
                        p
                    }
                    Err(e) => {
                        run.init_errors.push(format!("{e:#}"));
                        std::thread::sleep(Duration::from_millis(100));
                        continue;
                    }
                },
            };
            let key = (producer, txn, attempt);
            let began = Instant::now();
            let (outcome, keep, error) = run_txn(&p, key);
            run.attempts.push(Attempt { key, outcome, began, ended: Instant::now(), error });
            if keep {
                client = Some(p);
            }
            if outcome == Outcome::Committed {
                progress.committed.fetch_add(1, Ordering::SeqCst);
                break;
            }
            attempt += 1;
        }
    }
    run
}

fn init(bootstrap: &str, transactional_id: &str) -> Result<FutureProducer> {
    let producer: FutureProducer = transactional_config(bootstrap, transactional_id).create()?;
    producer.init_transactions(CALL_TIMEOUT).context("init_transactions")?;
    Ok(producer)
}

/// One attempt: (outcome, whether the producer is still usable, the error that ended it).
fn run_txn(p: &FutureProducer, key: AttemptKey) -> (Outcome, bool, Option<String>) {
    if let Err(e) = p.begin_transaction() {
        // Nothing was sent: this attempt cannot appear.
        return (Outcome::Aborted, false, Some(format!("begin: {e}")));
    }
    for part in 0..PARTS {
        let (k, v) = (format!("p{}-t{}", key.0, key.1), value(key, part));
        // The delivery is checked by commit_transaction, which flushes and fails abortably if
        // any record of the transaction failed.
        if let Err((e, _)) = p.send_result(FutureRecord::to(TOPIC).partition(part).key(&k).payload(&v)) {
            return abort(p, format!("send: {e}"));
        }
    }
    let mut last = None;
    for _ in 0..CALL_TRIES {
        match p.commit_transaction(CALL_TIMEOUT) {
            Ok(()) => return (Outcome::Committed, true, None),
            Err(KafkaError::Transaction(e)) if e.txn_requires_abort() => {
                return abort(p, format!("commit: {e}"))
            }
            // librdkafka: a timed-out commit may be called again and resumes.
            Err(KafkaError::Transaction(e)) if e.is_retriable() => last = Some(format!("commit: {e}")),
            Err(e) => return (Outcome::Unknown, false, Some(format!("commit: {e}"))),
        }
    }
    (Outcome::Unknown, false, last)
}

/// Aborts after an abortable error; the producer stays usable if the abort completes.
fn abort(p: &FutureProducer, why: String) -> (Outcome, bool, Option<String>) {
    for _ in 0..CALL_TRIES {
        match p.abort_transaction(CALL_TIMEOUT) {
            Ok(()) => return (Outcome::Aborted, true, Some(why)),
            Err(KafkaError::Transaction(e)) if e.is_retriable() => continue,
            Err(_) => break,
        }
    }
    // Never committed by this client, so never visible; the next instance's init aborts it.
    (Outcome::Aborted, false, Some(why))
}

fn summary(runs: &[ProducerRun]) -> String {
    let attempts = runs.iter().flat_map(|r| r.attempts.iter());
    let count = |o: Outcome| attempts.clone().filter(|a| a.outcome == o).count();
    let errors: BTreeSet<&str> = attempts.clone().filter_map(|a| a.error.as_deref()).collect();
    let init_errors: BTreeSet<&str> =
        runs.iter().flat_map(|r| r.init_errors.iter().map(String::as_str)).collect();
    format!(
        "attempts: {} committed, {} aborted, {} unknown; producers created {}; errors seen {errors:?}; \
         init errors {init_errors:?}",
        count(Outcome::Committed),
        count(Outcome::Aborted),
        count(Outcome::Unknown),
        runs.iter().map(|r| r.inits).sum::<usize>()
    )
}

/// The read_committed checks of the module documentation; prints the figures.
fn verify(bootstrap: &str, runs: &[ProducerRun], faults: &Faults) -> Result<()> {
    let committed_values = read_values(bootstrap, TOPIC, PARTS, READ_COMMITTED)?;
    let physical = read_values(bootstrap, TOPIC, PARTS, READ_UNCOMMITTED)?.len();
    let mut seen: BTreeMap<AttemptKey, Vec<i32>> = BTreeMap::new();
    for v in &committed_values {
        let (key, part) = parse(v).with_context(|| format!("unrecognised value {v:?}"))?;
        seen.entry(key).or_default().push(part);
    }
    let attempts: BTreeMap<AttemptKey, &Attempt> =
        runs.iter().flat_map(|r| r.attempts.iter()).map(|a| (a.key, a)).collect();
    for (key, parts) in &mut seen {
        let attempt = attempts.get(key).with_context(|| format!("{key:?} visible but never attempted"))?;
        parts.sort_unstable();
        ensure!(*parts == [0, 1], "{key:?} ({:?}) visible with parts {parts:?}", attempt.outcome);
    }
    let mut unknown_landed = 0;
    for attempt in attempts.values() {
        let visible = seen.contains_key(&attempt.key);
        match attempt.outcome {
            Outcome::Committed => ensure!(visible, "{:?} committed but not visible", attempt.key),
            Outcome::Aborted => {
                ensure!(!visible, "{:?} aborted ({:?}) but visible", attempt.key, attempt.error)
            }
            Outcome::Unknown => unknown_landed += usize::from(visible),
        }
    }
    let recovery = attempts
        .values()
        .filter(|a| a.outcome == Outcome::Committed && a.began >= faults.killed_at)
        .map(|a| a.ended - faults.killed_at)
        .min()
        .context("no transaction begun after the kill committed")?;
    let count = |o: Outcome| attempts.values().filter(|a| a.outcome == o).count();
    println!(
        "transactions committed {} (attempts {}: {} aborted and retried, {} unknown of which {unknown_landed} \
         visible); leader killed after {} commits, election {:?}, first commit of a transaction begun \
         after the kill {recovery:?} after it; read_committed {} records, read_uncommitted {physical}",
        count(Outcome::Committed),
        attempts.len(),
        count(Outcome::Aborted),
        count(Outcome::Unknown),
        faults.committed_at_kill,
        faults.election,
        committed_values.len()
    );
    println!("{}", summary(runs));
    Ok(())
}

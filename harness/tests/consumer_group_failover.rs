//! Acceptance test (3) of issue #4: kill -9 the leader while a consumer group is consuming.
//!
//! Three nodes; 30,000 messages in a 6-partition topic; three librdkafka consumers in one
//! group store each message's offset after processing it and auto-commit every 100 ms (so
//! every commit covers only processed messages: at-least-once). An observer reads the group's
//! committed offsets every 50 ms throughout. A third of the way through, the Raft leader (the
//! group's coordinator) is killed with SIGKILL; the group carries on with the new leader.
//!
//! Checked: every message is consumed at least once; no partition's committed offset is seen
//! below its value at the kill afterwards (librdkafka may retry an older auto-commit after a
//! newer one, which Kafka accepts too; such steps back are printed); every message consumed twice lies at or after
//! its partition's last committed offset observed before the kill, and there are no more of
//! them than messages processed but not committed across the failover; at the end the
//! committed offsets equal the log end offsets. Printed: the duplicate count, the time to a
//! new leader and the time until the group commits again.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use harness::cluster::ELECTION_TIMEOUT_MAX;
use harness::kafka::{
    client_config, create_topics, group_member_config, produce_numbered, CLIENT_REQUEST_TIMEOUT,
};
use harness::{Cluster, ClusterOptions};
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::watch;

const TOPIC: &str = "consumed-through-failover";
const GROUP: &str = "survivors";
const PARTITIONS: i32 = 6;
const CONSUMERS: usize = 3;
const MESSAGES: usize = 30_000;
/// Consumed (distinct) when the leader is killed.
const KILL_AFTER: usize = MESSAGES / 3;
const TIMEOUT: Duration = Duration::from_secs(120);
const OBSERVE_INTERVAL: Duration = Duration::from_millis(50);

/// What the consumers did: how often each (partition, offset) was processed, and the highest
/// offset processed per partition.
#[derive(Default)]
struct Seen {
    consumed: BTreeMap<(i32, i64), u32>,
    processed_max: BTreeMap<i32, i64>,
}

/// One reading of the group's committed offsets (-1: none yet), per partition.
type Committed = Vec<i64>;

#[tokio::test(flavor = "multi_thread")]
async fn committed_offsets_survive_a_kill_9_of_the_leader_mid_consumption() {
    let options = ClusterOptions::new(3).config("group.initial.rebalance.delay.ms", 0);
    let mut cluster = Cluster::start_with(options).expect("starting 3 nodes");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    let leader = cluster.leader()?;
    create_topics(&bootstrap, &[(TOPIC, PARTITIONS)]).await?;
    produce_numbered(&bootstrap, TOPIC, 0..MESSAGES).await?;
    let log_end = log_end_offsets(&bootstrap).await?;
    ensure!(log_end.iter().sum::<i64>() == MESSAGES as i64, "log end offsets {log_end:?}");

    let seen = Arc::new(Mutex::new(Seen::default()));
    let observations: Arc<Mutex<Vec<(Instant, Committed)>>> = Arc::default();
    let observing = Arc::new(AtomicBool::new(true));
    let observer = {
        let (bootstrap, observations, observing) =
            (bootstrap.clone(), observations.clone(), observing.clone());
        std::thread::spawn(move || observe(&bootstrap, &observations, &observing))
    };
    let (stop, stopped) = watch::channel(false);
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|i| tokio::spawn(consume(bootstrap.clone(), i, seen.clone(), stopped.clone())))
        .collect();

    // Phase 1: consume a third, then kill the leader (the group's coordinator).
    wait_for(&seen, "a third consumed", |s| s.consumed.len() >= KILL_AFTER).await?;
    let before_kill =
        last_observation(&observations).context("no committed offsets observed before the kill")?;
    cluster.kill9(leader)?;
    let killed_at = Instant::now();
    let processed_at_kill = seen.lock().unwrap().processed_max.clone();
    let (new_leader, elected_after) =
        tokio::task::block_in_place(|| cluster.wait_for_leader(ELECTION_TIMEOUT_MAX * 30))?;
    println!(
        "killed leader {leader} after {} consumed; committed then {before_kill:?}; new leader {new_leader} after {elected_after:?}",
        seen.lock().unwrap().consumed.len()
    );

    // Phase 2: the group carries on until every message was consumed.
    let commits_again = wait_for_commits_past(&observations, &before_kill, killed_at).await?;
    let resumed_after = commits_again.0.duration_since(killed_at);
    let processed_when_committing_again = seen.lock().unwrap().processed_max.clone();
    println!("group commits again on the new leader {resumed_after:?} after the kill: {:?}", commits_again.1);
    wait_for(&seen, "every message consumed", |s| distinct(s) == MESSAGES).await?;
    // Let any late duplicate delivery show up before counting.
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.send(true)?;
    for consumer in consumers {
        consumer.await??;
    }
    observing.store(false, Ordering::Relaxed);
    observer.join().map_err(|_| anyhow::anyhow!("observer panicked"))??;

    check_survives(&observations.lock().unwrap(), &before_kill, killed_at)?;
    let seen = seen.lock().unwrap();
    let duplicates =
        check_duplicates(&seen, &before_kill, &processed_at_kill, &processed_when_committing_again)?;
    println!("duplicates: {duplicates}");
    let committed = committed_offsets(&offset_reader(&bootstrap)?)?;
    println!("final committed {committed:?}, log end {log_end:?}");
    ensure!(
        committed == log_end,
        "final committed offsets {committed:?} differ from log end offsets {log_end:?}"
    );
    Ok(())
}

fn distinct(s: &Seen) -> usize {
    s.consumed.len()
}

/// Committed offsets survive the kill: no reading after it, per partition, is below the last
/// reading before it. Readings may step back a little after the kill: librdkafka retries an
/// auto-commit it had sent to the dying leader, and that retry can land after a newer commit
/// on the new leader (Kafka accepts such a commit too; seen as 4633, then 3373, with 3295
/// committed at the kill). Those steps are counted and printed, not failed.
fn check_survives(
    observations: &[(Instant, Committed)],
    before_kill: &Committed,
    killed_at: Instant,
) -> Result<()> {
    let mut steps_back = 0;
    for pair in observations.windows(2) {
        let ((_, a), (at, b)) = (&pair[0], &pair[1]);
        if *at > killed_at {
            ensure!(
                before_kill.iter().zip(b).all(|(x, y)| y >= x),
                "a committed offset fell below its value at the kill: {before_kill:?} then {b:?}"
            );
        }
        if a.iter().zip(b).any(|(x, y)| y < x) {
            steps_back += 1;
            println!("a reading stepped back (client retry of an older commit): {a:?} then {b:?}");
        }
    }
    println!(
        "{} readings of the committed offsets; none below the value at the kill; {steps_back} stepped back",
        observations.len()
    );
    Ok(())
}

/// Duplicates lie at or after the last committed offset observed before the kill, and are no
/// more than what was processed but not committed across the failover: processed when the
/// group committed again on the new leader, minus committed before the kill. Returns them.
fn check_duplicates(
    seen: &Seen,
    committed_before_kill: &Committed,
    processed_at_kill: &BTreeMap<i32, i64>,
    processed_when_committing_again: &BTreeMap<i32, i64>,
) -> Result<usize> {
    let uncommitted = |processed: &BTreeMap<i32, i64>| -> i64 {
        (0..PARTITIONS)
            .map(|p| {
                let next = processed.get(&p).map_or(0, |o| o + 1);
                (next - committed_before_kill[p as usize].max(0)).max(0)
            })
            .sum()
    };
    let in_flight_at_kill = uncommitted(processed_at_kill);
    let in_flight_across_failover = uncommitted(processed_when_committing_again);
    let duplicated: Vec<(i32, i64)> =
        seen.consumed.iter().filter(|(_, n)| **n > 1).map(|(k, _)| *k).collect();
    println!(
        "processed but uncommitted: {in_flight_at_kill} at the kill, {in_flight_across_failover} until \
         the group committed again; consumed twice or more: {}",
        duplicated.len()
    );
    for (p, o) in &duplicated {
        let committed = committed_before_kill[*p as usize];
        ensure!(
            *o >= committed,
            "partition {p} offset {o} consumed twice but committed ({committed}) before the kill"
        );
    }
    ensure!(
        duplicated.len() as i64 <= in_flight_across_failover,
        "{} duplicates, more than the {in_flight_across_failover} uncommitted across the failover",
        duplicated.len()
    );
    Ok(duplicated.len())
}

/// One group member: processes a message (records it, and takes a little time, so that the
/// kill lands mid-consumption), then stores its offset for the next auto-commit.
async fn consume(
    bootstrap: String,
    i: usize,
    seen: Arc<Mutex<Seen>>,
    mut stop: watch::Receiver<bool>,
) -> Result<()> {
    let consumer: StreamConsumer = group_member_config(
        &bootstrap,
        GROUP,
        &format!("survivor-{i}"),
        Duration::from_millis(100),
        Duration::from_secs(10),
    )
    .create()?;
    consumer.subscribe(&[TOPIC])?;
    let mut processed = 0u64;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            received = tokio::time::timeout(Duration::from_millis(100), consumer.recv()) => {
                let Ok(received) = received else { continue };
                let m = match received {
                    Ok(m) => m,
                    // Transport errors while the coordinator or partition leader moves.
                    Err(e) => {
                        println!("consumer {i}: {e}");
                        continue;
                    }
                };
                {
                    let mut s = seen.lock().unwrap();
                    *s.consumed.entry((m.partition(), m.offset())).or_default() += 1;
                    let max = s.processed_max.entry(m.partition()).or_insert(-1);
                    *max = (*max).max(m.offset());
                }
                processed += 1;
                if processed % 2 == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                consumer.store_offset_from_message(&m)?;
            }
        }
    }
    // Dropping closes the consumer: it commits the stored offsets and leaves the group.
    drop(consumer);
    Ok(())
}

/// Reads the group's committed offsets every [`OBSERVE_INTERVAL`] until told to stop; a
/// reading that fails (no coordinator during the failover) is skipped.
fn observe(
    bootstrap: &str,
    observations: &Mutex<Vec<(Instant, Committed)>>,
    observing: &AtomicBool,
) -> Result<()> {
    let reader = offset_reader(bootstrap)?;
    while observing.load(Ordering::Relaxed) {
        if let Ok(committed) = committed_offsets(&reader) {
            observations.lock().unwrap().push((Instant::now(), committed));
        }
        std::thread::sleep(OBSERVE_INTERVAL);
    }
    Ok(())
}

/// A consumer of the group that never joins it: it only reads committed offsets.
fn offset_reader(bootstrap: &str) -> Result<BaseConsumer> {
    Ok(client_config(bootstrap).set("group.id", GROUP).set("client.id", "offset-reader").create()?)
}

/// The group's committed offset per partition (-1: none), by OffsetFetch.
fn committed_offsets(consumer: &BaseConsumer) -> Result<Committed> {
    let mut partitions = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        partitions.add_partition(TOPIC, p);
    }
    let committed = consumer.committed_offsets(partitions, CLIENT_REQUEST_TIMEOUT)?;
    (0..PARTITIONS)
        .map(|p| {
            let element = committed.find_partition(TOPIC, p).context("partition missing")?;
            match element.error() {
                Ok(()) => Ok(match element.offset() {
                    Offset::Offset(o) => o,
                    _ => -1,
                }),
                Err(e) => bail!("partition {p}: {e}"),
            }
        })
        .collect()
}

async fn log_end_offsets(bootstrap: &str) -> Result<Vec<i64>> {
    let bootstrap = bootstrap.to_string();
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = client_config(&bootstrap).set("group.id", "watermarks").create()?;
        (0..PARTITIONS)
            .map(|p| Ok(consumer.fetch_watermarks(TOPIC, p, CLIENT_REQUEST_TIMEOUT)?.1))
            .collect::<Result<Vec<i64>>>()
    })
    .await?
}

fn last_observation(observations: &Mutex<Vec<(Instant, Committed)>>) -> Option<Committed> {
    observations.lock().unwrap().last().map(|(_, c)| c.clone())
}

/// The first reading after `since` in which some partition's committed offset passed
/// `before`: the group committing again, on the new leader.
async fn wait_for_commits_past(
    observations: &Mutex<Vec<(Instant, Committed)>>,
    before: &Committed,
    since: Instant,
) -> Result<(Instant, Committed)> {
    let deadline = Instant::now() + TIMEOUT;
    while Instant::now() < deadline {
        let found = observations
            .lock()
            .unwrap()
            .iter()
            .find(|(at, c)| *at > since && c.iter().zip(before).any(|(now, then)| now > then))
            .cloned();
        if let Some(found) = found {
            return Ok(found);
        }
        tokio::time::sleep(OBSERVE_INTERVAL).await;
    }
    bail!("the group did not commit again within {TIMEOUT:?} of the kill")
}

async fn wait_for(seen: &Mutex<Seen>, what: &str, ok: impl Fn(&Seen) -> bool) -> Result<()> {
    let deadline = Instant::now() + TIMEOUT;
    while Instant::now() < deadline {
        if ok(&seen.lock().unwrap()) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bail!("timed out waiting for {what}: consumed {}", seen.lock().unwrap().consumed.len())
}

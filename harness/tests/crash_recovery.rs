//! kill -9 under load: every write acknowledged with acks=all survives, at the offset it was
//! acknowledged with, and the partitions hold nothing torn or invented.
//!
//! Writes in flight at the kill are unknown outcomes (present or absent, both fine); a record
//! that is present must still be one the producer sent, byte for byte.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use harness::kafka::{client_config, create_topics, read_partitions, PartitionRecords};
use harness::{Broker, BrokerOptions};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;

const TOPIC: &str = "crash";
const PARTITIONS: i32 = 3;
const SENDERS: usize = 16;
/// Acknowledged writes before the kill.
const ACKS_BEFORE_KILL: usize = 20_000;
const ACK_WAIT: Duration = Duration::from_secs(120);

/// One acknowledged write.
#[derive(Debug, Clone)]
struct Acked {
    partition: i32,
    offset: i64,
    key: String,
}

fn value_of(key: &str) -> String {
    format!("value-of-{key}-").repeat(8)
}

fn producer(bootstrap: &str) -> Result<FutureProducer> {
    Ok(client_config(bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "false")
        .set("linger.ms", "0")
        .set("message.timeout.ms", "5000")
        .create()?)
}

/// Closed-loop senders until `stop`; returns the acknowledged writes and the failure count.
async fn produce_until_stopped(
    producer: FutureProducer,
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<Acked>>>,
) -> usize {
    let next = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..SENDERS {
        let (producer, stop, acked) = (producer.clone(), stop.clone(), acked.clone());
        let (next, failures) = (next.clone(), failures.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let key = format!("k{:08}", next.fetch_add(1, Ordering::SeqCst));
                let value = value_of(&key);
                let record = FutureRecord::to(TOPIC).key(&key).payload(&value);
                match producer.send(record, Timeout::After(Duration::from_secs(5))).await {
                    Ok(d) => {
                        acked.lock().unwrap().push(Acked { partition: d.partition, offset: d.offset, key })
                    }
                    Err(_) => {
                        failures.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("sender task");
    }
    failures.load(Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread")]
async fn acknowledged_writes_survive_kill_9() {
    let mut broker = Broker::start(BrokerOptions::default()).expect("starting onelog");
    let result = acknowledged_writes_survive_kill_9_scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn acknowledged_writes_survive_kill_9_scenario(broker: &mut Broker) -> Result<()> {
    create_topics(&broker.bootstrap(), &[(TOPIC, PARTITIONS)]).await?;

    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let load =
        tokio::spawn(produce_until_stopped(producer(&broker.bootstrap())?, stop.clone(), acked.clone()));
    let started = Instant::now();
    let mut first_ack = None;
    while acked.lock().unwrap().len() < ACKS_BEFORE_KILL {
        if first_ack.is_none() && !acked.lock().unwrap().is_empty() {
            first_ack = Some(started.elapsed());
        }
        if started.elapsed() > ACK_WAIT || load.is_finished() {
            bail!("only {} acks after {ACK_WAIT:?}", acked.lock().unwrap().len());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    broker.kill9()?;
    let killed_at = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    let failures = load.await?;
    let acked = acked.lock().unwrap().clone();
    println!(
        "killed after {killed_at:?} (first ack after {first_ack:?}): {} acknowledged, \
         {failures} failed or unknown",
        acked.len()
    );

    broker.restart()?;
    let consumed = read_all(broker).await?;
    check_recovered(&acked, &consumed)?;

    // The recovered broker takes new writes after what it recovered.
    let after = producer(&broker.bootstrap())?;
    let delivery = after
        .send(
            FutureRecord::to(TOPIC).key("after").payload(&value_of("after")).partition(0),
            Duration::from_secs(10),
        )
        .await
        .map_err(|(e, _)| e)?;
    let recovered_len = consumed[&(TOPIC.to_owned(), 0)].len() as i64;
    ensure!(
        delivery.offset == recovered_len,
        "first write after restart got offset {}, partition 0 held {recovered_len}",
        delivery.offset
    );
    Ok(())
}

async fn read_all(broker: &Broker) -> Result<PartitionRecords> {
    let bootstrap = broker.bootstrap();
    let partitions: Vec<(String, i32)> = (0..PARTITIONS).map(|p| (TOPIC.to_owned(), p)).collect();
    tokio::task::spawn_blocking(move || read_partitions(&bootstrap, &partitions, Duration::from_secs(120)))
        .await?
}

fn check_recovered(acked: &[Acked], consumed: &PartitionRecords) -> Result<()> {
    let mut present_keys = 0;
    for ((topic, partition), records) in consumed {
        for (i, record) in records.iter().enumerate() {
            ensure!(
                record.offset == i as i64,
                "{topic}/{partition}: record #{i} at offset {}",
                record.offset
            );
            let key = record.key.as_deref().map(String::from_utf8_lossy).unwrap_or_default();
            ensure!(
                record.value.as_deref() == Some(value_of(&key).as_bytes()),
                "{topic}/{partition} offset {}: value does not belong to key {key:?}",
                record.offset
            );
            present_keys += 1;
        }
    }
    let mut by_position: BTreeMap<(i32, i64), &Acked> = BTreeMap::new();
    for a in acked {
        if let Some(other) = by_position.insert((a.partition, a.offset), a) {
            bail!("offset {}/{} acknowledged for {} and {}", a.partition, a.offset, other.key, a.key);
        }
        let records = &consumed[&(TOPIC.to_owned(), a.partition)];
        let record = records
            .get(a.offset as usize)
            .with_context(|| format!("acked {a:?} missing: partition holds {} records", records.len()))?;
        ensure!(
            record.key.as_deref() == Some(a.key.as_bytes()),
            "acked {a:?} but offset holds key {:?}",
            record.key.as_deref().map(String::from_utf8_lossy)
        );
    }
    println!(
        "after restart: {present_keys} records present, {} acknowledged, {} unacknowledged but present",
        acked.len(),
        present_keys - acked.len()
    );
    Ok(())
}

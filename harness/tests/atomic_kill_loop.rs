//! Native atomic writes under crashes (issue #5, acceptance 4): `send_atomic` of an order and its
//! inventory change — one Produce request spanning two topics — while the Raft leader of a
//! three-node cluster is killed with SIGKILL again and again. No crash may leave one topic
//! with a record the other lacks, read back under read_committed (librdkafka) and
//! read_uncommitted (raw Fetch); every acknowledged pair is present, and no pair is there twice
//! (each key is sent once, in one attempt, so a second copy is a write applied twice).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{ensure, Result};
use harness::atomic::{send_atomic, Slice, ATOMIC_PARTITION};
use harness::kafka::{create_topics, read_partitions};
use harness::raw_ops::fetch_all;
use harness::{Cluster, ClusterOptions, RawClient};

const ORDERS: &str = "orders";
const INVENTORY: &str = "inventory";
const KILL_ROUNDS: usize = 3;

#[tokio::test(flavor = "multi_thread")]
async fn send_atomic_never_tears_across_leader_kills() {
    let mut cluster = Cluster::start_with(ClusterOptions::new(3)).expect("starting cluster");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

/// Sends pairs until told to stop, trying every node until one accepts; returns the ids of
/// acknowledged pairs and how many attempts failed (outcome unknown, may or may not be there).
async fn sender(nodes: Vec<SocketAddr>, stop: Arc<AtomicBool>) -> (Vec<u64>, usize) {
    let mut acked = Vec::new();
    let mut failed = 0;
    let mut id = 0u64;
    let mut client: Option<RawClient> = None;
    let mut node = 0;
    while !stop.load(Ordering::Relaxed) {
        if client.is_none() {
            node = (node + 1) % nodes.len();
            client = RawClient::connect_negotiated(nodes[node]).await.ok();
            if client.is_none() {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        }
        let key = format!("order-{id:06}");
        let slices = [
            Slice { topic: ORDERS, key: key.as_bytes(), value: b"2 x widget" },
            Slice { topic: INVENTORY, key: key.as_bytes(), value: b"widget -2" },
        ];
        match send_atomic(client.as_mut().expect("connected"), &slices).await {
            Ok(_) => acked.push(id),
            Err(_) => {
                failed += 1;
                client = None; // another node may be the leader now
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        id += 1;
    }
    (acked, failed)
}

/// The keys as a sorted list: a multiset, so that a duplicated record makes two lists differ
/// and shows in `duplicates`.
fn keys_of(records: impl Iterator<Item = Option<Vec<u8>>>) -> Vec<String> {
    let mut keys: Vec<String> =
        records.map(|k| String::from_utf8_lossy(&k.unwrap_or_default()).into_owned()).collect();
    keys.sort();
    keys
}

fn duplicates(sorted_keys: &[String]) -> Vec<&String> {
    sorted_keys.windows(2).filter(|w| w[0] == w[1]).map(|w| &w[1]).collect()
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    cluster.wait_for_leader(Duration::from_secs(30))?;
    create_topics(&cluster.bootstrap(), &[(ORDERS, 1), (INVENTORY, 1)]).await?;
    let nodes: Vec<SocketAddr> = cluster.ids().into_iter().map(|id| cluster.kafka_addr(id)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let sending = tokio::spawn(sender(nodes, stop.clone()));
    for round in 0..KILL_ROUNDS {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let leader = cluster.leader()?;
        cluster.kill9(leader)?;
        let (new_leader, took) = cluster.wait_for_leader(Duration::from_secs(30))?;
        println!("round {round}: killed leader {leader}, node {new_leader} leads after {took:?}");
        cluster.start_node(leader)?;
        cluster.wait_serving(leader)?;
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    stop.store(true, Ordering::Relaxed);
    let (acked, failed) = sending.await?;
    cluster.wait_for_leader(Duration::from_secs(30))?;

    let bootstrap = cluster.bootstrap();
    let partitions = [(ORDERS.to_string(), ATOMIC_PARTITION), (INVENTORY.to_string(), ATOMIC_PARTITION)];
    let committed = tokio::task::spawn_blocking(move || {
        read_partitions(&bootstrap, &partitions, Duration::from_secs(60))
    })
    .await??;
    let committed_orders = keys_of(committed[&(ORDERS.to_string(), 0)].iter().map(|r| r.key.clone()));
    let committed_inventory = keys_of(committed[&(INVENTORY.to_string(), 0)].iter().map(|r| r.key.clone()));

    let leader = cluster.leader()?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    let raw_keys = |records: &[harness::batch::StoredRecord]| {
        keys_of(records.iter().map(|r| r.record.key.as_ref().map(|k| k.to_vec())))
    };
    let uncommitted_orders = raw_keys(&fetch_all(&mut client, ORDERS, 0).await?.records);
    let uncommitted_inventory = raw_keys(&fetch_all(&mut client, INVENTORY, 0).await?.records);

    println!(
        "acknowledged pairs {}, failed attempts {failed}, orders stored {} (read_committed) / {} (read_uncommitted)",
        acked.len(),
        committed_orders.len(),
        uncommitted_orders.len()
    );
    for (view, keys) in [
        ("read_committed orders", &committed_orders),
        ("read_committed inventory", &committed_inventory),
        ("read_uncommitted orders", &uncommitted_orders),
        ("read_uncommitted inventory", &uncommitted_inventory),
    ] {
        let twice = duplicates(keys);
        ensure!(twice.is_empty(), "{view}: {} keys stored more than once: {twice:?}", twice.len());
    }
    ensure!(committed_orders == committed_inventory, "read_committed: orders and inventory differ");
    ensure!(uncommitted_orders == uncommitted_inventory, "read_uncommitted: orders and inventory differ");
    ensure!(committed_orders == uncommitted_orders, "no transactions here: both views must agree");
    for id in &acked {
        let key = format!("order-{id:06}");
        ensure!(committed_orders.binary_search(&key).is_ok(), "acknowledged pair {key} is missing");
    }
    ensure!(acked.len() > 100, "the sender made too little progress to test anything: {}", acked.len());
    Ok(())
}

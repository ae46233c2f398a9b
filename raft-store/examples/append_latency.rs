//! Reports the latency of durable appends to a `LogStore` (a benchmark, not a test: it prints
//! figures and asserts nothing). Each append is awaited until its fdatasync completed, so this
//! measures one write + one fsync per entry, into new (fallocated) segments or, with `recycled`,
//! into recycled ones: the same number of entries is first written and purged, in 4 MiB
//! segments so that the measured appends roll through several of them.
//!
//! Run: `cargo run --release -p raft-store --example append_latency -- [dir] [count]
//! [entry_bytes] [new|recycled]` (default: a temporary directory, 2000 entries of 1024 bytes,
//! new).

use std::io::Cursor; // named by declare_raft_types! for the default SnapshotData
use std::time::{Duration, Instant};

use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId};
use raft_store::{LogStore, LogStoreOptions};

openraft::declare_raft_types!(BenchConfig: D = Vec<u8>, R = ());

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let tmp = tempfile::tempdir()?;
    let dir = args.get(1).map(Into::into).unwrap_or_else(|| tmp.path().to_path_buf());
    let count: u64 = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(2000);
    let entry_bytes: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(1024);

    let recycled = args.get(4).is_some_and(|m| m == "recycled");

    let opened = Instant::now();
    let mut options = LogStoreOptions::default();
    if recycled {
        options.segment_bytes = 4 * 1024 * 1024;
    }
    let mut store = LogStore::<BenchConfig>::open(&dir, options)?;
    println!("open: {:?} (segment preallocation continues in the background)", opened.elapsed());
    let first = if recycled { count + 1 } else { 1 };
    if recycled {
        for index in 1..=count {
            let log_id = LogId::new(CommittedLeaderId::new(1, 1), index);
            store
                .blocking_append([Entry { log_id, payload: EntryPayload::Normal(vec![7u8; entry_bytes]) }])
                .await?;
        }
        store.purge(LogId::new(CommittedLeaderId::new(1, 1), count)).await?;
        println!("wrote and purged {count} entries: the measured ones go into recycled segments");
    }

    let mut latencies = Vec::with_capacity(count as usize);
    let started = Instant::now();
    for index in first..first + count {
        let log_id = LogId::new(CommittedLeaderId::new(1, 1), index);
        let entry = Entry { log_id, payload: EntryPayload::Normal(vec![7u8; entry_bytes]) };
        let t = Instant::now();
        store.blocking_append([entry]).await?;
        latencies.push(t.elapsed());
    }
    let total = started.elapsed();
    println!("first append (may wait for the first segment): {:?}", latencies[0]);
    latencies.sort();
    println!(
        "{count} durable appends of {entry_bytes} B: p50 {:?} p99 {:?} max {:?}; {:.0} appends/s",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies[latencies.len() - 1],
        count as f64 / total.as_secs_f64()
    );
    Ok(())
}

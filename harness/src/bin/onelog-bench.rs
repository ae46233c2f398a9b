//! `onelog-bench`: closed-loop produce benchmark against a running broker, a spawned release
//! build, or a spawned release cluster of N voters, printed as a markdown table beside the
//! floor measured in the same run (loopback TCP round trip, fdatasync of a preallocated file).
//!
//! Each "producer" is one concurrent sender sharing a single librdkafka FutureProducer; it awaits
//! every delivery before sending the next record, so each latency sample is one message's.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::{Args, Parser, Subcommand};
use harness::bench::floor::{loopback_rtt, preallocated_fdatasync};
use harness::bench::stats::Percentiles;
use harness::kafka::client_config;
use harness::process::onelog_binary;
use harness::{Broker, BrokerOptions, Cluster, ClusterOptions};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{FutureProducer, FutureRecord};

#[derive(Parser)]
#[command(about = "Benchmarks for onelog; they report figures and assert nothing")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Closed-loop produce with acks=all.
    Produce(ProduceArgs),
    /// Transactional against idempotent produce (two partitions per unit), side by side.
    Txn(ProduceArgs),
    /// Disk footprint: one-record partitions with and without whole-segment preallocation
    /// on spawned release clusters, side by side (issue 13).
    Disk(DiskArgs),
    /// Only the floor: loopback TCP round trip and fdatasync of a preallocated file.
    Floor {
        /// Directory for the fdatasync file; the system temp directory by default.
        #[arg(long)]
        sync_dir: Option<PathBuf>,
    },
}

#[derive(Args)]
struct ProduceArgs {
    /// A running broker or cluster (host:port,...); conflicts with --spawn and --spawn-cluster.
    #[arg(long, conflicts_with_all = ["spawn", "spawn_cluster"], required_unless_present_any = ["spawn", "spawn_cluster"])]
    bootstrap: Option<String>,
    /// Start a release onelog (ONELOG_BIN or target/release/onelog) in a temporary directory.
    #[arg(long, conflicts_with = "spawn_cluster")]
    spawn: bool,
    /// Start a cluster of N release onelog voters (ONELOG_BIN or target/release/onelog) on
    /// 127.0.0.1, each in its own temporary directory, and produce against all of them.
    #[arg(long, value_name = "N")]
    spawn_cluster: Option<u64>,
    #[arg(long, default_value_t = 1024)]
    record_bytes: usize,
    /// Seconds per producer count.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Comma-separated concurrent sender counts, one table row each.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100")]
    producers: Vec<usize>,
    #[arg(long, default_value = "onelog-bench")]
    topic: String,
    #[arg(long, default_value_t = 1)]
    partitions: i32,
    /// Directory for the fdatasync floor; the spawned broker's node directory, else the system
    /// temp directory.
    #[arg(long)]
    sync_dir: Option<PathBuf>,
}

#[derive(Args)]
struct DiskArgs {
    #[arg(long, default_value_t = 3)]
    nodes: u64,
    #[arg(long, default_value_t = 1000)]
    partitions: i32,
    #[arg(long, default_value_t = 100)]
    record_bytes: usize,
    /// `log.segment.bytes` of the old-footprint run: whole 128 MiB segments for 1,000
    /// partitions on 3 nodes would need 375 GiB, so the old footprint runs at this size (and
    /// the new one too, beside the default 128 MiB).
    #[arg(long, default_value_t = 1024 * 1024)]
    old_segment_bytes: u64,
}

#[tokio::main]
async fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Produce(args) => produce(args).await,
        Command::Disk(args) => disk(args).await,
        Command::Txn(args) => txn(args).await,
        Command::Floor { sync_dir } => {
            let sync_dir = sync_dir.unwrap_or_else(std::env::temp_dir);
            print_floor(&loopback_rtt()?, &preallocated_fdatasync(&sync_dir)?, &sync_dir);
            Ok(())
        }
    }
}

/// What the benchmark produces against.
enum Target {
    Running(String),
    Broker(Broker),
    Cluster(Cluster),
}

impl Target {
    fn bootstrap(&self) -> String {
        match self {
            Target::Running(b) => b.clone(),
            Target::Broker(b) => b.bootstrap(),
            Target::Cluster(c) => c.bootstrap(),
        }
    }

    fn describe(&self) -> String {
        match self {
            Target::Running(b) => format!("broker {b}"),
            Target::Broker(b) => format!("one spawned node {}", b.bootstrap()),
            Target::Cluster(c) => format!("spawned {}-node cluster {}", c.ids().len(), c.bootstrap()),
        }
    }

    fn dir(&self) -> Option<PathBuf> {
        match self {
            Target::Running(_) => None,
            Target::Broker(b) => Some(b.dir().to_path_buf()),
            Target::Cluster(c) => Some(c.root().to_path_buf()),
        }
    }

    /// Replication factor for the benchmark topic: every voter is a replica.
    fn replication(&self) -> i32 {
        match self {
            Target::Cluster(c) => c.ids().len() as i32,
            _ => 1,
        }
    }
}

fn target(args: &ProduceArgs) -> Result<Target> {
    Ok(match (args.spawn, args.spawn_cluster, &args.bootstrap) {
        (true, _, _) => Target::Broker(spawn_release()?),
        (false, Some(nodes), _) => Target::Cluster(spawn_release_cluster(nodes)?),
        (false, None, Some(b)) => Target::Running(b.clone()),
        (false, None, None) => bail!("--bootstrap, --spawn or --spawn-cluster N"),
    })
}

async fn produce(args: ProduceArgs) -> Result<()> {
    let target = target(&args)?;
    let bootstrap = target.bootstrap();
    let sync_dir = args.sync_dir.clone().or_else(|| target.dir()).unwrap_or_else(std::env::temp_dir);
    let rtt = loopback_rtt()?;
    let fsync = preallocated_fdatasync(&sync_dir)?;
    ensure_topic(&bootstrap, &args.topic, args.partitions, target.replication()).await?;

    println!(
        "\nproduce, acks=all, {} B records, {} s per row, {}\n",
        args.record_bytes,
        args.seconds,
        target.describe()
    );
    println!("| producers | msgs/s | MB/s | p50 ms | p99 ms |");
    println!("|---:|---:|---:|---:|---:|");
    for &producers in &args.producers {
        let row = run_closed_loop(&bootstrap, &args, producers).await?;
        println!(
            "| {producers} | {:.0} | {:.2} | {:.3} | {:.3} |",
            row.msgs_per_s, row.mb_per_s, row.latency.p50_ms, row.latency.p99_ms
        );
    }
    println!("\nfloor, same run:");
    print_floor(&rtt, &fsync, &sync_dir);
    Ok(())
}

/// `txn`: for each producer count, an idempotent row and a transactional row, and their ratio.
async fn txn(args: ProduceArgs) -> Result<()> {
    use harness::bench::txn::{run, Mode, RowOptions};
    let target = target(&args)?;
    let bootstrap = target.bootstrap();
    ensure_topic(&bootstrap, &args.topic, args.partitions.max(2), target.replication()).await?;
    println!(
        "\ntransactional vs idempotent, acks=all, one {} B record to each of 2 partitions per unit, {} s per row, {}\n",
        args.record_bytes,
        args.seconds,
        target.describe()
    );
    println!("| producers | mode | units/s | records/s | p50 ms | p99 ms | p50 ratio | throughput ratio |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    for &producers in &args.producers {
        let row = |mode| RowOptions {
            bootstrap: bootstrap.clone(),
            topic: args.topic.clone(),
            record_bytes: args.record_bytes,
            duration: Duration::from_secs(args.seconds),
            producers,
            mode,
        };
        let idem = run(row(Mode::Idempotent)).await?;
        let txn = run(row(Mode::Transactional)).await?;
        let line = |name: &str, r: &harness::bench::txn::Row, ratios: &str| {
            println!(
                "| {producers} | {name} | {:.0} | {:.0} | {:.3} | {:.3} | {ratios} |",
                r.units_per_s, r.records_per_s, r.latency.p50_ms, r.latency.p99_ms
            )
        };
        line("idempotent", &idem, " | ");
        let ratios = format!(
            "{:.2}× | {:.2}×",
            txn.latency.p50_ms / idem.latency.p50_ms,
            txn.units_per_s / idem.units_per_s
        );
        line("transactional", &txn, &ratios);
    }
    Ok(())
}

/// `disk`: the three variants one after another, then the fdatasync of each way to grow a file.
async fn disk(args: DiskArgs) -> Result<()> {
    use harness::bench::disk::{fdatasync_by_growth, run, sync_dir, Growth, Variant};
    let binary = onelog_binary("release")?;
    let default_segment_bytes = 128 * 1024 * 1024;
    let variants = [
        Variant {
            name: "old: log.preallocate=true",
            segment_bytes: args.old_segment_bytes,
            preallocate: true,
        },
        Variant { name: "new: reserved in steps", segment_bytes: args.old_segment_bytes, preallocate: false },
        Variant { name: "new: reserved in steps", segment_bytes: default_segment_bytes, preallocate: false },
    ];
    let mut rows = Vec::new();
    for variant in variants {
        rows.push(run(&binary, args.nodes, args.partitions, args.record_bytes, variant).await?);
    }
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!(
        "
disk: {} one-record partitions ({} B records) on {} nodes, produce acks=all one record at a time
",
        args.partitions, args.record_bytes, args.nodes
    );
    println!("| footprint | log.segment.bytes | partition files per node, MiB | per partition per node, KiB | data dir per node, MiB | 1st record p50 / p99 ms | 2nd record p50 / p99 ms |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for row in &rows {
        let files: Vec<String> = row.per_node.iter().map(|(p, _)| format!("{:.1}", mib(*p))).collect();
        let data: Vec<String> = row.per_node.iter().map(|(_, d)| format!("{:.1}", mib(*d))).collect();
        let max_files = row.per_node.iter().map(|(p, _)| *p).max().unwrap_or(0);
        println!(
            "| {} | {} | {} | {:.1} | {} | {:.3} / {:.3} | {:.3} / {:.3} |",
            row.variant.name,
            row.variant.segment_bytes,
            files.join(" / "),
            max_files as f64 / 1024.0 / args.partitions.max(1) as f64,
            data.join(" / "),
            row.first.p50_ms,
            row.first.p99_ms,
            row.second.p50_ms,
            row.second.p99_ms
        );
    }
    let old =
        rows[0].per_node.iter().map(|(p, _)| *p).max().unwrap_or(0) as f64 / args.partitions.max(1) as f64;
    println!(
        "
old footprint at the default log.segment.bytes ({default_segment_bytes}): {:.0} MiB per partition per node, {:.1} GiB per node for {} partitions (computed, not run)",
        mib(default_segment_bytes) * (old / args.old_segment_bytes as f64),
        mib(default_segment_bytes) * (old / args.old_segment_bytes as f64) * args.partitions as f64 / 1024.0,
        args.partitions
    );
    let dir = sync_dir();
    println!(
        "
| 4 KiB write + fdatasync, file in {} | samples | p50 ms | p99 ms |",
        dir.display()
    );
    println!("|---|---:|---:|---:|");
    for (name, growth) in [
        ("pre-written (Raft log segments)", Growth::PreWritten),
        ("sparse, fallocate in 64 KiB steps (partition segments)", Growth::ReservedSteps),
        ("appending, file grows", Growth::Appending),
    ] {
        let p = fdatasync_by_growth(&dir, growth)?;
        println!("| {name} | {} | {:.3} | {:.3} |", p.samples, p.p50_ms, p.p99_ms);
    }
    Ok(())
}

fn print_floor(rtt: &Percentiles, fsync: &Percentiles, sync_dir: &Path) {
    println!("\n| floor | samples | p50 ms | p99 ms |");
    println!("|---|---:|---:|---:|");
    println!("| loopback TCP RTT | {} | {:.3} | {:.3} |", rtt.samples, rtt.p50_ms, rtt.p99_ms);
    println!(
        "| fdatasync, preallocated file in {} | {} | {:.3} | {:.3} |",
        sync_dir.display(),
        fsync.samples,
        fsync.p50_ms,
        fsync.p99_ms
    );
}

fn spawn_release() -> Result<Broker> {
    let options = BrokerOptions { binary: Some(onelog_binary("release")?), ..BrokerOptions::default() };
    let broker = Broker::start(options)?;
    eprintln!("spawned onelog at {} (log {})", broker.bootstrap(), broker.log_path().display());
    Ok(broker)
}

fn spawn_release_cluster(nodes: u64) -> Result<Cluster> {
    let options = ClusterOptions { profile: "release", ..ClusterOptions::new(nodes) };
    let cluster = Cluster::start_with(options)?;
    eprintln!(
        "spawned {nodes} onelog nodes at {} (directories in {})",
        cluster.bootstrap(),
        cluster.root().display()
    );
    Ok(cluster)
}

async fn ensure_topic(bootstrap: &str, topic: &str, partitions: i32, replication: i32) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create()?;
    let new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(replication));
    for result in admin.create_topics([&new_topic], &AdminOptions::new()).await? {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => bail!("creating {name}: {code:?}"),
        }
    }
    Ok(())
}

struct Row {
    msgs_per_s: f64,
    mb_per_s: f64,
    latency: Percentiles,
}

async fn run_closed_loop(bootstrap: &str, args: &ProduceArgs, producers: usize) -> Result<Row> {
    let producer: FutureProducer = client_config(bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "false")
        .set("linger.ms", "0")
        .set("message.timeout.ms", "30000")
        .create()?;
    let payload: Arc<Vec<u8>> = Arc::new((0..args.record_bytes).map(|i| (i * 31 % 251) as u8).collect());
    let topic = Arc::new(args.topic.clone());
    let duration = Duration::from_secs(args.seconds);
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(producers);
    for sender in 0..producers {
        let (producer, payload, topic) = (producer.clone(), payload.clone(), topic.clone());
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut n = 0u64;
            while start.elapsed() < duration {
                let key = format!("{sender}-{n}");
                let record = FutureRecord::to(topic.as_str()).key(&key).payload(payload.as_slice());
                let sent = Instant::now();
                producer.send(record, Duration::from_secs(30)).await.map_err(|(e, _)| e)?;
                samples.push(sent.elapsed());
                n += 1;
            }
            anyhow::Ok(samples)
        }));
    }
    let mut samples = Vec::new();
    for task in tasks {
        samples.extend(task.await??);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let count = samples.len() as f64;
    Ok(Row {
        msgs_per_s: count / elapsed,
        mb_per_s: count * args.record_bytes as f64 / elapsed / 1e6,
        latency: Percentiles::of(samples),
    })
}

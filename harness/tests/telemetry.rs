//! KIP-714 with a Java 4.1 client: onelog advertises GetTelemetrySubscriptions and answers an
//! empty subscription (what Kafka answers with no client-metrics resources). The producer must
//! work without a telemetry error, ask for its subscription once at start, never push, and not
//! ask again within the push interval (no retry storm). The broker logs each ask at debug
//! level; the test counts those lines on every node.

use anyhow::{ensure, Context, Result};
use harness::java::Clients;
use harness::raw_ops::create_topics_ok;
use harness::{Cluster, ClusterOptions, RawClient};

const SEGMENT_BYTES: u32 = 1024 * 1024;
const RECORDS: u64 = 200;
/// The broker's log line for one subscription served.
const SERVED: &str = "empty telemetry subscription served";
/// At most this many asks from one short-lived producer: one at start, one more if its first
/// connection is to a node that is not the one it keeps (no retries beyond).
const ASKS_MAX: usize = 2;

#[tokio::test(flavor = "multi_thread")]
async fn java_client_takes_the_empty_telemetry_subscription_and_does_not_retry() {
    let mut options = ClusterOptions::new(3).config("log.segment.bytes", SEGMENT_BYTES);
    options.env.push(("RUST_LOG".into(), "info,broker::handlers::get_telemetry_subscriptions=debug".into()));
    let mut cluster = Cluster::start_with(options).expect("starting three onelog nodes");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    create_topics_ok(&mut client, &[("telemetry", 1)]).await?;
    let args = vec![cluster.bootstrap(), "--topic=telemetry".to_string(), format!("--count={RECORDS}")];
    let out = Clients::Kafka4.run_text("Produce", &args)?;
    let summary: serde_json::Value =
        serde_json::from_str(out.stdout.lines().last().context("no summary")?).context("summary JSON")?;
    ensure!(summary["acked"] == RECORDS, "Produce: {summary}");
    let complaints: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.to_lowercase().contains("telemetry") && (l.contains("WARN") || l.contains("ERROR")))
        .collect();
    ensure!(complaints.is_empty(), "the client complained about telemetry:\n{}", complaints.join("\n"));
    let mut asks = 0;
    for id in cluster.ids() {
        let log = std::fs::read_to_string(cluster.log_path(id))?;
        asks += log.lines().filter(|l| l.contains(SERVED)).count();
        // handlers::not_served logs every PushTelemetry (rate-limited, so any push shows).
        ensure!(!log.contains("api=PushTelemetry"), "node {id}: the client pushed metrics nobody asked for");
    }
    ensure!(
        (1..=ASKS_MAX).contains(&asks),
        "{asks} subscription asks from one producer (want 1..={ASKS_MAX})"
    );
    println!("Java 4.1 producer: {RECORDS} records acked, {asks} telemetry subscription ask(s), no push");
    Ok(())
}

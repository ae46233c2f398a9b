//! The demo programs' logic (`demo-checkout`, `demo-pipeline`; issue 16): two small
//! applications of the kind onelog is for, each with a bounded run and a check at its end, run
//! by `docker-compose.yml`, `scripts/demo.sh` and `harness/tests/demo_runs.rs` alike.
//!
//! - `checkout`: an order and its stock decrement written together, by one multi-topic
//!   Produce request or by a transaction; `checkout_check` reads both topics back;
//! - `pipeline`: the exactly-once consume-process-produce pipeline, the chaos copier under the
//!   demo's names, and its verifier.
//!
//! Both are clients of a cluster that may lose its leader mid-run: they retry what is safe to
//! retry, and count what they cannot know (a write whose answer was lost) as unknown, which
//! the checks allow to be present or absent but never torn.

pub mod checkout;
pub mod checkout_check;
pub mod pipeline;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;

use crate::atomic::now_ms;
use crate::chaos::checker::Violations;
use crate::kafka::client_config;

/// How long a demo waits for the cluster to take its topics (a cluster just started may
/// still be electing its first leader).
pub const TOPICS_READY_WAIT: Duration = Duration::from_secs(60);

/// A run id that differs between runs (milliseconds since the epoch, in hex): every record a
/// run writes carries it, so a run's check ignores what earlier runs left in the same topics.
pub fn fresh_run_id() -> String {
    format!("{:x}", now_ms())
}

/// Creates the topics that do not exist yet (an earlier run's are kept), retrying for
/// [`TOPICS_READY_WAIT`] while the cluster cannot take them.
pub async fn ensure_topics(bootstrap: &str, topics: &[(&str, i32)]) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create()?;
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let new_topics: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|(name, partitions)| NewTopic::new(name, *partitions, TopicReplication::Fixed(1)))
        .collect();
    let deadline = Instant::now() + TOPICS_READY_WAIT;
    loop {
        let failed: Vec<String> = match admin.create_topics(&new_topics, &options).await {
            Ok(results) => results
                .into_iter()
                .filter_map(|r| match r {
                    Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => None,
                    Err((name, code)) => Some(format!("{name}: {code:?}")),
                })
                .collect(),
            Err(e) => vec![e.to_string()],
        };
        if failed.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("creating topics for {TOPICS_READY_WAIT:?}: {}", failed.join(", "));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Sleeps until `n` operations at `per_second` have had their time since `start`: a demo's
/// writers go at a steady pace, so a run lasts long enough for a leader to be killed in it.
pub fn pace(start: Instant, n: u64, per_second: f64) {
    if per_second <= 0.0 {
        return;
    }
    let due = start + Duration::from_secs_f64(n as f64 / per_second);
    if let Some(wait) = due.checked_duration_since(Instant::now()) {
        std::thread::sleep(wait);
    }
}

/// A demo program's end: the violations' examples on stderr, the summary line on stdout, and
/// the exit status (1 on any violation).
pub fn finish(violations: &Violations, summary: &str) -> ExitCode {
    for (kind, examples) in &violations.examples {
        eprintln!("{kind}: {}", examples.join("; "));
    }
    println!("{summary}");
    if violations.total() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

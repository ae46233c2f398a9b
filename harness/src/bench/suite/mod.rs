//! The Rust port (librdkafka) of the four benches of the Java suite in harness/java
//! (`dev.onelog.bench`, after kafka-tx-performance), run by the `txbench` binary with the same
//! environment-variable interface, topics, transactional ids, groups, outputs and summary line,
//! so that both suites' figures can be read by the same script:
//! - BaseWritesBench / TxWritesBench: [`writes`], one record to each of topic1 and topic2 per
//!   iteration, the second in a transaction (default TX_ID tx-writes-bench);
//! - BaseStreamingBench / TxStreamingBench: [`streaming`], read topic1, forward to topic2 and
//!   commit the group's offset (default GROUP streaming-bench, TX_ID tx-streaming-bench);
//! - CreateTopics: [`topics`].
//!
//! Settings: [`config`]; the warm-up, measurement and outputs: [`runner`].

pub mod clients;
pub mod config;
pub mod runner;
pub mod streaming;
pub mod topics;
pub mod writes;

use anyhow::{bail, Result};

use config::BenchConfig;
use streaming::{fill_source, Streaming};
use writes::Writes;

/// What `txbench` accepts.
pub const COMMANDS: [&str; 5] =
    ["BaseWritesBench", "TxWritesBench", "BaseStreamingBench", "TxStreamingBench", "CreateTopics"];

/// Runs one of [`COMMANDS`].
pub fn main(command: &str) -> Result<()> {
    // Only awaits delivery and admin futures, which need no worker threads of their own.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let rt = runtime.handle();
    match command {
        "CreateTopics" => runtime.block_on(topics::create_topics()),
        "BaseWritesBench" | "TxWritesBench" => {
            let cfg = BenchConfig::from_env("tx-writes-bench", "streaming-bench")?;
            let tx = command == "TxWritesBench";
            runner::run(command, &cfg, |i| {
                Writes::open(&cfg, tx.then(|| cfg.tx_id(i)).as_deref(), rt.clone())
            })
        }
        "BaseStreamingBench" | "TxStreamingBench" => {
            let cfg = BenchConfig::from_env("tx-streaming-bench", "streaming-bench")?;
            let tx = command == "TxStreamingBench";
            let first = fill_source(&cfg, cfg.producers as u64 * cfg.iterations(), rt.clone())?;
            runner::run(command, &cfg, |i| {
                let from = first + (i as u64 * cfg.iterations()) as i64;
                Streaming::open(&cfg, &cfg.group(i), tx.then(|| cfg.tx_id(i)).as_deref(), from, rt.clone())
            })
        }
        other => bail!("unknown bench {other:?}; one of {}", COMMANDS.join(", ")),
    }
}

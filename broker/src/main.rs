//! `onelog`: a Kafka-wire-compatible broker whose every write is an entry in one Raft log.
//!
//! With no arguments it serves a one-node cluster on 127.0.0.1:9092 with data in `./data`.
//! Everything but argument parsing, logging and the runtime lives in the `broker` library.

use clap::Parser;
use tracing_subscriber::EnvFilter;

#[global_allocator]
static ALLOC: broker::alloc_guard::GuardedAlloc = broker::alloc_guard::GuardedAlloc;

fn main() -> anyhow::Result<()> {
    let args = broker::config::Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,openraft=warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = runtime.block_on(broker::node::run(args));
    if let Err(e) = &result {
        tracing::error!(error = %format!("{e:#}"), "onelog stopped");
    }
    result
}

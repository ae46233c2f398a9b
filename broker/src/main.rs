//! `onelog`: a Kafka-wire-compatible broker whose every write is an entry in one Raft log.
//!
//! With no arguments it serves a one-node cluster on 127.0.0.1:9092 with data in `./data`.

mod admin;
mod admin_api;
mod alloc_guard;
mod config;
mod ctx;
mod duties;
mod fault;
mod forward;
mod groups;
mod handlers;
mod limits;
mod node;
mod proposer;
mod raft;
mod server;
mod state;
mod storage;
#[cfg(test)]
mod test_batches;
mod txn_duties;
mod txn_memory;
mod txn_views;

use clap::Parser;
use tracing_subscriber::EnvFilter;

#[global_allocator]
static ALLOC: alloc_guard::GuardedAlloc = alloc_guard::GuardedAlloc;

fn main() -> anyhow::Result<()> {
    let args = config::Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,openraft=warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = runtime.block_on(node::run(args));
    if let Err(e) = &result {
        tracing::error!(error = %format!("{e:#}"), "onelog stopped");
    }
    result
}

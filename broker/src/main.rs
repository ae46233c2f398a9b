//! `onelog`: a Kafka-wire-compatible broker whose every write is an entry in one Raft log.
//!
//! With no arguments it serves a one-node cluster on 127.0.0.1:9092 with data in `./data`;
//! `onelog admin …` is the operators' command line against a running cluster (`broker::cli`).
//! Everything but argument parsing, logging and the runtime lives in the `broker` library.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

#[global_allocator]
static ALLOC: broker::alloc_guard::GuardedAlloc = broker::alloc_guard::GuardedAlloc;

/// onelog: a Kafka-compatible broker whose every write is an entry in one Raft log.
///
/// Without a subcommand it runs the broker with the flags below.
#[derive(Debug, Parser)]
#[command(name = "onelog", version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(flatten)]
    broker: broker::config::Args,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Operate a running cluster: status, membership, leadership, topics, groups, transactions.
    Admin(broker::cli::AdminArgs),
}

/// Colour only for a person at a terminal: a log file gets plain lines, as Kafka's and
/// Redpanda's do. `with_ansi` overrides tracing-subscriber's own NO_COLOR check, so it is
/// repeated here (https://no-color.org: set and non-empty means no colour).
fn colour_logs() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    std::io::stderr().is_terminal() && !no_color
}

/// Runs the node on a runtime with `onelog.runtime.worker.threads` workers (0: tokio's
/// default, one per CPU the process may use).
fn serve(config: broker::config::BrokerConfig) -> anyhow::Result<()> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if config.settings.runtime_worker_threads > 0 {
        builder.worker_threads(config.settings.runtime_worker_threads);
    }
    builder.enable_all().build()?.block_on(broker::node::run(config))
}

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    if let Some(Command::Admin(admin)) = cli.command {
        return Ok(broker::cli::run(admin));
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,openraft=warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(colour_logs())
        .init();
    let result = broker::config::BrokerConfig::load(&cli.broker).and_then(serve);
    if let Err(e) = &result {
        tracing::error!(error = %format!("{e:#}"), "onelog stopped");
    }
    result.map(|()| ExitCode::SUCCESS)
}

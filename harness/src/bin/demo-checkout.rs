//! `demo-checkout`: orders and their stock decrements written all-or-nothing, then checked.
//!
//!   demo-checkout --bootstrap 127.0.0.1:19092,127.0.0.1:19093 --mode both --orders 1000
//!
//! `--mode atomic-produce` puts each order and its inventory record in one multi-topic Produce
//! request, `--mode transactional` in one transaction (one in `--abort-one-in` aborted on
//! purpose), `--mode both` runs the two writers at once. At the end it reads `orders` and
//! `inventory` under read_committed, prints a one-line summary with the figures, and exits 1
//! if any order lacks its inventory record (or the other way round), is there twice, or was
//! aborted and is visible (see `harness::demo::checkout`).

use std::process::ExitCode;

use clap::Parser;
use harness::demo::checkout::{run, CheckoutConfig, Mode};
use harness::demo::{finish, fresh_run_id};

#[derive(Parser, Debug)]
#[command(about = "The checkout demo: an order and its stock decrement, written atomically, then checked")]
struct Args {
    /// Kafka bootstrap servers, host:port, comma separated.
    #[arg(long)]
    bootstrap: String,
    #[arg(long, value_enum, default_value = "both")]
    mode: Mode,
    /// Orders each writer places.
    #[arg(long, default_value_t = 1000)]
    orders: u64,
    /// Orders each writer places per second at most.
    #[arg(long, default_value_t = 50.0)]
    per_second: f64,
    /// The transactional writer aborts one order in this many on purpose, then retries it (0: none).
    #[arg(long, default_value_t = 10)]
    abort_one_in: u64,
    /// Partitions of `orders` and `inventory` when this run creates them.
    #[arg(long, default_value_t = 3)]
    partitions: i32,
    /// Tags this run's records (default: the time); the check looks at this run's only.
    #[arg(long)]
    run_id: Option<String>,
}

fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    let config = CheckoutConfig {
        bootstrap: args.bootstrap,
        mode: args.mode,
        orders: args.orders,
        per_second: args.per_second,
        abort_one_in: args.abort_one_in,
        partitions: args.partitions,
        run_id: args.run_id.unwrap_or_else(fresh_run_id),
    };
    let report = run(&config)?;
    Ok(finish(&report.violations, &report.summary()))
}

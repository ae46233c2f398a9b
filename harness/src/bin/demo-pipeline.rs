//! `demo-pipeline`: an exactly-once consume-process-produce pipeline, then verified.
//!
//!   demo-pipeline --bootstrap 127.0.0.1:19092,127.0.0.1:19093 --seconds 30
//!
//! A feeder writes numbered records to `pipeline-in` for `--seconds`; processors in one
//! consumer group turn each into a record of `pipeline-out` inside a transaction that also
//! commits the consumed offsets. Then the processors drain the input, and the verifier checks
//! that the output is the input, each record exactly once and in order per partition, and that
//! the group's committed offsets are the input's end offsets; it prints a one-line summary with
//! the figures and exits 1 on any violation (see `harness::demo::pipeline`).

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use harness::demo::finish;
use harness::demo::pipeline::{run, PipelineConfig};

#[derive(Parser, Debug)]
#[command(about = "The exactly-once pipeline demo: feed, process in transactions, verify")]
struct Args {
    /// Kafka bootstrap servers, host:port, comma separated.
    #[arg(long)]
    bootstrap: String,
    /// How long the feeder writes input.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Partitions of `pipeline-in` and `pipeline-out` when this run creates them.
    #[arg(long, default_value_t = 4)]
    partitions: i32,
    /// Processor instances in the consumer group (at least 2).
    #[arg(long, default_value_t = 2)]
    processors: usize,
    /// Tags this run's records (default: the time); the verifier looks at this run's only.
    #[arg(long)]
    run_id: Option<String>,
}

fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    let mut config = PipelineConfig::new(&args.bootstrap, Duration::from_secs(args.seconds));
    config.partitions = args.partitions;
    config.processors = args.processors;
    if let Some(run_id) = args.run_id {
        config.run_id = run_id;
    }
    let report = run(&config)?;
    Ok(finish(&report.violations, &report.summary()))
}

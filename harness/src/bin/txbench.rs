//! `txbench BENCH`: the Rust (librdkafka) port of the Java transaction benches of harness/java,
//! with their interface — BENCH is BaseWritesBench, TxWritesBench, BaseStreamingBench,
//! TxStreamingBench or CreateTopics, and the settings are environment variables:
//!
//! ```sh
//! KAFKA_CONNECTION=127.0.0.1:9092 txbench CreateTopics
//! KAFKA_CONNECTION=127.0.0.1:9092 WARMUP=1000 TXES=1000 MEASURES=tx.writes.log txbench TxWritesBench
//! ```
//!
//! See `harness::bench::suite` for what each bench measures and which variables it reads.

use harness::bench::suite::{main as run, COMMANDS};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [command] = args.as_slice() else {
        eprintln!("usage: txbench {}", COMMANDS.join("|"));
        std::process::exit(2);
    };
    if let Err(e) = run(command) {
        eprintln!("txbench {command}: {e:#}");
        std::process::exit(1);
    }
}

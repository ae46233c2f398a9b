//! Logs are plain text when stderr is not a terminal (issue 27): a broker whose stderr is a
//! file writes no ANSI escape sequences there, as Kafka and Redpanda write plain lines. The
//! harness sets `NO_COLOR=` (empty, which no-color.org reads as unset), so the test does not
//! pass on an inherited `NO_COLOR=1`: only the broker's own terminal check keeps colour out.

use anyhow::{ensure, Result};
use harness::{Broker, BrokerOptions};

/// The start of every ANSI control sequence (CSI) tracing-subscriber's colours use.
const CSI: &str = "\x1b[";

#[test]
fn a_log_file_gets_no_ansi_colour_codes() {
    let options = BrokerOptions::default().env("NO_COLOR", "").env("RUST_LOG", "debug,openraft=info");
    let mut broker = Broker::start(options).expect("starting onelog");
    let result = scenario(&mut broker);
    broker.unwrap_or_dump(result);
}

fn scenario(broker: &mut Broker) -> Result<()> {
    // SIGTERM, so the shutdown lines are in the file too.
    let status = broker.terminate()?;
    ensure!(status.success(), "onelog exited with {status} after SIGTERM");
    let log = std::fs::read_to_string(broker.log_path())?;
    ensure!(log.lines().count() >= 3, "too few log lines to judge:\n{log}");
    let coloured: Vec<&str> = log.lines().filter(|l| l.contains(CSI)).take(5).collect();
    ensure!(
        coloured.is_empty(),
        "{} of {} log lines carry ANSI escape codes, e.g.:\n{}",
        log.lines().filter(|l| l.contains(CSI)).count(),
        log.lines().count(),
        coloured.join("\n").replace('\x1b', "\\x1b")
    );
    println!("{} log lines, none with an ANSI escape code", log.lines().count());
    Ok(())
}

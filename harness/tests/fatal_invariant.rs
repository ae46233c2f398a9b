//! Regression: a failed invariant while applying an entry used to panic with the applied
//! state's write lock held, poisoning it, so every later request handler panicked on the lock
//! while the node kept its listener open until a watcher noticed. Now the one fatal path
//! stops the node at once: exit code 70 and one "invariant failed" line, and nothing is served
//! from the state the failure left behind. Fault `invariant-fails-in-apply` (fault-injection
//! build only) panics inside apply at the first appended batch.

use std::time::Duration;

use anyhow::{ensure, Result};
use harness::atomic::{send_atomic, Slice};
use harness::raw_ops::create_topics_ok;
use harness::{Broker, BrokerOptions, RawClient};

const FAULT: &str = "invariant-fails-in-apply";
/// The fatal path's exit code (`broker::fatal::EXIT_CODE`, EX_SOFTWARE).
const FATAL_EXIT_CODE: i32 = 70;

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_invariant_in_apply_stops_the_node_with_exit_code_70() {
    let mut broker =
        Broker::start(BrokerOptions::default().env("ONELOG_FAULT", FAULT)).expect("starting onelog");
    let result = scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn scenario(broker: &mut Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    // Creating a topic appends nothing: the fault is not reached.
    create_topics_ok(&mut client, &[("fatal", 1)]).await?;
    let produced = send_atomic(&mut client, &[Slice { topic: "fatal", key: b"k", value: b"v" }]).await;
    ensure!(
        produced.is_err(),
        "a produce was acknowledged at {produced:?} although its apply failed: \
         is ONELOG_BIN built with --features fault-injection?"
    );
    let status = broker.wait_exit(Duration::from_secs(30))?;
    ensure!(status.code() == Some(FATAL_EXIT_CODE), "the node stopped with {status}, not exit code 70");
    let log = broker.log_tail(200);
    ensure!(log.contains("invariant failed"), "no \"invariant failed\" line in the log:\n{log}");
    ensure!(!log.contains("poisoned"), "a handler met a poisoned lock before the node stopped:\n{log}");
    println!("the node stopped through the fatal path: {status}");
    Ok(())
}

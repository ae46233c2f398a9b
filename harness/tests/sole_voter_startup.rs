//! A one-node cluster's Kafka listener opens only once the node takes writes.
//!
//! Regression (CI, internal_topic under load): the harness, like a client, took a node that
//! answered ApiVersions as started, but a new leader refuses writes until it has applied its
//! own term's first entry (`Leadership::may_propose`), so the first raw Produce could meet
//! NOT_LEADER_OR_FOLLOWER. Kafka opens its listeners at the end of start-up; a sole voter,
//! which no other node can stand in for, now does too. `ONELOG_FAULT_DELAY=apply.blank` holds
//! the window open for the test, and the test checks the node logged each hold (a binary built
//! without `fault-injection` ignores the variable, and the test would test nothing).

use anyhow::{ensure, Result};
use harness::batch::{encode_batch, TestRecord};
use harness::process::log_lines_with;
use harness::raw_ops::{create_topics_ok, produce, BatchFor};
use harness::{Broker, BrokerOptions, RawClient};
use kafka_compat::error_code::UNKNOWN_TOPIC_OR_PARTITION;

const TOPIC: &str = "first-write";
/// How long the fault holds the leader's first entry of its term: far longer than start-up.
const BLANK_DELAY_MS: u64 = 1_500;

#[tokio::test(flavor = "multi_thread")]
async fn a_sole_voter_takes_writes_from_its_first_request() {
    let options = BrokerOptions::default()
        .config("log.segment.bytes", 1 << 20)
        .env("ONELOG_FAULT_DELAY", &format!("apply.blank:{BLANK_DELAY_MS}"));
    let mut broker = Broker::start(options).expect("onelog");
    let fresh = first_produce_succeeds(&broker, true).await;
    broker.unwrap_or_dump(fresh);
    broker.unwrap_or_dump(blank_entry_held(&broker));
    // A restart: the node leads again. It applied no blank entry before its listener opened
    // when this was checked (its log showed no second hold), so the fault does not widen this
    // phase; the first Produce must still succeed.
    broker.terminate().expect("terminate");
    broker.restart().expect("restart");
    let restarted = first_produce_succeeds(&broker, false).await;
    broker.unwrap_or_dump(restarted);
}

/// The fault held the leader's blank entry (its log line): the fresh start's window was open.
fn blank_entry_held(broker: &Broker) -> Result<()> {
    let held = log_lines_with(&broker.log_path(), &["fault injection: delaying", "apply.blank"])?;
    ensure!(
        !held.is_empty(),
        "the node never logged holding its blank entry: is ONELOG_BIN built with \
         --features fault-injection (scripts/test.sh)?"
    );
    Ok(())
}

async fn first_produce_succeeds(broker: &Broker, create: bool) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    let batch = encode_batch(&[TestRecord::new("k", "v", 1)])?;
    let batches = [BatchFor { topic: TOPIC.to_string(), partition: 0, records: batch }];
    let produced = produce(&mut client, -1, &batches).await?;
    let code = produced.responses[0].partition_responses[0].error_code;
    if create {
        // The topic does not exist yet: a serving leader says so, a waiting one says
        // NOT_LEADER_OR_FOLLOWER (6).
        ensure!(code == UNKNOWN_TOPIC_OR_PARTITION, "the first Produce on a fresh node: {produced:?}");
        create_topics_ok(&mut client, &[(TOPIC, 1)]).await?;
        let again = produce(&mut client, -1, &batches).await?;
        let code = again.responses[0].partition_responses[0].error_code;
        ensure!(code == 0, "Produce after CreateTopics: {again:?}");
    } else {
        ensure!(code == 0, "the first Produce after a restart: {produced:?}");
    }
    Ok(())
}

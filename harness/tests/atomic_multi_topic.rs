//! One Produce request spanning two topics is all-or-nothing, even when the broker dies halfway
//! through applying it (fault `crash-mid-apply-multi-topic`, fault-injection build only).

use std::time::Duration;

use anyhow::{bail, ensure, Result};
use harness::atomic::{send_atomic, Slice};
use harness::batch::StoredRecord;
use harness::raw_ops::{create_topics_ok, fetch_all};
use harness::{Broker, BrokerOptions, RawClient};

const FAULT: &str = "crash-mid-apply-multi-topic";
const TOPIC_A: &str = "atomic-a";
const TOPIC_B: &str = "atomic-b";

fn slices() -> Vec<Slice<'static>> {
    vec![
        Slice { topic: TOPIC_A, key: b"a-1", value: b"first in a" },
        Slice { topic: TOPIC_B, key: b"b-1", value: b"first in b" },
        Slice { topic: TOPIC_A, key: b"a-2", value: b"second in a" },
    ]
}

/// Keys read back from `topic`, in offset order.
async fn keys(client: &mut RawClient, topic: &str) -> Result<Vec<Vec<u8>>> {
    let fetched = fetch_all(client, topic, 0).await?;
    ensure!(
        fetched.records.len() as i64 == fetched.high_watermark,
        "{topic}: {} records below high watermark {}",
        fetched.records.len(),
        fetched.high_watermark
    );
    Ok(fetched
        .records
        .into_iter()
        .map(|StoredRecord { record, .. }| record.key.unwrap_or_default().to_vec())
        .collect())
}

fn expect_keys(got: &[Vec<u8>], want: &[&[u8]]) -> bool {
    got.len() == want.len() && got.iter().zip(want).all(|(g, w)| g.as_slice() == *w)
}

#[tokio::test(flavor = "multi_thread")]
async fn multi_topic_produce_lands_in_both_topics() {
    let mut broker = Broker::start(BrokerOptions::default()).expect("starting onelog");
    let result = multi_topic_produce_lands_in_both_topics_scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn multi_topic_produce_lands_in_both_topics_scenario(broker: &mut Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    create_topics_ok(&mut client, &[(TOPIC_A, 1), (TOPIC_B, 1)]).await?;
    let offsets = send_atomic(&mut client, &slices()).await?;
    ensure!(offsets == vec![(0, 0), (0, 0), (0, 1)], "offsets {offsets:?}");
    let a = keys(&mut client, TOPIC_A).await?;
    let b = keys(&mut client, TOPIC_B).await?;
    ensure!(expect_keys(&a, &[b"a-1", b"a-2"]), "{TOPIC_A}: {a:?}");
    ensure!(expect_keys(&b, &[b"b-1"]), "{TOPIC_B}: {b:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn crash_mid_apply_leaves_both_topics_or_neither() {
    let mut broker =
        Broker::start(BrokerOptions::default().env("ONELOG_FAULT", FAULT)).expect("starting onelog");
    let result = crash_mid_apply_leaves_both_topics_or_neither_scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn crash_mid_apply_leaves_both_topics_or_neither_scenario(broker: &mut Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    create_topics_ok(&mut client, &[(TOPIC_A, 1), (TOPIC_B, 1)]).await?;
    // Single-topic writes do not trip the fault: one baseline record per topic.
    send_atomic(&mut client, &[Slice { topic: TOPIC_A, key: b"base-a", value: b"x" }]).await?;
    send_atomic(&mut client, &[Slice { topic: TOPIC_B, key: b"base-b", value: b"x" }]).await?;

    if let Ok(offsets) = send_atomic(&mut client, &slices()).await {
        bail!(
            "multi-topic produce acknowledged at {offsets:?} with {FAULT} armed: \
             is ONELOG_BIN built with --features fault-injection?"
        );
    }
    let status = broker.wait_exit(Duration::from_secs(30))?;
    ensure!(!status.success(), "broker exited cleanly ({status}) instead of crashing");
    println!("broker died as injected: {status}");

    broker.options_mut().env.clear();
    broker.restart()?;
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    let a = keys(&mut client, TOPIC_A).await?;
    let b = keys(&mut client, TOPIC_B).await?;
    let both = expect_keys(&a, &[b"base-a", b"a-1", b"a-2"]) && expect_keys(&b, &[b"base-b", b"b-1"]);
    let neither = expect_keys(&a, &[b"base-a"]) && expect_keys(&b, &[b"base-b"]);
    ensure!(both || neither, "torn multi-topic write after restart: {TOPIC_A} {a:?}, {TOPIC_B} {b:?}");
    println!(
        "after restart the multi-topic write is {}",
        if both { "in both topics" } else { "in neither topic" }
    );

    // The recovered broker appends the next multi-topic write after what it holds.
    let offsets = send_atomic(&mut client, &slices()).await?;
    let (next_a, next_b) = (a.len() as i64, b.len() as i64);
    ensure!(
        offsets == vec![(0, next_a), (0, next_b), (0, next_a + 1)],
        "offsets after recovery {offsets:?}, expected to follow {next_a}/{next_b}"
    );
    Ok(())
}

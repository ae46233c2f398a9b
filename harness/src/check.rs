//! Assertions shared by the scenario tests: the broker is alive and serving after each case.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::batch::{encode_batch, TestRecord};
use crate::process::Broker;
use crate::raw_client::{Closed, RawClient};
use crate::raw_ops::{fetch_all, produce, produce_results, BatchFor};

/// How long a broker may take to close a connection it should drop.
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// The broker process is alive and a fresh connection gets a good ApiVersions answer.
pub async fn assert_serving(broker: &mut Broker, after: &str) -> Result<()> {
    if !broker.is_running() {
        bail!("broker died after {after}; log tail:\n{}", broker.log_tail(crate::process::LOG_TAIL_LINES));
    }
    RawClient::connect_negotiated(broker.addr())
        .await
        .with_context(|| format!("fresh connection after {after}"))?;
    Ok(())
}

/// Opens a connection, writes `bytes`, expects the broker to close it, then checks it serves.
pub async fn assert_closes(broker: &mut Broker, case: &str, bytes: &[u8]) -> Result<Closed> {
    let mut client = RawClient::connect(broker.addr()).await?;
    client.write_raw(bytes).await.with_context(|| format!("{case}: writing"))?;
    let closed = client.expect_closed(CLOSE_TIMEOUT).await.with_context(|| case.to_owned())?;
    assert_serving(broker, case).await?;
    Ok(closed)
}

/// Produces one record to `topic` partition 0 (acks=all) over a fresh connection and reads the
/// partition back: the record must be there, at the offset the produce answered. A normal
/// client's whole cycle, for tests that check a node keeps serving while it is abused.
pub async fn assert_round_trip(addr: SocketAddr, topic: &str, value: &str) -> Result<()> {
    let mut client = RawClient::connect_negotiated(addr).await.context("round trip: connecting")?;
    let record = TestRecord::new(value.to_owned(), value.to_owned(), 1_700_000_000_000);
    let batch = BatchFor { topic: topic.to_owned(), partition: 0, records: encode_batch(&[record])? };
    let results = produce_results(&produce(&mut client, -1, &[batch]).await.context("round trip: produce")?);
    let [(_, _, 0, offset)] = results.as_slice() else { bail!("round trip: produce answered {results:?}") };
    let fetched = fetch_all(&mut client, topic, 0).await.context("round trip: fetch")?;
    let found = fetched.records.iter().find(|r| r.offset == *offset);
    if found.and_then(|r| r.record.value.as_deref()) != Some(value.as_bytes()) {
        bail!("round trip: offset {offset} of {topic} holds {found:?}, want {value:?}");
    }
    Ok(())
}

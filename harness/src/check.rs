//! Assertions shared by the scenario tests: the broker is alive and serving after each case.

use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::process::Broker;
use crate::raw_client::{Closed, RawClient};

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

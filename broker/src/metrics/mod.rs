//! Prometheus metrics, served as text by the admin API's `GET /metrics`.
//!
//! Two kinds, as Prometheus' own guidance splits them:
//!
//! - [`recorded`]: counters and histograms updated where the event happens — a Kafka request
//!   answered (`net::listener`), a Raft entry proposed (`leader::proposer`), an fdatasync of
//!   the Raft log (raft-store's observer hook), a transaction decided at apply (`raft::sm_store`).
//!   One process-wide set ([`METRICS`]): a process runs one node.
//! - gauges read from the node's state at each scrape — Raft term, leader, indexes and
//!   per-follower lag, per-partition offsets and sizes, open transactions, consumer groups,
//!   connections: `admin_api::metrics`, a collector handed to [`render`]. Taken at scrape,
//!   they never go stale (a deleted topic's series disappear).
//!
//! This module depends on nothing of the broker's, so that every layer may record into it.
//!
//! Names follow Prometheus' conventions: the `onelog_` prefix, base units in the name
//! (`_seconds`, `_bytes`), `_total` on counters (added by the encoder).

pub mod error_codes;
pub mod recorded;
pub mod txn_outcomes;

pub use recorded::METRICS;

use prometheus_client::collector::Collector;
use prometheus_client::registry::Registry;

/// The exposition's content type: prometheus-client writes OpenMetrics text (`_total`
/// counters, `# UNIT`, `# EOF`), which Prometheus parses when told so.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Renders every metric: the recorded ones and `scraped`, the state read for this scrape.
pub fn render(scraped: Box<dyn Collector>) -> String {
    let mut registry = Registry::with_prefix("onelog");
    METRICS.register(&mut registry);
    registry.register_collector(scraped);
    let mut text = String::new();
    // Writing into a String cannot fail; an encoder error would be a bug in a metric.
    if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &registry) {
        tracing::error!(error = %e, "encoding the metrics failed");
    }
    text
}

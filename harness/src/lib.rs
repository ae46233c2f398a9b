//! Test and benchmark tools for onelog: broker and cluster process control, a raw Kafka client
//! for inputs real clients never send, rdkafka helpers, a producer load that runs through faults,
//! the admin API client, on-disk footprint measurement, the atomic multi-topic write, transactional producers and readers,
//! a KIP-932 share-group consumer on the raw client (`share_consumer`),
//! the Java scenario drivers, the chaos runner with its checker (`chaos`), the upgrades from an
//! earlier release (`upgrade`: its golden fixture, the rolling upgrade), and the demo programs' logic (`demo`).
//!
//! The integration tests in `tests/` and the `onelog-bench` binary are built from these parts;
//! each test spawns its own broker processes with their own directories and ports.

pub mod admin_api;
pub mod atomic;
pub mod batch;
pub mod bench;
pub mod certs;
pub mod chaos;
pub mod check;
pub mod cluster;
pub mod codec;
pub mod demo;
pub mod disk;
pub mod java;
pub mod kafka;
pub mod links;
pub mod load;
pub mod netproxy;
pub mod ports;
pub mod probe;
pub mod process;
pub mod raft_groups;
pub mod raw_client;
pub mod raw_ops;
pub mod scrape;
pub mod share_consumer;
pub mod txn;
pub mod txn_ledger;
pub mod upgrade;

pub use cluster::{Cluster, ClusterOptions};
pub use netproxy::{Mode as ProxyMode, Proxy, ProxyHandle};
pub use process::{Broker, BrokerOptions};
pub use raw_client::RawClient;

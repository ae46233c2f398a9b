//! Test and benchmark tools for onelog: broker process control, a raw Kafka client for inputs
//! real clients never send, rdkafka helpers, and the atomic multi-topic write.
//!
//! The integration tests in `tests/` and the `onelog-bench` binary are built from these parts;
//! each test spawns its own broker process with its own directory and port.

pub mod atomic;
pub mod batch;
pub mod bench;
pub mod check;
pub mod codec;
pub mod kafka;
pub mod probe;
pub mod process;
pub mod raw_client;
pub mod raw_ops;

pub use process::{Broker, BrokerOptions};
pub use raw_client::RawClient;

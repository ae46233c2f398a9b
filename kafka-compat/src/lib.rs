//! Sans-IO Kafka protocol layer for onelog.
//!
//! Everything here is pure: bytes in, typed values or bytes out. No sockets, no tokio, no clock.
//! The broker owns all I/O and calls into this crate to frame, decode and encode, and to
//! validate and patch client record batches without ever re-encoding them (DESIGN §3).

pub mod batch;
pub mod client;
pub mod codec;
pub mod consumer_protocol;
pub mod control;
pub mod error_code;
pub mod frame;
pub mod inflate;
pub mod isolation_level;
pub mod legacy_produce;
pub mod principal;
pub mod records;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod topic_name;

pub use kafka_protocol;

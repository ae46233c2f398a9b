//! The Kafka side of the network: the listeners (framing, request routing, responses in
//! request order; connection limits, bounded frame reading, incident counters; TLS and the
//! SASL exchange) and forwarding of requests a follower must pass to the leader.

pub mod connections;
pub mod exchange;
pub mod forward;
pub mod framing;
pub mod incidents;
pub mod listener;
pub mod responses;
pub mod tls;

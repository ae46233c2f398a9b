//! The Kafka side of the network: the listener (framing, request routing, responses in
//! request order; connection limits, bounded frame reading, incident counters) and forwarding
//! of requests a follower must pass to the leader.

pub mod connections;
pub mod forward;
pub mod framing;
pub mod incidents;
pub mod listener;

//! The Kafka side of the network: the listener (framing, request routing, responses in
//! request order) and forwarding of requests a follower must pass to the leader.

pub mod forward;
pub mod listener;

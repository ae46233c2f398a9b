//! The Raft RPC transport between onelog nodes: a framed binary protocol over TCP (or TLS), one
//! persistent pipelined connection per peer.
//!
//! - [`auth`]: the handshake that admits only nodes holding the cluster secret; `guard`: what
//!   every request must satisfy before openraft sees it.
//! - [`tls`]: mutual TLS under the handshake, when `onelog.raft.ssl.*` is set.
//! - [`codec`]: the frame format (length, CRC32C, kind, request id, bincode body).
//! - [`client`]: the connection to one peer, shared by every openraft client for it; the
//!   openraft-facing `RaftNetwork` is in `raft::network`.
//! - [`server`]: [`serve_raft`], answering peers' requests with the local `Raft`.
//! - [`handover`]: leadership handover on graceful shutdown.
//! - [`removal`]: the leader's notice to a node it removed from the membership.
//! - [`transfer`]: leadership transfer on request, the leader staying up.
//! - [`envelope`]: a follower's Kafka request forwarded to the leader with its principal.
//! - [`features`]: asking a peer which feature levels its build supports (before the leader
//!   finalizes one).
//! - [`log_state`]: asking a peer how much log it holds (a node that lost its log asks).
//! - [`vote_gate`]: the votes a node that lost its log may cast until it has caught up.
//! - [`xgroup`]: the messages between Raft groups' leaders for transactions across groups.

pub mod auth;
pub mod client;
pub mod codec;
pub mod envelope;
pub mod features;
mod guard;
pub mod handover;
pub mod log_state;
pub mod peers;
pub mod removal;
pub mod server;
pub mod tls;
pub mod transfer;
pub mod vote_gate;
pub mod xgroup;

pub use server::{serve_raft, GroupRaft, GroupRafts, RaftService};

#[cfg(test)]
mod groups_tests;
#[cfg(test)]
mod security_tests;
#[cfg(test)]
mod tests;

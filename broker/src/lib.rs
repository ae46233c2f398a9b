//! The onelog broker as a library; `main.rs` is a thin binary over [`node::run`].
//!
//! The folder tree is the architecture (docs/ARCHITECTURE.md has the picture and the table of
//! what may touch what):
//! - `net/`: the Kafka listener, framing, and forwarding to the leader;
//! - `pipeline/`: the one way a request reaches its handler (access check, forwarding,
//!   throttling, counting), driven by the registry's declarations;
//! - `handlers/`: one file per Kafka API, thin: decode → one call → encode; the registry
//!   (`handlers::HANDLERS`) declares each API's access, route and response hooks;
//! - `coord/txn/`: the transaction coordinator (leader memory, views, duties);
//! - `coord/group/`: the classic group coordinator;
//! - `controller.rs`: topic administration (the Raft leader is Kafka's controller);
//! - `leader/`: the proposer, the leadership view and lease, the leader's duties;
//! - `raft/`: openraft's types, the state machine store, the applied-state view, the network;
//! - `storage/`: partition files, the materialized view of the log;
//! - `admin_api/`: the operators' HTTP API;
//! - `cli/`: `onelog admin`, the operators' command line over the admin and Kafka APIs.
//!
//! The replicated state, the commands and the pure apply are the `onelog-state` crate.

pub mod admin_api;
pub mod alloc_guard;
pub mod cli;
pub mod clock;
pub mod config;
pub mod config_admin;
pub mod controller;
pub mod coord;
pub mod ctx;
pub mod errors;
pub mod fatal;
pub mod fault;
pub mod handlers;
pub mod incident;
pub mod internal_topic;
pub mod leader;
pub mod limits;
pub mod metrics;
pub mod net;
pub mod node;
pub mod pipeline;
pub mod raft;
pub mod security;
pub mod storage;
pub mod upgrade;

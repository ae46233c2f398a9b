//! Security, in one folder: who a client is and what it may do.
//!
//! - `sasl/`: the per-connection SASL state machine the listener's read loop runs (KIP-152
//!   re-authentication), the mechanisms (PLAIN, SCRAM) and the per-address limit on attempts;
//! - `scram/`: the SCRAM-SHA-256/512 server exchange over the replicated credentials;
//! - `principal_rules.rs`: `ssl.principal.mapping.rules` (Kafka's `SslPrincipalMapper`), used
//!   by the configuration at start-up and by `net/tls/principal.rs`;
//! - `authz/`: the authorizer ([`authz::Authorizer`]) over the replicated ACL table;
//! - `quotas/`: client byte-rate and request-time quotas against the replicated quota table.
//!
//! TLS stays in `net/tls`: it is transport. Layering: security sits below `ctx.rs`, the
//! pipeline and the handlers, and above `config` and `raft::applied`. It takes narrow views —
//! its settings and the [`AppliedView`](crate::raft::applied::AppliedView) — never `&Ctx`, so
//! nothing here can reach the proposer, the coordinators or leadership.

pub mod authz;
pub mod principal_rules;
pub mod quotas;
pub mod sasl;
pub mod scram;

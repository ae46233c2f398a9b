//! `harness chaos`: a seeded fault-injection run against a onelog cluster on 127.0.0.1, with
//! stock clients (librdkafka) driving a workload and a checker that reports every broken
//! promise (issue 14).
//!
//! - `history`: what the clients did and saw, and the faults;
//! - `checker`: the queue checker (lost, duplicate, aborted read, inconsistent offset,
//!   non-monotonic poll, torn, phantom, write cycle, hanging transaction);
//! - `schedule`: the seeded fault plan;
//! - `faults`: applying a planned fault to the cluster and measuring recovery;
//! - `queue`, `bank`, `copier`, `share`: the workloads (the copier, a consume-process-produce
//!   application with its offsets in its transactions, brings its own checker,
//!   `copier_check`; the share workload, KIP-932 share groups, its writers (`share_writers`),
//!   history (`share_history`) and checker (`share_check`));
//! - `placement`: with `--groups N`, which Raft group holds each topic and transactional id
//!   (the bank's accounts and the copier's topics spread over the groups, so their
//!   transactions span groups), and `raft_groups`: every group agreeing once the run is over;
//! - `run`: one run end to end, and its report.

pub mod bank;
pub mod checker;
pub mod copier;
pub mod copier_check;
pub mod faults;
pub mod group_protocol;
pub mod history;
pub mod placement;
pub mod queue;
pub mod raft_groups;
pub mod report;
pub mod run;
pub mod schedule;
pub mod share;
pub mod share_check;
pub mod share_history;
pub mod share_writers;

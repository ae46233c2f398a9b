//! `harness chaos`: a seeded fault-injection run against a onelog cluster on 127.0.0.1, with
//! stock clients (librdkafka) driving a workload and a checker that reports every broken
//! promise (issue 14).
//!
//! - `history`: what the clients did and saw, and the faults;
//! - `checker`: the queue checker (lost, duplicate, aborted read, inconsistent offset,
//!   non-monotonic poll, torn, phantom, write cycle, hanging transaction);
//! - `schedule`: the seeded fault plan;
//! - `faults`: applying a planned fault to the cluster and measuring recovery;
//! - `queue`, `bank`: the workloads;
//! - `run`: one run end to end, and its report.

pub mod bank;
pub mod checker;
pub mod faults;
pub mod history;
pub mod queue;
pub mod report;
pub mod run;
pub mod schedule;

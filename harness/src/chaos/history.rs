//! What a chaos run's clients did, as they saw it: every transaction a writer attempted with
//! its values and outcome, every record a reader polled, every value the copier's feeder had
//! acknowledged, and every fault with its window.
//!
//! Clients append to one shared [`History`] from many threads; the checkers read a
//! [`Snapshot`] of it once the run is over. Times are offsets from the start of the run, so
//! a summary and a plot can be read side by side.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

/// How a transaction ended, as its writer knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Outcome {
    /// `commit_transaction` returned Ok: every value is acknowledged.
    Committed,
    /// Aborted by the writer (deliberately or after an abortable error), by a crash followed by
    /// a successful `init_transactions` of the next instance, or fenced by a hijacker.
    Aborted,
    /// The writer cannot tell (a commit that timed out, a producer that failed fatally): the
    /// values may be visible or not, but only all of them or none.
    Unknown,
}

/// One transaction: its values, each with the partition it was sent to.
#[derive(Debug, Clone, Serialize)]
pub struct Txn {
    pub writer: String,
    pub values: Vec<(i32, String)>,
    pub outcome: Outcome,
    /// Planned as an abort (the workload's deliberate aborts).
    pub deliberate_abort: bool,
    pub started: Duration,
    pub ended: Duration,
}

/// One record a reader returned to the application.
#[derive(Debug, Clone, Serialize)]
pub struct Poll {
    /// A consumer instance: offsets of one partition only increase within it.
    pub session: u64,
    pub partition: i32,
    pub offset: i64,
    pub value: String,
    pub at: Duration,
}

/// One injected fault: its kind, the node it hit, and when it began and was undone.
#[derive(Debug, Clone, Serialize)]
pub struct FaultWindow {
    pub kind: String,
    pub node: Option<u64>,
    pub began: Duration,
    pub ended: Duration,
    /// From the fault to a leader every live node agrees on (faults that hit the leader).
    pub new_leader_after: Option<Duration>,
}

impl FaultWindow {
    /// A client-side fault (a crash or a hijack a workload carried out): no node, no election.
    pub fn client(kind: &str, began: Duration, ended: Duration) -> FaultWindow {
        FaultWindow { kind: kind.into(), node: None, began, ended, new_leader_after: None }
    }
}

/// A consistent cut a bank reader observed (LSO equal to the log end on every partition) and
/// the read_committed sum it read up to it.
#[derive(Debug, Clone, Serialize)]
pub struct Cut {
    pub at: Duration,
    pub ends: Vec<i64>,
    pub sum: i64,
}

#[derive(Debug, Default, Clone, Serialize)]
pub struct Snapshot {
    pub txns: Vec<Txn>,
    pub polls: Vec<Poll>,
    pub faults: Vec<FaultWindow>,
    pub cuts: Vec<Cut>,
    /// Values the copier workload's feeder was told are written: (input partition, value).
    pub inputs: Vec<(i32, String)>,
    /// Reader or writer errors that are not violations (timeouts, retriable errors), counted.
    pub client_errors: usize,
}

/// The shared, append-only record of a run.
#[derive(Clone)]
pub struct History {
    start: Instant,
    inner: Arc<Mutex<Snapshot>>,
}

impl History {
    pub fn new() -> Self {
        History { start: Instant::now(), inner: Arc::new(Mutex::new(Snapshot::default())) }
    }

    /// Time since the run started.
    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn with<T>(&self, f: impl FnOnce(&mut Snapshot) -> T) -> T {
        f(&mut self.inner.lock().expect("history lock"))
    }

    pub fn txn(&self, txn: Txn) {
        self.with(|s| s.txns.push(txn));
    }

    pub fn polls(&self, polls: Vec<Poll>) {
        self.with(|s| s.polls.extend(polls));
    }

    pub fn fault(&self, fault: FaultWindow) {
        self.with(|s| s.faults.push(fault));
    }

    pub fn cut(&self, cut: Cut) {
        self.with(|s| s.cuts.push(cut));
    }

    pub fn input(&self, partition: i32, value: String) {
        self.with(|s| s.inputs.push((partition, value)));
    }

    pub fn client_error(&self) {
        self.with(|s| s.client_errors += 1);
    }

    /// Committed transactions so far (the workloads' operation bound).
    pub fn committed(&self) -> usize {
        self.with(|s| s.txns.iter().filter(|t| t.outcome == Outcome::Committed).count())
    }

    pub fn snapshot(&self) -> Snapshot {
        self.with(|s| s.clone())
    }
}

impl Default for History {
    fn default() -> Self {
        Self::new()
    }
}

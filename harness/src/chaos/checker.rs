//! The queue checker, after Jepsen's Kafka checker: from what the writers were told and what
//! the readers saw, every way the log could have broken its promises.
//!
//! - **lost**: a value of a committed transaction is missing from the final read (every
//!   acknowledged write is eventually read);
//! - **duplicate**: a value sits at two offsets;
//! - **aborted read**: a value of an aborted transaction was returned under read_committed;
//! - **inconsistent offset**: one (partition, offset) was read with two values;
//! - **non-monotonic poll**: within one consumer session a partition's offsets went back or
//!   repeated;
//! - **torn**: a committed or unknown transaction of which some values are visible and others
//!   are not (an unknown one may be all visible or none);
//! - **phantom**: a value no writer ever sent;
//!
//! Reported apart, as an anomaly Kafka's protocol allows and onelog does not prevent
//! ([`write_cycles`], not a violation): a **write cycle** (G0), transactions ordered one way in
//! one partition and the other way in another (or interleaved in one), i.e. a cycle in the
//! graph of "wrote just before, in the same partition" between committed transactions in the
//! final read. A transactional record gets its offset when it is produced, and the produce
//! response carries it before the transaction commits, so concurrent transactions interleave
//! in every log that speaks Kafka's protocol; what onelog adds is that each commit is one log
//! entry, so no transaction is ever torn (see docs/TESTING.md, "Write cycles (G0)").
//!
//! - **hanging transaction**: a partition whose last stable offset stayed below its high
//!   watermark for the whole final wait, longer than the writers' transaction timeout after
//!   they stopped (a transaction nobody ends: read_committed readers never pass it).
//!
//! A write whose outcome is unknown is never lost: it is counted, present or not. The checker
//! is a pure function of its inputs, so its unit tests feed it each violation by hand.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::history::{Outcome, Snapshot};

/// Violations by kind: how many, and a few examples.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Violations {
    pub counts: BTreeMap<String, usize>,
    pub examples: BTreeMap<String, Vec<String>>,
}

const EXAMPLES_PER_KIND: usize = 5;

impl Violations {
    pub fn add(&mut self, kind: &str, example: String) {
        *self.counts.entry(kind.to_string()).or_default() += 1;
        let examples = self.examples.entry(kind.to_string()).or_default();
        if examples.len() < EXAMPLES_PER_KIND {
            examples.push(example);
        }
    }

    pub fn total(&self) -> usize {
        self.counts.values().sum()
    }

    pub fn merge(&mut self, other: Violations) {
        for (kind, n) in other.counts {
            *self.counts.entry(kind.clone()).or_default() += n;
            let examples = self.examples.entry(kind.clone()).or_default();
            for e in other.examples.get(&kind).into_iter().flatten() {
                if examples.len() < EXAMPLES_PER_KIND {
                    examples.push(e.clone());
                }
            }
        }
    }
}

/// Counts of what the writers did, for the summary.
#[derive(Debug, Default, Clone, Serialize)]
pub struct QueueCounts {
    pub txns: usize,
    pub committed: usize,
    pub aborted: usize,
    /// Of `aborted`, the workload's deliberate aborts; the rest followed an error (a fault
    /// the client saw: a crash, a hijack, a failed send). Issue 17: no leader fault causes one.
    pub aborted_on_purpose: usize,
    pub unknown: usize,
    pub unknown_visible: usize,
    pub values_acknowledged: usize,
    pub polled: usize,
    pub final_read: usize,
}

/// A partition whose last stable offset had not reached its high watermark when the final
/// read stopped waiting for open transactions to end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unstable {
    pub partition: i32,
    pub last_stable_offset: i64,
    pub high_watermark: i64,
}

/// One "hanging transaction" per partition the final read found unstable after waiting `waited`.
pub fn check_stable(unstable: &[Unstable], waited: std::time::Duration) -> Violations {
    check_stable_named(unstable, waited, |p| format!("partition {p}"))
}

/// As [`check_stable`], each partition named by `name` (the bank's accounts span topics).
pub fn check_stable_named(
    unstable: &[Unstable],
    waited: std::time::Duration,
    name: impl Fn(i32) -> String,
) -> Violations {
    let mut v = Violations::default();
    for u in unstable {
        v.add(
            "hanging transaction",
            format!(
                "{}: last stable offset {} below the high watermark {} after {waited:?}",
                name(u.partition),
                u.last_stable_offset,
                u.high_watermark
            ),
        );
    }
    v
}

/// The transactions' counts by outcome (every workload's summary line).
pub fn txn_counts(history: &Snapshot) -> QueueCounts {
    let mut counts = QueueCounts { txns: history.txns.len(), ..Default::default() };
    for t in &history.txns {
        match t.outcome {
            Outcome::Committed => {
                counts.committed += 1;
                counts.values_acknowledged += t.values.len();
            }
            Outcome::Aborted => {
                counts.aborted += 1;
                counts.aborted_on_purpose += usize::from(t.deliberate_abort);
            }
            Outcome::Unknown => counts.unknown += 1,
        }
    }
    counts
}

/// A partition's records as the final read_committed read returned them: (offset, value).
pub type FinalRead = BTreeMap<i32, Vec<(i64, String)>>;

/// Checks a queue run. `final_read` is a read_committed read of every partition from the
/// start to its end once the faults are over.
pub fn check_queue(history: &Snapshot, final_read: &FinalRead) -> (Violations, QueueCounts) {
    let mut v = Violations::default();
    let mut counts = txn_counts(history);

    // Which transaction wrote each value.
    let mut writer_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, t) in history.txns.iter().enumerate() {
        for (_, value) in &t.values {
            writer_of.insert(value.as_str(), i);
        }
    }

    // Every (partition, offset) → value seen anywhere, and where each value was seen.
    let mut at_offset: BTreeMap<(i32, i64), &str> = BTreeMap::new();
    let mut offsets_of: BTreeMap<&str, BTreeSet<(i32, i64)>> = BTreeMap::new();
    let mut all_reads: Vec<(i32, i64, &str)> =
        history.polls.iter().map(|p| (p.partition, p.offset, p.value.as_str())).collect();
    for (partition, records) in final_read {
        all_reads.extend(records.iter().map(|(offset, value)| (*partition, *offset, value.as_str())));
    }
    for &(partition, offset, value) in &all_reads {
        match at_offset.get(&(partition, offset)) {
            Some(other) if *other != value => {
                v.add("inconsistent offset", format!("{partition}/{offset}: {other:?} and {value:?}"))
            }
            Some(_) => {}
            None => drop(at_offset.insert((partition, offset), value)),
        }
        offsets_of.entry(value).or_default().insert((partition, offset));
    }
    for (value, offsets) in &offsets_of {
        if offsets.len() > 1 {
            v.add("duplicate", format!("{value:?} at {offsets:?}"));
        }
        match writer_of.get(value) {
            None => v.add("phantom", format!("{value:?} at {offsets:?} was never sent")),
            Some(&i) if history.txns[i].outcome == Outcome::Aborted => {
                v.add("aborted read", format!("{value:?} of an aborted transaction at {offsets:?}"))
            }
            Some(_) => {}
        }
    }

    // Within a session, each partition's offsets only increase.
    let mut last: BTreeMap<(u64, i32), i64> = BTreeMap::new();
    for p in &history.polls {
        counts.polled += 1;
        if let Some(prev) = last.insert((p.session, p.partition), p.offset) {
            if p.offset <= prev {
                v.add(
                    "non-monotonic poll",
                    format!(
                        "session {} partition {}: offset {} after {prev}, at {:?}",
                        p.session, p.partition, p.offset, p.at
                    ),
                );
            }
        }
    }

    // What the final read holds: lost and torn transactions.
    let visible: BTreeSet<&str> = final_read.values().flatten().map(|(_, value)| value.as_str()).collect();
    counts.final_read = visible.len();
    for t in &history.txns {
        let present = t.values.iter().filter(|(_, value)| visible.contains(value.as_str())).count();
        match t.outcome {
            Outcome::Committed if present < t.values.len() => {
                let missing: Vec<&str> = t
                    .values
                    .iter()
                    .map(|(_, value)| value.as_str())
                    .filter(|value| !visible.contains(value))
                    .collect();
                if present > 0 {
                    v.add(
                        "torn",
                        format!("committed txn of {}: {missing:?} missing of {}", t.writer, t.values.len()),
                    );
                }
                for value in missing {
                    v.add("lost", format!("{value:?} (committed by {} at {:?})", t.writer, t.ended));
                }
            }
            Outcome::Unknown if present > 0 && present < t.values.len() => {
                v.add(
                    "torn",
                    format!("unknown txn of {}: {present} of {} visible", t.writer, t.values.len()),
                );
            }
            Outcome::Unknown if present > 0 => counts.unknown_visible += 1,
            _ => {}
        }
    }

    (v, counts)
}

/// G0: cycles among committed (or visible unknown) transactions ordered by "wrote the record
/// just before, in the same partition", one entry ("write cycle") per strongly connected
/// component. An anomaly the protocol allows (module header), reported beside the violations.
pub fn write_cycles(history: &Snapshot, final_read: &FinalRead) -> Violations {
    let writer_of: BTreeMap<&str, usize> = history
        .txns
        .iter()
        .enumerate()
        .flat_map(|(i, t)| t.values.iter().map(move |(_, value)| (value.as_str(), i)))
        .collect();
    let mut found = Violations::default();
    for cycle in cycles_among(history, final_read, &writer_of) {
        found.add("write cycle", cycle);
    }
    found
}

fn cycles_among(
    history: &Snapshot,
    final_read: &FinalRead,
    writer_of: &BTreeMap<&str, usize>,
) -> Vec<String> {
    let mut edges: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for records in final_read.values() {
        let mut previous: Option<usize> = None;
        for (_, value) in records {
            let Some(&txn) = writer_of.get(value.as_str()) else { continue };
            if let Some(before) = previous.filter(|b| *b != txn) {
                edges.entry(before).or_default().insert(txn);
            }
            previous = Some(txn);
        }
    }
    strongly_connected(&edges)
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| {
            let names: Vec<String> = component
                .iter()
                .take(4)
                .map(|i| {
                    let t = &history.txns[*i];
                    format!("{}@{:?}", t.writer, t.started)
                })
                .collect();
            format!("{} transactions in a cycle, e.g. {names:?}", component.len())
        })
        .collect()
}

/// Tarjan's strongly connected components of a directed graph (iterative: a long run's
/// graph is deep).
fn strongly_connected(edges: &BTreeMap<usize, BTreeSet<usize>>) -> Vec<Vec<usize>> {
    let nodes: BTreeSet<usize> =
        edges.iter().flat_map(|(a, bs)| std::iter::once(*a).chain(bs.iter().copied())).collect();
    let mut index: BTreeMap<usize, usize> = BTreeMap::new();
    let mut low: BTreeMap<usize, usize> = BTreeMap::new();
    let mut on_stack: BTreeSet<usize> = BTreeSet::new();
    let mut stack: Vec<usize> = Vec::new();
    let mut components = Vec::new();
    let mut next = 0;
    let empty = BTreeSet::new();
    for &root in &nodes {
        if index.contains_key(&root) {
            continue;
        }
        // (node, successors not yet visited)
        let mut work: Vec<(usize, Vec<usize>)> = Vec::new();
        index.insert(root, next);
        low.insert(root, next);
        next += 1;
        stack.push(root);
        on_stack.insert(root);
        work.push((root, edges.get(&root).unwrap_or(&empty).iter().rev().copied().collect()));
        while let Some((node, successors)) = work.last_mut() {
            let node = *node;
            if let Some(succ) = successors.pop() {
                if let std::collections::btree_map::Entry::Vacant(slot) = index.entry(succ) {
                    slot.insert(next);
                    low.insert(succ, next);
                    next += 1;
                    stack.push(succ);
                    on_stack.insert(succ);
                    work.push((succ, edges.get(&succ).unwrap_or(&empty).iter().rev().copied().collect()));
                } else if on_stack.contains(&succ) {
                    let l = low[&node].min(index[&succ]);
                    low.insert(node, l);
                }
                continue;
            }
            work.pop();
            if let Some((parent, _)) = work.last() {
                let l = low[parent].min(low[&node]);
                low.insert(*parent, l);
            }
            if low[&node] == index[&node] {
                let mut component = Vec::new();
                while let Some(top) = stack.pop() {
                    on_stack.remove(&top);
                    component.push(top);
                    if top == node {
                        break;
                    }
                }
                components.push(component);
            }
        }
    }
    components
}

#[cfg(test)]
#[path = "checker_tests.rs"]
mod tests;

//! The copier workload's end state and its checker: both topics read back under
//! read_committed, the group's committed offsets and the input's ends, and the invariants of
//! an exactly-once copy (see `copier`). The checker is a pure function of what was read, so
//! its unit tests feed it each violation by hand.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use super::checker::{FinalRead, Unstable, Violations};
use super::copier::CopierNames;
use super::queue;
use super::queue::CALL_TIMEOUT;
use crate::kafka::client_config;

/// The input topic's end offsets (high watermarks; it holds no transactions).
pub fn input_ends(bootstrap: &str, names: &CopierNames, partitions: i32) -> anyhow::Result<Vec<i64>> {
    let group = format!("{}-ends", names.group);
    let consumer: BaseConsumer = client_config(bootstrap).set("group.id", group).create()?;
    (0..partitions).map(|p| Ok(consumer.fetch_watermarks(names.input, p, CALL_TIMEOUT)?.1)).collect()
}

/// The copiers' group's committed offsets of the input (None: nothing committed), read as a
/// read_committed consumer does (require_stable: a pending transactional commit is waited for).
pub fn committed_offsets(
    bootstrap: &str,
    names: &CopierNames,
    partitions: i32,
) -> anyhow::Result<Vec<Option<i64>>> {
    let consumer: BaseConsumer = client_config(bootstrap)
        .set("group.id", names.group)
        .set("isolation.level", "read_committed")
        .create()?;
    let mut list = TopicPartitionList::new();
    for p in 0..partitions {
        list.add_partition(names.input, p);
    }
    let committed = consumer.committed_offsets(list, CALL_TIMEOUT)?;
    Ok((0..partitions)
        .map(|p| match committed.find_partition(names.input, p).map(|e| e.offset()) {
            Some(Offset::Offset(o)) => Some(o),
            _ => None,
        })
        .collect())
}

/// Committed offsets at the input's ends (nothing committed is right for an empty partition).
pub fn offsets_match(committed: &[Option<i64>], ends: &[i64]) -> bool {
    committed.len() == ends.len()
        && committed.iter().zip(ends).all(|(c, e)| *c == Some(*e) || (c.is_none() && *e == 0))
}

/// What the end of a copier run holds: both topics read under read_committed, the group's
/// committed offsets and the input's ends.
#[derive(Debug, Default, Clone)]
pub struct CopierRead {
    pub input: FinalRead,
    pub output: FinalRead,
    pub committed: Vec<Option<i64>>,
    pub input_ends: Vec<i64>,
    /// Output partitions whose transactions had not all ended when the read gave up waiting.
    pub unstable: Vec<Unstable>,
}

pub fn final_read(
    bootstrap: &str,
    names: &CopierNames,
    partitions: i32,
    wait: Duration,
) -> anyhow::Result<CopierRead> {
    // The input is written outside transactions: it is always stable.
    let (input, _) = queue::final_read(bootstrap, names.input, partitions, wait)?;
    let (output, unstable) = queue::final_read(bootstrap, names.output, partitions, wait)?;
    Ok(CopierRead {
        input,
        output,
        committed: committed_offsets(bootstrap, names, partitions)?,
        input_ends: input_ends(bootstrap, names, partitions)?,
        unstable,
    })
}

/// The copier's invariants. The input is every acknowledged value and everything the input
/// topic holds (a value whose delivery failed may be there: it must then be copied too); its
/// order per partition is the input topic's.
pub fn check_copier(acknowledged: &[(i32, String)], read: &CopierRead) -> Violations {
    let mut v = Violations::default();
    // value → (input partition, position in it)
    let mut input: BTreeMap<&str, (i32, usize)> = BTreeMap::new();
    for (p, records) in &read.input {
        for (i, (offset, value)) in records.iter().enumerate() {
            if input.insert(value.as_str(), (*p, i)).is_some() {
                v.add(
                    "copier duplicate",
                    format!("{value:?} twice in the input topic (again at {p}/{offset})"),
                );
            }
        }
    }
    let mut copied: BTreeMap<&str, Vec<(i32, i64)>> = BTreeMap::new();
    for (q, records) in &read.output {
        let mut last: Option<(usize, &str)> = None;
        for (offset, value) in records {
            let seen = copied.entry(value.as_str()).or_default();
            seen.push((*q, *offset));
            if seen.len() > 1 {
                continue; // a duplicate, reported below; order is judged on first copies
            }
            let Some(&(p, i)) = input.get(value.as_str()) else {
                v.add("copier phantom", format!("{value:?} at output {q}/{offset} is no input"));
                continue;
            };
            if p != *q {
                v.add("copier order", format!("{value:?} of input {p} copied to output {q}/{offset}"));
            } else if let Some((before, prev)) = last.filter(|(before, _)| *before > i) {
                v.add(
                    "copier order",
                    format!("output {q}/{offset}: {value:?} (input #{i}) after {prev:?} (input #{before})"),
                );
            } else {
                last = Some((i, value.as_str()));
            }
        }
    }
    for (value, at) in &copied {
        if at.len() > 1 {
            v.add("copier duplicate", format!("{value:?} copied {} times, at {at:?}", at.len()));
        }
    }
    for (value, (p, _)) in &input {
        if !copied.contains_key(value) {
            v.add("copier lost", format!("{value:?} of input {p} is not in the output"));
        }
    }
    for (p, value) in acknowledged {
        if !input.contains_key(value.as_str()) && !copied.contains_key(value.as_str()) {
            v.add("copier lost", format!("{value:?} acknowledged to the feeder is in neither topic ({p})"));
        }
    }
    if !offsets_match(&read.committed, &read.input_ends) {
        v.add("copier offsets", format!("committed {:?}, input ends {:?}", read.committed, read.input_ends));
    }
    v
}

#[cfg(test)]
#[path = "copier_check_tests.rs"]
mod tests;

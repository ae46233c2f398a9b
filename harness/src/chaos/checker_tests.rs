//! The checker sees each violation it names, and nothing in a clean history.

use std::time::Duration;

use super::*;
use crate::chaos::history::{Poll, Txn};

fn txn(writer: &str, values: &[(i32, &str)], outcome: Outcome) -> Txn {
    Txn {
        writer: writer.to_string(),
        values: values.iter().map(|(p, v)| (*p, v.to_string())).collect(),
        outcome,
        deliberate_abort: false,
        started: Duration::ZERO,
        ended: Duration::ZERO,
    }
}

fn poll(session: u64, partition: i32, offset: i64, value: &str) -> Poll {
    Poll { session, partition, offset, value: value.to_string(), at: Duration::ZERO }
}

fn read(records: &[(i32, i64, &str)]) -> FinalRead {
    let mut out = FinalRead::new();
    for (p, o, v) in records {
        out.entry(*p).or_default().push((*o, v.to_string()));
    }
    out
}

fn kinds(v: &Violations) -> Vec<(&str, usize)> {
    v.counts.iter().map(|(k, n)| (k.as_str(), *n)).collect()
}

#[test]
fn a_clean_history_has_no_violations() {
    let history = Snapshot {
        txns: vec![
            txn("a", &[(0, "a1"), (1, "a2")], Outcome::Committed),
            txn("b", &[(0, "b1")], Outcome::Aborted),
            txn("c", &[(1, "c1"), (0, "c2")], Outcome::Unknown),
        ],
        polls: vec![poll(1, 0, 0, "a1"), poll(1, 0, 3, "c2"), poll(2, 0, 0, "a1")],
        ..Default::default()
    };
    let final_read = read(&[(0, 0, "a1"), (0, 3, "c2"), (1, 0, "a2"), (1, 1, "c1")]);
    let (v, counts) = check_queue(&history, &final_read);
    assert_eq!(v.total(), 0, "{v:?}");
    assert_eq!((counts.committed, counts.aborted, counts.unknown, counts.unknown_visible), (1, 1, 1, 1));
}

#[test]
fn each_violation_is_named() {
    let history = Snapshot {
        txns: vec![
            txn("lost", &[(0, "l1")], Outcome::Committed),
            txn("torn", &[(0, "t1"), (1, "t2")], Outcome::Committed),
            txn("aborted", &[(0, "x1")], Outcome::Aborted),
            txn("dup", &[(1, "d1")], Outcome::Committed),
            txn("unknown-torn", &[(0, "u1"), (1, "u2")], Outcome::Unknown),
        ],
        polls: vec![
            poll(1, 0, 5, "t1"),
            poll(1, 0, 4, "x1"), // goes back, and is aborted
            poll(2, 1, 7, "d1"),
            poll(3, 1, 7, "t2"), // offset 7 read with two values
        ],
        ..Default::default()
    };
    let final_read =
        read(&[(0, 4, "x1"), (0, 5, "t1"), (0, 6, "u1"), (1, 7, "d1"), (1, 8, "d1"), (1, 9, "ghost")]);
    let (v, _) = check_queue(&history, &final_read);
    assert_eq!(
        kinds(&v),
        vec![
            ("aborted read", 1),
            ("duplicate", 1),
            ("inconsistent offset", 1),
            ("lost", 2), // l1, and t2 of the torn one
            ("non-monotonic poll", 1),
            ("phantom", 1),
            ("torn", 2),
        ],
        "{v:#?}"
    );
}

/// T1 before T2 in partition 0, T2 before T1 in partition 1: a write cycle. Interleaving in
/// one partition alone (T1, T2, T1) is one too.
#[test]
fn write_cycles_are_found() {
    let history = Snapshot {
        txns: vec![
            txn("t1", &[(0, "a"), (1, "d")], Outcome::Committed),
            txn("t2", &[(0, "b"), (1, "c")], Outcome::Committed),
            txn("t3", &[(2, "e"), (2, "g")], Outcome::Committed),
            txn("t4", &[(2, "f")], Outcome::Committed),
        ],
        ..Default::default()
    };
    let final_read =
        read(&[(0, 0, "a"), (0, 1, "b"), (1, 0, "c"), (1, 1, "d"), (2, 0, "e"), (2, 1, "f"), (2, 2, "g")]);
    let cycles = write_cycles(&history, &final_read);
    assert_eq!(kinds(&cycles), vec![("write cycle", 2)], "{cycles:#?}");
    // Reported apart: not a violation of the queue's promises.
    assert_eq!(check_queue(&history, &final_read).0.total(), 0);
    let ordered =
        read(&[(0, 0, "a"), (0, 1, "b"), (1, 0, "d"), (1, 1, "c"), (2, 0, "e"), (2, 1, "g"), (2, 2, "f")]);
    assert_eq!(write_cycles(&history, &ordered).total(), 0);
}

/// A partition whose last stable offset never reached its high watermark is a hanging
/// transaction; a stable final read is none.
#[test]
fn hanging_transactions_are_named() {
    let waited = Duration::from_secs(90);
    assert_eq!(check_stable(&[], waited).total(), 0);
    let unstable = [
        Unstable { partition: 1, last_stable_offset: 7, high_watermark: 9 },
        Unstable { partition: 3, last_stable_offset: 0, high_watermark: 4 },
    ];
    let v = check_stable(&unstable, waited);
    assert_eq!(kinds(&v), vec![("hanging transaction", 2)], "{v:#?}");
    assert!(v.examples["hanging transaction"][0].contains("partition 1: last stable offset 7"), "{v:#?}");
}

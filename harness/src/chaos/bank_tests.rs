//! The bank's checks over accounts in several groups: a transfer torn between two groups, one
//! lost, one visible after its abort, and money made or lost, each named; a partition left
//! open named by its topic.

use std::time::Duration;

use super::*;
use crate::chaos::checker::{check_queue, check_stable_named};
use crate::chaos::history::Snapshot;

fn transfer(writer: &str, from: i32, to: i32, x: i64, outcome: Outcome) -> Txn {
    Txn {
        writer: writer.to_string(),
        values: vec![(from, format!("{writer}-1a:{}", -x)), (to, format!("{writer}-1b:{x}"))],
        outcome,
        deliberate_abort: outcome == Outcome::Aborted,
        started: Duration::ZERO,
        ended: Duration::ZERO,
    }
}

/// The final read of `visible` values of `txns`, each at the next offset of its account.
fn read_of(txns: &[Txn], visible: &[&str]) -> FinalRead {
    let mut read = FinalRead::new();
    for (account, value) in txns.iter().flat_map(|t| t.values.iter()) {
        if visible.contains(&value.as_str()) {
            let records = read.entry(*account).or_default();
            records.push((records.len() as i64, value.clone()));
        }
    }
    read
}

fn kinds(v: &Violations) -> Vec<(&str, usize)> {
    v.counts.iter().map(|(k, n)| (k.as_str(), *n)).collect()
}

#[test]
fn transfers_across_groups_that_break_the_bank_are_named() {
    // Three groups of four accounts: 1 is in group 0, 5 in group 1, 10 in group 2.
    let accounts = Accounts::new(3, 4);
    assert_eq!((accounts.group(1), accounts.group(5), accounts.group(10)), (0, 1, 2));
    let txns = vec![
        transfer("ok", 1, 5, 10, Outcome::Committed),
        transfer("torn", 5, 10, 20, Outcome::Committed),
        transfer("gone", 10, 1, 30, Outcome::Committed),
        transfer("undone", 1, 10, 40, Outcome::Aborted),
    ];
    let history = Snapshot { txns: txns.clone(), ..Default::default() };
    let clean =
        read_of(&txns, &["ok-1a:-10", "ok-1b:10", "torn-1a:-20", "torn-1b:20", "gone-1a:-30", "gone-1b:30"]);
    assert_eq!(check_queue(&history, &clean).0.total(), 0);
    assert_eq!(check_bank(&[], &clean).total(), 0);

    let broken = read_of(&txns, &["ok-1a:-10", "ok-1b:10", "torn-1a:-20", "undone-1a:-40", "undone-1b:40"]);
    let (mut v, _) = check_queue(&history, &broken);
    v.merge(check_bank(&[Cut { at: Duration::ZERO, ends: vec![], sum: -20 }], &broken));
    assert_eq!(kinds(&v), vec![("aborted read", 2), ("bank sum", 2), ("lost", 3), ("torn", 1)], "{v:#?}");
}

#[test]
fn a_hanging_transaction_names_its_topic() {
    let accounts = Accounts::new(3, 4);
    let unstable = [Unstable { partition: 6, last_stable_offset: 3, high_watermark: 5 }];
    let v = check_stable_named(&unstable, Duration::from_secs(90), |a| accounts.name(a));
    let example = &v.examples["hanging transaction"][0];
    assert!(example.starts_with("chaos-bank-g1 partition 2: last stable offset 3"), "{example}");
    let one = Accounts::new(1, 4);
    let v = check_stable_named(&unstable, Duration::from_secs(90), |a| one.name(a));
    assert!(v.examples["hanging transaction"][0].starts_with("partition 6: "), "{v:#?}");
}

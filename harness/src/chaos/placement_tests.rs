//! The rules a run gives its nodes place every topic and transactional id where the module
//! header says, read by the broker's own parser (`onelog_state::xgroup::placement`).

use std::collections::BTreeMap;
use std::time::Duration;

use onelog_state::xgroup::placement::{IdKind, Placement};

use super::*;
use crate::chaos::history::Txn;

fn parsed(workload: Workload, groups: u32, slots: usize) -> Placement {
    Placement::new(groups, &rules(workload, groups, slots), BTreeMap::new()).expect("rules parse")
}

fn topic_group(placement: &Placement, topic: &str) -> u32 {
    placement.topic(topic, &BTreeMap::new()).expect("placed")
}

#[test]
fn one_group_keeps_the_one_group_names() {
    let accounts = Accounts::new(1, 4);
    assert_eq!(accounts.topics, vec!["chaos-bank"]);
    assert_eq!(
        (accounts.count(), accounts.locate(3), accounts.name(3)),
        (4, ("chaos-bank", 3), "partition 3".into())
    );
    assert_eq!(bank_transactional_id(2, 1), "chaos-bank-2");
    assert_eq!(topics(Workload::Bank, 1, 4), vec![("chaos-bank".to_string(), 4)]);
    assert_eq!(topics(Workload::Queue, 1, 4), vec![("chaos-queue".to_string(), 4)]);
}

#[test]
fn bank_accounts_and_coordinators_span_every_group() {
    let placement = parsed(Workload::Bank, 3, 3);
    let accounts = Accounts::new(3, 4);
    assert_eq!(accounts.count(), 12);
    for account in 0..accounts.count() {
        let (topic, partition) = accounts.locate(account);
        assert_eq!(topic_group(&placement, topic), accounts.group(account), "{topic}");
        assert_eq!(accounts.account(account as usize / 4, partition), account);
    }
    assert_eq!(accounts.name(5), "chaos-bank-g1 partition 1");
    let coordinators: Vec<u32> =
        (0..3).map(|w| placement.id(IdKind::Txn, &bank_transactional_id(w, 3))).collect();
    assert_eq!(coordinators, vec![0, 1, 2]);
    assert_eq!(placement.id(IdKind::Group, "chaos-final-read"), 0);
}

/// Eleven groups: `chaos-bank-g1`'s rule must not take `chaos-bank-g10`, nor copier slot 1's
/// rule slot 10's id.
#[test]
fn longer_names_are_not_taken_by_their_prefixes() {
    let bank = parsed(Workload::Bank, 11, 11);
    assert_eq!(topic_group(&bank, "chaos-bank-g10"), 10);
    assert_eq!(topic_group(&bank, "chaos-bank-g1"), 1);
    assert_eq!(bank.id(IdKind::Txn, &bank_transactional_id(10, 11)), 10);
    let copier = parsed(Workload::Copier, 3, 11);
    let names = CopierNames::CHAOS;
    for slot in [1, 2, 10] {
        assert_eq!(
            copier.id(IdKind::Txn, &names.transactional_id(slot)),
            copier_coordinator(slot, 3),
            "slot {slot}"
        );
    }
}

#[test]
fn the_copier_spans_input_output_and_offsets_groups() {
    let placement = parsed(Workload::Copier, 3, 3);
    let names = CopierNames::CHAOS;
    assert_eq!(topic_group(&placement, names.input), 1);
    assert_eq!(topic_group(&placement, names.output), 2);
    assert_eq!(topic_group(&placement, names.observer), 0);
    assert_eq!(placement.id(IdKind::Group, names.group), 2, "the consumer group with the output");
    let two = parsed(Workload::Copier, 2, 2);
    assert_eq!((topic_group(&two, names.input), topic_group(&two, names.output)), (0, 1));
}

#[test]
fn the_queue_and_the_share_group_span_groups() {
    let queue = parsed(Workload::Queue, 3, 11);
    assert_eq!(topic_group(&queue, "chaos-queue"), 2);
    for writer in [0, 1, 2, 10] {
        let id = queue_transactional_id(writer);
        assert_eq!(queue.id(IdKind::Txn, &id), queue_coordinator(writer, 3), "{id}");
    }
    assert_eq!(queue.id(IdKind::Group, "chaos-reader-3"), 2, "the readers' groups with the topic");
    assert_eq!(queue.id(IdKind::Group, "chaos-final-read"), 0);
    let share = parsed(Workload::Share, 3, 3);
    assert_eq!(topic_group(&share, "chaos-share"), 2);
    assert_eq!(share.id(IdKind::Group, "chaos-share"), 0, "the share group apart from its topic");
    assert_eq!(share.id(IdKind::Txn, "chaos-share-writer-1"), 0);
}

#[test]
fn transfers_across_groups_are_counted() {
    let txn = |values: &[(i32, &str)], outcome| Txn {
        writer: "b0".into(),
        values: values.iter().map(|(a, v)| (*a, v.to_string())).collect(),
        outcome,
        deliberate_abort: false,
        started: Duration::ZERO,
        ended: Duration::ZERO,
    };
    let snapshot = Snapshot {
        txns: vec![
            txn(&[(0, "a"), (5, "b")], Outcome::Committed),
            txn(&[(0, "c"), (1, "d")], Outcome::Committed),
            txn(&[(2, "e"), (9, "f")], Outcome::Aborted),
        ],
        ..Default::default()
    };
    assert_eq!(transfers_across_groups(&snapshot, &Accounts::new(3, 4)), (1, 2));
}

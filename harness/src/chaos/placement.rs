//! `--groups N` (issue 32): which Raft group holds each of a chaos run's topics and
//! transactional ids, as the one `onelog.placement.rules` value every node is given, and the
//! bank's accounts spread over its topics.
//!
//! With one group nothing is placed and every name is the one-group run's. With N > 1
//! (transactions across groups, docs/SCALING.md §3):
//! - **bank**: the accounts are spread over N topics, `chaos-bank-g<g>` in group g; writer
//!   w's transactional id `chaos-bank-c<g>-<w>` is coordinated in group g = w mod N. A
//!   transfer debits one account and credits another drawn from all of them, so most
//!   transfers write to two groups, under a coordinator that is often a third;
//! - **copier**: the input in group N-2, the output and the consumer group `chaos-copier` in
//!   group N-1 (the cluster places its groups, `onelog.group.placement`), slot s's
//!   transactional id `chaos-copier-<s>` coordinated in group s mod N: each transaction
//!   writes its output and its offsets (`send_offsets_to_transaction`, a TxnOffsetCommit) in
//!   group N-1, within that group for the slots it coordinates, across groups for the others;
//! - **queue**: the topic in group N-1, writer w's transactional id `chaos-writer-<w>`
//!   coordinated in group w mod N: a writer coordinated in another group than the topic's
//!   commits across groups, the one in group N-1 within it; the plain (idempotent) writers
//!   write to group N-1 and the readers' consumer groups (`chaos-reader-…`) commit there too;
//! - **share**: the topic in group N-1, the share group `chaos-share` and the writers'
//!   transactional ids in group 0: the group's members join at group 0's leader and fetch
//!   from group N-1's, where its share partitions live, and every transactional write to the
//!   topic is a transaction across groups.
//!
//! Transactional ids the rules above do not name (none today) stay in group 0 (`txn:=0`), and
//! so do the other consumer and share groups (`group:=0`).

use std::cmp::Reverse;

use super::copier::CopierNames;
use super::history::{Outcome, Snapshot};
use super::run::{RunOptions, Workload};

/// The one-group bank's topic; with N groups, `chaos-bank-g<g>` for each group g.
pub const BANK_TOPIC: &str = "chaos-bank";

/// The bank's accounts: every partition of its topics, numbered topic by topic, so account a
/// is partition a mod P of topic a / P, and topic g is placed in group g. With one group the
/// accounts are the partitions of `chaos-bank`, numbered as before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accounts {
    pub topics: Vec<String>,
    pub partitions: i32,
}

impl Accounts {
    pub fn new(groups: u32, partitions: i32) -> Accounts {
        let topics = if groups > 1 {
            (0..groups).map(|g| format!("{BANK_TOPIC}-g{g}")).collect()
        } else {
            vec![BANK_TOPIC.to_string()]
        };
        Accounts { topics, partitions }
    }

    /// The Raft groups the accounts span (one topic in each).
    pub fn groups(&self) -> u32 {
        self.topics.len() as u32
    }

    pub fn count(&self) -> i32 {
        self.topics.len() as i32 * self.partitions
    }

    /// Partition `partition` of topic number `topic`.
    pub fn account(&self, topic: usize, partition: i32) -> i32 {
        topic as i32 * self.partitions + partition
    }

    /// The topic and partition that hold `account`.
    pub fn locate(&self, account: i32) -> (&str, i32) {
        (&self.topics[(account / self.partitions) as usize], account % self.partitions)
    }

    /// The Raft group that holds `account`: its topic's number.
    pub fn group(&self, account: i32) -> u32 {
        (account / self.partitions) as u32
    }

    /// How a violation names `account`: as the one-group run always did ("partition 3"), or
    /// with its topic.
    pub fn name(&self, account: i32) -> String {
        if self.topics.len() == 1 {
            return format!("partition {account}");
        }
        let (topic, partition) = self.locate(account);
        format!("{topic} partition {partition}")
    }
}

/// Bank writer `writer`'s coordinator group.
pub fn bank_coordinator(writer: usize, groups: u32) -> u32 {
    (writer % groups.max(1) as usize) as u32
}

/// Bank writer `writer`'s transactional id: its coordinator group is in the name, so one rule
/// per group places every writer.
pub fn bank_transactional_id(writer: usize, groups: u32) -> String {
    if groups > 1 {
        format!("{}-{writer}", bank_txn_prefix(bank_coordinator(writer, groups)))
    } else {
        format!("{BANK_TOPIC}-{writer}")
    }
}

fn bank_txn_prefix(group: u32) -> String {
    format!("{BANK_TOPIC}-c{group}")
}

/// The groups of the copier's input and output topics.
pub fn copier_topic_groups(groups: u32) -> (u32, u32) {
    (groups.saturating_sub(2), groups.saturating_sub(1))
}

/// The copier's slots (instances at a time): `--writers`, at least 2.
pub fn copier_slots(writers: usize) -> usize {
    writers.max(2)
}

/// Copier slot `slot`'s coordinator group.
pub fn copier_coordinator(slot: usize, groups: u32) -> u32 {
    (slot % groups.max(1) as usize) as u32
}

/// The group of the queue's topic.
pub fn queue_topic_group(groups: u32) -> u32 {
    groups.saturating_sub(1)
}

/// Queue writer `writer`'s transactional id (one rule per writer places it).
pub fn queue_transactional_id(writer: usize) -> String {
    format!("chaos-writer-{writer}")
}

/// Queue writer `writer`'s coordinator group.
pub fn queue_coordinator(writer: usize, groups: u32) -> u32 {
    (writer % groups.max(1) as usize) as u32
}

/// The topics a run creates, with their partition counts.
pub fn topics(workload: Workload, groups: u32, partitions: i32) -> Vec<(String, i32)> {
    match workload {
        Workload::Bank => {
            Accounts::new(groups, partitions).topics.into_iter().map(|t| (t, partitions)).collect()
        }
        Workload::Copier => {
            let names = CopierNames::CHAOS;
            vec![
                (names.input.into(), partitions),
                (names.output.into(), partitions),
                (names.observer.into(), 1),
            ]
        }
        Workload::Queue | Workload::Share => vec![(format!("chaos-{}", workload.name()), partitions)],
    }
}

/// `onelog.placement.rules` for a run of `groups` groups with `writers` writers (the copier's
/// and the queue's transactional ids). Longest prefix first: the first matching rule wins, so
/// `chaos-copier-1` must come after `chaos-copier-10`, or it would take its id.
pub fn rules(workload: Workload, groups: u32, writers: usize) -> String {
    let mut rules: Vec<(String, u32)> = Vec::new();
    match workload {
        Workload::Bank => {
            for (g, topic) in Accounts::new(groups, 1).topics.iter().enumerate() {
                rules.push((format!("topic:{topic}"), g as u32));
            }
            rules.extend((0..groups).map(|g| (format!("txn:{}-", bank_txn_prefix(g)), g)));
        }
        Workload::Copier => {
            let names = CopierNames::CHAOS;
            let (input, output) = copier_topic_groups(groups);
            rules.push((format!("topic:{}", names.input), input));
            rules.push((format!("topic:{}", names.output), output));
            rules.push((format!("group:{}", names.group), output));
            rules.push((format!("topic:{}", names.observer), 0));
            for slot in 0..copier_slots(writers) {
                rules.push((
                    format!("txn:{}", names.transactional_id(slot)),
                    copier_coordinator(slot, groups),
                ));
            }
        }
        Workload::Queue => {
            rules.push(("topic:chaos-queue".into(), queue_topic_group(groups)));
            rules.push(("group:chaos-reader".into(), queue_topic_group(groups)));
            for w in 0..writers {
                rules.push((format!("txn:{}", queue_transactional_id(w)), queue_coordinator(w, groups)));
            }
        }
        Workload::Share => rules.push(("topic:chaos-share".into(), groups - 1)),
    }
    rules.push(("txn:".into(), 0));
    rules.push(("group:".into(), 0));
    rules.sort_by_key(|(prefix, _)| Reverse(prefix.len()));
    rules.iter().map(|(prefix, g)| format!("{prefix}={g}")).collect::<Vec<_>>().join(",")
}

/// The rules of the run `options` describes.
pub fn run_rules(options: &RunOptions) -> String {
    rules(options.workload, options.groups, options.writers)
}

/// What ran where, for the report (nothing with one group).
pub fn describe(options: &RunOptions, snapshot: &Snapshot) -> Vec<String> {
    let groups = options.groups;
    if groups < 2 {
        return Vec::new();
    }
    let mut lines = vec![format!("{groups} Raft groups, onelog.placement.rules={}", run_rules(options))];
    match options.workload {
        Workload::Bank => {
            let accounts = Accounts::new(groups, options.partitions);
            let (across, committed) = transfers_across_groups(snapshot, &accounts);
            lines.push(format!(
                "bank: accounts in {} (topic -g<g> in group g), writer w's transactions coordinated in group w mod {groups}; {across} of {committed} committed transfers between two groups",
                accounts.topics.join(", ")
            ));
        }
        Workload::Copier => {
            let (input, output) = copier_topic_groups(groups);
            lines.push(format!(
                "copier: input in group {input}, output, the consumer group and its offsets in group {output}, slot s's transactions coordinated in group s mod {groups}"
            ));
        }
        Workload::Queue => lines.push(format!(
            "queue: the topic and the readers' consumer groups in group {}, writer w's transactions coordinated in group w mod {groups}",
            queue_topic_group(groups)
        )),
        Workload::Share => lines.push(format!(
            "share: the topic and its share partitions in group {}, the share group's members and the writers' transactions in group 0",
            groups - 1
        )),
    }
    lines
}

/// Of the committed transfers, how many wrote to accounts of two groups; and how many there were.
pub fn transfers_across_groups(snapshot: &Snapshot, accounts: &Accounts) -> (usize, usize) {
    let committed: Vec<_> = snapshot.txns.iter().filter(|t| t.outcome == Outcome::Committed).collect();
    let across = committed
        .iter()
        .filter(|t| {
            let mut groups = t.values.iter().map(|(account, _)| accounts.group(*account));
            groups.next().is_some_and(|first| groups.any(|g| g != first))
        })
        .count();
    (across, committed.len())
}

#[cfg(test)]
#[path = "placement_tests.rs"]
mod tests;

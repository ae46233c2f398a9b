//! What apply must keep, per entry, on the leader (see the crate header): offsets ordered,
//! the offsets the leader stamped reported back, transactions and partitions agreeing, a
//! write answered at stamping applied where it was stamped, and a committed transaction's
//! offsets stored.
//!
//! The checks that need a client's view of its own requests are in `answers`.

use std::collections::{BTreeMap, BTreeSet};

use kafka_compat::batch::parse_header;
use kafka_compat::error_code;
use onelog_state::command::{Command, CommandResponse, Op, OpResult, PartitionProduced};
use onelog_state::txns::TxnState;
use onelog_state::BrokerState;

use crate::clients::SentPart;
use crate::cluster::Applied;
use crate::report::summarize_op;
use crate::sim::Sim;
use crate::GROUPS;

/// What must hold on the leader after every entry (see the module header).
pub(crate) fn check_entry(after: &BrokerState, command: &Command, applied: &Applied) -> Result<(), String> {
    for (index, (op, result)) in command.ops.iter().zip(&applied.response.results).enumerate() {
        let Op::Produce(produce) = op else { continue };
        match result {
            OpResult::Produced(Ok(parts)) => {
                if parts.len() != produce.partitions.len() {
                    return Err(format!(
                        "op {index}: {} results for {} partitions",
                        parts.len(),
                        produce.partitions.len()
                    ));
                }
                for (append, part) in produce.partitions.iter().zip(parts) {
                    let stamped = parse_header(&append.batches[0]).map_err(|e| e.to_string())?.base_offset;
                    if part.error_code != error_code::NONE
                        || part.base_offset != stamped
                        || part.append_time_ms != command.stamp.now_ms
                    {
                        return Err(format!(
                            "op {index}: {}-{} stamped at {stamped} by the leader, apply reports {part:?}",
                            append.topic, append.partition
                        ));
                    }
                }
            }
            // The builder runs apply's checks; a refusal here means they disagree, and writes
            // answered at stamping would be lost.
            OpResult::Produced(Err(refusal)) => {
                return Err(format!(
                    "op {index}: apply refused a produce op the entry builder stamped: {refusal:?}"
                ))
            }
            other => return Err(format!("op {index}: a produce op answered with {other:?}")),
        }
    }
    for (name, topic) in &after.topics {
        for (index, p) in topic.partitions.iter().enumerate() {
            let (start, lso, hw) = (p.log_start_offset, p.last_stable_offset(), p.high_watermark());
            if !(0 <= start && start <= lso && lso <= hw) {
                return Err(format!("{name}-{index}: log start {start}, LSO {lso}, high watermark {hw}"));
            }
            if p.aborted_txns.windows(2).any(|w| w[0].last_offset >= w[1].last_offset)
                || p.aborted_txns.iter().any(|a| a.first_offset > a.last_offset || a.last_offset >= hw)
            {
                return Err(format!("{name}-{index}: aborted index out of order: {:?}", p.aborted_txns));
            }
            for (pid, first) in &p.open_txns {
                let meta = after.txns.by_producer(*pid).map(|(_, m)| m);
                let registered = meta.is_some_and(|m| {
                    m.state == TxnState::Ongoing
                        && m.partitions.get(&(name.clone(), index as i32)) == Some(first)
                });
                if !registered {
                    return Err(format!(
                        "{name}-{index}: producer {pid} open from {first} but its transaction is {meta:?}"
                    ));
                }
            }
        }
    }
    for (tid, meta) in &after.txns.by_id {
        for ((topic, partition), first) in &meta.partitions {
            let open = after.partition(topic, *partition).and_then(|p| p.open_txns.get(&meta.producer_id));
            if meta.state != TxnState::Ongoing || open != Some(first) {
                return Err(format!(
                    "{tid} ({:?}) wrote {topic}-{partition} from {first}, the partition has it open from {open:?}",
                    meta.state
                ));
            }
        }
    }
    Ok(())
}

impl Sim {
    /// A transaction that committed in this entry stored the offsets it held, when nothing
    /// else in the entry touched the group.
    pub(crate) fn check_txn_offsets(
        &mut self,
        before: &BrokerState,
        after: &BrokerState,
        command: &Command,
        applied: &Applied,
    ) -> Result<(), String> {
        let touched: BTreeSet<&str> = command
            .ops
            .iter()
            .filter_map(|op| match op {
                Op::OffsetCommit(c) => Some(vec![c.group_id.as_str()]),
                Op::TxnOffsetCommit(c) => Some(vec![c.group_id.as_str()]),
                Op::OffsetDelete(d) => Some(vec![d.group_id.as_str()]),
                Op::DeleteGroups(d) => Some(d.groups.iter().map(|g| g.group_id.as_str()).collect()),
                Op::DeleteTopics(_) => Some(GROUPS.to_vec()),
                _ => None,
            })
            .flatten()
            .collect();
        let mut committing: BTreeMap<&str, usize> = BTreeMap::new();
        let mut ended = Vec::new();
        for (op, result) in command.ops.iter().zip(&applied.response.results) {
            let Op::EndTxn(end) = op else { continue };
            if !end.txn_commit || !matches!(result, OpResult::Txn(Ok(_))) {
                continue;
            }
            let Some(meta) = before.txns.by_id.get(&end.transactional_id) else { continue };
            if meta.state != TxnState::Ongoing || meta.producer_id != end.producer.producer_id {
                continue;
            }
            for group in meta.pending_offsets.keys() {
                *committing.entry(group.as_str()).or_default() += 1;
            }
            ended.push(meta);
        }
        for meta in ended {
            for (group, offsets) in &meta.pending_offsets {
                if touched.contains(group.as_str()) || committing[group.as_str()] > 1 {
                    continue;
                }
                for ((topic, partition), offset) in offsets {
                    let stored = after.groups.committed(group, topic, *partition);
                    if stored != Some(offset) {
                        return Err(format!(
                            "producer {} committed {group} {topic}-{partition} at {offset:?}, the group has {stored:?}",
                            meta.producer_id
                        ));
                    }
                    self.stats.txn_offsets_checked += 1;
                }
            }
        }
        Ok(())
    }
}

/// A transactional write answered at stamping must be applied where it was stamped.
pub(crate) fn check_early_answer(
    command: &Command,
    response: &CommandResponse,
    part: &SentPart,
    answer: &PartitionProduced,
) -> Result<(), String> {
    for (index, (op, result)) in command.ops.iter().zip(&response.results).enumerate() {
        let Op::Produce(produce) = op else { continue };
        let Some(k) = produce.partitions.iter().position(|a| {
            a.topic == part.topic
                && a.partition == part.partition
                && parse_header(&a.batches[0]).is_ok_and(|h| h.base_offset == answer.base_offset)
        }) else {
            continue;
        };
        if matches!(result, OpResult::Produced(Ok(parts)) if parts[k].base_offset == answer.base_offset) {
            return Ok(());
        }
        return Err(format!(
            "{}-{}: a transactional write was answered at stamping with {answer:?}, but apply \
             answered its op {index} with {result:?}; {}",
            part.topic,
            part.partition,
            first_refusal(command, response)
        ));
    }
    Err(format!(
        "{}-{}: a transactional write was answered at stamping with {answer:?}, but no op of the entry holds it",
        part.topic, part.partition
    ))
}

/// The first produce op of the entry apply refused, and why: where a cascade of refusals began.
fn first_refusal(command: &Command, response: &CommandResponse) -> String {
    command
        .ops
        .iter()
        .zip(&response.results)
        .enumerate()
        .find_map(|(index, (op, result))| match (op, result) {
            (Op::Produce(_), OpResult::Produced(Err(refusal))) => {
                Some(format!("the first refused produce op is {index}: {refusal:?}, op {}", summarize_op(op)))
            }
            _ => None,
        })
        .unwrap_or_else(|| "no produce op of the entry was refused".into())
}

//! Failure messages: a caught panic's text, clipping, where two states first differ, and an
//! entry or op in one line.
//!
//! Shared by the harness, the storage model and the checks, so that a failure says what
//! differed in terms a reader can follow to the op that caused it.

use std::collections::BTreeSet;

use kafka_compat::batch::parse_header;
use onelog_state::command::{Command, Op};
use onelog_state::BrokerState;

pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else {
        "(no message)".into()
    }
}

pub(crate) fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &s[..end], s.len())
}

/// Where two states first differ, for the failure message.
pub(crate) fn describe_state_diff(a: &BrokerState, b: &BrokerState) -> String {
    let mut out = Vec::new();
    if a.cluster_id != b.cluster_id {
        out.push(format!("cluster_id {:?} vs {:?}", a.cluster_id, b.cluster_id));
    }
    if a.limits != b.limits {
        out.push(format!("limits {:?} vs {:?}", a.limits, b.limits));
    }
    let names: BTreeSet<&String> = a.topics.keys().chain(b.topics.keys()).collect();
    for name in names {
        match (a.topics.get(name), b.topics.get(name)) {
            (Some(ta), Some(tb)) if ta != tb => {
                if ta.partitions.len() != tb.partitions.len() {
                    out.push(format!(
                        "topic {name}: {} vs {} partitions",
                        ta.partitions.len(),
                        tb.partitions.len()
                    ));
                }
                for (i, (pa, pb)) in ta.partitions.iter().zip(&tb.partitions).enumerate() {
                    if pa != pb {
                        out.push(format!("{name}-{i}: {pa:?} vs {pb:?}"));
                    }
                }
                if ta.topic_id != tb.topic_id || ta.configs != tb.configs {
                    out.push(format!("topic {name}: id or configs differ"));
                }
            }
            (Some(_), None) | (None, Some(_)) => out.push(format!("topic {name} exists on one side only")),
            _ => {}
        }
    }
    if a.producers != b.producers {
        if a.producers.next_producer_id != b.producers.next_producer_id {
            out.push(format!(
                "next producer id {} vs {}",
                a.producers.next_producer_id, b.producers.next_producer_id
            ));
        }
        let ids: BTreeSet<&i64> = a.producers.live.keys().chain(b.producers.live.keys()).collect();
        if let Some(id) = ids.into_iter().find(|id| a.producers.live.get(*id) != b.producers.live.get(*id)) {
            out.push(format!(
                "producer {id}: {:?} vs {:?}",
                a.producers.live.get(id),
                b.producers.live.get(id)
            ));
        }
        if a.producers.idle_order != b.producers.idle_order {
            out.push("producers' idle order differs".into());
        }
    }
    if a.groups != b.groups {
        let ids: BTreeSet<&String> = a.groups.groups.keys().chain(b.groups.groups.keys()).collect();
        if let Some(id) = ids.into_iter().find(|id| a.groups.groups.get(*id) != b.groups.groups.get(*id)) {
            out.push(format!("group {id}: {:?} vs {:?}", a.groups.groups.get(id), b.groups.groups.get(id)));
        }
    }
    if a.txns != b.txns {
        let ids: BTreeSet<&String> = a.txns.by_id.keys().chain(b.txns.by_id.keys()).collect();
        if let Some(id) = ids.into_iter().find(|id| a.txns.by_id.get(*id) != b.txns.by_id.get(*id)) {
            out.push(format!(
                "transactional id {id}: {:?} vs {:?}",
                a.txns.by_id.get(id),
                b.txns.by_id.get(id)
            ));
        }
        if a.txns.by_producer_id != b.txns.by_producer_id {
            out.push("transactions' producer id index differs".into());
        }
    }
    if out.is_empty() {
        out.push("no field differs (the serialized bytes do)".into());
    }
    clip(&out.join("; "), 4000)
}

/// One line per entry for failure messages.
pub(crate) fn summarize(command: &Command) -> String {
    let ops: Vec<String> = command.ops.iter().map(summarize_op).collect();
    clip(&format!("term {} now_ms {}: {}", command.stamp.term, command.stamp.now_ms, ops.join(", ")), 3000)
}

pub(crate) fn summarize_op(op: &Op) -> String {
    match op {
        Op::Produce(produce) => {
            let parts: Vec<String> = produce
                .partitions
                .iter()
                .map(|a| {
                    let headers: Vec<String> = a
                        .batches
                        .iter()
                        .filter_map(|b| parse_header(b).ok())
                        .map(|h| {
                            let txn = if h.is_transactional() { " txn" } else { "" };
                            format!(
                                "@{}+{} pid {} e{} s{}{txn}",
                                h.base_offset,
                                h.record_count,
                                h.producer_id,
                                h.producer_epoch,
                                h.base_sequence
                            )
                        })
                        .collect();
                    format!("{}-{} {}", a.topic, a.partition, headers.join(" "))
                })
                .collect();
            format!("Produce[{}]", parts.join("; "))
        }
        Op::EndTxn(end) => format!(
            "EndTxn({} {} {}/{}{})",
            end.transactional_id,
            if end.txn_commit { "commit" } else { "abort" },
            end.producer.producer_id,
            end.producer.producer_epoch,
            if end.bump_epoch { " v2" } else { "" }
        ),
        other => clip(&format!("{other:?}"), 300),
    }
}

//! Delivering each proposal's answer to its client: the client learns its producer ids,
//! sequences and transaction state, the counters that come from answers are taken, and what
//! only a client can see is checked (a retry answered with its batch's offsets, an early
//! answer only for a transactional write, a fenced instance never ending a transaction, no
//! commit after an acknowledged write was lost).

use std::collections::BTreeMap;

use kafka_compat::error_code;
use onelog_state::command::{OpResult, PartitionProduced};
use onelog_state::entry::{Answer, Decision};
use onelog_state::txns::ProducerIdEpoch;

use crate::checks::check_early_answer;
use crate::clients::{EntryCtx, IdemClient, ItemsKind, PartKind, Sent, SentBatch, SentPart, Who};
use crate::sim::Sim;
use crate::RETRY_HISTORY;

impl Sim {
    /// Delivers each proposal's answer to its client, checking what can be checked.
    pub(crate) fn answer(
        &mut self,
        step: u64,
        decisions: Vec<Decision>,
        sent: Vec<Sent>,
        ctx: &EntryCtx,
    ) -> Result<(), String> {
        if decisions.len() != sent.len() {
            return Err(format!("{} decisions for {} proposals", decisions.len(), sent.len()));
        }
        let answers: Vec<(bool, Option<Answer>)> = decisions
            .into_iter()
            .map(|d| match d {
                Decision::Answered(answer) => (true, Some(answer)),
                Decision::Waiting(w) => match ctx.response {
                    Some(response) => (false, Some(w.answer(&response.results))),
                    None => (false, w.failed(error_code::NOT_LEADER_OR_FOLLOWER, "the entry was lost")),
                },
            })
            .collect();
        for (index, (sent, (early, answer))) in sent.into_iter().zip(&answers).enumerate() {
            let answer = answer.as_ref();
            match sent {
                Sent::Produce { who, parts } => {
                    let results = produced(answer, parts.len(), index)?;
                    self.on_produced(ctx, &answers, *early, who, &parts, results)?;
                }
                Sent::Duty => {}
                Sent::Items(kind) => {
                    let items = match op_result(answer, index)? {
                        Some(OpResult::Items(items)) => items,
                        None => continue,
                        Some(other) => {
                            return Err(format!("proposal {index}: items answered with {other:?}"))
                        }
                    };
                    let ok = items.iter().filter(|(code, _)| *code == error_code::NONE).count() as u64;
                    match kind {
                        ItemsKind::CreateTopics => self.stats.topics_created += ok,
                        ItemsKind::DeleteTopics => self.stats.topics_deleted += ok,
                        ItemsKind::CreatePartitions => self.stats.partitions_added += ok,
                        ItemsKind::DeleteGroups => self.stats.groups_deleted += ok,
                        ItemsKind::OffsetCommit => {
                            self.stats.offsets_committed += ok;
                            self.stats.offset_commits_refused += items.len() as u64 - ok;
                        }
                    }
                }
                Sent::InitIdem => match op_result(answer, index)? {
                    Some(OpResult::ProducerId(Ok(id))) => {
                        self.stats.idempotent_inits += 1;
                        self.idem.push(IdemClient {
                            producer_id: id.producer_id,
                            epoch: id.producer_epoch,
                            next_seq: BTreeMap::new(),
                            history: BTreeMap::new(),
                        });
                    }
                    Some(OpResult::ProducerId(Err(_))) | None => {}
                    Some(other) => {
                        return Err(format!("proposal {index}: InitProducerId answered with {other:?}"))
                    }
                },
                Sent::InitTxn { client, fencing } => match op_result(answer, index)? {
                    Some(OpResult::Txn(Ok(id))) => {
                        self.stats.txn_inits += 1;
                        let c = &mut self.txn[client];
                        if fencing {
                            if let Some(old) = c.id.filter(|old| *old != id) {
                                c.zombie = Some(old);
                                c.fenced_at = step;
                            }
                        }
                        c.take_id(id);
                    }
                    Some(OpResult::Txn(Err(e))) => self.txn[client].on_error(&e, &mut self.stats),
                    None => {}
                    Some(other) => {
                        return Err(format!("proposal {index}: InitProducerId answered with {other:?}"))
                    }
                },
                Sent::TxnOffsets { client } => match op_result(answer, index)? {
                    Some(OpResult::TxnOffsets(Ok(results))) => {
                        let held =
                            results.iter().filter(|(code, _)| *code == error_code::NONE).count() as u64;
                        self.stats.txn_offsets_held += held;
                        if held > 0 {
                            self.txn[client].in_txn = true;
                        }
                    }
                    Some(OpResult::TxnOffsets(Err(e))) => self.txn[client].on_error(&e, &mut self.stats),
                    None => {}
                    Some(other) => {
                        return Err(format!("proposal {index}: TxnOffsetCommit answered with {other:?}"))
                    }
                },
                Sent::EndTxn { client, zombie, retry, commit, v2 } => {
                    let result = match op_result(answer, index)? {
                        Some(OpResult::Txn(result)) => result,
                        None => continue,
                        Some(other) => {
                            return Err(format!("proposal {index}: EndTxn answered with {other:?}"))
                        }
                    };
                    if v2 {
                        self.stats.v2_end_txns += 1;
                    } else {
                        self.stats.v1_end_txns += 1;
                    }
                    let c = &mut self.txn[client];
                    match result {
                        Ok(id) if zombie => {
                            return Err(format!(
                                "{}: the fenced instance {:?} ended a transaction ({}), answered {id:?}",
                                c.tid,
                                c.zombie,
                                if commit { "commit" } else { "abort" }
                            ))
                        }
                        Err(_) if zombie => self.stats.fenced += 1,
                        _ if retry => {}
                        Ok(id) => {
                            if commit && c.lost_ack {
                                return Err(format!(
                                    "{}: committed ({id:?}) although a write it was told succeeded was lost \
                                     with its entry",
                                    c.tid
                                ));
                            }
                            c.take_id(id);
                        }
                        Err(e) => c.on_error(&e, &mut self.stats),
                    }
                }
                Sent::OffsetDelete { offsets } => match op_result(answer, index)? {
                    Some(OpResult::Deleted(Ok(()))) => self.stats.offsets_deleted += offsets,
                    Some(OpResult::Deleted(Err(_))) | None => {}
                    Some(other) => {
                        return Err(format!("proposal {index}: OffsetDelete answered with {other:?}"))
                    }
                },
            }
        }
        Ok(())
    }

    /// One produce proposal's answers: the checks, then the client learns them.
    fn on_produced(
        &mut self,
        ctx: &EntryCtx,
        answers: &[(bool, Option<Answer>)],
        early: bool,
        who: Who,
        parts: &[SentPart],
        results: &[PartitionProduced],
    ) -> Result<(), String> {
        for (part, result) in parts.iter().zip(results) {
            let at = format!("{}-{}", part.topic, part.partition);
            let log_end = ctx.before.partition(&part.topic, part.partition).map(|p| p.log_end_offset);
            let stamped_now =
                result.error_code == error_code::NONE && log_end.is_some_and(|end| result.base_offset >= end);
            if early && stamped_now {
                // Answered before commit: only a transactional write of an open transaction.
                if matches!(who, Who::Plain | Who::Idempotent(_)) {
                    return Err(format!(
                        "{at}: a non-transactional write was answered before commit: {result:?}"
                    ));
                }
                self.stats.early_txn_answers += 1;
                if let Some(response) = ctx.response {
                    check_early_answer(ctx.command, response, part, result)?;
                }
            }
            let last_seq = part.producer.map(|(_, _, first)| first + part.records - 1);
            if result.error_code == error_code::NONE {
                match part.kind {
                    PartKind::Retry => {
                        let (pid, epoch, first) = part.producer.expect("retries are idempotent");
                        let original = ctx
                            .before
                            .producers
                            .partition(pid, &part.topic, part.partition)
                            .filter(|s| s.epoch == epoch)
                            .and_then(|s| {
                                s.batches
                                    .iter()
                                    .find(|m| m.first_seq == first && Some(m.last_seq) == last_seq)
                            });
                        if let Some(meta) = original {
                            if result.base_offset != meta.base_offset {
                                return Err(format!(
                                    "{at}: retry of producer {pid} seq {first} answered at {} but the batch is at {}",
                                    result.base_offset, meta.base_offset
                                ));
                            }
                            self.stats.duplicates += 1;
                        }
                    }
                    PartKind::RetryInEntry(proposal, k) => {
                        let original = match &answers[proposal].1 {
                            Some(Answer::Produced(parts)) => parts.get(k).cloned(),
                            _ => None,
                        };
                        let same = original.as_ref().is_some_and(|o| {
                            o.error_code == result.error_code && o.base_offset == result.base_offset
                        });
                        if !same {
                            return Err(format!(
                                "{at}: in-entry retry answered {result:?}, its original {original:?}"
                            ));
                        }
                        self.stats.duplicates_in_entry += 1;
                    }
                    PartKind::Fresh | PartKind::Gap => {}
                }
            } else if result.error_code == error_code::OUT_OF_ORDER_SEQUENCE_NUMBER {
                self.stats.out_of_order += 1;
            }
            let key = (part.topic.clone(), part.partition);
            if let Who::Idempotent(c) = who {
                let client = &mut self.idem[c];
                let (_, epoch, first) = part.producer.expect("an idempotent client's batch");
                if epoch != client.epoch {
                    continue;
                }
                match result.error_code {
                    error_code::NONE => {
                        let next = client.next_seq.entry(key.clone()).or_insert(0);
                        *next = (*next).max(first + part.records);
                        if matches!(part.kind, PartKind::Fresh | PartKind::Gap) {
                            let history = client.history.entry(key.clone()).or_default();
                            history.push_back(SentBatch {
                                epoch,
                                first_seq: first,
                                records: part.records,
                                bytes: part.bytes.clone(),
                            });
                            if history.len() > RETRY_HISTORY {
                                history.pop_front();
                            }
                        }
                    }
                    error_code::OUT_OF_ORDER_SEQUENCE_NUMBER | error_code::INVALID_PRODUCER_EPOCH
                        if part.kind == PartKind::Fresh =>
                    {
                        client.bump_epoch();
                    }
                    _ => {}
                }
            }
            if let Who::Zombie(c) = who {
                // A duplicate of a batch it wrote while current is answered from the log; a
                // new append would be a write of a fenced epoch.
                if stamped_now {
                    return Err(format!(
                        "{at}: a write of {}'s fenced instance {:?} was appended: {result:?}",
                        self.txn[c].tid, part.producer
                    ));
                }
                if result.error_code != error_code::NONE {
                    self.stats.fenced += 1;
                }
            }
            if let Who::Txn(c) = who {
                let client = &mut self.txn[c];
                let (pid, epoch, first) = part.producer.expect("a transactional batch");
                if client.id != Some(ProducerIdEpoch { producer_id: pid, producer_epoch: epoch }) {
                    continue;
                }
                match result.error_code {
                    error_code::NONE => {
                        let next = client.next_seq.entry(key).or_insert(0);
                        *next = (*next).max(first + part.records);
                        client.in_txn = true;
                        if early && ctx.lost {
                            client.lost_ack = true;
                        }
                    }
                    error_code::UNKNOWN_TOPIC_OR_PARTITION
                    | error_code::NOT_LEADER_OR_FOLLOWER
                    | error_code::NOT_ENOUGH_REPLICAS => {}
                    _ => client.needs_reinit = true,
                }
            }
        }
        Ok(())
    }
}

fn produced(answer: Option<&Answer>, parts: usize, index: usize) -> Result<&[PartitionProduced], String> {
    match answer {
        Some(Answer::Produced(results)) if results.len() == parts => Ok(results),
        other => Err(format!("proposal {index}: a produce of {parts} partitions answered with {other:?}")),
    }
}

fn op_result(answer: Option<&Answer>, index: usize) -> Result<Option<OpResult>, String> {
    match answer {
        Some(Answer::Op(result)) => Ok(Some(result.clone())),
        None => Ok(None),
        Some(other) => Err(format!("proposal {index}: an op answered with {other:?}")),
    }
}

//! What one run did: the counters, their summary line and the minimums a default-length run
//! must reach (`Stats::check_coverage`), so that the test cannot pass by generating nothing.
//!
//! Most counters are taken from the applied entries here (`Sim::count_applied`, from the
//! leader's effects); the rest where the clients read their answers (`answers`).

use std::collections::BTreeSet;

use kafka_compat::batch::{parse_header, BatchHeader};
use kafka_compat::control::marker_is_commit;
use onelog_state::command::{Command, Op};
use onelog_state::txns::{BrokerAbort, TxnState};
use onelog_state::{BrokerState, Effect};

use crate::cluster::Applied;
use crate::sim::Sim;
use crate::DEFAULT_OPS;

/// What one run did; the default test asserts minimums so that it cannot pass vacuously.
#[derive(Debug, Default, Clone)]
pub(crate) struct Stats {
    pub(crate) ops: usize,
    entries: u64,
    pub(crate) terms: u64,
    pub(crate) takeover_entries: u64,
    pub(crate) lost_entries: u64,
    /// Entries built while an earlier one was still in flight (pipelined proposals).
    pub(crate) pipelined_entries: u64,
    pub(crate) checkpoints: u64,
    set_limits: u64,
    pub(crate) topics_created: u64,
    pub(crate) topics_deleted: u64,
    pub(crate) partitions_added: u64,
    records: u64,
    partitions_written: BTreeSet<([u8; 16], i32)>,
    plain_batches: u64,
    idempotent_batches: u64,
    txn_batches: u64,
    pub(crate) duplicates: u64,
    pub(crate) duplicates_in_entry: u64,
    pub(crate) out_of_order: u64,
    pub(crate) early_txn_answers: u64,
    pub(crate) idempotent_inits: u64,
    pub(crate) txn_inits: u64,
    txn_commits: u64,
    txn_aborts: u64,
    pub(crate) v1_end_txns: u64,
    pub(crate) v2_end_txns: u64,
    fencing_aborts: u64,
    timeout_aborts: u64,
    takeover_aborts: u64,
    admin_aborts: u64,
    pub(crate) fenced: u64,
    pub(crate) aborted_by_broker: u64,
    commit_markers: u64,
    abort_markers: u64,
    pub(crate) txn_offsets_held: u64,
    pub(crate) txn_offsets_checked: u64,
    pub(crate) offsets_committed: u64,
    pub(crate) offset_commits_refused: u64,
    pub(crate) generations: u64,
    pub(crate) groups_deleted: u64,
    pub(crate) offsets_deleted: u64,
    trims: u64,
    producers_expired: u64,
    txn_ids_expired: u64,
}

impl Stats {
    pub(crate) fn summary(&self) -> String {
        format!(
            "{} ops in {} entries ({} built with another in flight), {} terms ({} takeover entries, \
             {} lost entries), {} checkpoints, \
             {} SetLimits; topics +{} -{} (+{} partitions); {} records on {} partitions \
             ({} plain, {} idempotent, {} transactional batches); {} duplicates answered from the \
             log, {} in-entry duplicates, {} out-of-order refused, \
             {} transactional writes answered at stamping; {} idempotent and {} transactional \
             InitProducerId; transactions: {} committed, {} aborted by clients, {} by fencing, \
             {} timed out, {} at takeover, {} by admin ({} v1 and {} v2 EndTxn, {} commit and \
             {} abort markers), {} fenced requests, {} told aborted by the broker, {} offsets held \
             ({} checked after commit); {} offsets committed, {} refused, {} generations, \
             {} groups deleted, {} offsets deleted; {} trims, {} producer ids expired, \
             {} transactional ids expired",
            self.ops,
            self.entries,
            self.pipelined_entries,
            self.terms,
            self.takeover_entries,
            self.lost_entries,
            self.checkpoints,
            self.set_limits,
            self.topics_created,
            self.topics_deleted,
            self.partitions_added,
            self.records,
            self.partitions_written.len(),
            self.plain_batches,
            self.idempotent_batches,
            self.txn_batches,
            self.duplicates,
            self.duplicates_in_entry,
            self.out_of_order,
            self.early_txn_answers,
            self.idempotent_inits,
            self.txn_inits,
            self.txn_commits,
            self.txn_aborts,
            self.fencing_aborts,
            self.timeout_aborts,
            self.takeover_aborts,
            self.admin_aborts,
            self.v1_end_txns,
            self.v2_end_txns,
            self.commit_markers,
            self.abort_markers,
            self.fenced,
            self.aborted_by_broker,
            self.txn_offsets_held,
            self.txn_offsets_checked,
            self.offsets_committed,
            self.offset_commits_refused,
            self.generations,
            self.groups_deleted,
            self.offsets_deleted,
            self.trims,
            self.producers_expired,
            self.txn_ids_expired,
        )
    }

    /// Minimums for a default-length run; a shorter one (`REPLAY_OPS`) is only checked for
    /// its op count.
    pub(crate) fn check_coverage(&self, ops: usize) -> Result<(), String> {
        if self.ops < ops {
            return Err(format!("{} ops applied, {ops} asked for", self.ops));
        }
        if ops < DEFAULT_OPS {
            return Ok(());
        }
        // About half the smallest value seen over 100 seeds; only the fixed seeds must meet them.
        let minimums = [
            ("entries", self.entries, 800),
            ("terms", self.terms, 8),
            ("lost entries", self.lost_entries, 1),
            ("entries built with another in flight", self.pipelined_entries, 300),
            ("checkpoints", self.checkpoints, 10),
            ("SetLimits", self.set_limits, 3),
            ("topics created", self.topics_created, 8),
            ("topics deleted", self.topics_deleted, 5),
            ("records", self.records, 10_000),
            ("partitions written", self.partitions_written.len() as u64, 20),
            ("plain batches", self.plain_batches, 3_000),
            ("idempotent batches", self.idempotent_batches, 1_500),
            ("transactional batches", self.txn_batches, 1_000),
            ("duplicates answered from the log", self.duplicates, 80),
            ("in-entry duplicates", self.duplicates_in_entry, 60),
            ("out-of-order refusals", self.out_of_order, 20),
            ("idempotent InitProducerId", self.idempotent_inits, 50),
            ("transactional InitProducerId", self.txn_inits, 100),
            ("commits", self.txn_commits, 100),
            ("client aborts", self.txn_aborts, 40),
            ("v1 EndTxn", self.v1_end_txns, 150),
            ("v2 EndTxn", self.v2_end_txns, 150),
            ("fencing aborts", self.fencing_aborts, 30),
            ("timeout aborts", self.timeout_aborts, 40),
            // No longer proposed by a leader (issue 17); the admin duty replays a few as logs
            // written before hold them.
            ("takeover aborts", self.takeover_aborts, 1),
            ("admin aborts", self.admin_aborts, 1),
            ("fenced requests", self.fenced, 70),
            ("told aborted by the broker", self.aborted_by_broker, 50),
            ("offsets held by transactions", self.txn_offsets_held, 100),
            ("committed offsets checked", self.txn_offsets_checked, 30),
            ("offsets committed", self.offsets_committed, 400),
            ("generations", self.generations, 120),
            ("groups deleted", self.groups_deleted, 30),
            ("offsets deleted", self.offsets_deleted, 90),
            ("trims", self.trims, 130),
            ("producer ids expired", self.producers_expired, 20),
            ("transactional ids expired", self.txn_ids_expired, 1),
        ];
        let missing: Vec<String> = minimums
            .iter()
            .filter(|(_, got, min)| got < min)
            .map(|(name, got, min)| format!("{name}: {got} < {min}"))
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(missing.join(", "))
        }
    }
}

impl Sim {
    /// Counts what an applied entry did (from the leader's effects and the state before it).
    pub(crate) fn count_applied(&mut self, before: &BrokerState, command: &Command, applied: &Applied) {
        self.stats.entries += 1;
        self.stats.ops += command.ops.len();
        let now = command.stamp.now_ms;
        for (op, effects) in command.ops.iter().zip(&applied.effects) {
            let pids: BTreeSet<i64> = effects
                .iter()
                .filter_map(|e| match e {
                    Effect::Append { batch, .. } => parse_header(batch).ok().filter(BatchHeader::is_control),
                    _ => None,
                })
                .map(|h| h.producer_id)
                .collect();
            match op {
                Op::SetLimits(_) => self.stats.set_limits += 1,
                Op::AbortTxns(abort) => {
                    let n = pids.len() as u64;
                    match abort.reason {
                        BrokerAbort::Timeout => self.stats.timeout_aborts += n,
                        BrokerAbort::Takeover => self.stats.takeover_aborts += n,
                        BrokerAbort::Admin => self.stats.admin_aborts += n,
                    }
                }
                Op::InitTxnProducer(_) if !pids.is_empty() => self.stats.fencing_aborts += 1,
                Op::EndTxn(end) if !pids.is_empty() => {
                    if end.txn_commit {
                        self.stats.txn_commits += 1;
                    } else {
                        self.stats.txn_aborts += 1;
                    }
                }
                Op::ExpireProducers(_) => {
                    self.stats.producers_expired +=
                        before.producers.expirable(now, before.limits.producer_id_expiration_ms) as u64;
                }
                Op::ExpireTransactionalIds(_) => {
                    let expiration = before.limits.transactional_id_expiration_ms;
                    self.stats.txn_ids_expired += before
                        .txns
                        .by_id
                        .values()
                        .filter(|m| m.state != TxnState::Ongoing && now - m.last_update_ms >= expiration)
                        .count() as u64;
                }
                _ => {}
            }
            for effect in effects {
                match effect {
                    Effect::Append { topic_id, partition, batch } => {
                        let Ok(header) = parse_header(batch) else { continue };
                        if header.is_control() {
                            if marker_is_commit(batch) == Some(true) {
                                self.stats.commit_markers += 1;
                            } else {
                                self.stats.abort_markers += 1;
                            }
                            continue;
                        }
                        self.stats.records += header.record_count as u64;
                        self.stats.partitions_written.insert((*topic_id, *partition));
                        if header.is_transactional() {
                            self.stats.txn_batches += 1;
                        } else if header.producer_id >= 0 {
                            self.stats.idempotent_batches += 1;
                        } else {
                            self.stats.plain_batches += 1;
                        }
                    }
                    Effect::TrimLog { .. } => self.stats.trims += 1,
                    Effect::CreatePartitionLog { .. } | Effect::DeleteTopicLogs { .. } => {}
                }
            }
        }
    }
}

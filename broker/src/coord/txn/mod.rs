//! The transaction coordinator (KIP-98): every transaction API's one domain call, on the
//! leader, which coordinates every transactional id (FindCoordinator names it).
//!
//! With several Raft groups at `onelog.version` 8 each group has one, on its leader, for the
//! transactional ids placed in it (`Ctx::txn_coordinator`, docs/SCALING.md §2); it serves only
//! once its group's log says which group it is (`XOp::Identify`), so the producer ids it hands
//! out come from the group's own range and never collide with another group's.
//!
//! It owns the leader memory of what open transactions added (`memory`, reset when the term
//! changes), checks requests against the applied state, proposes the transaction ops and keeps
//! the memory in step with what they decide: a transaction that ends by EndTxn, by fencing in
//! InitProducerId, or by a broker abort (timeout, `kafka-transactions.sh abort`) is forgotten
//! here in one place. Its duties (`duties`) abort timed-out transactions and expire idle ids.
//! A leader change ends no transaction (issue 17): every write and offset commit of one is
//! answered once committed, its start and timeout are in the log, and a new leader lets its
//! producer carry on (`admit_write`).
//!
//! Handlers get typed outcomes ([`TxnFailure`]) and map them to Kafka codes with the errors
//! module's table.

pub mod duties;
pub mod memory;
pub mod remote;
pub mod views;

use std::collections::HashMap;
use std::sync::Arc;

use kafka_compat::error_code;
use onelog_state::command::{AbortTxnsOp, EndTxnOp, InitTxnProducerOp, TxnOffsetCommitOp};
use onelog_state::groups::CommitResult;
use onelog_state::txns::{BrokerAbort, ProducerIdEpoch, Transactions, TxnError};

use self::memory::{Added, TxnMemory};
use self::views::ListFilter;
use crate::clock::wall_clock_ms;
use crate::errors::ProposeError;
pub use crate::errors::{TxnFailure, WriteRefusal};
use crate::leader::leadership::Leadership;
use crate::leader::proposer::Proposer;
use crate::limits;
use crate::raft::applied::AppliedView;

pub struct TxnCoordinator {
    /// The Raft group whose transactional ids it coordinates.
    group: u32,
    leadership: Arc<Leadership>,
    applied: AppliedView,
    proposer: Proposer,
    memory: TxnMemory,
}

impl TxnCoordinator {
    pub fn new(group: u32, leadership: Arc<Leadership>, applied: AppliedView, proposer: Proposer) -> Self {
        TxnCoordinator { group, leadership, applied, proposer, memory: TxnMemory::default() }
    }

    /// Whether it coordinates now: this node leads its group, and a group other than 0 knows
    /// its number (`ensure_coordinator`).
    pub fn leads(&self) -> bool {
        self.ensure_coordinator().is_ok()
    }

    fn term(&self) -> u64 {
        self.leadership.term()
    }

    fn ensure_coordinator(&self) -> Result<(), TxnFailure> {
        if !self.leadership.is_leader() {
            Err(TxnFailure::Propose(ProposeError::NotLeader))
        } else if self.group != 0 && !self.applied.state(|s| s.xgroup.enabled()) {
            // Its leader identifies the group within a pass (`leader::groups`); until then
            // the ids it would allocate are group 0's range. Clients retry this code.
            Err(TxnFailure::Invalid(error_code::COORDINATOR_LOAD_IN_PROGRESS))
        } else {
            Ok(())
        }
    }

    /// Whether `producer` is the current instance of `transactional_id` in the applied state.
    fn check_producer(&self, transactional_id: &str, producer: ProducerIdEpoch) -> Result<(), TxnError> {
        self.applied.state(|state| match state.txns.by_id.get(transactional_id) {
            Some(meta) => meta.check_epoch(producer),
            None => Err(TxnError::InvalidProducerIdMapping),
        })
    }

    /// InitProducerId with a transactional id: allocate or bump (fencing the previous
    /// instance, whose open transaction the same op aborts).
    pub async fn init_producer(
        &self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<ProducerIdEpoch>,
    ) -> Result<ProducerIdEpoch, TxnFailure> {
        if transactional_id.is_empty() || transactional_id.len() > limits::TRANSACTIONAL_ID_BYTES_MAX {
            // Kafka: an empty transactional id is an invalid request, not "no transactional id".
            return Err(TxnFailure::Invalid(error_code::INVALID_REQUEST));
        }
        self.ensure_coordinator()?;
        let op = InitTxnProducerOp { transactional_id: transactional_id.to_string(), timeout_ms, expected };
        let id = self.proposer.propose(op).await??;
        self.memory.clear(self.term(), transactional_id);
        Ok(id)
    }

    /// AddPartitionsToTxn: checked against the applied state and recorded in leader memory
    /// (no log entry, DESIGN §1). `unknown` says, per partition, whether the cluster's metadata
    /// (group 0's) lacks it; Ok returns it, and the partitions are recorded only if none is.
    /// A partition of another Raft group joins the transaction when that group's leader asks
    /// (`remote`).
    pub fn add_partitions(
        &self,
        transactional_id: &str,
        producer: ProducerIdEpoch,
        partitions: &[(String, i32)],
        unknown: Vec<bool>,
    ) -> Result<Vec<bool>, TxnFailure> {
        self.ensure_coordinator()?;
        self.check_producer(transactional_id, producer)?;
        if partitions.len() > limits::TXN_PARTITIONS_MAX {
            return Err(TxnFailure::Invalid(error_code::INVALID_REQUEST));
        }
        if !unknown.iter().any(|u| *u) {
            self.memory.add_partitions(
                self.term(),
                transactional_id,
                producer,
                partitions.iter().cloned(),
                wall_clock_ms(),
            );
        }
        Ok(unknown)
    }

    /// AddOffsetsToTxn: the transaction will commit offsets for `group` (leader memory).
    pub fn add_offsets(
        &self,
        transactional_id: &str,
        producer: ProducerIdEpoch,
        group: &str,
    ) -> Result<(), TxnFailure> {
        self.ensure_coordinator()?;
        if group.len() > limits::GROUP_ID_BYTES_MAX {
            return Err(TxnFailure::Invalid(error_code::INVALID_GROUP_ID));
        }
        self.check_producer(transactional_id, producer)?;
        self.memory.add_group(self.term(), transactional_id, producer, group, wall_clock_ms());
        Ok(())
    }

    /// A transactional batch of `producer` for `topic`-`partition`: it must come from the
    /// current epoch of its transactional id and go to a partition the transaction added
    /// (KIP-890 part 1), so a late batch of an ended transaction can never open a new one that
    /// nobody will end. `implicit_add` (Produce v12+, KIP-890 part 2) adds the partition.
    ///
    /// After a leader change the partitions added under the previous leader are not in this
    /// term's memory, and the producer does not add them again: until this term sees the
    /// transaction begin, a batch at the current epoch counts as added (`memory`). What that
    /// lets through is a late batch of a transactions-v1 producer whose earlier transaction
    /// ended with the batch unwritten and whose epoch did not move (clients bump it after such
    /// a timeout, KIP-360). It would open a transaction in the log, which the timeout duty
    /// aborts after `transaction.timeout.ms`: held, never hanging for good.
    pub fn admit_write(
        &self,
        producer: ProducerIdEpoch,
        topic: &str,
        partition: i32,
        implicit_add: bool,
    ) -> Result<(), WriteRefusal> {
        let tid = self.applied.state(|s| s.txns.check_write(producer).cloned()).map_err(WriteRefusal::Txn)?;
        let term = self.term();
        if implicit_add {
            self.memory.add_partitions(
                term,
                &tid,
                producer,
                [(topic.to_string(), partition)],
                wall_clock_ms(),
            );
        } else if !self.memory.admit_partition(term, &tid, producer, topic, partition, wall_clock_ms()) {
            return Err(WriteRefusal::NotAdded { transactional_id: tid });
        }
        Ok(())
    }

    /// TxnOffsetCommit: one op holding the offsets in the transaction until it ends.
    pub async fn txn_offset_commit(&self, op: TxnOffsetCommitOp) -> Result<Vec<CommitResult>, TxnFailure> {
        self.ensure_coordinator()?;
        Ok(self.proposer.propose(op).await??)
    }

    /// EndTxn: the one durable round of a transaction (DESIGN §1). `bump_epoch`: KIP-890
    /// part 2, EndTxn v5.
    pub async fn end_txn(
        &self,
        transactional_id: &str,
        producer: ProducerIdEpoch,
        txn_commit: bool,
        bump_epoch: bool,
    ) -> Result<ProducerIdEpoch, TxnFailure> {
        self.ensure_coordinator()?;
        if !bump_epoch && self.ends_added_only(transactional_id, producer, txn_commit) {
            return Ok(producer);
        }
        let op =
            EndTxnOp { transactional_id: transactional_id.to_string(), producer, txn_commit, bump_epoch };
        let next = self.proposer.propose(op).await??;
        self.memory.clear(self.term(), transactional_id);
        Ok(next)
    }

    /// Transactions v1: a transaction that only added partitions or groups is Ongoing for
    /// Kafka, whose AddPartitionsToTxn is in its log; here the adds are leader memory and the
    /// log still shows the previous transaction ended, where the other decision would be taken
    /// for a confused retry (INVALID_TXN_STATE, fatal to the client). Such a transaction has
    /// nothing in the log to decide, so its EndTxn (or a retry of it) ends it in memory.
    fn ends_added_only(&self, transactional_id: &str, producer: ProducerIdEpoch, commit: bool) -> bool {
        let ended = self.applied.state(|s| s.txns.ended_at(transactional_id, producer));
        ended && self.memory.end_added_only(self.term(), transactional_id, producer, commit)
    }

    /// The broker aborts `transactions` (each as it was seen open; one that moved on is left
    /// alone): timed out, or by an operator (WriteTxnMarkers).
    pub async fn abort(
        &self,
        reason: BrokerAbort,
        transactions: Vec<(String, ProducerIdEpoch)>,
    ) -> Result<(), ProposeError> {
        let ids: Vec<String> = transactions.iter().map(|(tid, _)| tid.clone()).collect();
        self.proposer.propose(AbortTxnsOp { reason, transactions }).await?;
        let term = self.term();
        for tid in &ids {
            self.memory.clear(term, tid);
        }
        Ok(())
    }

    /// Forgets transactions that added partitions but wrote nothing for longer than their
    /// timeout (they live only in leader memory; the written ones are aborted through the log).
    pub fn expire_memory(&self) {
        // Only the ids in memory are looked up (the memory's lock, then the applied state's:
        // nothing takes them the other way round).
        let timeout_ms =
            |id: &str| self.applied.state(|s| s.txns.by_id.get(id).map(|m| i64::from(m.timeout_ms)));
        self.memory.expire(self.term(), wall_clock_ms(), timeout_ms);
    }

    /// Reads the applied transactions together with this term's leader memory
    /// (DescribeTransactions, ListTransactions).
    pub fn view<R>(&self, f: impl FnOnce(&Transactions, &HashMap<String, Added>) -> R) -> R {
        let added = self.memory.added(self.term());
        self.applied.state(|s| f(&s.txns, &added))
    }

    /// ListTransactions' filters, measured against the coordinator's clock.
    pub fn list_filter(&self, states: Vec<String>, producer_ids: Vec<i64>, duration_ms: i64) -> ListFilter {
        ListFilter { states, producer_ids, duration_ms, now_ms: wall_clock_ms() }
    }
}

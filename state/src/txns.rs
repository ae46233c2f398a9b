//! Transactions (KIP-98) as replicated state: transactional id → producer id and epoch, the
//! partitions the open transaction wrote and the group offsets it holds (DESIGN §1, §2).
//!
//! There is no coordinator and no transaction log: the Raft log orders everything, so a
//! transaction's decision is the one `EndTxn` entry, and its apply writes the markers, moves the
//! last stable offsets and commits or drops the pending offsets at once (see `apply`). What the
//! client adds with AddPartitionsToTxn / AddOffsetsToTxn before writing is leader memory
//! (the broker's `coord::txn::memory`); only writes reach this state.
//!
//! The epoch rules follow Kafka's `TransactionCoordinator`: InitProducerId bumps the epoch and
//! aborts the open transaction of the previous instance (fencing); a request with an older epoch
//! is fenced; `last_producer_epoch` recognises a retry of the request that bumped (KIP-360). A
//! transaction the broker aborted (its timeout expired, or an administrator asked for it; before
//! issue 17 also a new leader's takeover) has its epoch bumped too, but the client of the aborted epoch
//! gets an error it can abort and carry on from, not the fencing error
//! ([`TxnError::AbortedByBroker`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::command::{InitTxnProducerOp, ReplicatedLimits, TxnOffsetCommitOp};
use super::groups::CommittedOffset;

/// Every transactional id the log has seen and not expired.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Transactions {
    pub by_id: BTreeMap<String, TxnMeta>,
    /// Producer id → transactional id: transactional batches name only the producer id.
    pub by_producer_id: BTreeMap<i64, String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum TxnState {
    /// No transaction open.
    Empty,
    /// Data or offsets written, no decision yet.
    Ongoing,
    CompleteCommit,
    CompleteAbort,
}

impl TxnState {
    /// Kafka's name for the state (DescribeTransactions, ListTransactions).
    pub fn kafka_name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
        }
    }
}

/// What moved the epoch last: it decides how a request with the previous epoch is answered.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum EpochBump {
    /// InitProducerId without a current id: a new instance, which fences the old one.
    Init,
    /// InitProducerId naming the current id and epoch (KIP-360): the same instance bumps.
    SameInstance,
    /// EndTxn of a transactions-v2 client (KIP-890 part 2).
    EndTxn,
    /// The broker aborted the open transaction.
    BrokerAbort(BrokerAbort),
}

/// Why the broker, not the client, aborted a transaction.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum BrokerAbort {
    /// `transaction.timeout.ms` expired.
    Timeout,
    /// A new leader took over while it was open: no longer proposed (issue 17), kept so that
    /// logs written before still apply.
    Takeover,
    /// An administrator aborted it: `kafka-transactions.sh abort`, which sends WriteTxnMarkers
    /// (`handlers::write_txn_markers`).
    Admin,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TxnMeta {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump, or -1 (KIP-360 retries, broker aborts).
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// What bumped the epoch to `producer_epoch` (None for epoch 0 of a new producer id).
    pub last_bump: Option<EpochBump>,
    /// (topic, partition) → first offset this transaction wrote there.
    pub partitions: BTreeMap<(String, i32), i64>,
    /// group → (topic, partition) → offset committed if the transaction commits.
    pub pending_offsets: BTreeMap<String, BTreeMap<(String, i32), CommittedOffset>>,
    /// Leader clock of the first write of the open transaction, or -1.
    pub start_ms: i64,
    /// Leader clock of the last change (expiry of idle ids).
    pub last_update_ms: i64,
}

/// Why a transactional request was refused; the handler maps it to the code each API version
/// expects (`handlers::txn_errors`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnError {
    /// The transactional id is unknown or belongs to another producer id.
    InvalidProducerIdMapping,
    /// An older (or otherwise wrong) epoch: another instance took over.
    Fenced,
    /// The broker aborted this transaction; the client should abort and carry on.
    AbortedByBroker(BrokerAbort),
    /// The request does not fit the transaction's state (e.g. commit after abort).
    InvalidState(String),
    InvalidTimeout(i32),
    /// Too many live producer ids; retriable.
    ProducerIdsExhausted(String),
    /// A transactions-v2 commit with nothing of the transaction in the log yet: its writes are
    /// still on their way; retriable (see `end_txn`).
    CommitBeforeWrites,
    /// A write of a producer's next transaction reached a group that has not applied the
    /// decision of its previous one yet (`xgroup`); retriable.
    PreviousUndecided,
}

/// The producer id and epoch a request names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdEpoch {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

impl TxnMeta {
    fn new(producer_id: i64, timeout_ms: i32, now_ms: i64) -> Self {
        TxnMeta {
            producer_id,
            producer_epoch: 0,
            last_producer_epoch: -1,
            timeout_ms,
            state: TxnState::Empty,
            last_bump: None,
            partitions: BTreeMap::new(),
            pending_offsets: BTreeMap::new(),
            start_ms: -1,
            last_update_ms: now_ms,
        }
    }

    /// Checks that a write (transactional produce, TxnOffsetCommit) or an AddPartitions /
    /// AddOffsets belongs to the current epoch.
    pub fn check_epoch(&self, id: ProducerIdEpoch) -> Result<(), TxnError> {
        if id.producer_id != self.producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if id.producer_epoch == self.producer_epoch {
            return Ok(());
        }
        match self.last_bump {
            Some(EpochBump::BrokerAbort(reason)) if id.producer_epoch == self.last_producer_epoch => {
                Err(TxnError::AbortedByBroker(reason))
            }
            _ => Err(TxnError::Fenced),
        }
    }

    /// Moves the epoch on; false when it would overflow and a new producer id is needed.
    fn bump_epoch(&mut self, why: EpochBump) -> bool {
        if self.producer_epoch >= i16::MAX - 1 {
            return false;
        }
        self.last_producer_epoch = self.producer_epoch;
        self.producer_epoch += 1;
        self.last_bump = Some(why);
        true
    }

    fn begin_if_needed(&mut self, now_ms: i64) {
        if self.state != TxnState::Ongoing {
            self.state = TxnState::Ongoing;
            self.start_ms = now_ms;
        }
        self.last_update_ms = now_ms;
    }
}

/// What ending a transaction leaves for apply to write into partitions and groups.
#[derive(Debug, Default)]
pub struct Ended {
    pub producer_id: i64,
    /// The epoch the markers carry: the one the transaction was written with.
    pub marker_epoch: i16,
    pub txn_commit: bool,
    pub partitions: BTreeMap<(String, i32), i64>,
    pub offsets: BTreeMap<String, BTreeMap<(String, i32), CommittedOffset>>,
}

impl Transactions {
    pub fn by_producer(&self, producer_id: i64) -> Option<(&String, &TxnMeta)> {
        let id = self.by_producer_id.get(&producer_id)?;
        Some((id, self.by_id.get(id)?))
    }

    /// InitProducerId with a transactional id (KIP-98, KIP-360). `allocate` hands out a fresh
    /// producer id (the idempotent registry's counter, so ids never collide). Returns the new
    /// id and epoch, and the open transaction it aborts (fencing the previous instance), if any.
    pub fn init_producer(
        &mut self,
        op: &InitTxnProducerOp,
        now_ms: i64,
        limits: &ReplicatedLimits,
        allocate: &mut dyn FnMut() -> Result<i64, String>,
    ) -> Result<(ProducerIdEpoch, Option<Ended>), TxnError> {
        if op.timeout_ms <= 0 || op.timeout_ms > limits.txn_timeout_ms_max {
            return Err(TxnError::InvalidTimeout(op.timeout_ms));
        }
        let Some(meta) = self.by_id.get_mut(&op.transactional_id) else {
            if self.by_id.len() >= limits.transactional_ids_max {
                let message = format!("{} transactional ids, the limit", self.by_id.len());
                return Err(TxnError::ProducerIdsExhausted(message));
            }
            let producer_id = allocate().map_err(TxnError::ProducerIdsExhausted)?;
            self.by_id.insert(op.transactional_id.clone(), TxnMeta::new(producer_id, op.timeout_ms, now_ms));
            self.by_producer_id.insert(producer_id, op.transactional_id.clone());
            return Ok((ProducerIdEpoch { producer_id, producer_epoch: 0 }, None));
        };
        if let Some(expected) = op.expected {
            // KIP-360: a producer that names itself must be the current one, or be retrying
            // the request that bumped it (then it gets the current epoch, not another bump).
            if expected.producer_id != meta.producer_id {
                return Err(TxnError::Fenced);
            }
            let retry = matches!(meta.last_bump, Some(EpochBump::SameInstance | EpochBump::BrokerAbort(_)));
            if retry && expected.producer_epoch == meta.last_producer_epoch && meta.state != TxnState::Ongoing
            {
                return Ok((current(meta), None));
            }
            if expected.producer_epoch != meta.producer_epoch {
                return Err(TxnError::Fenced);
            }
        }
        let aborted = (meta.state == TxnState::Ongoing).then(|| end(meta, false, now_ms));
        meta.timeout_ms = op.timeout_ms;
        meta.last_update_ms = now_ms;
        let why = if op.expected.is_some() { EpochBump::SameInstance } else { EpochBump::Init };
        if !meta.bump_epoch(why) {
            self.move_to_new_producer_id(&op.transactional_id, allocate)?;
        }
        Ok((current(&self.by_id[&op.transactional_id]), aborted))
    }

    /// A transactional batch of `id` is being appended at `base_offset`: the transaction is
    /// open from then on. Returns the transactional id; None if the producer id has none.
    /// Whether the log shows `producer`'s last transaction of `transactional_id` ended (at
    /// that producer id and epoch): a transactions-v1 transaction it is in now has written
    /// nothing, so only leader memory knows of it (`txn_adds::TxnAdds::end_added_only`).
    pub fn ended_at(&self, transactional_id: &str, producer: ProducerIdEpoch) -> bool {
        self.by_id.get(transactional_id).is_some_and(|m| {
            (m.producer_id, m.producer_epoch) == (producer.producer_id, producer.producer_epoch)
                && matches!(m.state, TxnState::CompleteCommit | TxnState::CompleteAbort)
        })
    }

    pub fn check_write(&self, id: ProducerIdEpoch) -> Result<&String, TxnError> {
        let (tid, meta) = self.by_producer(id.producer_id).ok_or(TxnError::InvalidProducerIdMapping)?;
        meta.check_epoch(id)?;
        Ok(tid)
    }

    /// Records a checked write; returns true if this is the transaction's first write to the
    /// partition (apply then registers it as open there).
    pub fn record_write(
        &mut self,
        producer_id: i64,
        topic: &str,
        partition: i32,
        base_offset: i64,
        now_ms: i64,
    ) -> bool {
        let tid = self.by_producer_id.get(&producer_id).expect("checked by check_write").clone();
        let meta = self.by_id.get_mut(&tid).expect("by_producer_id and by_id agree");
        meta.begin_if_needed(now_ms);
        let key = (topic.to_string(), partition);
        if meta.partitions.contains_key(&key) {
            return false;
        }
        meta.partitions.insert(key, base_offset);
        true
    }

    /// Another group registered as holding data of the current transaction of `id`
    /// (`xgroup::coordinator::register`): the transaction is open from then on.
    pub fn begin_remote(&mut self, id: ProducerIdEpoch, now_ms: i64) -> Result<(), TxnError> {
        let tid = self.check_write(id)?.clone();
        self.by_id.get_mut(&tid).expect("found by check_write").begin_if_needed(now_ms);
        Ok(())
    }

    /// TxnOffsetCommit: the offsets are pending until the transaction ends.
    pub fn add_offsets(
        &mut self,
        op: &TxnOffsetCommitOp,
        now_ms: i64,
        accepted: &[bool],
    ) -> Result<(), TxnError> {
        let meta = self.by_id.get_mut(&op.transactional_id).ok_or(TxnError::InvalidProducerIdMapping)?;
        meta.check_epoch(op.producer)?;
        meta.begin_if_needed(now_ms);
        let group = meta.pending_offsets.entry(op.group_id.clone()).or_default();
        for (commit, _) in op.commits.iter().zip(accepted).filter(|(_, ok)| **ok) {
            let offset = CommittedOffset {
                offset: commit.offset,
                leader_epoch: commit.leader_epoch,
                metadata: commit.metadata.clone().unwrap_or_default(),
                commit_time_ms: now_ms,
            };
            group.insert((commit.topic.clone(), commit.partition), offset);
        }
        Ok(())
    }

    /// EndTxn. Ok(None) when there is nothing to write (an empty transaction, or a retry of a
    /// decision already applied); the epoch returned is what the client uses next.
    pub fn end_txn(
        &mut self,
        transactional_id: &str,
        id: ProducerIdEpoch,
        txn_commit: bool,
        bump_epoch: bool,
        now_ms: i64,
        allocate: &mut dyn FnMut() -> Result<i64, String>,
    ) -> Result<(ProducerIdEpoch, Option<Ended>), TxnError> {
        let meta = self.by_id.get_mut(transactional_id).ok_or(TxnError::InvalidProducerIdMapping)?;
        if id.producer_id != meta.producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if id.producer_epoch != meta.producer_epoch {
            return retried_end(meta, id, txn_commit);
        }
        let ended = match meta.state {
            TxnState::Ongoing => Some(end(meta, txn_commit, now_ms)),
            // Transactions v2 (KIP-890 part 2): a client sends EndTxn only after it wrote
            // something, so a commit at the current epoch with nothing in the log means its
            // writes have not arrived. Success would report a transaction committed without its
            // records. Kafka answers INVALID_TXN_STATE, which is fatal to the client; we answer
            // a retriable error instead, because kafka-clients 4.x can send EndTxn before its
            // batches (Sender reads `accumulator.hasIncomplete()` before taking the transaction
            // manager's lock, so a commit enqueued in between goes out first): on the retry the
            // batches are sent first and the commit includes them. An abort bumps the epoch as
            // any v2 EndTxn does (Kafka's table).
            _ if bump_epoch && txn_commit => return Err(TxnError::CommitBeforeWrites),
            _ if bump_epoch => {
                meta.state = TxnState::CompleteAbort;
                None
            }
            // Transactions v1: nothing was written (AddPartitions alone lives in leader memory),
            // so there is nothing to do.
            TxnState::Empty => None,
            // Kafka: the same decision again is a retry and succeeds; the other is refused.
            TxnState::CompleteCommit if txn_commit => None,
            TxnState::CompleteAbort if !txn_commit => None,
            state => {
                let verb = if txn_commit { "commit" } else { "abort" };
                return Err(TxnError::InvalidState(format!("cannot {verb} in state {}", state.kafka_name())));
            }
        };
        meta.last_update_ms = now_ms;
        // KIP-890 part 2: every EndTxn of a transactions-v2 client bumps the epoch; at the
        // epoch limit the transactional id moves on to a new producer id.
        if bump_epoch && !meta.bump_epoch(EpochBump::EndTxn) {
            self.move_to_new_producer_id(transactional_id, allocate)?;
        }
        Ok((current(&self.by_id[transactional_id]), ended))
    }

    /// The epoch is exhausted: a fresh producer id at epoch 0 for the same transactional id.
    fn move_to_new_producer_id(
        &mut self,
        transactional_id: &str,
        allocate: &mut dyn FnMut() -> Result<i64, String>,
    ) -> Result<(), TxnError> {
        let producer_id = allocate().map_err(TxnError::ProducerIdsExhausted)?;
        let meta = self.by_id.get_mut(transactional_id).expect("caller holds the id");
        let old = std::mem::replace(&mut meta.producer_id, producer_id);
        meta.producer_epoch = 0;
        meta.last_producer_epoch = -1;
        meta.last_bump = None;
        self.by_producer_id.remove(&old);
        self.by_producer_id.insert(producer_id, transactional_id.to_string());
        Ok(())
    }

    /// Aborts an open transaction by the broker's decision (timeout, takeover, admin): the epoch is
    /// bumped so that the old instance's late writes are refused.
    pub fn broker_abort(
        &mut self,
        transactional_id: &str,
        reason: BrokerAbort,
        now_ms: i64,
    ) -> Option<Ended> {
        let meta = self.by_id.get_mut(transactional_id)?;
        if meta.state != TxnState::Ongoing {
            return None;
        }
        let ended = end(meta, false, now_ms);
        // At the epoch limit the old instance stays unfenced; its next InitProducerId moves
        // it to a new producer id.
        meta.bump_epoch(EpochBump::BrokerAbort(reason));
        Some(ended)
    }

    /// The open transactions whose `transaction.timeout.ms` has passed at `now_ms`: what the
    /// leader's timeout duty aborts.
    pub fn timed_out(&self, now_ms: i64) -> Vec<(String, ProducerIdEpoch)> {
        self.by_id
            .iter()
            .filter(|(_, m)| m.state == TxnState::Ongoing && now_ms - m.start_ms > i64::from(m.timeout_ms))
            .map(|(id, m)| (id.clone(), current(m)))
            .collect()
    }

    /// The partitions of `group` for which an open transaction holds pending offsets (KIP-447
    /// `require_stable`). One pass over the ids, made once per group of an OffsetFetch rather
    /// than once per partition asked for.
    pub fn pending_offsets_of(&self, group: &str) -> BTreeSet<(String, i32)> {
        self.by_id
            .values()
            .filter(|m| m.state == TxnState::Ongoing)
            .filter_map(|m| m.pending_offsets.get(group))
            .flat_map(|offsets| offsets.keys().cloned())
            .collect()
    }

    /// `transactional.id.expiration.ms`: forgets ids with no open transaction idle that long.
    /// Returns the producer ids released.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) -> BTreeSet<i64> {
        let expired: Vec<String> = self
            .by_id
            .iter()
            .filter(|(_, m)| m.state != TxnState::Ongoing && now_ms - m.last_update_ms >= expiration_ms)
            .map(|(id, _)| id.clone())
            .collect();
        let mut released = BTreeSet::new();
        for id in expired {
            let meta = self.by_id.remove(&id).expect("listed above");
            self.by_producer_id.remove(&meta.producer_id);
            released.insert(meta.producer_id);
        }
        released
    }

    /// A deleted topic leaves every transaction (its markers would have nowhere to go).
    pub fn forget_topic(&mut self, topic: &str) {
        for meta in self.by_id.values_mut() {
            meta.partitions.retain(|(t, _), _| t != topic);
            for offsets in meta.pending_offsets.values_mut() {
                offsets.retain(|(t, _), _| t != topic);
            }
        }
    }

    /// Checked after every change of `transactional_ids`, in release builds too: the indexes
    /// agree in size, and each changed id's entry agrees with the producer id index and holds
    /// partitions or offsets only while open. Costs O(changed ids × log ids), so apply does not
    /// grow with every transactional id the log has seen (issue 17: a full scan per EndTxn was
    /// ~6% of the leader's CPU at 100 producers, and grows with the ids until they expire).
    /// Debug builds (the tests) also check every id ([`Self::assert_invariants`]).
    pub fn assert_invariants_of<'a>(&self, transactional_ids: impl IntoIterator<Item = &'a String>) {
        assert_eq!(self.by_id.len(), self.by_producer_id.len(), "one producer id per transactional id");
        for id in transactional_ids {
            let Some(meta) = self.by_id.get(id) else { continue };
            let indexed = self.by_producer_id.get(&meta.producer_id);
            assert_eq!(indexed, Some(id), "{id}: producer id {} index out of step", meta.producer_id);
            assert_meta(id, meta);
        }
        if cfg!(debug_assertions) {
            self.assert_invariants();
        }
    }

    /// Every id checked: the producer id index and the transactions agree one to one, and only
    /// an open transaction holds partitions or offsets. O(ids × log ids).
    pub fn assert_invariants(&self) {
        assert_eq!(self.by_id.len(), self.by_producer_id.len(), "one producer id per transactional id");
        for (pid, id) in &self.by_producer_id {
            let meta = &self.by_id[id];
            assert_eq!(meta.producer_id, *pid, "{id}: producer id index out of step");
            assert_meta(id, meta);
        }
    }
}

fn assert_meta(id: &str, meta: &TxnMeta) {
    assert!(
        meta.state == TxnState::Ongoing || (meta.partitions.is_empty() && meta.pending_offsets.is_empty()),
        "{id}: only an open transaction holds partitions or offsets"
    );
}

fn current(meta: &TxnMeta) -> ProducerIdEpoch {
    ProducerIdEpoch { producer_id: meta.producer_id, producer_epoch: meta.producer_epoch }
}

/// Closes the open transaction of `meta` and returns what apply must write.
fn end(meta: &mut TxnMeta, txn_commit: bool, now_ms: i64) -> Ended {
    assert_eq!(meta.state, TxnState::Ongoing, "only an open transaction ends");
    meta.state = if txn_commit { TxnState::CompleteCommit } else { TxnState::CompleteAbort };
    meta.start_ms = -1;
    meta.last_update_ms = now_ms;
    Ended {
        producer_id: meta.producer_id,
        marker_epoch: meta.producer_epoch,
        txn_commit,
        partitions: std::mem::take(&mut meta.partitions),
        offsets: std::mem::take(&mut meta.pending_offsets),
    }
}

/// EndTxn with an epoch other than the current one: a retry of a decision that bumped the
/// epoch (KIP-890 part 2), the client of a transaction the broker aborted, or a zombie.
fn retried_end(
    meta: &TxnMeta,
    id: ProducerIdEpoch,
    txn_commit: bool,
) -> Result<(ProducerIdEpoch, Option<Ended>), TxnError> {
    if id.producer_epoch != meta.last_producer_epoch {
        return Err(TxnError::Fenced);
    }
    match (meta.last_bump, meta.state, txn_commit) {
        (Some(EpochBump::BrokerAbort(reason)), _, true) => Err(TxnError::AbortedByBroker(reason)),
        // The client learns of the abort and aborts too: done already.
        (Some(EpochBump::BrokerAbort(_)), _, false) => Ok((current(meta), None)),
        // KIP-890 part 2: the answer to the EndTxn that bumped was lost; same decision again.
        (Some(EpochBump::EndTxn), TxnState::CompleteCommit, true)
        | (Some(EpochBump::EndTxn), TxnState::CompleteAbort, false) => Ok((current(meta), None)),
        _ => Err(TxnError::Fenced),
    }
}

#[cfg(test)]
#[path = "txns_tests.rs"]
mod tests;

//! The leader's entry builder (DESIGN §2): turns the requests queued since the last entry was
//! built into one [`Command`], and decides how each request is answered.
//!
//! The proposer (in the broker) hands over the queue, the applied state (a leader first applies
//! every entry of earlier terms), the overlay of its entries still in flight ([`InFlight`]:
//! pipelined proposals, issue 31) and the entry's [`LeaderStamp`]. This module stamps every
//! produce batch with its offset and the leader's term, and returns a [`Decision`] per request:
//! answered now (an error, a duplicate of a committed batch), or once the entry applies. It
//! sends nothing; the proposer delivers the answers.
//!
//! Idempotent batches (KIP-98) are checked here against the applied producer state plus what
//! the entries in flight and earlier ops of the same entry append (`producers::Pending`): a duplicate is answered with its
//! original offset and not proposed, a partition that fails the check is answered with its
//! error and left out, and the rest of the request is still one all-or-nothing op. Apply runs
//! the same check again and refuses the op if its answer differs.

use std::collections::BTreeMap;

use kafka_compat::batch::{parse_header, stamp_batch, BatchHeader, BatchStamp, ValidBatch};
use kafka_compat::error_code;
use kafka_protocol::messages::ApiKey;

use crate::command::{
    Command, LeaderStamp, Op, OpResult, PartitionAppend, PartitionProduced, ProduceOp, ReplicatedLimits,
};
pub use crate::in_flight::InFlight;
use crate::producers::{BatchMeta, BatchSeq, Verdict};
use crate::txn_errors;
use crate::txns::{ProducerIdEpoch, TxnState};
use crate::xgroup::{XOp, XResult};
use crate::BrokerState;
pub use remote::RemoteAppends;

#[path = "entry_remote.rs"]
mod remote;

/// A produce op before the leader has stamped it.
#[derive(Debug)]
pub struct UnstampedAppend {
    pub topic: String,
    pub partition: i32,
    pub batches: Vec<ValidBatch>,
}

/// bincode's framing of a `Vec`, `String` or `Bytes` (a u64 length) and of an enum (a u32 tag).
const LENGTH_BYTES: usize = 8;
const TAG_BYTES: usize = 4;

impl UnstampedAppend {
    /// At least what this append adds to an entry once stamped (a `PartitionAppend` in bincode:
    /// topic, partition, the batches with their lengths; stamping changes no length).
    pub fn entry_bytes(&self) -> usize {
        let batches: usize = self.batches.iter().map(|b| LENGTH_BYTES + b.bytes.len()).sum();
        LENGTH_BYTES + self.topic.len() + 4 + LENGTH_BYTES + batches
    }
}

/// What a produce op holding `appends` costs in an entry: the op's tag and its list.
fn produce_op_bytes(appends: &[UnstampedAppend]) -> usize {
    TAG_BYTES + LENGTH_BYTES + appends.iter().map(UnstampedAppend::entry_bytes).sum::<usize>()
}

/// Splits one produce request's appends, in order, into groups each of which fits one entry of
/// `entry_bytes_max` as a produce op (Kafka promises no atomicity across the partitions of a
/// non-transactional request; onelog keeps a request atomic whenever it fits one entry). An
/// append that alone does not fit gets a group of its own; the caller refuses those first.
pub fn split_for_entries(appends: Vec<UnstampedAppend>, entry_bytes_max: usize) -> Vec<Vec<UnstampedAppend>> {
    let mut groups: Vec<Vec<UnstampedAppend>> = Vec::new();
    let mut bytes = 0;
    for append in appends {
        let size = append.entry_bytes();
        match groups.last_mut() {
            Some(group) if bytes + size <= entry_bytes_max => group.push(append),
            _ => {
                bytes = TAG_BYTES + LENGTH_BYTES;
                groups.push(vec![append]);
            }
        }
        bytes += size;
    }
    groups
}

/// The bytes a produce request of `appends` needs in one entry (see [`split_for_entries`]).
pub fn produce_entry_bytes(appends: &[UnstampedAppend]) -> usize {
    produce_op_bytes(appends)
}

/// What a handler asks the proposer to put in the log.
#[derive(Debug)]
pub enum Proposal {
    Op(Op),
    Produce(Vec<UnstampedAppend>),
    /// Transactional batches only. Answered, like every acks=all write, once its entry is
    /// committed and applied (issue 17): everything a client was told about a transaction is
    /// then in the log, so a new leader carries the transaction on instead of aborting it.
    /// Kept apart from `Produce` for one request being one proposal whatever its size, and
    /// for the chaos checker's own test (the broker's `leader::bugs`, fault-injection build
    /// only, answers those of an open transaction once stamped).
    ProduceTransactional(Vec<UnstampedAppend>),
    /// Transactional batches of an instance another Raft group coordinates (docs/SCALING.md
    /// §3.1): stamped like `ProduceTransactional`, proposed as the cross-group step
    /// `XOp::Produce` (`remote`).
    ProduceRemote(RemoteAppends),
}

impl Proposal {
    /// At least what the proposal adds to an entry (bincode), for the entry's byte limit: the
    /// proposer never lets the sum pass raft-store's entry limit.
    pub fn size_bytes(&self) -> usize {
        match self {
            Proposal::Produce(appends) | Proposal::ProduceTransactional(appends) => produce_op_bytes(appends),
            Proposal::ProduceRemote(remote) => remote::REMOTE_OP_BYTES + produce_op_bytes(&remote.appends),
            Proposal::Op(op) => bincode::serialized_size(op).map_or(usize::MAX, |n| n as usize),
        }
    }

    /// How many partitions a produce proposal answers (0 for an op).
    pub fn produce_partitions(&self) -> usize {
        match self {
            Proposal::Produce(appends) | Proposal::ProduceTransactional(appends) => appends.len(),
            Proposal::ProduceRemote(remote) => remote.appends.len(),
            Proposal::Op(_) => 0,
        }
    }
}

/// What the leader's settings add to stamping (the rest comes from the replicated state).
#[derive(Debug, Clone, Copy, Default)]
pub struct EntryOptions {
    /// The broker's static `log.message.timestamp.type` is LogAppendTime (a dynamic broker
    /// config or the topic may override it).
    pub log_append_time_default: bool,
    /// The leader's broker id: whose dynamic broker configs apply.
    pub node_id: i32,
}

/// The answer to one proposal.
#[derive(Debug, Clone)]
pub enum Answer {
    /// `Proposal::Op`: the op's result.
    Op(OpResult),
    /// A produce proposal: one result per partition, in request order.
    Produced(Vec<PartitionProduced>),
}

/// How one proposal is answered.
#[derive(Debug)]
pub enum Decision {
    /// Now: nothing in the entry decides it.
    Answered(Answer),
    /// Once the entry is applied (or has failed).
    Waiting(Waiting),
}

/// One entry's command and a decision per proposal, in proposal order. The command may have
/// no ops (every proposal was decided at stamping): nothing is to be proposed then.
#[derive(Debug)]
pub struct Entry {
    pub command: Command,
    pub decisions: Vec<Decision>,
    /// The entry carries writes of a transaction already open in the committed state (see
    /// [`txn_is_open`]): where the fault-injection build's `proposer.before-txn-write` delay
    /// point holds the leader.
    pub open_txn_writes: bool,
}

impl Entry {
    /// Answers each produce proposal that `chosen` names (by proposal index) as stamped, now,
    /// where [`Waiting::as_stamped`] can: the chaos checker's test bugs (the broker's
    /// `leader::bugs`, fault-injection build only, and the replay test's leader fault).
    /// `state` is the one the entry was built against.
    pub fn answer_as_stamped(&mut self, state: &BrokerState, chosen: &[bool]) {
        let decisions = std::mem::take(&mut self.decisions);
        self.decisions = decisions
            .into_iter()
            .zip(chosen.iter().chain(std::iter::repeat(&false)))
            .map(|(decision, &chosen)| match decision {
                Decision::Waiting(waiting) if chosen => waiting
                    .as_stamped(state, &self.command)
                    .map_or_else(Decision::Waiting, Decision::Answered),
                decision => decision,
            })
            .collect();
    }
}

/// Builds one entry from the queued proposals, in queue order, against `state` (the applied
/// state) with nothing else in flight.
pub fn build_entry(
    state: &BrokerState,
    stamp: LeaderStamp,
    options: &EntryOptions,
    proposals: Vec<Proposal>,
) -> Entry {
    build_entry_in_flight(state, &mut InFlight::default(), stamp, options, proposals)
}

/// Builds one entry against `state` (the applied state) plus what the entries `in_flight` will
/// append (pipelined proposals, [`InFlight`]), and records its own stamps there. The caller
/// then tells `in_flight` whether the entry was proposed ([`InFlight::proposed`]) or not
/// ([`InFlight::abandoned`]), unless it has no ops. Only when [`InFlight::may_build`].
pub fn build_entry_in_flight(
    state: &BrokerState,
    in_flight: &mut InFlight,
    stamp: LeaderStamp,
    options: &EntryOptions,
    proposals: Vec<Proposal>,
) -> Entry {
    assert!(in_flight.may_build(), "an entry built behind a barrier or a wrong prediction");
    let mut entry = EntryBuilder::new(state, in_flight, stamp, options);
    let mut decisions = Vec::with_capacity(proposals.len());
    let mut open_txn_writes = false;
    // Ops that could make a produce op of the entry fail its checks on apply go after every
    // produce op (`Op::changes_produce_checks`): a marker takes the next offset of its
    // partitions, which would shift the offsets stamped into a later produce op; a topic
    // deletion or an expired transactional id would refuse it. (Only the checker's test bugs
    // answer a produce with its stamp before commit, [`Waiting::as_stamped`]; then it must also
    // apply as stamped.) The proposals
    // were queued together, unanswered, so either order is one the clients could have seen.
    let mut deferred = Vec::new();
    // Writes of instances coordinated elsewhere go after the entry's produce ops and before
    // its other deferred ops, which may write markers (`remote`).
    let mut remote = Vec::new();
    for proposal in proposals {
        let decision = match proposal {
            Proposal::Op(op) => {
                if matches!(op, Op::InitProducerId(_) | Op::InitTxnProducer(_)) {
                    entry.in_flight.producer_ids_allocated += 1;
                }
                if op.changes_produce_checks() {
                    deferred.push((decisions.len(), op));
                    // Replaced below, once the op's place in the entry is known.
                    Decision::Waiting(Waiting::Op(usize::MAX))
                } else {
                    entry.ops.push(op);
                    Decision::Waiting(Waiting::Op(entry.ops.len() - 1))
                }
            }
            Proposal::Produce(appends) => produce_decision(entry.add_produce(appends)),
            Proposal::ProduceTransactional(appends) => {
                let open = writes_open_txn(state, &appends);
                let slots = entry.add_produce(appends);
                if slots.iter().all(|s| matches!(s, Slot::Decided(_))) {
                    // Nothing goes into the entry for it, so nothing would answer it later.
                    Decision::Answered(Answer::Produced(slots.into_iter().map(|s| s.answer(&[])).collect()))
                } else {
                    open_txn_writes |= open;
                    Decision::Waiting(Waiting::Produce(slots))
                }
            }
            Proposal::ProduceRemote(appends) => {
                remote.push((decisions.len(), appends));
                Decision::Waiting(Waiting::Op(usize::MAX))
            }
        };
        decisions.push(decision);
    }
    for (index, appends) in remote {
        decisions[index] = produce_decision(entry.add_remote_produce(appends));
    }
    for (index, op) in deferred {
        entry.ops.push(op);
        decisions[index] = Decision::Waiting(Waiting::Op(entry.ops.len() - 1));
    }
    let number = entry.in_flight.building();
    entry.in_flight.batches.extend(entry.entry_batches.into_keys().map(|key| (key, number)));
    Entry { command: Command { stamp, ops: entry.ops }, decisions, open_txn_writes }
}

/// A produce proposal's answer: now when stamping decided every partition, else once the
/// entry applies.
fn produce_decision(slots: Vec<Slot>) -> Decision {
    if slots.iter().all(|s| matches!(s, Slot::Decided(_))) {
        Decision::Answered(Answer::Produced(slots.into_iter().map(|s| s.answer(&[])).collect()))
    } else {
        Decision::Waiting(Waiting::Produce(slots))
    }
}

/// What a new leader proposes, as its own entry, before anything else in its term: its limits
/// when the replicated ones differ. Open transactions are left open (issue 17): every write a
/// client was told about is in the log, so their producers carry on with this leader.
pub fn takeover_ops(state: &BrokerState, limits: &ReplicatedLimits) -> Vec<Op> {
    if state.limits != *limits {
        vec![Op::SetLimits(*limits)]
    } else {
        Vec::new()
    }
}

/// Whether every batch of `appends` (a `ProduceTransactional`) belongs to a transaction
/// already open in the applied state: see [`txn_is_open`].
pub fn writes_open_txn(state: &BrokerState, appends: &[UnstampedAppend]) -> bool {
    appends.iter().flat_map(|a| &a.batches).all(|b| txn_is_open(state, &b.header))
}

/// Whether the batch's transaction is already open in the applied (committed) state at the
/// batch's epoch: a write after the transaction's first. Before issue 17 such writes were
/// answered once stamped; now only the chaos checker's test bug does that (the broker's
/// `leader::bugs`, fault-injection build only), and that build holds their entries at a
/// delay point so that a test can kill their leader with them in flight.
pub fn txn_is_open(state: &BrokerState, header: &BatchHeader) -> bool {
    state.txns.by_producer(header.producer_id).is_some_and(|(_, meta)| {
        meta.state == TxnState::Ongoing && meta.producer_epoch == header.producer_epoch
    })
}

/// How a proposal in the entry is answered once the entry is applied.
#[derive(Debug)]
pub enum Waiting {
    /// `Proposal::Op`: the result of that op.
    Op(usize),
    /// A produce proposal: one slot per partition, in request order.
    Produce(Vec<Slot>),
}

impl Waiting {
    /// The answer from the applied entry's results, one per op.
    pub fn answer(self, results: &[OpResult]) -> Answer {
        match self {
            Waiting::Op(op) => Answer::Op(results[op].clone()),
            Waiting::Produce(slots) => {
                Answer::Produced(slots.into_iter().map(|s| s.answer(results)).collect())
            }
        }
    }

    /// The answer this produce gets if `command`, built against `state`, applies as stamped:
    /// what a deliberately broken leader sends before the entry commits (the chaos checker's
    /// own test, issue 14: "the checker is not blind"; only the broker's fault-injection build
    /// does). `Err(self)` for an op, and for a produce with a partition that is a duplicate of
    /// a batch in the same entry (true only if that op applies).
    pub fn as_stamped(self, state: &BrokerState, command: &Command) -> Result<Answer, Waiting> {
        let Waiting::Produce(slots) = self else { return Err(self) };
        if slots.iter().any(|s| matches!(s, Slot::DuplicateInEntry { .. })) {
            return Err(Waiting::Produce(slots));
        }
        Ok(Answer::Produced(slots.into_iter().map(|s| stamped_answer(state, command, s)).collect()))
    }

    /// The answer when the entry did not commit here: partitions decided at stamping keep
    /// their answer, the others get `error_code`. None for an op: its caller gets the error.
    pub fn failed(self, error_code: i16, message: &str) -> Option<Answer> {
        match self {
            Waiting::Op(_) => None,
            Waiting::Produce(slots) => {
                let failed = PartitionProduced::error(error_code, message);
                Some(Answer::Produced(
                    slots
                        .into_iter()
                        .map(|s| match s {
                            Slot::Decided(result) => result,
                            _ => failed.clone(),
                        })
                        .collect(),
                ))
            }
        }
    }
}

/// One partition of a produce proposal, as stamping left it.
#[derive(Debug)]
pub enum Slot {
    /// Answered from the applied state: an error, or a duplicate of a committed batch.
    Decided(PartitionProduced),
    /// Appended as partition `index` of op `op`.
    Appended { op: usize, index: usize },
    /// A duplicate of a batch that op `op` of this entry appends (a retry queued behind its
    /// original): true only if that op applies, so it is never answered before the entry.
    DuplicateInEntry { op: usize, result: PartitionProduced },
}

impl Slot {
    fn answer(self, results: &[OpResult]) -> PartitionProduced {
        match self {
            Slot::Decided(result) => result,
            Slot::Appended { op, index } => match produced(results.get(op)) {
                Ok(parts) => parts[index].clone(),
                Err(refused) => refused,
            },
            Slot::DuplicateInEntry { op, result } => match produced(results.get(op)) {
                Ok(_) => result,
                Err(refused) => refused,
            },
        }
    }
}

/// One partition's answer if `command` applies as stamped (see [`Waiting::as_stamped`]).
fn stamped_answer(state: &BrokerState, command: &Command, slot: Slot) -> PartitionProduced {
    let Slot::Appended { op, index } = slot else { return slot.answer(&[]) };
    let produce = match &command.ops[op] {
        Op::Produce(produce) => produce,
        Op::CrossGroup(x) => match x.as_ref() {
            XOp::Produce(remote) => &remote.produce,
            _ => unreachable!("a produce slot names a produce op"),
        },
        _ => unreachable!("a produce slot names a produce op"),
    };
    let append = &produce.partitions[index];
    let header = parse_header(&append.batches[0]).expect("stamped by the builder");
    let log_start_offset = state.partition(&append.topic, append.partition).map_or(0, |p| p.log_start_offset);
    PartitionProduced {
        error_code: error_code::NONE,
        message: None,
        base_offset: header.base_offset,
        log_start_offset,
        append_time_ms: command.stamp.now_ms,
    }
}

/// A produce op's partitions as applied, or the refusal every partition of it gets. A
/// cross-group write (`XOp::Produce`) is answered like a produce op.
fn produced(result: Option<&OpResult>) -> Result<&[PartitionProduced], PartitionProduced> {
    let result = match result {
        Some(OpResult::Produced(result)) => result,
        Some(OpResult::CrossGroup(XResult::Produced(result))) => result,
        // Apply answers a produce op with `Produced`, always; anything else is a broken apply.
        other => panic!("a produce op was answered with {other:?}"),
    };
    result.as_deref().map_err(|refusal| PartitionProduced::error(refusal.error_code, &refusal.message))
}

/// The entry being built: its ops; the offsets and producer state they will leave go into
/// the overlay of the entries in flight, which this entry joins.
struct EntryBuilder<'a> {
    state: &'a BrokerState,
    in_flight: &'a mut InFlight,
    stamp: LeaderStamp,
    options: &'a EntryOptions,
    ops: Vec<Op>,
    /// (topic, partition, base offset) of each idempotent batch this entry appends → its op.
    entry_batches: BTreeMap<(String, i32, i64), usize>,
    /// Prior decisions of remote writes whose markers are counted already (`remote`).
    priors: std::collections::BTreeSet<crate::xgroup::Instance>,
}

impl<'a> EntryBuilder<'a> {
    fn new(
        state: &'a BrokerState,
        in_flight: &'a mut InFlight,
        stamp: LeaderStamp,
        options: &'a EntryOptions,
    ) -> Self {
        let (ops, entry_batches, priors) = (Vec::new(), BTreeMap::new(), Default::default());
        EntryBuilder { state, in_flight, stamp, options, ops, entry_batches, priors }
    }

    /// Adds one produce request: the partitions that pass become one op.
    fn add_produce(&mut self, appends: Vec<UnstampedAppend>) -> Vec<Slot> {
        let op = self.ops.len();
        let mut partitions = Vec::new();
        let mut slots = Vec::with_capacity(appends.len());
        for append in appends {
            match self.check(&append, None) {
                Ok(seq) => {
                    slots.push(Slot::Appended { op, index: partitions.len() });
                    partitions.push(self.stamp_append(append, seq, op));
                }
                Err(slot) => slots.push(slot),
            }
        }
        if !partitions.is_empty() {
            self.ops.push(Op::Produce(ProduceOp { partitions }));
        }
        slots
    }

    /// Whether `append` goes into the entry (with its idempotent batch, if any); if not, its
    /// answer.
    fn check(
        &self,
        append: &UnstampedAppend,
        remote: Option<&RemoteAppends>,
    ) -> Result<Option<BatchSeq>, Slot> {
        let (topic, p) = (&append.topic, append.partition);
        let decided = |code, message: String| Slot::Decided(PartitionProduced::error(code, message));
        let Some(partition) = self.state.partition(topic, p) else {
            return Err(decided(
                error_code::UNKNOWN_TOPIC_OR_PARTITION,
                format!("{topic}-{p} does not exist"),
            ));
        };
        self.check_txn(append, remote)?;
        let seqs: Vec<BatchSeq> = append.batches.iter().filter_map(|b| BatchSeq::of(&b.header)).collect();
        let seq = match (seqs.as_slice(), append.batches.len()) {
            ([], _) => return Ok(None),
            ([seq], 1) => *seq,
            // The produce handler refuses these; Kafka allows one batch per partition (v3+).
            _ => {
                return Err(decided(error_code::INVALID_RECORD, "one idempotent batch per partition".into()))
            }
        };
        match self.in_flight.producers.check(&self.state.producers, topic, p, &seq) {
            Verdict::Append => {}
            Verdict::Duplicate(meta) => {
                let key = (topic.clone(), p, meta.base_offset);
                if !self.entry_batches.contains_key(&key) && self.in_flight.batch_in_flight(&key) {
                    // Its original is in an earlier entry not yet applied, which may still
                    // fail: the retry's retry finds it applied (see `in_flight`).
                    let message = format!("{topic}-{p}: the batch this retries is still being committed");
                    return Err(decided(error_code::NOT_ENOUGH_REPLICAS, message));
                }
                let result = PartitionProduced {
                    error_code: error_code::NONE,
                    message: None,
                    base_offset: meta.base_offset,
                    log_start_offset: partition.log_start_offset,
                    append_time_ms: meta.append_time_ms,
                };
                return Err(match self.entry_batches.get(&(topic.clone(), p, meta.base_offset)) {
                    Some(&op) => Slot::DuplicateInEntry { op, result },
                    None => Slot::Decided(result),
                });
            }
            Verdict::Reject { error_code, message } => return Err(decided(error_code, message)),
        }
        if self.in_flight.producers.is_new(&self.state.producers, seq.producer_id) {
            // Counted high: InitProducerId ops in the entries may evict as well as add.
            let live = self.state.producers.live.len() as u64
                + self.in_flight.producers.new_producer_ids() as u64
                + self.in_flight.producer_ids_allocated;
            if live >= self.state.limits.producer_ids_live_max {
                // Retriable: the producer keeps its sequence and retries until there is room.
                let message = format!("{live} live producer ids, the limit; retry later");
                return Err(decided(error_code::NOT_ENOUGH_REPLICAS, message));
            }
        }
        Ok(Some(seq))
    }

    /// Apply refuses a transactional batch of a fenced or unknown producer, and with it the
    /// whole op; decided here, only this partition is refused (as the produce handler would
    /// have refused it had the fencing entry applied before it looked).
    fn check_txn(&self, append: &UnstampedAppend, remote: Option<&RemoteAppends>) -> Result<(), Slot> {
        let (topic, p) = (&append.topic, append.partition);
        for header in append.batches.iter().map(|b| &b.header).filter(|h| h.is_transactional()) {
            let id =
                ProducerIdEpoch { producer_id: header.producer_id, producer_epoch: header.producer_epoch };
            let checked = match remote {
                None => self.state.txns.check_write(id).map(|_| ()),
                Some(remote) => remote.admits(self.state, id),
            };
            if let Err(e) = checked {
                let message = format!("{topic}-{p}: transactional write refused: {e:?}");
                let code = txn_errors::code(&e, ApiKey::Produce, 0);
                return Err(Slot::Decided(PartitionProduced::error(code, message)));
            }
        }
        Ok(())
    }

    /// The answer for a slot from its stamp alone (transactional produce, see `Proposal`).
    /// Stamps offsets and the term into `append`'s batches and records its idempotent batch.
    fn stamp_append(&mut self, append: UnstampedAppend, seq: Option<BatchSeq>, op: usize) -> PartitionAppend {
        let partition = self.state.partition(&append.topic, append.partition).expect("checked");
        let now = self.stamp.now_ms;
        let log_append_time = is_log_append_time(self.state, self.options, &append.topic).then_some(now);
        let offset = self
            .in_flight
            .next_offset
            .entry((append.topic.clone(), append.partition))
            .or_insert(partition.log_end_offset);
        let base_offset = *offset;
        let batches = append
            .batches
            .iter()
            .map(|b| {
                let stamp = BatchStamp {
                    base_offset: *offset,
                    partition_leader_epoch: self.stamp.term,
                    log_append_time_ms: log_append_time,
                };
                *offset += i64::from(b.header.last_offset_delta) + 1;
                stamp_batch(&b.bytes, stamp)
            })
            .collect();
        let last_offset = *offset - 1;
        if let Some(seq) = seq {
            let meta = BatchMeta {
                first_seq: seq.first_seq,
                last_seq: seq.last_seq,
                base_offset,
                last_offset,
                append_time_ms: now,
            };
            self.in_flight.producers.record(
                &self.state.producers,
                &append.topic,
                append.partition,
                &seq,
                meta,
            );
            self.entry_batches.insert((append.topic.clone(), append.partition, base_offset), op);
        }
        PartitionAppend { topic: append.topic, partition: append.partition, batches }
    }
}

/// Whether batches appended to `topic` get the leader's clock as their timestamp (Kafka's
/// `message.timestamp.type`, the broker default unless the topic sets it).
pub fn is_log_append_time(state: &BrokerState, options: &EntryOptions, topic: &str) -> bool {
    let topic_value = state.topics.get(topic).and_then(|t| t.configs.get("message.timestamp.type"));
    let dynamic =
        || state.configs.broker_value(options.node_id, "log.message.timestamp.type").map(|(v, _)| v);
    match topic_value.map(String::as_str).or_else(dynamic) {
        Some(configured) => configured == "LogAppendTime",
        None => options.log_append_time_default,
    }
}

#[cfg(test)]
#[path = "entry_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "entry_pipeline_tests.rs"]
mod pipeline_tests;

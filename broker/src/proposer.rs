//! Leader-side aggregation and sequencing (DESIGN §2, DRMQ's cross-request aggregator).
//!
//! Handlers hand ops to one proposer task. While one entry is being committed, new ops queue;
//! the next entry takes everything queued, up to a byte and op limit. Before proposing, the
//! proposer stamps every produce batch with its offset and the leader's term: it reads the
//! applied state, which is complete because only one entry is in flight and a leader first
//! applies every entry of earlier terms (DESIGN §4). Followers re-check the stamps on apply.
//!
//! Idempotent batches (KIP-98) are checked here too, against the applied producer state plus
//! what earlier ops of the same entry append (`producers::Pending`): a duplicate is answered
//! with its original offset and not proposed, a partition that fails the check is answered with
//! its error and left out, and the rest of the request is still one all-or-nothing op. Apply
//! runs the same check again and refuses the op if its answer differs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kafka_compat::batch::{parse_header, stamp_batch, BatchStamp, ValidBatch};
use kafka_compat::error_code;
use openraft::error::{ClientWriteError, RaftError};
use tokio::sync::{mpsc, oneshot};

use crate::config::BrokerConfig;
use crate::limits;
use crate::raft::sm_store::SmShared;
use crate::raft::Raft;
use crate::state::command::{
    AbortTxnsOp, Command, LeaderStamp, Op, OpResult, PartitionAppend, PartitionProduced, ProduceOp,
};
use crate::state::producers::{BatchMeta, BatchSeq, Pending, Verdict};
use crate::state::txns::{BrokerAbort, ProducerIdEpoch};
use crate::state::BrokerState;

/// A produce op before the leader has stamped it.
#[derive(Debug)]
pub struct UnstampedAppend {
    pub topic: String,
    pub partition: i32,
    pub batches: Vec<ValidBatch>,
}

/// What a handler asks the proposer to put in the log.
#[derive(Debug)]
pub enum Proposal {
    Op(Op),
    Produce(Vec<UnstampedAppend>),
    /// Transactional batches only: answered once stamped, before the entry is committed
    /// (DESIGN §1, §4), when the transaction is already open in the committed state (see
    /// `txn_is_open`). Safe because nothing of a transaction becomes visible before its EndTxn
    /// entry, which this leader proposes after this one, so it commits only with it; and if
    /// this leader's term ends first, the next leader aborts the open transaction (the
    /// proposer's takeover abort) and the client's EndTxn fails with an abortable error.
    ProduceTransactional(Vec<UnstampedAppend>),
}

impl Proposal {
    fn size_bytes(&self) -> usize {
        match self {
            Proposal::Produce(appends) | Proposal::ProduceTransactional(appends) => {
                appends.iter().flat_map(|a| a.batches.iter()).map(|b| b.bytes.len()).sum::<usize>() + 64
            }
            // Ops other than produce are small, except commits with metadata: count them.
            Proposal::Op(op) => bincode::serialized_size(op).map_or(256, |n| n as usize),
        }
    }
}

/// Why a proposal did not produce a result.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProposeError {
    #[error("this node is not the Raft leader")]
    NotLeader,
    #[error("the Raft node has stopped: {0}")]
    Fatal(String),
}

impl ProposeError {
    pub fn error_code(&self) -> i16 {
        match self {
            ProposeError::NotLeader => error_code::NOT_LEADER_OR_FOLLOWER,
            ProposeError::Fatal(_) => error_code::KAFKA_STORAGE_ERROR,
        }
    }
}

type Reply = oneshot::Sender<Result<OpResult, ProposeError>>;

#[derive(Clone)]
pub struct Proposer {
    tx: mpsc::Sender<(Proposal, Reply)>,
}

impl Proposer {
    pub fn start(node_id: u64, raft: Raft, shared: Arc<SmShared>) -> Proposer {
        let (tx, rx) = mpsc::channel(limits::PROPOSAL_QUEUE_OPS_MAX);
        let task = tokio::spawn(run(Sequencer { node_id, raft, shared, term: 0, takeover_term: 0 }, rx));
        // A proposer that died (a failed invariant) would leave every later write waiting for
        // ever; the node stops instead, like on a storage fault, and a replica takes over.
        tokio::spawn(async move {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "the proposer stopped; exiting");
                std::process::exit(70);
            }
        });
        Proposer { tx }
    }

    /// Queues `proposal` (in call order) and returns a future of its result.
    pub async fn submit(
        &self,
        proposal: Proposal,
    ) -> Result<impl std::future::Future<Output = Result<OpResult, ProposeError>>, ProposeError> {
        let (reply, rx) = oneshot::channel();
        self.tx.send((proposal, reply)).await.map_err(|_| ProposeError::Fatal("proposer stopped".into()))?;
        Ok(async move { rx.await.map_err(|_| ProposeError::Fatal("proposer dropped the request".into()))? })
    }

    /// Puts `proposal` in the log and waits until it is committed and applied.
    pub async fn propose(&self, proposal: Proposal) -> Result<OpResult, ProposeError> {
        self.submit(proposal).await?.await
    }

    /// Convenience for ops that need no stamping.
    pub async fn propose_op(&self, op: Op) -> Result<OpResult, ProposeError> {
        self.propose(Proposal::Op(op)).await
    }
}

struct Sequencer {
    node_id: u64,
    raft: Raft,
    shared: Arc<SmShared>,
    /// Term in which the applied state was last known complete.
    term: u64,
    /// Term whose takeover abort of open transactions is done (DESIGN §4).
    takeover_term: u64,
}

async fn run(mut seq: Sequencer, mut rx: mpsc::Receiver<(Proposal, Reply)>) {
    while let Some(first) = rx.recv().await {
        let mut bytes = first.0.size_bytes();
        let mut queued = vec![first];
        while bytes < limits::PROPOSAL_BYTES_MAX && queued.len() < limits::PROPOSAL_OPS_MAX {
            match rx.try_recv() {
                Ok(next) => {
                    bytes += next.0.size_bytes();
                    queued.push(next);
                }
                Err(_) => break,
            }
        }
        seq.propose_batch(queued).await;
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl Sequencer {
    async fn propose_batch(&mut self, queued: Vec<(Proposal, Reply)>) {
        let term = match self.ready_term().await {
            Ok(term) => term,
            Err(e) => {
                queued.into_iter().for_each(|(_, reply)| drop(reply.send(Err(e.clone()))));
                return;
            }
        };
        if self.takeover_term != term {
            if let Err(e) = self.abort_open_transactions(term).await {
                self.term = 0;
                queued.into_iter().for_each(|(_, reply)| drop(reply.send(Err(e.clone()))));
                return;
            }
            self.takeover_term = term;
        }
        let (ops, waiting) = self.stamp(queued, term);
        if ops.is_empty() {
            assert!(waiting.is_empty(), "only proposals with ops in the entry wait for it");
            return;
        }
        let op_count = ops.len();
        match self.raft.client_write(Command { ops }).await {
            Ok(response) => {
                let results = response.data.results;
                assert_eq!(results.len(), op_count, "one result per proposed op");
                for (reply, waiting) in waiting {
                    let _ = reply.send(Ok(waiting.answer(&results)));
                }
            }
            Err(e) => {
                let err = match e {
                    RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => ProposeError::NotLeader,
                    other => ProposeError::Fatal(other.to_string()),
                };
                // The entry may still commit later under a new leader; this node re-reads the
                // applied state before it stamps again.
                self.term = 0;
                for (reply, waiting) in waiting {
                    let _ = reply.send(waiting.failed(&err));
                }
            }
        }
    }

    /// DESIGN §4: a transaction open when this leader took over may have writes acknowledged
    /// by an earlier leader that never reached this log, so it is aborted before anything
    /// else is proposed — after every entry of earlier terms is applied (`ready_term`), so a
    /// transaction whose EndTxn made it into the log is complete and left alone. Its own
    /// entry: the abort markers move log ends that later stamping must see.
    async fn abort_open_transactions(&mut self, term: u64) -> Result<(), ProposeError> {
        let open: Vec<_> = {
            let applied = self.shared.applied.read().expect("applied lock");
            let txns = &applied.state.txns;
            txns.open_ids()
                .into_iter()
                .map(|id| {
                    let meta = &txns.by_id[&id];
                    (
                        id,
                        ProducerIdEpoch {
                            producer_id: meta.producer_id,
                            producer_epoch: meta.producer_epoch,
                        },
                    )
                })
                .collect()
        };
        if open.is_empty() {
            return Ok(());
        }
        tracing::info!(term, count = open.len(), "aborting transactions open at the leader change");
        let stamp = LeaderStamp { now_ms: now_ms(), term: term as i32 };
        let op = Op::AbortTxns(AbortTxnsOp { reason: BrokerAbort::Takeover, transactions: open, stamp });
        match self.raft.client_write(Command { ops: vec![op] }).await {
            Ok(_) => Ok(()),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))) => Err(ProposeError::NotLeader),
            Err(other) => Err(ProposeError::Fatal(other.to_string())),
        }
    }

    /// Returns the current term once this node leads and has applied its whole log.
    async fn ready_term(&mut self) -> Result<u64, ProposeError> {
        let mut metrics = self.raft.metrics();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let (leader, term, last_log, applied) = {
                let m = metrics.borrow();
                (m.current_leader, m.current_term, m.last_log_index, m.last_applied.map(|l| l.index))
            };
            if leader != Some(self.node_id) {
                return Err(ProposeError::NotLeader);
            }
            if self.term == term || applied >= last_log {
                self.term = term;
                return Ok(term);
            }
            if tokio::time::timeout_at(deadline, metrics.changed()).await.is_err() {
                return Err(ProposeError::NotLeader);
            }
        }
    }

    fn stamp(&self, queued: Vec<(Proposal, Reply)>, term: u64) -> (Vec<Op>, Vec<(Reply, Waiting)>) {
        let applied = self.shared.applied.read().expect("applied lock");
        stamp_entry(&applied.state, &self.shared.config, term, now_ms(), queued)
    }
}

/// Builds one entry's ops from the queued proposals, in queue order, against `state` (the
/// applied state). Produce proposals decided entirely here are answered at once; the others
/// wait for the entry.
fn stamp_entry(
    state: &BrokerState,
    config: &BrokerConfig,
    term: u64,
    now: i64,
    queued: Vec<(Proposal, Reply)>,
) -> (Vec<Op>, Vec<(Reply, Waiting)>) {
    let mut entry = EntryBuilder::new(state, config, term, now);
    let mut waiting = Vec::with_capacity(queued.len());
    // Ops that write transaction markers go after every produce op of the entry: a marker
    // takes the next offset of its partitions when applied, which would shift the offsets
    // stamped into a later produce op of the same entry (and a transactional produce has
    // already been answered with them). The proposals were queued together, unanswered, so
    // either order is one the clients could have seen.
    let mut deferred = Vec::new();
    for (proposal, reply) in queued {
        match proposal {
            Proposal::Op(op) => {
                if matches!(op, Op::InitProducerId(_) | Op::InitTxnProducer(_)) {
                    entry.producer_ids_allocated += 1;
                }
                if op.writes_markers() {
                    deferred.push((op, reply));
                    continue;
                }
                waiting.push((reply, Waiting::Op(entry.ops.len())));
                entry.ops.push(op);
            }
            Proposal::Produce(appends) => {
                let slots = entry.add_produce(appends);
                if slots.iter().all(|s| matches!(s, Slot::Decided(_))) {
                    let decided = slots.into_iter().map(|s| s.answer(&[])).collect();
                    let _ = reply.send(Ok(OpResult::Produced(decided)));
                } else {
                    waiting.push((reply, Waiting::Produce(slots)));
                }
            }
            Proposal::ProduceTransactional(appends) => {
                let open = appends.iter().flat_map(|a| &a.batches).all(|b| txn_is_open(state, &b.header));
                let slots = entry.add_produce(appends);
                if slots.iter().all(|s| matches!(s, Slot::Decided(_))) {
                    // Nothing goes into the entry for it, so nothing would answer it later.
                    let decided = slots.into_iter().map(|s| s.answer(&[])).collect();
                    let _ = reply.send(Ok(OpResult::Produced(decided)));
                } else if !open || slots.iter().any(|s| matches!(s, Slot::DuplicateInEntry { .. })) {
                    // A retry queued behind its original is answered only with the original's op.
                    waiting.push((reply, Waiting::Produce(slots)));
                } else {
                    let stamped = slots.into_iter().map(|s| entry.stamped_answer(s)).collect();
                    let _ = reply.send(Ok(OpResult::Produced(stamped)));
                }
            }
        }
    }
    for (op, reply) in deferred {
        waiting.push((reply, Waiting::Op(entry.ops.len())));
        entry.ops.push(op);
    }
    (entry.ops, waiting)
}

/// Whether the batch's transaction is already open in the applied (committed) state. Only
/// then may its produce be answered before commit: a new leader aborts every transaction the
/// log shows open, but one whose only writes never reached the log looks like the previous,
/// completed transaction of the same epoch (transactions v1), and the client's EndTxn(commit)
/// would be taken for a retry and succeed without its data. So the first write of every
/// transaction waits for its entry to commit; the ones after it are answered once stamped.
fn txn_is_open(state: &BrokerState, header: &kafka_compat::batch::BatchHeader) -> bool {
    state.txns.by_producer(header.producer_id).is_some_and(|(_, meta)| {
        meta.state == crate::state::txns::TxnState::Ongoing && meta.producer_epoch == header.producer_epoch
    })
}

/// How a proposal in the entry is answered once the entry is applied.
enum Waiting {
    /// `Proposal::Op`: the result of that op.
    Op(usize),
    /// `Proposal::Produce`: one slot per partition, in request order.
    Produce(Vec<Slot>),
}

impl Waiting {
    fn answer(self, results: &[OpResult]) -> OpResult {
        match self {
            Waiting::Op(op) => results[op].clone(),
            Waiting::Produce(slots) => {
                OpResult::Produced(slots.into_iter().map(|s| s.answer(results)).collect())
            }
        }
    }

    /// The answer when the entry did not commit here: partitions decided at stamping keep
    /// their answer, the others get the error.
    fn failed(self, err: &ProposeError) -> Result<OpResult, ProposeError> {
        match self {
            Waiting::Op(_) => Err(err.clone()),
            Waiting::Produce(slots) => {
                let failed = OpResult::Refused { error_code: err.error_code(), message: err.to_string() };
                Ok(OpResult::Produced(
                    slots.into_iter().map(|s| s.answer(std::slice::from_ref(&failed))).collect(),
                ))
            }
        }
    }
}

/// One partition of a produce proposal, as stamping left it.
enum Slot {
    /// Answered from the applied state: an error, or a duplicate of a committed batch.
    Decided(PartitionProduced),
    /// Appended as partition `index` of op `op`.
    Appended { op: usize, index: usize },
    /// A duplicate of a batch that op `op` of this entry appends (a retry queued behind its
    /// original): true only if that op applies, so it is never answered before the entry.
    DuplicateInEntry { op: usize, result: PartitionProduced },
}

impl Slot {
    /// `results`: the entry's op results, or a single refusal standing for every op.
    fn answer(self, results: &[OpResult]) -> PartitionProduced {
        let outcome = |op: usize| results.get(op).or(results.first());
        match self {
            Slot::Decided(result) => result,
            Slot::Appended { op, index } => match outcome(op) {
                Some(OpResult::Produced(parts)) => parts[index].clone(),
                other => refusal(other),
            },
            Slot::DuplicateInEntry { op, result } => match outcome(op) {
                Some(OpResult::Produced(_)) => result,
                other => refusal(other),
            },
        }
    }
}

fn refusal(result: Option<&OpResult>) -> PartitionProduced {
    match result {
        Some(OpResult::Refused { error_code, message }) => {
            PartitionProduced::error(*error_code, message.clone())
        }
        other => PartitionProduced::error(error_code::UNKNOWN_SERVER_ERROR, format!("unexpected {other:?}")),
    }
}

/// The entry being built: its ops, and the offsets and producer state they will leave.
struct EntryBuilder<'a> {
    state: &'a BrokerState,
    config: &'a BrokerConfig,
    term: u64,
    now: i64,
    ops: Vec<Op>,
    next_offset: BTreeMap<(String, i32), i64>,
    producers: Pending,
    /// (topic, partition, base offset) of each idempotent batch this entry appends → its op.
    entry_batches: BTreeMap<(String, i32, i64), usize>,
    /// InitProducerId ops in this entry: each may add a live producer id.
    producer_ids_allocated: u64,
}

impl<'a> EntryBuilder<'a> {
    fn new(state: &'a BrokerState, config: &'a BrokerConfig, term: u64, now: i64) -> Self {
        EntryBuilder {
            state,
            config,
            term,
            now,
            ops: Vec::new(),
            next_offset: BTreeMap::new(),
            producers: Pending::default(),
            entry_batches: BTreeMap::new(),
            producer_ids_allocated: 0,
        }
    }

    /// Adds one produce request: the partitions that pass become one op.
    fn add_produce(&mut self, appends: Vec<UnstampedAppend>) -> Vec<Slot> {
        let op = self.ops.len();
        let mut partitions = Vec::new();
        let mut slots = Vec::with_capacity(appends.len());
        for append in appends {
            match self.check(&append) {
                Ok(seq) => {
                    slots.push(Slot::Appended { op, index: partitions.len() });
                    partitions.push(self.stamp_append(append, seq, op));
                }
                Err(slot) => slots.push(slot),
            }
        }
        if !partitions.is_empty() {
            self.ops.push(Op::Produce(ProduceOp { append_time_ms: self.now, partitions }));
        }
        slots
    }

    /// Whether `append` goes into the entry (with its idempotent batch, if any); if not, its
    /// answer.
    fn check(&self, append: &UnstampedAppend) -> Result<Option<BatchSeq>, Slot> {
        let (topic, p) = (&append.topic, append.partition);
        let decided = |code, message: String| Slot::Decided(PartitionProduced::error(code, message));
        let Some(partition) = self.state.partition(topic, p) else {
            return Err(decided(
                error_code::UNKNOWN_TOPIC_OR_PARTITION,
                format!("{topic}-{p} does not exist"),
            ));
        };
        let seqs: Vec<BatchSeq> = append.batches.iter().filter_map(|b| BatchSeq::of(&b.header)).collect();
        let seq = match (seqs.as_slice(), append.batches.len()) {
            ([], _) => return Ok(None),
            ([seq], 1) => *seq,
            // The produce handler refuses these; Kafka allows one batch per partition (v3+).
            _ => {
                return Err(decided(error_code::INVALID_RECORD, "one idempotent batch per partition".into()))
            }
        };
        match self.producers.check(&self.state.producers, topic, p, &seq) {
            Verdict::Append => {}
            Verdict::Duplicate(meta) => {
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
        if self.producers.is_new(&self.state.producers, seq.producer_id) {
            // Counted high: InitProducerId ops in the entry may evict as well as add.
            let live = self.state.producers.live.len() as u64
                + self.producers.new_producer_ids() as u64
                + self.producer_ids_allocated;
            if live >= limits::PRODUCER_IDS_LIVE_MAX {
                // Retriable: the producer keeps its sequence and retries until there is room.
                let message = format!("{live} live producer ids, the limit; retry later");
                return Err(decided(error_code::NOT_ENOUGH_REPLICAS, message));
            }
        }
        Ok(Some(seq))
    }

    /// The answer for a slot from its stamp alone (transactional produce, see `Proposal`).
    fn stamped_answer(&self, slot: Slot) -> PartitionProduced {
        let Slot::Appended { op, index } = slot else { return slot.answer(&[]) };
        let Op::Produce(produce) = &self.ops[op] else { unreachable!("a produce slot names a produce op") };
        let append = &produce.partitions[index];
        let header = parse_header(&append.batches[0]).expect("stamped by this builder");
        let log_start_offset =
            self.state.partition(&append.topic, append.partition).map_or(0, |p| p.log_start_offset);
        PartitionProduced {
            error_code: error_code::NONE,
            message: None,
            base_offset: header.base_offset,
            log_start_offset,
            append_time_ms: self.now,
        }
    }

    /// Stamps offsets and the term into `append`'s batches and records its idempotent batch.
    fn stamp_append(&mut self, append: UnstampedAppend, seq: Option<BatchSeq>, op: usize) -> PartitionAppend {
        let partition = self.state.partition(&append.topic, append.partition).expect("checked");
        let log_append_time = is_log_append_time(self.state, self.config, &append.topic).then_some(self.now);
        let offset = self
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
                    partition_leader_epoch: self.term as i32,
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
                append_time_ms: self.now,
            };
            self.producers.record(&self.state.producers, &append.topic, append.partition, &seq, meta);
            self.entry_batches.insert((append.topic.clone(), append.partition, base_offset), op);
        }
        PartitionAppend { topic: append.topic, partition: append.partition, batches }
    }
}

pub fn is_log_append_time(state: &BrokerState, config: &crate::config::BrokerConfig, topic: &str) -> bool {
    let configured = state.topics.get(topic).and_then(|t| t.configs.get("message.timestamp.type"));
    configured.map(String::as_str).or(config.get("log.message.timestamp.type")) == Some("LogAppendTime")
}

#[cfg(test)]
#[path = "proposer_tests.rs"]
mod tests;

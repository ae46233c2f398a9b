//! Leader-side aggregation and sequencing (DESIGN §2, DRMQ's cross-request aggregator).
//!
//! Handlers hand ops to one proposer task. While one entry is being committed, new ops queue;
//! the next entry takes everything queued, up to a byte and op limit. Before proposing, the
//! proposer stamps every produce batch with its offset and the leader's term: it reads the
//! applied state, which is complete because only one entry is in flight and a leader first
//! applies every entry of earlier terms (DESIGN §4). Followers re-check the stamps on apply.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kafka_compat::batch::{stamp_batch, BatchStamp, ValidBatch};
use kafka_compat::error_code;
use openraft::error::{ClientWriteError, RaftError};
use tokio::sync::{mpsc, oneshot};

use crate::limits;
use crate::raft::sm_store::SmShared;
use crate::raft::Raft;
use crate::state::command::{Command, Op, OpResult, PartitionAppend, ProduceOp};
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
}

impl Proposal {
    fn size_bytes(&self) -> usize {
        match self {
            Proposal::Produce(appends) => {
                appends.iter().flat_map(|a| a.batches.iter()).map(|b| b.bytes.len()).sum::<usize>() + 64
            }
            Proposal::Op(_) => 256,
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
        tokio::spawn(run(Sequencer { node_id, raft, shared, term: 0 }, rx));
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
        let (ops, replies) = self.stamp(queued, term);
        if ops.is_empty() {
            return;
        }
        match self.raft.client_write(Command { ops }).await {
            Ok(response) => {
                let results = response.data.results;
                assert_eq!(results.len(), replies.len(), "one result per proposed op");
                for (reply, result) in replies.into_iter().zip(results) {
                    let _ = reply.send(Ok(result));
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
                replies.into_iter().for_each(|reply| drop(reply.send(Err(err.clone()))));
            }
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

    /// Stamps produce proposals against the applied state. Proposals that cannot be stamped
    /// (their partition vanished) are answered at once and left out.
    fn stamp(&self, queued: Vec<(Proposal, Reply)>, term: u64) -> (Vec<Op>, Vec<Reply>) {
        let applied = self.shared.applied.read().expect("applied lock");
        let mut next: BTreeMap<(String, i32), i64> = BTreeMap::new();
        let now = now_ms();
        let mut ops = Vec::with_capacity(queued.len());
        let mut replies = Vec::with_capacity(queued.len());
        for (proposal, reply) in queued {
            let op = match proposal {
                Proposal::Op(op) => op,
                Proposal::Produce(appends) => {
                    match stamp_produce(&applied.state, &self.shared.config, &mut next, appends, term, now) {
                        Ok(op) => op,
                        Err(result) => {
                            let _ = reply.send(Ok(result));
                            continue;
                        }
                    }
                }
            };
            ops.push(op);
            replies.push(reply);
        }
        (ops, replies)
    }
}

fn stamp_produce(
    state: &BrokerState,
    config: &crate::config::BrokerConfig,
    next: &mut BTreeMap<(String, i32), i64>,
    appends: Vec<UnstampedAppend>,
    term: u64,
    now: i64,
) -> Result<Op, OpResult> {
    let mut partitions = Vec::with_capacity(appends.len());
    // Check every partition first so a refused op reserves no offsets.
    for append in &appends {
        if state.partition(&append.topic, append.partition).is_none() {
            let message = format!("{}-{} does not exist", append.topic, append.partition);
            return Err(OpResult::Refused { error_code: error_code::UNKNOWN_TOPIC_OR_PARTITION, message });
        }
    }
    for append in appends {
        let key = (append.topic.clone(), append.partition);
        let partition = state.partition(&append.topic, append.partition).expect("checked above");
        let offset = next.entry(key).or_insert(partition.log_end_offset);
        let log_append_time = is_log_append_time(state, config, &append.topic).then_some(now);
        let batches = append
            .batches
            .iter()
            .map(|b| {
                let stamp = BatchStamp {
                    base_offset: *offset,
                    partition_leader_epoch: term as i32,
                    log_append_time_ms: log_append_time,
                };
                *offset += i64::from(b.header.last_offset_delta) + 1;
                stamp_batch(&b.bytes, stamp)
            })
            .collect();
        partitions.push(PartitionAppend { topic: append.topic, partition: append.partition, batches });
    }
    Ok(Op::Produce(ProduceOp { append_time_ms: now, partitions }))
}

pub fn is_log_append_time(state: &BrokerState, config: &crate::config::BrokerConfig, topic: &str) -> bool {
    let configured = state.topics.get(topic).and_then(|t| t.configs.get("message.timestamp.type"));
    configured.map(String::as_str).or(config.get("log.message.timestamp.type")) == Some("LogAppendTime")
}

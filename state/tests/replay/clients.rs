//! The simulated clients and the requests in flight: what an idempotent or transactional
//! producer remembers about itself, what each proposal of an entry was (to read its answer),
//! and the queue of proposals the generator fills for one entry.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;
use onelog_state::command::{Command, CommandResponse, EndTxnOp, Op};
use onelog_state::entry::Proposal;
use onelog_state::txns::{ProducerIdEpoch, TxnError};
use onelog_state::BrokerState;

use crate::stats::Stats;

#[derive(Debug, Clone)]
pub(crate) struct SentBatch {
    pub(crate) epoch: i16,
    pub(crate) first_seq: i32,
    pub(crate) records: i32,
    pub(crate) bytes: Bytes,
}

/// An idempotent producer (KIP-98) as the client sees itself.
pub(crate) struct IdemClient {
    pub(crate) producer_id: i64,
    pub(crate) epoch: i16,
    pub(crate) next_seq: BTreeMap<(String, i32), i32>,
    pub(crate) history: BTreeMap<(String, i32), VecDeque<SentBatch>>,
}

impl IdemClient {
    pub(crate) fn bump_epoch(&mut self) {
        self.epoch += 1;
        self.next_seq.clear();
        self.history.clear();
    }
}

/// A transactional producer, one per transactional id; a fencing InitProducerId leaves the
/// previous instance behind as `zombie`.
pub(crate) struct TxnClient {
    pub(crate) tid: String,
    pub(crate) v2: bool,
    pub(crate) timeout_ms: i32,
    pub(crate) id: Option<ProducerIdEpoch>,
    pub(crate) zombie: Option<ProducerIdEpoch>,
    /// The step whose entry fenced `zombie`.
    pub(crate) fenced_at: u64,
    pub(crate) next_seq: BTreeMap<(String, i32), i32>,
    /// The client wrote (or holds offsets) in its current transaction.
    pub(crate) in_txn: bool,
    /// A write of the current transaction was answered at stamping and its entry lost.
    pub(crate) lost_ack: bool,
    pub(crate) needs_reinit: bool,
    pub(crate) must_abort: bool,
    pub(crate) last_end: Option<EndTxnOp>,
}

impl TxnClient {
    pub(crate) fn take_id(&mut self, id: ProducerIdEpoch) {
        if self.id != Some(id) {
            self.next_seq.clear();
        }
        self.id = Some(id);
        self.in_txn = false;
        self.lost_ack = false;
        self.needs_reinit = false;
        self.must_abort = false;
    }

    fn lose_id(&mut self) {
        self.id = None;
        self.in_txn = false;
        self.lost_ack = false;
        self.needs_reinit = false;
        self.must_abort = false;
        self.next_seq.clear();
    }

    pub(crate) fn on_error(&mut self, error: &TxnError, stats: &mut Stats) {
        match error {
            TxnError::Fenced => {
                stats.fenced += 1;
                self.lose_id();
            }
            // The transactional id expired (or moved to another producer id).
            TxnError::InvalidProducerIdMapping => self.lose_id(),
            TxnError::AbortedByBroker(_) => {
                stats.aborted_by_broker += 1;
                self.must_abort = true;
            }
            TxnError::InvalidState(_) => self.needs_reinit = true,
            TxnError::InvalidTimeout(_) => self.timeout_ms = 10_000,
            // PreviousUndecided comes only from a cross-group write, which this replay never makes.
            TxnError::ProducerIdsExhausted(_)
            | TxnError::CommitBeforeWrites
            | TxnError::PreviousUndecided => {}
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PartKind {
    Fresh,
    /// A deliberate sequence gap.
    Gap,
    /// A resend of a batch answered before.
    Retry,
    /// A resend queued in the same entry as the original (proposal, partition index).
    RetryInEntry(usize, usize),
}

#[derive(Debug, Clone)]
pub(crate) struct SentPart {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    /// (producer id, epoch, first sequence), for idempotent and transactional batches.
    pub(crate) producer: Option<(i64, i16, i32)>,
    pub(crate) records: i32,
    pub(crate) bytes: Bytes,
    pub(crate) kind: PartKind,
}

/// Who sent a produce request.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Who {
    Plain,
    Idempotent(usize),
    Txn(usize),
    /// The fenced instance of transactional client `usize`.
    Zombie(usize),
}

/// What a proposal was, to read its answer.
pub(crate) enum Sent {
    Duty,
    Items(ItemsKind),
    InitIdem,
    Produce { who: Who, parts: Vec<SentPart> },
    InitTxn { client: usize, fencing: bool },
    TxnOffsets { client: usize },
    EndTxn { client: usize, zombie: bool, retry: bool, commit: bool, v2: bool },
    OffsetDelete { offsets: u64 },
}

#[derive(Clone, Copy)]
pub(crate) enum ItemsKind {
    CreateTopics,
    DeleteTopics,
    CreatePartitions,
    OffsetCommit,
    DeleteGroups,
}

/// The proposals of the entry being generated.
#[derive(Default)]
pub(crate) struct Queue {
    pub(crate) proposals: Vec<Proposal>,
    pub(crate) sent: Vec<Sent>,
    pub(crate) busy_txn: BTreeSet<usize>,
    pub(crate) busy_zombie: BTreeSet<usize>,
    /// Sequences handed out in this entry: (idempotent client, topic, partition) → next.
    pub(crate) idem_next: BTreeMap<(usize, String, i32), i32>,
    pub(crate) txn_next: BTreeMap<(usize, String, i32), i32>,
}

impl Queue {
    pub(crate) fn push(&mut self, proposal: Proposal, sent: Sent) -> usize {
        self.proposals.push(proposal);
        self.sent.push(sent);
        self.proposals.len() - 1
    }

    pub(crate) fn duty(&mut self, op: Op) {
        self.push(Proposal::Op(op), Sent::Duty);
    }
}

/// What answering an entry's proposals needs from it.
pub(crate) struct EntryCtx<'a> {
    pub(crate) before: &'a BrokerState,
    pub(crate) command: &'a Command,
    /// None when the entry was not applied.
    pub(crate) response: Option<&'a CommandResponse>,
    pub(crate) lost: bool,
}

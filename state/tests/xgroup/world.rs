//! The groups of the simulation: each a replicated state applied with the real apply
//! functions, a queue of proposed entries not committed yet, a term and its leader's memory.
//!
//! A leader change drops a random suffix of the uncommitted entries (never applied, their
//! answers never given) and the leader's memory; a crash of every node does that in every
//! group at once. Committed entries are applied in order, one per step at most per group.
//! Offsets are stamped when an entry commits, against the applied state: this simulation
//! checks the protocol between groups, and the replay test checks the pipelined stamping.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use kafka_compat::batch::{stamp_batch, BatchStamp};
use onelog_state::command::{CreateTopicsOp, DeleteTopicsOp, LeaderStamp, NewTopic, Op, OpResult, ProduceOp};
use onelog_state::effect::Effect;
use onelog_state::txn_adds::TxnAdds;
use onelog_state::xgroup::ops::{XOp, XResult};
use onelog_state::xgroup::{Decision, GroupId, Instance};
use onelog_state::{apply_op, BrokerState};

use crate::net::WriteId;

/// What the simulation does with an entry's result once applied.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    None,
    /// InitProducerId or EndTxn of a client.
    Client {
        client: usize,
        attempt: u64,
    },
    /// A transactional write in the coordinator's own group.
    LocalWrite {
        write: WriteId,
    },
    /// A transactional write tagged with its instance, in a participant.
    RemoteWrite {
        write: WriteId,
    },
    /// A registration, answered to the participant's leader.
    Register {
        participant: GroupId,
        instance: Instance,
    },
    /// Decisions applied in a participant, confirmed to their coordinator.
    Decisions {
        coordinator: GroupId,
    },
}

#[derive(Debug, Clone)]
pub(crate) enum Action {
    Op(Op),
    X(XOp),
}

#[derive(Debug, Clone)]
pub(crate) struct Proposal {
    pub action: Action,
    pub reply: Reply,
    /// The term it was proposed in: a later leader did not propose it and answers no one.
    pub term: i32,
}

impl Proposal {
    /// Whether it is an operator's creation of `topic`.
    pub fn creates(&self, topic: &str) -> bool {
        matches!(&self.action, Action::Op(Op::CreateTopics(op)) if op.topics.iter().any(|t| t.name == topic))
    }
}

/// A participant's leader, waiting to answer a write: applied here, and registered in C.
#[derive(Debug, Clone)]
pub(crate) struct Awaiting {
    pub instance: Instance,
    pub applied: bool,
    pub registered: bool,
}

/// What a leader keeps in memory only: lost at a leader change.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    /// Client writes this leader asked their coordinator about: the request is held until the
    /// answer, and a second answer (a duplicated JoinTxn) finds it gone.
    pub joining: BTreeSet<WriteId>,
    pub awaiting: BTreeMap<WriteId, Awaiting>,
    /// Instances whose registration of this group applied in their coordinator.
    pub registered: BTreeSet<Instance>,
    /// As coordinator, what each open transaction added in this term (AddPartitionsToTxn, or
    /// implicitly by a v2 write), under the broker's own KIP-890 part 1 rule.
    pub adds: TxnAdds,
}

pub(crate) struct Group {
    pub id: GroupId,
    pub state: BrokerState,
    pub term: i32,
    pub queue: VecDeque<Proposal>,
    pub memory: Memory,
}

/// What applying one entry gave.
pub(crate) enum Outcome {
    Op(OpResult),
    X(XResult),
}

pub(crate) const PARTITIONS: i32 = 2;

fn new_topic(name: &str, topic_id: [u8; 16]) -> NewTopic {
    NewTopic {
        name: name.to_string(),
        topic_id,
        partitions: PARTITIONS,
        replication_factor: 3,
        configs: BTreeMap::new(),
    }
}

/// Topic names of group `g`.
pub(crate) fn topics_of(g: GroupId) -> [String; 2] {
    [format!("g{g}-orders"), format!("g{g}-audit")]
}

impl Group {
    pub fn new(id: GroupId, groups: u32) -> Group {
        let mut state = BrokerState::default();
        // Each group identifies itself, as its first leader does (`XOp::Identify`): producer
        // ids come from its own range.
        onelog_state::xgroup::CrossGroup::identify(&mut state, id, groups);
        let topics = topics_of(id)
            .iter()
            .enumerate()
            .map(|(i, name)| new_topic(name, [(id * 16 + i as u32 + 1) as u8; 16]))
            .collect();
        let stamp = LeaderStamp { now_ms: 0, term: 1 };
        apply_op(&mut state, &stamp, &Op::CreateTopics(CreateTopicsOp { topics }), &mut Vec::new());
        Group { id, state, term: 1, queue: VecDeque::new(), memory: Memory::default() }
    }

    /// An operator deletes `topic` and creates it again at once, with a new topic id: two
    /// entries, answered to nobody, lost with their leader like any other.
    pub fn recreate_topic(&mut self, topic: &str, topic_id: [u8; 16]) {
        let delete = Op::DeleteTopics(DeleteTopicsOp { names: vec![topic.to_string()] });
        self.propose(Action::Op(delete), Reply::None);
        self.create_topic(topic, topic_id);
    }

    pub fn create_topic(&mut self, topic: &str, topic_id: [u8; 16]) {
        let topics = vec![new_topic(topic, topic_id)];
        self.propose(Action::Op(Op::CreateTopics(CreateTopicsOp { topics })), Reply::None);
    }

    pub fn propose(&mut self, action: Action, reply: Reply) {
        self.queue.push_back(Proposal { action, reply, term: self.term });
    }

    /// A new leader: uncommitted entries from `keep` on are lost, and so is the old leader's memory.
    pub fn change_leader(&mut self, keep: usize) {
        self.term += 1;
        self.queue.truncate(keep);
        self.memory = Memory::default();
    }

    /// Commits and applies the oldest proposal: stamped now, applied op by op.
    pub fn commit_next(&mut self, now: i64) -> Option<(Proposal, Outcome, Vec<Effect>)> {
        let mut proposal = self.queue.pop_front()?;
        let stamp = LeaderStamp { now_ms: now, term: self.term };
        let mut effects = Vec::new();
        let outcome = match &mut proposal.action {
            Action::Op(op) => {
                if let Op::Produce(produce) = op {
                    self.stamp_offsets(produce, None);
                }
                Outcome::Op(apply_op(&mut self.state, &stamp, op, &mut effects))
            }
            Action::X(op) => {
                if let XOp::Produce(produce) = op {
                    self.stamp_offsets(&mut produce.produce, produce.prior);
                }
                Outcome::X(apply_logged(&mut self.state, &stamp, op, &mut effects))
            }
        };
        Some((proposal, outcome, effects))
    }

    /// The leader's stamp: each batch at its partition's log end as applied so far. A prior
    /// decision in the same op writes its markers first, so their offsets are added.
    fn stamp_offsets(&self, produce: &mut ProduceOp, prior: Option<Decision>) {
        for append in &mut produce.partitions {
            let Some(partition) = self.state.partition(&append.topic, append.partition) else { continue };
            let markers_first = self.marker_ahead(prior, &append.topic, append.partition);
            let mut next = partition.log_end_offset + markers_first;
            for batch in &mut append.batches {
                let stamp = BatchStamp {
                    base_offset: next,
                    partition_leader_epoch: self.term,
                    log_append_time_ms: None,
                };
                *batch = stamp_batch(batch, stamp);
                let header = kafka_compat::batch::parse_header(batch).expect("a valid batch");
                next = header.last_offset() + 1;
            }
        }
    }

    /// 1 if applying `prior` first writes a marker on the partition: its instance is open
    /// here with data on it, and not fenced yet.
    fn marker_ahead(&self, prior: Option<Decision>, topic: &str, partition: i32) -> i64 {
        let Some(prior) = prior else { return 0 };
        let Some(remote) = self.state.xgroup.remote.get(&prior.instance.producer_id) else { return 0 };
        let open = remote.open.as_ref().filter(|o| o.instance == prior.instance);
        let fenced = remote.fence.is_some_and(|f| prior.instance <= f);
        i64::from(!fenced && open.is_some_and(|o| o.partitions.contains_key(&(topic.to_string(), partition))))
    }
}

/// Applies `op` as a replica applies it from the log: wrapped in its `Op` (level 7's
/// `CrossGroup`), through bincode and back, then the state machine's dispatch.
fn apply_logged(
    state: &mut BrokerState,
    stamp: &LeaderStamp,
    op: &XOp,
    effects: &mut Vec<Effect>,
) -> XResult {
    let logged = bincode::serialize(&Op::CrossGroup(Box::new(op.clone()))).expect("an op serializes");
    let op: Op = bincode::deserialize(&logged).expect("an op read back from the log");
    match apply_op(state, stamp, &op, effects) {
        OpResult::CrossGroup(result) => result,
        other => panic!("a cross-group op answered {other:?}"),
    }
}

//! What each group's leader does with a message (SCALING.md §3): a client's requests become
//! entries; a participant asks the coordinator to join a write to its transaction; the
//! coordinator registers participants and answers; decisions travel to participants and
//! their confirmations back; a participant pulls the outcome of an instance it holds too long.

use onelog_state::command::{
    EndTxnOp, InitTxnProducerOp, OffsetCommitEntry, Op, OpResult, PartitionAppend, ProduceOp,
    TxnOffsetCommitOp,
};
use onelog_state::txns::{ProducerIdEpoch, TxnError};
use onelog_state::xgroup::coordinator::{self, Resolution};
use onelog_state::xgroup::ops::{XOp, XProduceOp, XTxnOffsetCommitOp};
use onelog_state::xgroup::{Decision, GroupId, Instance};

use crate::checks::{coordinator_of, Check};
use crate::net::{Msg, Write};
use crate::sim::{Bug, World};
use crate::world::{Action, Awaiting, Reply};

impl World {
    pub(crate) fn deliver(&mut self, to: GroupId, msg: Msg) -> Check {
        match msg {
            Msg::Produce(write) => self.on_produce(to, write),
            Msg::AddPartitionsToTxn { client, attempt, producer, partitions } => {
                let tid = self.clients[client].transactional_id.clone();
                let current =
                    self.groups[to as usize].state.txns.by_id.get(&tid).map(|m| m.check_epoch(producer));
                let added = current == Some(Ok(()));
                if added {
                    let now = self.now;
                    self.group(to).memory.adds.add_partitions(
                        &tid,
                        producer,
                        partitions.iter().cloned(),
                        now,
                    );
                }
                let out = self.clients[client].partitions_added(attempt, self.now, added);
                self.sent_by_client(out);
            }
            Msg::InitProducerId { client, attempt, expected, timeout_ms } => {
                let transactional_id = self.clients[client].transactional_id.clone();
                let op = InitTxnProducerOp { transactional_id, timeout_ms, expected };
                self.group(to)
                    .propose(Action::Op(Op::InitTxnProducer(op)), Reply::Client { client, attempt });
            }
            Msg::EndTxn { client, attempt, producer, commit, v2 } => {
                let transactional_id = self.clients[client].transactional_id.clone();
                if !v2 && self.ends_added_only(to, &transactional_id, producer, commit) {
                    self.stats.added_only_ends += 1;
                    return self.client_answered(client, attempt, &OpResult::Txn(Ok(producer)));
                }
                let op = EndTxnOp { transactional_id, producer, txn_commit: commit, bump_epoch: v2 };
                self.group(to).propose(Action::Op(Op::EndTxn(op)), Reply::Client { client, attempt });
            }
            Msg::JoinTxn { from, write, open_here } => self.on_join(to, from, write, open_here),
            Msg::Joined { write, answer } => {
                if !self.group(to).memory.joining.remove(&write.id) {
                    self.stats.stale_answers += 1;
                    return Ok(());
                }
                match answer {
                    Ok((joined, registered)) => self.on_joined(to, write, joined, registered),
                    Err(error) => self.write_failed(&write, &error),
                }
            }
            Msg::Registered { instance, result } => self.on_registered(to, instance, result),
            Msg::Decide { coordinator, decisions } => {
                self.stats.decisions_sent += decisions.len() as u64;
                let op = XOp::Decisions { coordinator, decisions };
                self.group(to).propose(Action::X(op), Reply::Decisions { coordinator });
            }
            Msg::Confirm { from, instances } => self.on_confirm(to, from, instances),
            Msg::Resolve { from, instance } => self.on_resolve(to, from, instance),
        }
        Ok(())
    }

    /// The broker's `TxnCoordinator::ends_added_only`: a v1 transaction that only added (the
    /// log shows the producer's previous transaction ended) ends in the leader's memory, and a
    /// retry of that end gets the same answer.
    fn ends_added_only(&mut self, g: GroupId, tid: &str, producer: ProducerIdEpoch, commit: bool) -> bool {
        let ended = self.groups[g as usize].state.txns.ended_at(tid, producer);
        let ended = ended || self.bug == Bug::AddedOnlyEndIgnoresLog;
        ended && self.group(g).memory.adds.end_added_only(tid, producer, commit)
    }

    /// A transactional write: in the coordinator's own group it is today's write; elsewhere
    /// the leader first asks the coordinator which instance it belongs to.
    fn on_produce(&mut self, to: GroupId, write: Write) {
        let coordinator = coordinator_of(write.producer.producer_id);
        if coordinator == to {
            if !self.admit(to, &write) {
                return self.write_failed(&write, &TxnError::InvalidState("partition not added".into()));
            }
            let op = match self.offsets_op(&write) {
                Some(commit) => Op::TxnOffsetCommit(commit),
                None => Op::Produce(produce_op(&write)),
            };
            self.group(to).propose(Action::Op(op), Reply::LocalWrite { write: write.id });
            return;
        }
        let open_here = self.groups[to as usize].state.xgroup.open_instance(write.producer.producer_id);
        self.group(to).memory.joining.insert(write.id);
        self.send(coordinator, Msg::JoinTxn { from: to, write, open_here });
    }

    /// C: JoinTxn, answered from applied state; a registration proposed unless applied.
    fn on_join(&mut self, to: GroupId, from: GroupId, write: Write, open_here: Option<Instance>) {
        let state = &self.groups[to as usize].state;
        let mut answer = coordinator::join(state, write.producer, from, open_here).map(|joined| {
            let listed = state.xgroup.coordinated.get(&joined.instance.producer_id);
            let registered = listed.is_some_and(|c| c.participants.contains(&from));
            (joined, registered)
        });
        if answer.is_ok() && !self.admit(to, &write) {
            answer = Err(TxnError::InvalidState("partition not added".into()));
        }
        if let Ok((joined, false)) = &answer {
            let op = XOp::Register { instance: joined.instance, group: from };
            self.group(to)
                .propose(Action::X(op), Reply::Register { participant: from, instance: joined.instance });
        }
        if answer.as_ref().is_ok_and(|(joined, _)| joined.prior.is_some()) {
            self.stats.priors += 1;
        }
        self.send(from, Msg::Joined { write, answer });
    }

    /// P: the write, tagged with its instance, behind the decision of the instance P holds.
    fn on_joined(&mut self, to: GroupId, write: Write, joined: coordinator::Joined, registered: bool) {
        let group = self.group(to);
        let registered = registered || group.memory.registered.contains(&joined.instance);
        let awaiting = Awaiting { instance: joined.instance, applied: false, registered };
        group.memory.awaiting.insert(write.id, awaiting);
        let (coordinator, instance, prior) =
            (coordinator_of(write.producer.producer_id), joined.instance, joined.prior);
        let op = match self.offsets_op(&write) {
            Some(commit) => XOp::TxnOffsetCommit(XTxnOffsetCommitOp { coordinator, instance, prior, commit }),
            None => XOp::Produce(XProduceOp { coordinator, instance, prior, produce: produce_op(&write) }),
        };
        self.group(to).propose(Action::X(op), Reply::RemoteWrite { write: write.id });
    }

    fn on_registered(
        &mut self,
        to: GroupId,
        instance: Instance,
        result: Result<(), onelog_state::txns::TxnError>,
    ) {
        let memory = &mut self.group(to).memory;
        let waiting: Vec<_> =
            memory.awaiting.iter().filter(|(_, a)| a.instance == instance).map(|(id, _)| *id).collect();
        match result {
            Ok(()) => {
                memory.registered.insert(instance);
                for id in &waiting {
                    memory.awaiting.get_mut(id).expect("listed").registered = true;
                }
                waiting.into_iter().for_each(|id| self.maybe_ack(to, id));
            }
            Err(error) => {
                for id in waiting {
                    self.group(to).memory.awaiting.remove(&id);
                    let write = self.truth.writes[&id].write.clone();
                    self.write_failed(&write, &error);
                }
            }
        }
    }

    /// C: participants applied decisions.
    fn on_confirm(&mut self, to: GroupId, from: GroupId, instances: Vec<Instance>) {
        let mut confirmations: Vec<(Instance, GroupId)> = instances.iter().map(|i| (*i, from)).collect();
        if self.bug == Bug::ForgetAfterOneConfirmation {
            let undelivered = &self.groups[to as usize].state.xgroup.undelivered;
            for instance in &instances {
                let others = undelivered.get(instance).map(|u| u.waiting.clone()).unwrap_or_default();
                confirmations.extend(others.into_iter().map(|g| (*instance, g)));
            }
        }
        self.group(to).propose(Action::X(XOp::Delivered { confirmations }), Reply::None);
    }

    /// C: the pull (SCALING.md §3.3).
    fn on_resolve(&mut self, to: GroupId, from: GroupId, instance: Instance) {
        match coordinator::resolve(&self.groups[to as usize].state, instance, from) {
            Resolution::Open => {
                let op = XOp::Register { instance, group: from };
                self.group(to).propose(Action::X(op), Reply::Register { participant: from, instance });
            }
            Resolution::Decided(commit) => {
                self.stats.pulled[usize::from(commit)] += 1;
                let decisions = vec![Decision { instance, commit }];
                self.send(from, Msg::Decide { coordinator: to, decisions });
            }
        }
    }

    /// C's leader, KIP-890 part 1: a v2 write adds its partition; a v1 write must be to a
    /// partition its transaction added (the broker's `TxnCoordinator::admit_write`).
    /// A write that commits offsets, as the client's TxnOffsetCommit (a simple consumer's:
    /// no generation, no member).
    fn offsets_op(&self, write: &Write) -> Option<TxnOffsetCommitOp> {
        let group_id = write.offsets.clone()?;
        let commit = OffsetCommitEntry {
            topic: write.topic.clone(),
            partition: write.partition,
            offset: write.id as i64,
            leader_epoch: -1,
            metadata: None,
        };
        Some(TxnOffsetCommitOp {
            transactional_id: self.clients[write.client].transactional_id.clone(),
            producer: write.producer,
            group_id,
            generation_id: -1,
            member_id: String::new(),
            commits: vec![commit],
        })
    }

    fn admit(&mut self, coordinator: GroupId, write: &Write) -> bool {
        let tid = self.clients[write.client].transactional_id.clone();
        let key = (write.topic.clone(), write.partition);
        let now = self.now;
        let adds = &mut self.group(coordinator).memory.adds;
        // AddOffsetsToTxn is not modelled: offsets are admitted as a v2 client's would be.
        if write.v2 || write.offsets.is_some() {
            adds.add_partitions(&tid, write.producer, [key], now);
            return true;
        }
        adds.admit_partition(&tid, write.producer, key, now)
    }

    /// P's leader answers a write once it is applied here and registered in C.
    pub(crate) fn maybe_ack(&mut self, group: GroupId, write: u64) {
        let early = self.bug == Bug::AckBeforeRegistration;
        let memory = &mut self.group(group).memory;
        let Some(awaiting) = memory.awaiting.get(&write) else { return };
        let registered = awaiting.registered || early;
        if !(awaiting.applied && registered) {
            return;
        }
        memory.awaiting.remove(&write);
        self.ack(write);
    }

    /// Leader duties of group `g`: C resends undelivered decisions, P pulls old open
    /// instances, C aborts transactions past their timeout.
    pub(crate) fn duties(&mut self, g: GroupId) {
        let now = self.now;
        let mut by_group: std::collections::BTreeMap<GroupId, Vec<Decision>> = Default::default();
        for (participant, decision) in self.groups[g as usize].state.xgroup.deliveries() {
            by_group.entry(participant).or_default().push(decision);
        }
        for (participant, decisions) in by_group {
            self.stats.resends += 1;
            self.send(participant, Msg::Decide { coordinator: g, decisions });
        }
        for (coordinator, instance) in self.groups[g as usize].state.xgroup.open_since(now, PULL_AGE) {
            self.stats.pulls += 1;
            self.send(coordinator, Msg::Resolve { from: g, instance });
        }
        self.create_missing_topics(g);
        for timed_out in self.groups[g as usize].state.txns.timed_out(now) {
            self.stats.timeouts += 1;
            let op = onelog_state::command::AbortTxnsOp {
                reason: onelog_state::txns::BrokerAbort::Timeout,
                transactions: vec![timed_out],
            };
            self.group(g).propose(Action::Op(Op::AbortTxns(op)), Reply::None);
        }
    }
}

/// Steps an instance stays open in a participant before the participant asks about it.
const PULL_AGE: i64 = 80;

fn produce_op(write: &Write) -> ProduceOp {
    let producer = Some((write.producer.producer_id, write.producer.producer_epoch, write.first_seq));
    let batch = crate::batches::encode_batch(write.records, producer, true, 1_700_000_000_000, write.id);
    ProduceOp {
        partitions: vec![PartitionAppend {
            topic: write.topic.clone(),
            partition: write.partition,
            batches: vec![batch],
        }],
    }
}

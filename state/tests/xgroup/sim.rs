//! One seeded run: the world (groups, network, clients, what is known to be true), its step,
//! applying committed entries (their answers: `answers`), the faults, and the quiet phase at
//! the end that must leave nothing hanging (check 3).

use std::collections::BTreeSet;

use onelog_state::command::OpResult;
use onelog_state::txns::TxnState;
use onelog_state::xgroup::coordinator;
use onelog_state::xgroup::ops::{XOp, XResult};
use onelog_state::xgroup::{GroupId, Instance};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::checks::{Check, Truth, WriteInfo};
use crate::clients::Client;
use crate::net::{Msg, Net, WriteId};
use crate::stats::Stats;
use crate::world::{topics_of, Action, Group, Outcome, Proposal};

/// A bug put back on purpose, to show the checks catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bug {
    None,
    /// C forgets a decision at its first participant's confirmation: the others' pulls then
    /// hear "abort" for a committed transaction (a decision applied in one group only).
    ForgetAfterOneConfirmation,
    /// P applies decisions but keeps no fence: a late write of a decided instance applies.
    NoFenceInParticipant,
    /// P answers a write once applied, without waiting for its registration in C.
    AckBeforeRegistration,
    /// P stores a TxnOffsetCommit's offsets at once, not at the decision.
    OffsetsBeforeDecision,
    /// A v1 EndTxn ends a transaction in the leader's memory whenever that memory holds its
    /// adds, without asking whether the log shows it ended (so whether it wrote anything).
    AddedOnlyEndIgnoresLog,
    /// Deleting a topic leaves an open instance's pending offsets of it, which its commit then
    /// stores for the topic created again under the same name (a review finding, fixed).
    KeepOffsetsOfDeletedTopic,
}

pub(crate) const GROUPS: u32 = 3;
const CLIENTS: usize = 9;
/// Every how many steps a group's leader runs its duties.
const DUTY_EVERY: i64 = 25;
/// Steps the quiet phase may take before something is declared hanging.
const QUIET_STEPS: i64 = 6_000;

pub(crate) struct World {
    pub rng: StdRng,
    pub now: i64,
    pub groups: Vec<Group>,
    pub net: Net,
    pub clients: Vec<Client>,
    pub truth: Truth,
    pub stats: Stats,
    pub bug: Bug,
    pub faults: bool,
    next_write: WriteId,
    /// Topics deleted and created again so far (each gets a new topic id).
    incarnations: u32,
}

impl World {
    pub fn new(seed: u64, bug: Bug) -> World {
        let mut rng = StdRng::seed_from_u64(seed);
        let groups = (0..GROUPS).map(|g| Group::new(g, GROUPS)).collect();
        let clients = (0..CLIENTS).map(|i| Client::new(i, GROUPS, rng.gen_bool(0.5))).collect();
        World {
            rng,
            now: 0,
            groups,
            net: Net::default(),
            clients,
            truth: Truth::default(),
            stats: Stats::default(),
            bug,
            faults: true,
            next_write: 0,
            incarnations: 0,
        }
    }

    pub(crate) fn group(&mut self, g: GroupId) -> &mut Group {
        &mut self.groups[g as usize]
    }

    pub(crate) fn send(&mut self, to: GroupId, msg: Msg) {
        self.net.send(&mut self.rng, self.now, self.faults, to, msg);
    }

    /// One step: messages due, clients, one entry per group at most, duties, faults.
    pub fn step(&mut self, quiescing: bool) -> Check {
        self.now += 1;
        for (to, msg) in self.net.due(self.now) {
            self.deliver(to, msg)?;
        }
        for c in 0..self.clients.len() {
            if self.faults && self.rng.gen_bool(0.0005) {
                self.stats.client_crashes += 1;
                let down =
                    if self.rng.gen_bool(0.5) { 2 * i64::from(crate::clients::TXN_TIMEOUT) } else { 1 };
                self.clients[c].crash(self.now + down);
            }
            let out = self.clients[c].step(&mut self.rng, self.now, GROUPS, &mut self.next_write, quiescing);
            self.sent_by_client(out);
        }
        for g in 0..GROUPS {
            if self.rng.gen_bool(0.6) {
                self.commit(g)?;
            }
            if self.now % DUTY_EVERY == i64::from(g) {
                self.duties(g);
            }
        }
        if self.faults {
            self.faults_now();
        }
        if self.now % 250 == 0 {
            self.truth.visibility(&self.groups, false)?;
        }
        Ok(())
    }

    pub(crate) fn sent_by_client(&mut self, out: Vec<(GroupId, Msg)>) {
        for (to, msg) in out {
            if let Msg::Produce(write) = &msg {
                let info = WriteInfo {
                    write: write.clone(),
                    group: to,
                    acked: false,
                    applied: None,
                    deleted: false,
                };
                self.truth.writes.insert(write.id, info);
                self.stats.writes += 1;
            }
            self.send(to, msg);
        }
    }

    fn faults_now(&mut self) {
        for g in 0..GROUPS {
            if self.rng.gen_bool(0.004) {
                self.stats.leader_changes += 1;
                self.change_leader(g);
            }
        }
        if self.rng.gen_bool(0.0003) {
            self.stats.crashes += 1;
            (0..GROUPS).for_each(|g| self.change_leader(g));
        }
        if self.rng.gen_bool(0.001) {
            let g = self.rng.gen_range(0..GROUPS);
            let topic = topics_of(g)[self.rng.gen_range(0..2)].clone();
            let topic_id = self.next_topic_id(g);
            self.group(g).recreate_topic(&topic, topic_id);
        }
    }

    /// A topic id no incarnation of a topic of `g` had.
    fn next_topic_id(&mut self, g: GroupId) -> [u8; 16] {
        self.incarnations += 1;
        let mut id = [0u8; 16];
        id[0] = 0x80;
        id[1] = g as u8;
        id[12..].copy_from_slice(&self.incarnations.to_be_bytes());
        id
    }

    /// The operator's re-creation, proposed again by the leader's duty when its entry was lost
    /// with a leader after the deletion applied: a group's topics are always there in the end.
    pub(crate) fn create_missing_topics(&mut self, g: GroupId) {
        for topic in topics_of(g) {
            let group = &self.groups[g as usize];
            let queued = group.queue.iter().any(|p| p.creates(&topic));
            if group.state.topics.contains_key(&topic) || queued {
                continue;
            }
            let topic_id = self.next_topic_id(g);
            self.group(g).create_topic(&topic, topic_id);
        }
    }

    /// A new leader of `g`: a random suffix of the uncommitted entries is lost; the new
    /// leader resends the undelivered decisions at once.
    fn change_leader(&mut self, g: GroupId) {
        let keep = self.rng.gen_range(0..=self.groups[g as usize].queue.len());
        self.stats.entries_lost += (self.groups[g as usize].queue.len() - keep) as u64;
        self.group(g).change_leader(keep);
        self.duties(g);
    }

    /// Commits the next entry of `g`, checks what it did, and hands its answer on.
    fn commit(&mut self, g: GroupId) -> Check {
        let Some(head) = self.groups[g as usize].queue.front() else { return Ok(()) };
        let before = self.before_apply(g, head);
        let deleting = self.deleting(g, &head.action);
        let kept = (deleting.is_some() && self.bug == Bug::KeepOffsetsOfDeletedTopic)
            .then(|| self.groups[g as usize].state.xgroup.remote.clone());
        let (proposal, outcome, effects) = self.groups[g as usize].commit_next(self.now).expect("a head");
        if let Some(before) = kept {
            put_back_offsets(&mut self.groups[g as usize].state.xgroup.remote, before);
        }
        self.stats.entries += 1;
        let deleted = deleting.filter(|_| matches!(&outcome, Outcome::Op(OpResult::Items(i)) if i[0].0 == 0));
        if let Some((topic, open)) = deleted {
            self.stats.topic_deletions += 1;
            self.stats.deleted_under_open[0] += open[0];
            self.stats.deleted_under_open[1] += open[1];
            self.truth.topic_deleted(g, &topic);
        }
        self.after_apply(g, &proposal, &outcome, before)?;
        self.truth.effects(g, &self.groups[g as usize].state, &effects)?;
        if self.bug == Bug::NoFenceInParticipant {
            self.groups[g as usize].state.xgroup.remote.values_mut().for_each(|r| r.fence = None);
        }
        if proposal.term == self.groups[g as usize].term {
            self.forget_added(g, &proposal, &outcome);
            self.answer(g, &proposal, &outcome)?;
        }
        Ok(())
    }

    /// The topic an operator's DeleteTopics at the head of `g`'s log deletes, counting the
    /// transactions it finds open on it (their data goes, their markers skip it).
    fn deleting(&self, g: GroupId, head: &Action) -> Option<(String, [u64; 2])> {
        let Action::Op(onelog_state::command::Op::DeleteTopics(op)) = head else { return None };
        let topic = op.names[0].clone();
        let state = &self.groups[g as usize].state;
        let on_topic = |t: &str| t == topic;
        let remote = state.xgroup.remote.values().filter_map(|r| r.open.as_ref());
        let remote = remote.filter(|o| o.partitions.keys().any(|(t, _)| on_topic(t))).count();
        let local =
            state.txns.by_id.values().filter(|m| m.partitions.keys().any(|(t, _)| on_topic(t))).count();
        Some((topic, [local as u64, remote as u64]))
    }

    /// What the checks need from before an entry applies: for a coordinator's op that may
    /// end a transaction, its transactional id and the producer's instance and state.
    fn before_apply(&self, g: GroupId, head: &Proposal) -> Option<(String, Instance, TxnState)> {
        use onelog_state::command::Op;
        let state = &self.groups[g as usize].state;
        let transactional_id = match &head.action {
            Action::Op(Op::InitTxnProducer(op)) => &op.transactional_id,
            Action::Op(Op::EndTxn(op)) => &op.transactional_id,
            Action::Op(Op::AbortTxns(op)) => &op.transactions.first()?.0,
            _ => return None,
        };
        let meta = state.txns.by_id.get(transactional_id)?;
        let (instance, txn_state) = coordinator::current(state, meta.producer_id)?;
        Some((transactional_id.clone(), instance, txn_state))
    }

    /// Records what the entry decided: in a participant, the decisions it applied (check 4's
    /// fence); in the coordinator, a transaction it ended (checks 5 and 2).
    fn after_apply(
        &mut self,
        g: GroupId,
        proposal: &Proposal,
        outcome: &Outcome,
        before: Option<(String, Instance, TxnState)>,
    ) -> Check {
        if let (Action::X(XOp::Decisions { decisions, .. }), Outcome::X(XResult::Decisions(applied))) =
            (&proposal.action, outcome)
        {
            for (decision, applied) in decisions.iter().zip(applied) {
                if applied.confirmable() {
                    self.truth.fenced(g, decision.instance);
                }
            }
        }
        if let Action::X(XOp::Produce(op)) = &proposal.action {
            if let Some(prior) = op.prior {
                self.truth.fenced(g, prior.instance);
            }
        }
        let Some((transactional_id, instance, TxnState::Ongoing)) = before else { return Ok(()) };
        let state = &self.groups[g as usize].state;
        let commit = match state.txns.by_id.get(&transactional_id).map(|m| m.state) {
            Some(TxnState::Ongoing) => return Ok(()),
            Some(TxnState::CompleteCommit) => true,
            _ => false,
        };
        let listed: BTreeSet<GroupId> =
            state.xgroup.undelivered.get(&instance).map(|u| u.waiting.clone()).unwrap_or_default();
        if !listed.is_empty() {
            self.stats.cross_group_decisions[usize::from(commit)] += 1;
        }
        self.truth.decided(instance, commit, listed)
    }

    /// As the broker's coordinator does once an InitProducerId or EndTxn succeeded, or its
    /// broker abort applied: what the transaction added is forgotten.
    fn forget_added(&mut self, g: GroupId, proposal: &Proposal, outcome: &Outcome) {
        use onelog_state::command::Op;
        let ok = matches!(outcome, Outcome::Op(OpResult::Txn(Ok(_))));
        let tid = match &proposal.action {
            Action::Op(Op::InitTxnProducer(op)) if ok => &op.transactional_id,
            Action::Op(Op::EndTxn(op)) if ok => &op.transactional_id,
            Action::Op(Op::AbortTxns(op)) => &op.transactions[0].0,
            _ => return,
        };
        let tid = tid.clone();
        self.group(g).memory.adds.clear(&tid);
    }

    /// Check 3: faults off, no new transactions; everything must settle.
    pub fn quiesce(&mut self) -> Check {
        self.faults = false;
        let until = self.now + QUIET_STEPS;
        while self.now < until {
            self.step(true)?;
            if self.settled() {
                return self.truth.visibility(&self.groups, true);
            }
        }
        Err(format!("check 3: not settled after {QUIET_STEPS} quiet steps: {}", self.hanging()))
    }

    fn settled(&self) -> bool {
        self.net.is_empty()
            && self.groups.iter().all(|g| {
                g.queue.is_empty()
                    && g.state.xgroup.undelivered.is_empty()
                    && g.state.xgroup.remote.values().all(|r| r.open.is_none())
                    && g.state.txns.by_id.values().all(|m| m.state != TxnState::Ongoing)
            })
            && self.clients.iter().all(|c| c.txn.is_none())
    }

    fn hanging(&self) -> String {
        let mut parts = Vec::new();
        for g in &self.groups {
            for (instance, u) in &g.state.xgroup.undelivered {
                parts.push(format!("group {} has {instance} undelivered to {:?}", g.id, u.waiting));
            }
            for (pid, r) in &g.state.xgroup.remote {
                if let Some(open) = &r.open {
                    parts.push(format!("group {} holds {} of producer {pid} open", g.id, open.instance));
                }
            }
        }
        parts.join("; ")
    }
}

/// `Bug::KeepOffsetsOfDeletedTopic`: the pending offsets open instances held before the
/// deletion, given back to those still open.
fn put_back_offsets(
    remote: &mut std::collections::BTreeMap<i64, onelog_state::xgroup::RemoteProducer>,
    before: std::collections::BTreeMap<i64, onelog_state::xgroup::RemoteProducer>,
) {
    for (pid, was) in before {
        let now = remote.get_mut(&pid).and_then(|r| r.open.as_mut());
        if let (Some(now), Some(was)) = (now, was.open) {
            if now.instance == was.instance {
                now.offsets = was.offsets;
            }
        }
    }
}

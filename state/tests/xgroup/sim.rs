//! One seeded run: the world (groups, network, clients, what is known to be true), its step,
//! applying committed entries and handing their answers on, the faults, and the quiet phase
//! at the end that must leave nothing hanging (check 3).

use std::collections::BTreeSet;

use onelog_state::command::OpResult;
use onelog_state::txns::{TxnError, TxnState};
use onelog_state::xgroup::coordinator;
use onelog_state::xgroup::ops::{XOp, XResult};
use onelog_state::xgroup::{GroupId, Instance};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::checks::{Check, Truth, WriteInfo};
use crate::clients::Client;
use crate::net::{Msg, Net, Write, WriteId};
use crate::stats::Stats;
use crate::world::{Action, Group, Outcome, Proposal, Reply};

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
            self.deliver(to, msg);
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
            self.truth.visibility(&self.groups)?;
        }
        Ok(())
    }

    fn sent_by_client(&mut self, out: Vec<(GroupId, Msg)>) {
        for (to, msg) in out {
            if let Msg::Produce(write) = &msg {
                let info = WriteInfo { write: write.clone(), group: to, acked: false, applied: None };
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
        let (proposal, outcome, effects) = self.groups[g as usize].commit_next(self.now).expect("a head");
        self.stats.entries += 1;
        self.after_apply(g, &proposal, &outcome, before)?;
        self.truth.effects(g, &self.groups[g as usize].state, &effects)?;
        if self.bug == Bug::NoFenceInParticipant {
            self.groups[g as usize].state.xgroup.remote.values_mut().for_each(|r| r.fence = None);
        }
        if proposal.term == self.groups[g as usize].term {
            self.answer(g, &proposal, &outcome)?;
        }
        Ok(())
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

    /// Hands an applied entry's answer to whoever waits for it.
    fn answer(&mut self, g: GroupId, proposal: &Proposal, outcome: &Outcome) -> Check {
        match (&proposal.reply, outcome) {
            (Reply::None, _) => {}
            (Reply::Client { client, attempt }, Outcome::Op(result)) => {
                self.client_answered(*client, *attempt, result)?
            }
            (Reply::LocalWrite { write }, Outcome::Op(OpResult::Produced(result))) => {
                let write = self.truth.writes[write].write.clone();
                match result {
                    Ok(produced) => {
                        let instance = self.local_instance(g, &write, produced[0].base_offset);
                        self.truth.write_applied(write.id, produced[0].base_offset, instance, false)?;
                        self.ack(write.id);
                    }
                    Err(refusal) => self.write_refused(&write, refusal.error_code),
                }
            }
            (Reply::RemoteWrite { write }, Outcome::X(XResult::Produced(result))) => {
                let Action::X(XOp::Produce(op)) = &proposal.action else { unreachable!() };
                let write = self.truth.writes[write].write.clone();
                match result {
                    Ok(produced) => {
                        self.truth.write_applied(write.id, produced[0].base_offset, op.instance, true)?;
                        if let Some(awaiting) = self.group(g).memory.awaiting.get_mut(&write.id) {
                            awaiting.applied = true;
                        }
                        self.maybe_ack(g, write.id);
                    }
                    Err(refusal) => {
                        self.group(g).memory.awaiting.remove(&write.id);
                        self.write_refused(&write, refusal.error_code);
                    }
                }
            }
            (Reply::Register { participant, instance }, Outcome::X(XResult::Registered(result))) => {
                let msg = Msg::Registered { instance: *instance, result: result.clone() };
                self.send(*participant, msg);
            }
            (Reply::Decisions { coordinator }, Outcome::X(XResult::Decisions(applied))) => {
                let Action::X(XOp::Decisions { decisions, .. }) = &proposal.action else { unreachable!() };
                let instances: Vec<Instance> = decisions
                    .iter()
                    .zip(applied)
                    .filter(|(_, a)| a.confirmable())
                    .map(|(d, _)| d.instance)
                    .collect();
                self.stats.deferred += applied.iter().filter(|a| !a.confirmable()).count() as u64;
                if !instances.is_empty() {
                    self.send(*coordinator, Msg::Confirm { from: g, instances });
                }
            }
            (reply, outcome) => panic!("{reply:?} answered with {}", describe(outcome)),
        }
        Ok(())
    }

    /// The instance a write in its coordinator's own group joined: C's current one, which the
    /// write's apply just opened or extended.
    fn local_instance(&self, g: GroupId, write: &Write, _offset: i64) -> Instance {
        let state = &self.groups[g as usize].state;
        coordinator::current(state, write.producer.producer_id).expect("applied a write of it").0
    }

    fn client_answered(&mut self, client: usize, attempt: u64, result: &OpResult) -> Check {
        let Some((txn, commit)) = self.clients[client].answered(attempt, result) else { return Ok(()) };
        self.stats.ended[usize::from(commit)] += 1;
        // Check 5: the decision the client was told is its transaction's.
        for write in &txn.acked {
            let Some((_, instance)) = self.truth.writes[write].applied else { continue };
            let decided = self.truth.decisions.get(&instance).copied();
            if decided != Some(commit) {
                return Err(format!(
                    "check 5: client {client} told {commit} for its transaction, but write {write} of {instance} is decided {decided:?}"
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn ack(&mut self, write: WriteId) {
        let info = self.truth.writes.get_mut(&write).expect("recorded");
        info.acked = true;
        self.stats.acked += 1;
        let write = info.write.clone();
        if write.attempt == self.clients[write.client].attempt || self.clients[write.client].txn.is_some() {
            self.clients[write.client].acked(&write);
        }
    }

    fn write_refused(&mut self, write: &Write, error_code: i16) {
        self.stats.refused += 1;
        let fenced = error_code == kafka_compat::error_code::INVALID_PRODUCER_EPOCH
            || error_code == kafka_compat::error_code::PRODUCER_FENCED;
        let out = self.clients[write.client].write_failed(write, self.now, fenced);
        self.sent_by_client(out);
    }

    pub(crate) fn write_failed(&mut self, write: &Write, error: &TxnError) {
        self.stats.refused += 1;
        let out = self.clients[write.client].write_failed(write, self.now, matches!(error, TxnError::Fenced));
        self.sent_by_client(out);
    }

    /// Check 3: faults off, no new transactions; everything must settle.
    pub fn quiesce(&mut self) -> Check {
        self.faults = false;
        let until = self.now + QUIET_STEPS;
        while self.now < until {
            self.step(true)?;
            if self.settled() {
                return self.truth.visibility(&self.groups);
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

fn describe(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Op(result) => format!("{result:?}"),
        Outcome::X(result) => format!("{result:?}"),
    }
}

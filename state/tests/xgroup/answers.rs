//! Handing an applied entry's answer on: to the client that waits for it (InitProducerId,
//! EndTxn, a write in the coordinator's own group), or to the participant's leader (a write
//! tagged with its instance, a registration, decisions to confirm), with what the checks
//! learn from it on the way.

use onelog_state::command::OpResult;
use onelog_state::txns::TxnError;
use onelog_state::xgroup::coordinator;
use onelog_state::xgroup::ops::{XOp, XResult};
use onelog_state::xgroup::{GroupId, Instance};

use crate::checks::Check;
use crate::net::{Msg, Write, WriteId};
use crate::sim::{Bug, World};
use crate::world::{Action, Outcome, Proposal, Reply};

impl World {
    /// Hands an applied entry's answer to whoever waits for it.
    pub(crate) fn answer(&mut self, g: GroupId, proposal: &Proposal, outcome: &Outcome) -> Check {
        match (&proposal.reply, outcome) {
            (Reply::None, _) => {}
            (Reply::Client { client, attempt }, Outcome::Op(result)) => {
                self.client_answered(*client, *attempt, result)?
            }
            (Reply::LocalWrite { write }, Outcome::Op(OpResult::Produced(result))) => {
                let write = self.truth.writes[write].write.clone();
                match result {
                    Ok(produced) => {
                        let instance = self.local_instance(g, &write);
                        self.truth.write_applied(write.id, produced[0].base_offset, instance, false)?;
                        self.ack(write.id);
                    }
                    Err(refusal) => self.write_refused(&write, refusal.error_code),
                }
            }
            (Reply::LocalWrite { write }, Outcome::Op(OpResult::TxnOffsets(result))) => {
                let write = self.truth.writes[write].write.clone();
                let instance = self.local_instance(g, &write);
                self.offsets_answered(g, &write, instance, result, false)?;
            }
            (Reply::RemoteWrite { write }, Outcome::X(XResult::TxnOffsets(result))) => {
                let Action::X(XOp::TxnOffsetCommit(op)) = &proposal.action else { unreachable!() };
                let write = self.truth.writes[write].write.clone();
                self.offsets_answered(g, &write, op.instance, result, true)?;
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

    /// A TxnOffsetCommit applied (or refused), in the coordinator's group or a participant.
    fn offsets_answered(
        &mut self,
        g: GroupId,
        write: &Write,
        instance: Instance,
        result: &Result<Vec<onelog_state::groups::CommitResult>, TxnError>,
        remote: bool,
    ) -> Check {
        match result {
            Ok(results) if results.iter().all(|(code, _)| *code == kafka_compat::error_code::NONE) => {
                self.truth.write_applied(write.id, -1, instance, remote)?;
                self.stats.offset_commits[usize::from(remote)] += 1;
                if remote && self.bug == Bug::OffsetsBeforeDecision {
                    let group_id = write.offsets.clone().expect("an offsets write");
                    let offset = onelog_state::groups::CommittedOffset {
                        offset: write.id as i64,
                        leader_epoch: -1,
                        metadata: String::new(),
                        commit_time_ms: self.now,
                    };
                    let offsets = [((write.topic.clone(), write.partition), offset)].into();
                    self.group(g).state.groups.store_txn_offsets(&group_id, offsets);
                }
                if !remote {
                    self.ack(write.id);
                    return Ok(());
                }
                if let Some(awaiting) = self.group(g).memory.awaiting.get_mut(&write.id) {
                    awaiting.applied = true;
                }
                self.maybe_ack(g, write.id);
            }
            // Its topic was deleted, and is not there again yet: the client aborts.
            Ok(results)
                if results
                    .iter()
                    .all(|(code, _)| *code == kafka_compat::error_code::UNKNOWN_TOPIC_OR_PARTITION) =>
            {
                self.group(g).memory.awaiting.remove(&write.id);
                self.write_failed(write, &TxnError::InvalidState("its topic was deleted".into()));
            }
            Ok(results) => panic!("a simple consumer's commit refused: {results:?}"),
            Err(error) => {
                self.group(g).memory.awaiting.remove(&write.id);
                self.write_failed(write, error);
            }
        }
        Ok(())
    }

    /// The instance a write in its coordinator's own group joined: C's current one, which the
    /// write's apply just opened or extended.
    fn local_instance(&self, g: GroupId, write: &Write) -> Instance {
        let state = &self.groups[g as usize].state;
        coordinator::current(state, write.producer.producer_id).expect("applied a write of it").0
    }

    pub(crate) fn client_answered(&mut self, client: usize, attempt: u64, result: &OpResult) -> Check {
        if attempt != self.clients[client].attempt {
            self.stats.late_requests += 1;
        }
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
}

fn describe(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Op(result) => format!("{result:?}"),
        Outcome::X(result) => format!("{result:?}"),
    }
}

//! The three replicas and the one thing they do: apply an entry and compare the results.
//!
//! `Cluster::apply` runs `apply_command` on every replica and requires equal responses,
//! `EffectsDigest`s and `state_digest`s; `Cluster::checkpoint` sends one replica's state
//! through bincode. Both are where a `Fault` (see `faults`) is injected into replica `FAULTY`.

use std::convert::Infallible;
use std::panic::{catch_unwind, AssertUnwindSafe};

use onelog_state::command::{Command, CommandResponse};
use onelog_state::digest::{state_digest, EffectsDigest};
use onelog_state::{apply_command, BrokerState, Effect};

use crate::faults::Fault;
use crate::report::{clip, describe_state_diff, panic_message};
use crate::storage::StorageModel;
use crate::{FAULTY, REPLICAS};

#[derive(Default)]
pub(crate) struct Replica {
    pub(crate) state: BrokerState,
    effects: EffectsDigest,
}

/// What the leader replica's apply of one entry returned.
pub(crate) struct Applied {
    pub(crate) response: CommandResponse,
    /// Its effects, one list per op.
    pub(crate) effects: Vec<Vec<Effect>>,
}

pub(crate) struct Cluster {
    pub(crate) replicas: Vec<Replica>,
    /// The partition files as the leader's effects describe them.
    pub(crate) storage: StorageModel,
    pub(crate) fault: Fault,
    pub(crate) fault_at: Option<u64>,
}

impl Cluster {
    pub(crate) fn new(fault: Fault) -> Self {
        Cluster {
            replicas: (0..REPLICAS).map(|_| Replica::default()).collect(),
            storage: StorageModel::default(),
            fault,
            fault_at: None,
        }
    }

    /// A checkpoint and restore of one replica: its state through bincode, as a snapshot.
    pub(crate) fn checkpoint(&mut self, replica: usize, step: u64) -> Result<(), String> {
        let lossy = replica == FAULTY && self.lossy_checkpoint_due(step);
        let state = &self.replicas[replica].state;
        let bytes = bincode::serialize(state).map_err(|e| format!("checkpoint of replica {replica}: {e}"))?;
        let mut restored: BrokerState =
            bincode::deserialize(&bytes).map_err(|e| format!("restore of replica {replica}: {e}"))?;
        if restored != *state {
            return Err(format!(
                "a checkpoint round trip changed replica {replica}'s state: {}",
                describe_state_diff(state, &restored)
            ));
        }
        if lossy {
            for producer in restored.producers.live.values_mut() {
                producer.topics.clear();
            }
            self.fault_at = Some(step);
        }
        self.replicas[replica].state = restored;
        Ok(())
    }

    /// Applies `command` on every replica and compares them.
    pub(crate) fn apply(&mut self, step: u64, leader: usize, command: &Command) -> Result<Applied, String> {
        let mut responses = Vec::with_capacity(REPLICAS);
        let mut leader_effects = Vec::new();
        let fault_due = self.fault_due(step);
        for (i, replica) in self.replicas.iter_mut().enumerate() {
            let faulty = i == FAULTY && fault_due;
            let skipped;
            let command = match self.fault {
                Fault::SkipOp { .. } if faulty => {
                    let mut shorter = command.clone();
                    shorter.ops.pop();
                    self.fault_at = Some(step);
                    skipped = shorter;
                    &skipped
                }
                _ => command,
            };
            let drop_one = faulty && matches!(self.fault, Fault::DropEffect { .. });
            let mut dropped = false;
            let mut per_op: Vec<Vec<Effect>> = Vec::with_capacity(command.ops.len());
            let digest = &mut replica.effects;
            let state = &mut replica.state;
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                apply_command(state, command, |_, effects: &[Effect]| {
                    for effect in effects {
                        if drop_one && !dropped {
                            dropped = true;
                            continue;
                        }
                        digest.add(effect);
                    }
                    per_op.push(effects.to_vec());
                    Ok::<(), Infallible>(())
                })
            }));
            let response = match outcome {
                Ok(Ok(response)) => response,
                Ok(Err(never)) => match never {},
                Err(panic) => {
                    return Err(format!("replica {i} panicked applying: {}", panic_message(&*panic)))
                }
            };
            if dropped {
                self.fault_at = Some(step);
            }
            if faulty && matches!(self.fault, Fault::MoveLogEnd { .. }) {
                if let Some(partition) =
                    replica.state.topics.values_mut().find_map(|t| t.partitions.first_mut())
                {
                    partition.log_end_offset += 1;
                    self.fault_at = Some(step);
                }
            }
            if i == leader {
                leader_effects = per_op;
            }
            responses.push(response);
        }
        let mut differences = Vec::new();
        let shown: Vec<String> = responses.iter().map(|r| format!("{r:?}")).collect();
        for (i, other) in shown.iter().enumerate().skip(1) {
            if *other != shown[0] {
                differences.push(format!(
                    "responses differ: replica 0 {} but replica {i} {}",
                    clip(&shown[0], 1500),
                    clip(other, 1500)
                ));
            }
        }
        for (i, replica) in self.replicas.iter().enumerate().skip(1) {
            if replica.effects != self.replicas[0].effects {
                differences.push(format!(
                    "effects digests differ: replica 0 {:?} but replica {i} {:?}",
                    self.replicas[0].effects, replica.effects
                ));
            }
        }
        let digests: Vec<u32> = self.replicas.iter().map(|r| state_digest(&r.state)).collect();
        for (i, digest) in digests.iter().enumerate().skip(1) {
            if *digest != digests[0] {
                differences.push(format!(
                    "state digests differ: replica 0 {:08x} but replica {i} {digest:08x}: {}",
                    digests[0],
                    describe_state_diff(&self.replicas[0].state, &self.replicas[i].state)
                ));
            }
        }
        if !differences.is_empty() {
            return Err(differences.join("\n"));
        }
        let response = responses.swap_remove(leader);
        if response.results.len() != command.ops.len() {
            return Err(format!("{} results for {} ops", response.results.len(), command.ops.len()));
        }
        self.storage.apply(command, &leader_effects)?;
        Ok(Applied { response, effects: leader_effects })
    }
}

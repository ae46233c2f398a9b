//! The coordinator group's answers to other groups' leaders (docs/SCALING.md §3): JoinTxn,
//! RegisterParticipant, the pull and an operator's abort asked at a participant, for the
//! transactional ids this coordinator's group holds.
//!
//! JoinTxn is answered from the applied state and this term's memory, as AddPartitionsToTxn
//! is: the producer must be the id's current one and, for a transactions-v1 write, the
//! partition must have been added. A registration is an entry in this group's log
//! (`XOp::Register`), whose apply refuses an instance that is no longer current; every
//! decision this group takes from then on lists the participant (`xgroup::coordinator`).

use kafka_compat::error_code;
use onelog_state::txns::{BrokerAbort, ProducerIdEpoch, TxnState};
use onelog_state::xgroup::coordinator::{self, Resolution};
use onelog_state::xgroup::{GroupId, Instance, XOp, XResult};

use super::{TxnCoordinator, WriteRefusal};
use crate::errors::ProposeError;
use crate::fatal;
use crate::raft::transport::xgroup::{JoinAnswer, JoinTxn, Joining, XAnswer, XRefusal, XResponse};

impl TxnCoordinator {
    /// Whether this node coordinates for other groups now: it leads the group, and the
    /// group's log says it is one of several (`XOp::Identify`), so its decisions are kept for
    /// their participants (`CrossGroup::decided`).
    fn ensure_cross_group(&self) -> Result<(), XRefusal> {
        self.ensure_coordinator().map_err(|_| XRefusal::NotLeader)?;
        if !self.applied.state(|s| s.xgroup.enabled()) {
            return Err(XRefusal::Unavailable(format!("group {} is not identified yet", self.group)));
        }
        Ok(())
    }

    /// JoinTxn (§3.1 step 1): the instance the participant's write belongs to, the decision
    /// it must apply first, and whether it is registered already.
    pub fn join(&self, request: &JoinTxn) -> XResponse {
        self.ensure_cross_group()?;
        if let Joining::Partitions { partitions, implicit_add } = &request.writes {
            for (topic, partition) in partitions {
                self.admit_write(request.producer, topic, *partition, *implicit_add).map_err(|refusal| {
                    match refusal {
                        WriteRefusal::Txn(e) => XRefusal::Txn(e),
                        WriteRefusal::NotAdded { transactional_id } => {
                            XRefusal::NotAdded { transactional_id, partition: format!("{topic}-{partition}") }
                        }
                    }
                })?;
            }
        }
        self.applied.state(|s| {
            let joined = coordinator::join(s, request.producer, request.participant, request.open_here)
                .map_err(XRefusal::Txn)?;
            let listed = s.xgroup.coordinated.get(&joined.instance.producer_id);
            let registered = listed.is_some_and(|c| c.participants.contains(&request.participant));
            Ok(XAnswer::Joined(JoinAnswer { joined, registered }))
        })
    }

    /// RegisterParticipant (§3.1 step 2): answered once applied, or at once when the applied
    /// state lists the participant for the instance already.
    pub async fn register(&self, instance: Instance, participant: GroupId) -> XResponse {
        self.ensure_cross_group()?;
        let listed = self.applied.state(|s| {
            let current = coordinator::current(s, instance.producer_id).map(|(now, _)| now);
            let coordinated = s.xgroup.coordinated.get(&instance.producer_id);
            current == Some(instance) && coordinated.is_some_and(|c| c.participants.contains(&participant))
        });
        if listed {
            return Ok(XAnswer::Registered);
        }
        let op = Box::new(XOp::Register { instance, group: participant });
        match self.proposer.propose(op).await {
            Ok(XResult::Registered(Ok(()))) => Ok(XAnswer::Registered),
            Ok(XResult::Registered(Err(e))) => Err(XRefusal::Txn(e)),
            Ok(other) => fatal::invariant(&format!("a registration was answered with {other:?}")),
            Err(ProposeError::NotLeader) => Err(XRefusal::NotLeader),
            Err(e) => Err(XRefusal::Unavailable(e.to_string())),
        }
    }

    /// An operator's abort (`kafka-transactions.sh abort`, WriteTxnMarkers) that reached a
    /// participant holding an instance of `producer` open (`onelog.version` 9): this group
    /// aborts the producer's transaction if it is still open, as a partition leader's abort
    /// marker would (`handlers::write_txn_markers`). The answer is the partition's code.
    pub async fn admin_abort(&self, producer: ProducerIdEpoch) -> XResponse {
        self.ensure_cross_group()?;
        let found = self.applied.state(|s| {
            let (tid, meta) = s.txns.by_producer(producer.producer_id)?;
            let current =
                ProducerIdEpoch { producer_id: meta.producer_id, producer_epoch: meta.producer_epoch };
            Some((tid.clone(), current, meta.state))
        });
        let (transactional_id, current) = match found {
            Some((_, current, _)) if producer.producer_epoch < current.producer_epoch => {
                return Ok(XAnswer::Aborted(error_code::INVALID_PRODUCER_EPOCH));
            }
            Some((tid, current, TxnState::Ongoing)) => (tid, current),
            // Nothing open: nothing to abort, as the partition leader answers.
            _ => return Ok(XAnswer::Aborted(error_code::NONE)),
        };
        tracing::info!(
            transactional_id,
            "aborting a transaction for WriteTxnMarkers at a participant (admin)"
        );
        match self.abort(BrokerAbort::Admin, vec![(transactional_id, current)]).await {
            Ok(()) => Ok(XAnswer::Aborted(error_code::NONE)),
            Err(ProposeError::NotLeader) => Err(XRefusal::NotLeader),
            Err(e) => Err(XRefusal::Unavailable(e.to_string())),
        }
    }

    /// The pull (§3.3): what became of `instance`, which `participant` holds open. An
    /// instance still open is registered, so that its decision will reach the participant.
    pub async fn resolve(&self, instance: Instance, participant: GroupId) -> XResponse {
        self.ensure_cross_group()?;
        let resolution = self.applied.state(|s| coordinator::resolve(s, instance, participant));
        if resolution == Resolution::Open {
            self.register(instance, participant).await?;
        }
        Ok(XAnswer::Resolved(resolution))
    }
}

//! A participant group's leader (docs/SCALING.md §3.1, §3.2): transactional writes of a
//! producer another group coordinates, and applying that group's decisions.
//!
//! A write first asks the coordinator's leader to join (JoinTxn), in the connection's order
//! so that a producer's pipelined batches are queued as sent. Then the batches, tagged with
//! the instance and behind the decision of the producer's previous instance when this group
//! still holds that one open, go into this group's log, while the coordinator registers this
//! group for the instance in its own log, in parallel. The client is answered once both are
//! applied: an acknowledged write is durable here and listed there, so the coordinator's
//! decision reaches it. A refused registration fails the write even though its batches are in
//! the log: never acknowledged, they are aborted when the coordinator says it does not list
//! them (the pull, `duties`).

use std::future::Future;
use std::pin::Pin;

use kafka_compat::error_code;
use kafka_protocol::messages::ApiKey;
use onelog_state::command::{PartitionProduced, TxnOffsetCommitOp};
use onelog_state::entry::{RemoteAppends, UnstampedAppend};
use onelog_state::txns::ProducerIdEpoch;
use onelog_state::xgroup::ops::XTxnOffsetCommitOp;
use onelog_state::xgroup::{Decision, GroupId, Instance, XOp, XResult};
use tokio::task::JoinHandle;

use super::ask;
use crate::ctx::{Ctx, SharedCtx};
use crate::errors::{partition_not_added, txn_error_code, ProposeError};
use crate::fatal;
use crate::leader::proposer::Produced;
use crate::raft::transport::xgroup::{JoinAnswer, JoinTxn, Joining, XAnswer, XMessage, XRefusal, XResponse};

/// A write of `producer` in group `participant`, whose transactions group `coordinator`
/// coordinates.
#[derive(Debug, Clone, Copy)]
pub struct Remote {
    pub participant: GroupId,
    pub coordinator: GroupId,
    pub producer: ProducerIdEpoch,
}

pub type ProducedFuture = Pin<Box<dyn Future<Output = Produced> + Send>>;

/// Produce's partitions of one remote producer in this group: joins now, queues the write and
/// starts the registration; the future answers each partition once both are applied.
pub async fn submit_produce(
    ctx: &SharedCtx,
    remote: Remote,
    appends: Vec<UnstampedAppend>,
    (implicit_add, version): (bool, i16),
) -> ProducedFuture {
    let count = appends.len();
    let partitions = appends.iter().map(|a| (a.topic.clone(), a.partition)).collect();
    let joined = match join(ctx, remote, Joining::Partitions { partitions, implicit_add }).await {
        Ok(joined) => joined,
        Err(refusal) => return answered(refused(count, &refusal, version)),
    };
    let Some(lane) = ctx.lane(remote.participant) else {
        return Box::pin(std::future::ready(Err(ProposeError::NotLeader)));
    };
    let JoinAnswer { joined, registered } = joined;
    let write = RemoteAppends {
        coordinator: remote.coordinator,
        instance: joined.instance,
        prior: joined.prior,
        appends,
    };
    let written = lane.proposer.submit_remote_produce(write).await;
    let registration = (!registered).then(|| register(ctx, remote, joined.instance));
    Box::pin(async move {
        let produced = written?.await?;
        match registered_by(registration).await {
            Ok(()) => Ok(produced),
            Err(refusal) => Ok(fail_written(produced, &refusal, version)),
        }
    })
}

/// TxnOffsetCommit of a remote producer in this group, the consumer group's: the offsets are
/// held by the instance until its decision. One code per commit.
pub async fn commit_offsets(
    ctx: &SharedCtx,
    remote: Remote,
    commit: TxnOffsetCommitOp,
    version: i16,
) -> Vec<i16> {
    let n = commit.commits.len();
    let group_id = commit.group_id.clone();
    let code = |refusal: &XRefusal| offsets_code(refusal, version);
    let JoinAnswer { joined, registered } = match join(ctx, remote, Joining::Offsets { group_id }).await {
        Ok(joined) => joined,
        Err(refusal) => return vec![code(&refusal); n],
    };
    let Some(lane) = ctx.lane(remote.participant) else { return vec![error_code::NOT_COORDINATOR; n] };
    let (coordinator, instance, prior) = (remote.coordinator, joined.instance, joined.prior);
    let op = XOp::TxnOffsetCommit(XTxnOffsetCommitOp { coordinator, instance, prior, commit });
    let registration = (!registered).then(|| register(ctx, remote, instance));
    let (written, registered) =
        tokio::join!(lane.proposer.propose(Box::new(op)), registered_by(registration));
    let codes = match written {
        Ok(XResult::TxnOffsets(Ok(results))) => results.into_iter().map(|(code, _)| code).collect(),
        Ok(XResult::TxnOffsets(Err(e))) => vec![txn_error_code(&e, ApiKey::TxnOffsetCommit, version); n],
        Ok(other) => fatal::invariant(&format!("a TxnOffsetCommit step was answered with {other:?}")),
        Err(_) => vec![error_code::NOT_COORDINATOR; n],
    };
    match registered {
        Ok(()) => codes,
        Err(refusal) => vec![code(&refusal); n],
    }
}

/// JoinTxn at the coordinator's leader.
async fn join(ctx: &Ctx, remote: Remote, writes: Joining) -> Result<JoinAnswer, XRefusal> {
    let lane = ctx.lane(remote.participant).ok_or(XRefusal::NotLeader)?;
    let open_here = lane.applied.state(|s| s.xgroup.open_instance(remote.producer.producer_id));
    let (coordinator, participant, producer) = (remote.coordinator, remote.participant, remote.producer);
    let request = JoinTxn { coordinator, participant, producer, open_here, writes };
    match ask(ctx, coordinator, XMessage::Join(request)).await? {
        XAnswer::Joined(joined) => Ok(joined),
        other => Err(XRefusal::Unavailable(format!("JoinTxn was answered with {other:?}"))),
    }
}

/// The registration of this group for `instance`, started now, in parallel with the write.
fn register(ctx: &SharedCtx, remote: Remote, instance: Instance) -> JoinHandle<XResponse> {
    let ctx = ctx.clone();
    let (coordinator, participant) = (remote.coordinator, remote.participant);
    tokio::spawn(async move {
        ask(&ctx, coordinator, XMessage::Register { coordinator, participant, instance }).await
    })
}

/// Waits for a registration, if one was started.
async fn registered_by(registration: Option<JoinHandle<XResponse>>) -> Result<(), XRefusal> {
    let Some(handle) = registration else { return Ok(()) };
    match handle.await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(refusal)) => Err(refusal),
        Err(e) => Err(XRefusal::Unavailable(format!("the registration stopped: {e}"))),
    }
}

/// Applies a coordinator's decisions in this group's log; one outcome per decision.
pub async fn apply_decisions(
    ctx: &Ctx,
    participant: GroupId,
    coordinator: GroupId,
    decisions: Vec<Decision>,
) -> XResponse {
    let lane = ctx.lane(participant).filter(|l| l.leadership.may_propose()).ok_or(XRefusal::NotLeader)?;
    match lane.proposer.propose(Box::new(XOp::Decisions { coordinator, decisions })).await {
        Ok(XResult::Decisions(applied)) => Ok(XAnswer::Applied(applied)),
        Ok(other) => fatal::invariant(&format!("decisions were answered with {other:?}")),
        Err(ProposeError::NotLeader) => Err(XRefusal::NotLeader),
        Err(e) => Err(XRefusal::Unavailable(e.to_string())),
    }
}

fn answered(parts: Vec<PartitionProduced>) -> ProducedFuture {
    Box::pin(std::future::ready(Ok(parts)))
}

fn refused(count: usize, refusal: &XRefusal, version: i16) -> Vec<PartitionProduced> {
    let error = PartitionProduced::error(produce_code(refusal, version), refusal.to_string());
    vec![error; count]
}

/// The written partitions fail with the registration's refusal: the client was not told
/// about them, and the coordinator does not list them.
fn fail_written(
    produced: Vec<PartitionProduced>,
    refusal: &XRefusal,
    version: i16,
) -> Vec<PartitionProduced> {
    let error = PartitionProduced::error(produce_code(refusal, version), refusal.to_string());
    produced.into_iter().map(|p| if p.error_code == error_code::NONE { error.clone() } else { p }).collect()
}

/// What a Produce partition gets for a refusal: the coordinator's error as a Kafka partition
/// leader answers it after verifying with its coordinator (KIP-890 part 1), and
/// NOT_ENOUGH_REPLICAS, which clients retry, when the coordinator could not be reached.
fn produce_code(refusal: &XRefusal, version: i16) -> i16 {
    match refusal {
        XRefusal::Txn(e) => txn_error_code(e, ApiKey::Produce, version),
        XRefusal::NotAdded { .. } => partition_not_added(version),
        XRefusal::Refused { code, .. } => *code,
        XRefusal::NotLeader | XRefusal::Unavailable(_) => error_code::NOT_ENOUGH_REPLICAS,
    }
}

/// TxnOffsetCommit's: COORDINATOR_NOT_AVAILABLE, which clients retry, for an unreachable
/// coordinator.
fn offsets_code(refusal: &XRefusal, version: i16) -> i16 {
    match refusal {
        XRefusal::Txn(e) => txn_error_code(e, ApiKey::TxnOffsetCommit, version),
        XRefusal::NotAdded { .. } => error_code::INVALID_TXN_STATE,
        XRefusal::Refused { code, .. } => *code,
        XRefusal::NotLeader | XRefusal::Unavailable(_) => error_code::COORDINATOR_NOT_AVAILABLE,
    }
}

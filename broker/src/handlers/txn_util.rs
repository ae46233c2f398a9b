//! What the transaction handlers share: the leader's clock and term, and the check of a
//! request's producer id and epoch against the applied state.

use std::time::{SystemTime, UNIX_EPOCH};

use kafka_compat::error_code;
use kafka_protocol::messages::ProducerId;

use crate::ctx::Ctx;
use crate::proposer::ProposeError;
use crate::state::command::LeaderStamp;
use crate::state::txns::{ProducerIdEpoch, TxnError};

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

pub fn stamp(ctx: &Ctx) -> LeaderStamp {
    LeaderStamp { now_ms: now_ms(), term: ctx.leader_epoch() }
}

pub fn producer(id: ProducerId, epoch: i16) -> ProducerIdEpoch {
    ProducerIdEpoch { producer_id: id.0, producer_epoch: epoch }
}

/// Whether `producer` is the current instance of `transactional_id` in the applied state.
pub fn check_producer(ctx: &Ctx, transactional_id: &str, producer: ProducerIdEpoch) -> Result<(), TxnError> {
    let applied = ctx.sm.applied.read().expect("applied lock");
    match applied.state.txns.by_id.get(transactional_id) {
        Some(meta) => meta.check_epoch(producer),
        None => Err(TxnError::InvalidProducerIdMapping),
    }
}

/// A proposal that did not commit here: the client finds the coordinator again and retries.
pub fn propose_error_code(e: &ProposeError) -> i16 {
    match e {
        ProposeError::NotLeader => error_code::NOT_COORDINATOR,
        ProposeError::Fatal(_) => error_code::COORDINATOR_NOT_AVAILABLE,
    }
}

//! A participant group forgets remote producer ids (docs/SCALING.md §3.4, `onelog.version` 9).
//! It keeps, for each producer id of another group that wrote here, the fence of its last
//! decided instance, so that a late write of that instance is refused by log order. Once the
//! coordinator group no longer knows the id (its transactional id expired, or moved to a new
//! producer id) and the participant holds nothing of it open, no write of it can be registered
//! and committed any more, and the fence is dead weight: every
//! `producer.id.expiration.check.interval.ms` the participant's leader asks each coordinator
//! which of its idle ids it still knows, and forgets the others with one `XOp::Forget`.

use std::time::Duration;

use onelog_state::features::{ONELOG_VERSION, ONELOG_VERSION_PARTICIPANT_MESSAGES};
use onelog_state::xgroup::{GroupId, XOp};

use super::ask;
use super::duties::leads;
use crate::ctx::SharedCtx;
use crate::limits;
use crate::raft::transport::xgroup::{XAnswer, XMessage};

/// As participant in `group`: forgets, every check interval, the remote producer ids their
/// coordinators no longer know.
pub async fn run(ctx: SharedCtx, participant: GroupId) {
    let interval = ctx.config.settings.producer_id_expiration_check_interval_ms.max(1);
    loop {
        tokio::time::sleep(Duration::from_millis(interval)).await;
        let level = ctx.applied.state(|s| s.features.level(ONELOG_VERSION));
        if level < ONELOG_VERSION_PARTICIPANT_MESSAGES || !leads(&ctx, participant) {
            continue;
        }
        let Some(lane) = ctx.lane(participant) else { return };
        let idle = lane.applied.state(|s| s.xgroup.idle_remote(limits::XGROUP_FORGET_BATCH_MAX));
        for (coordinator, producer_ids) in idle {
            forget(&ctx, participant, coordinator, producer_ids).await;
        }
    }
}

/// Asks `coordinator` which of `producer_ids` it no longer knows, and forgets those here.
async fn forget(ctx: &SharedCtx, participant: GroupId, coordinator: GroupId, producer_ids: Vec<i64>) {
    let message = XMessage::Gone { coordinator, participant, producer_ids };
    let gone = match ask(ctx, coordinator, message).await {
        Ok(XAnswer::Gone(gone)) if !gone.is_empty() => gone,
        Ok(_) => return,
        Err(e) => {
            tracing::debug!(participant, coordinator, error = %e, "asking which producer ids are gone failed");
            return;
        }
    };
    let Some(lane) = ctx.lane(participant) else { return };
    let count = gone.len();
    match lane.proposer.propose(Box::new(XOp::Forget { producer_ids: gone })).await {
        Ok(_) => tracing::info!(
            participant,
            coordinator,
            count,
            "forgot producer ids their coordinator no longer knows"
        ),
        Err(e) => tracing::debug!(participant, error = %e, "forgetting producer ids did not commit"),
    }
}

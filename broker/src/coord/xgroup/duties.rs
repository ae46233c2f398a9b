//! The cross-group duties of every Raft group this node leads (docs/SCALING.md §3.2, §3.3):
//!
//! - as a coordinator, deliver each decision to the participants it lists that have not
//!   confirmed it, once applied and again every `XGROUP_DECISION_RESEND_MS`, and record the
//!   confirmations (`XOp::Delivered`), gathered for `XGROUP_CONFIRMATIONS_BATCH_MS` into one
//!   entry: nothing waits for them but the coordinator's memory of the decision, so one entry
//!   a few times a second replaces one per transaction. The undelivered decisions are applied
//!   state, so a new leader sends them again at once;
//! - as a participant, ask the coordinator about every instance held open here longer than
//!   `XGROUP_DECISION_PULL_MS`, and apply what it says (an abort for data it never listed),
//!   and forget the producer ids the coordinator no longer knows (`forget`);
//! - group 0 identifies itself as one of several groups, as the others do when they follow
//!   it (`leader::groups`), so that its decisions too are kept for their participants.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use onelog_state::features::{ONELOG_VERSION, ONELOG_VERSION_GROUP_COORDINATORS};
use onelog_state::xgroup::coordinator::Resolution;
use onelog_state::xgroup::{Decision, GroupId, Instance, XOp};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{ask, participant};
use crate::clock::wall_clock_ms;
use crate::ctx::SharedCtx;
use crate::limits;
use crate::raft::transport::xgroup::{XAnswer, XMessage};

/// Starts the duties of every group this node runs, in a cluster of several.
pub fn start(ctx: &SharedCtx) {
    if ctx.single_group() {
        return;
    }
    let groups: Vec<GroupId> = ctx.lanes().map(|lane| lane.group).collect();
    for group in groups {
        let confirmations = Arc::new(Confirmations::default());
        tokio::spawn(deliver(ctx.clone(), group, confirmations.clone()));
        tokio::spawn(record_confirmations(ctx.clone(), group, confirmations));
        tokio::spawn(pull(ctx.clone(), group));
        tokio::spawn(super::forget::run(ctx.clone(), group));
    }
    tokio::spawn(identify_group0(ctx.clone()));
}

/// Whether this node leads `group` and may write to its log now.
pub(super) fn leads(ctx: &SharedCtx, group: GroupId) -> bool {
    ctx.lane(group).is_some_and(|lane| lane.leadership.may_propose())
}

/// Participants' confirmations not yet proposed, and a wake-up for the task that proposes them.
#[derive(Default)]
struct Confirmations {
    pending: Mutex<Vec<(Instance, GroupId)>>,
    added: Notify,
}

/// As coordinator of `group`: every undelivered decision to its participants.
async fn deliver(ctx: SharedCtx, group: GroupId, confirmations: Arc<Confirmations>) {
    let Some(mut applied) = ctx.lane(group).map(|lane| lane.applied.applied_index()) else { return };
    let resend = Duration::from_millis(limits::XGROUP_DECISION_RESEND_MS);
    let mut sent: HashMap<(Instance, GroupId), Instant> = HashMap::new();
    loop {
        let _ = tokio::time::timeout(resend / 4, applied.changed()).await;
        if !leads(&ctx, group) {
            sent.clear();
            continue;
        }
        let now = Instant::now();
        sent.retain(|_, at| now.duration_since(*at) < resend);
        let mut due: BTreeMap<GroupId, Vec<Decision>> = BTreeMap::new();
        let lane = ctx.lane(group).expect("led above");
        lane.applied.state(|s| {
            for (participant, decision) in s.xgroup.deliveries() {
                if !sent.contains_key(&(decision.instance, participant)) {
                    due.entry(participant).or_default().push(decision);
                }
            }
        });
        for (participant, decisions) in due {
            for decision in &decisions {
                sent.insert((decision.instance, participant), now);
            }
            tokio::spawn(deliver_to(ctx.clone(), (group, participant), decisions, confirmations.clone()));
        }
    }
}

/// One delivery: the participant applies the decisions, and the ones it confirms are queued
/// for the coordinator's log. A failure is logged; the resend tries again.
async fn deliver_to(
    ctx: SharedCtx,
    (coordinator, participant): (GroupId, GroupId),
    decisions: Vec<Decision>,
    confirmations: Arc<Confirmations>,
) {
    let message = XMessage::Decisions { participant, coordinator, decisions: decisions.clone() };
    let applied = match ask(&ctx, participant, message).await {
        Ok(XAnswer::Applied(applied)) => applied,
        other => {
            tracing::debug!(coordinator, participant, answer = ?other, "a decision delivery did not go through; resending later");
            return;
        }
    };
    let confirmed = decisions.iter().zip(applied).filter(|(_, applied)| applied.confirmable());
    let confirmed: Vec<(Instance, GroupId)> = confirmed.map(|(d, _)| (d.instance, participant)).collect();
    if !confirmed.is_empty() {
        confirmations.pending.lock().unwrap_or_else(|p| p.into_inner()).extend(confirmed);
        confirmations.added.notify_one();
    }
}

/// Proposes the confirmations gathered for `XGROUP_CONFIRMATIONS_BATCH_MS`, as one entry. A
/// proposal that fails loses them: the decisions stay undelivered in the applied state, and
/// the resend asks the participants again, which confirm what they applied already.
async fn record_confirmations(ctx: SharedCtx, coordinator: GroupId, confirmations: Arc<Confirmations>) {
    let gather = Duration::from_millis(limits::XGROUP_CONFIRMATIONS_BATCH_MS);
    loop {
        confirmations.added.notified().await;
        tokio::time::sleep(gather).await;
        let batch = std::mem::take(&mut *confirmations.pending.lock().unwrap_or_else(|p| p.into_inner()));
        let Some(lane) = ctx.lane(coordinator).filter(|_| !batch.is_empty()) else { continue };
        if let Err(e) = lane.proposer.propose(Box::new(XOp::Delivered { confirmations: batch })).await {
            tracing::debug!(coordinator, error = %e, "recording delivered decisions did not commit");
        }
    }
}

/// As participant in `group`: asks about instances open here too long.
async fn pull(ctx: SharedCtx, group: GroupId) {
    let period = Duration::from_millis(limits::XGROUP_DECISION_PULL_MS / 2);
    loop {
        tokio::time::sleep(period).await;
        if !leads(&ctx, group) {
            continue;
        }
        let Some(lane) = ctx.lane(group) else { return };
        let age = limits::XGROUP_DECISION_PULL_MS as i64;
        let old = lane.applied.state(|s| s.xgroup.open_since(wall_clock_ms(), age));
        for (coordinator, instance) in old {
            tokio::spawn(resolve(ctx.clone(), group, coordinator, instance));
        }
    }
}

async fn resolve(ctx: SharedCtx, participant: GroupId, coordinator: GroupId, instance: Instance) {
    let message = XMessage::Resolve { coordinator, participant, instance };
    match ask(&ctx, coordinator, message).await {
        Ok(XAnswer::Resolved(Resolution::Decided(commit))) => {
            tracing::info!(participant, coordinator, %instance, commit, "applying a decision this group asked for");
            let decisions = vec![Decision { instance, commit }];
            if let Err(e) = participant::apply_decisions(&ctx, participant, coordinator, decisions).await {
                tracing::debug!(participant, %instance, error = %e, "applying a pulled decision failed");
            }
        }
        Ok(_) => {}
        Err(e) => {
            tracing::debug!(participant, coordinator, %instance, error = %e, "asking for a decision failed")
        }
    }
}

/// Group 0's `XOp::Identify` once its levels allow it (`onelog.version` 8).
async fn identify_group0(ctx: SharedCtx) {
    let groups = ctx.config.settings.raft_groups.groups;
    let mut applied = ctx.applied.applied_index();
    loop {
        let (level, known) = ctx.applied.state(|s| (s.features.level(ONELOG_VERSION), s.xgroup.groups));
        if level >= ONELOG_VERSION_GROUP_COORDINATORS && known != groups && ctx.may_propose() {
            match ctx.proposer.propose(Box::new(XOp::Identify { group: 0, groups })).await {
                Ok(_) => tracing::info!(groups, "Raft group 0 identified itself as one of several"),
                Err(e) => tracing::warn!(error = %e, "identifying Raft group 0 did not commit"),
            }
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), applied.changed()).await;
        tokio::time::sleep(Duration::from_millis(limits::FOLLOW_GROUP0_INTERVAL_MS_MIN)).await;
    }
}

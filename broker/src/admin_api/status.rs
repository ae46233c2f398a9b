//! `GET /status`, and the membership as every admin response shows it, both read from
//! openraft's metrics (this node's view: a follower may lag the leader's membership).

use openraft::{RaftMetrics, ServerState};
use serde_json::{json, Value};

use super::AdminCtx;
use crate::raft::{NodeAddr, StoredMembership};

pub fn role(state: ServerState) -> &'static str {
    match state {
        ServerState::Leader => "leader",
        ServerState::Follower => "follower",
        ServerState::Candidate => "candidate",
        ServerState::Learner => "learner",
        ServerState::Shutdown => "shutdown",
    }
}

/// `{"log_index", "voters", "learners", "nodes": [{"id","raft","kafka"}], "joint"}`. During a
/// joint configuration (Raft §6) `voters` lists the voters of both configurations.
pub fn membership_json(membership: &StoredMembership) -> Value {
    let m = membership.membership();
    let voters: Vec<u64> = m.voter_ids().collect();
    let learners: Vec<u64> = m.learner_ids().collect();
    let nodes: Vec<Value> = m.nodes().map(|(id, addr)| node_json(*id, addr)).collect();
    json!({
        "log_index": membership.log_id().map(|l| l.index),
        "voters": voters,
        "learners": learners,
        "nodes": nodes,
        "joint": m.get_joint_config().len() > 1,
    })
}

fn node_json(id: u64, addr: &NodeAddr) -> Value {
    json!({ "id": id, "raft": addr.raft, "kafka": addr.kafka })
}

pub fn status(ctx: &AdminCtx) -> Value {
    let metrics: RaftMetrics<u64, NodeAddr> = ctx.raft.metrics().borrow().clone();
    let membership = membership_json(&metrics.membership_config);
    let (finalized, epoch) = ctx.applied.state(|s| (s.features.finalized(), s.features.epoch()));
    let (parked, journaled) = ctx.applied.parked_log_segments();
    json!({
        "node_id": ctx.node_id,
        // This node's build, and the feature levels it supports and the cluster finalized
        // (docs/OPERATIONS.md, Upgrades): what a rolling upgrade checks node by node.
        "release": crate::upgrade::RELEASE,
        "features": {
            "supported": crate::upgrade::SUPPORTED.iter()
                .map(|(name, min, max)| json!({"name": name, "min": min, "max": max}))
                .collect::<Vec<_>>(),
            "finalized": finalized.into_iter().map(|(n, l)| (n, json!(l))).collect::<serde_json::Map<_, _>>(),
            "epoch": epoch,
        },
        "leader": metrics.current_leader,
        "term": metrics.current_term,
        "role": role(metrics.state),
        // An elected leader names itself before this; a client that writes to it in between
        // is refused NOT_CONTROLLER or NOT_LEADER_OR_FOLLOWER.
        "serving": crate::raft::leads_with_own_term_applied(&metrics),
        "last_log_index": metrics.last_log_index,
        "last_applied": metrics.last_applied.map(|l| l.index),
        "checkpoint_index": metrics.snapshot.map(|l| l.index),
        "purged_index": metrics.purged.map(|l| l.index),
        // Partition segments that leave their batches in the Raft log (issue 31), and the
        // Raft log segments kept past their purge for them.
        "journaled_segments": journaled,
        "parked_log_segments": parked.segments,
        "parked_log_bytes": parked.bytes,
        "voters": membership["voters"],
        "learners": membership["learners"],
        "nodes": membership["nodes"],
        "membership_log_index": membership["log_index"],
        "votes": ctx.votes.describe(),
        "kafka": ctx.kafka,
        "kafka_listener": crate::net::incidents::STATS.to_json(),
        "raft_groups": super::raft_groups::status_json(&ctx.groups, ctx.node_id),
    })
}

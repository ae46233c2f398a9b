//! The controller's topic administration (the Raft leader is Kafka's controller), shared by
//! CreateTopics, Metadata auto-creation, DeleteTopics and CreatePartitions: validation against
//! Kafka's rules, then one Raft entry.

use std::collections::BTreeMap;

use kafka_compat::error_code;
use kafka_compat::topic_name::topic_name_problem;

use crate::ctx::Ctx;
use crate::internal_topic;
use crate::limits;
use onelog_state::command::{CreatePartitionsOp, CreateTopicsOp, DeleteTopicsOp, NewPartitions, NewTopic};
use onelog_state::topic_config::topic_configs_problem;
use onelog_state::xgroup::placement::{recorded_topic_group, TOPIC_GROUP_CONFIG};

use crate::errors::{propose_error_code, Addressed};
use crate::leader::proposer::ProposeError;

/// Admin requests a follower could not relay to the leader (`net::forward::relay`) get
/// NOT_CONTROLLER: the Raft leader is the controller, and admin clients retry on this error.
fn failed(e: &ProposeError, n: usize) -> ItemResults {
    vec![(propose_error_code(e, Addressed::Controller), Some(e.to_string())); n]
}

/// A topic to create as a client asked for it (-1: broker default).
#[derive(Clone)]
pub struct TopicRequest {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
    /// A manual assignment: (partition index, replica ids); then both counts must be -1.
    pub assignments: Vec<(i32, Vec<i32>)>,
}

/// The partition count and replication factor a request comes to: the broker defaults for -1,
/// or (Kafka's rule) those of its manual assignment, which onelog checks and then places on
/// every voter as it does every partition.
fn resolved_counts(ctx: &Ctx, req: &TopicRequest) -> Result<(i32, i16), (i16, String)> {
    if req.assignments.is_empty() {
        let settings = &ctx.config.settings;
        let partitions = if req.partitions == -1 { settings.num_partitions } else { req.partitions };
        let rf = if req.replication_factor == -1 {
            settings.default_replication_factor
        } else {
            req.replication_factor
        };
        return Ok((partitions, rf));
    }
    let manual = "A manual partition assignment was specified, but";
    if req.replication_factor != -1 {
        return Err((error_code::INVALID_REQUEST, format!("{manual} replication factor was not set to -1.")));
    }
    if req.partitions != -1 {
        return Err((error_code::INVALID_REQUEST, format!("{manual} numPartitions was not set to -1.")));
    }
    let brokers = broker_ids(ctx);
    if let Some(why) = onelog_state::assignment::new_topic_problem(&req.assignments, Some(&brokers)) {
        return Err((error_code::INVALID_REPLICA_ASSIGNMENT, why));
    }
    let partitions = i32::try_from(req.assignments.len()).unwrap_or(i32::MAX);
    let rf = i16::try_from(req.assignments[0].1.len()).unwrap_or(i16::MAX);
    Ok((partitions, rf))
}

/// Outcome per topic, in request order.
pub type ItemResults = Vec<(i16, Option<String>)>;

/// Validates each topic and resolves defaults; returns the valid ones and per-item errors.
pub fn validate_topics(ctx: &Ctx, requests: &[TopicRequest]) -> (Vec<NewTopic>, Vec<Option<(i16, String)>>) {
    let voters = ctx.leadership.voter_ids().len() as i16;
    let mut valid = Vec::new();
    let mut errors = Vec::new();
    for req in requests {
        let (partitions, rf) = match resolved_counts(ctx, req) {
            Ok(counts) => counts,
            Err(problem) => {
                errors.push(Some(problem));
                continue;
            }
        };
        let problem = if let Some(p) = topic_name_problem(&req.name) {
            Some((error_code::INVALID_TOPIC_EXCEPTION, p.to_string()))
        } else if internal_topic::is_internal(&req.name) {
            Some((error_code::TOPIC_ALREADY_EXISTS, format!("Topic '{}' already exists.", req.name)))
        } else if partitions <= 0 || partitions > limits::TOPIC_PARTITIONS_MAX {
            Some((
                error_code::INVALID_PARTITIONS,
                format!("Number of partitions {partitions} is not in 1..={}.", limits::TOPIC_PARTITIONS_MAX),
            ))
        } else if rf <= 0 || rf > voters.max(1) {
            Some((
                error_code::INVALID_REPLICATION_FACTOR,
                format!("Replication factor: {rf} larger than available brokers: {voters}."),
            ))
        } else {
            topic_configs_problem(&req.configs).map(|p| (error_code::INVALID_CONFIG, p))
        };
        let placed = placed_configs(ctx, req);
        let problem = problem.or_else(|| placed.as_ref().err().cloned());
        if let (None, Ok(configs)) = (&problem, placed) {
            let topic_id = *uuid::Uuid::new_v4().as_bytes();
            valid.push(NewTopic {
                name: req.name.clone(),
                topic_id,
                partitions,
                replication_factor: rf,
                configs,
            });
        }
        errors.push(problem);
    }
    (valid, errors)
}

/// The configs a new topic is recorded with: as asked, plus, on a cluster of several Raft
/// groups, the group it is placed in (`onelog.raft.group`, docs/SCALING.md §2: its own config,
/// its placement key's group, a `topic:` rule of `onelog.placement.rules`, else the hash of
/// its name), decided here once and never recomputed. A one-group cluster records nothing
/// more (its topics all live in group 0, the state as before) and refuses a placement naming
/// another group.
fn placed_configs(ctx: &Ctx, req: &TopicRequest) -> Result<BTreeMap<String, String>, (i16, String)> {
    let settings = &ctx.config.settings.raft_groups;
    let group =
        settings.placement.topic(&req.name, &req.configs).map_err(|e| (error_code::INVALID_CONFIG, e.0))?;
    let mut configs = req.configs.clone();
    if settings.groups > 1 {
        configs.insert(TOPIC_GROUP_CONFIG.to_string(), group.to_string());
    }
    Ok(configs)
}

/// Creates topics in one Raft entry; per-topic results in request order.
pub async fn create_topics(ctx: &Ctx, requests: &[TopicRequest], validate_only: bool) -> ItemResults {
    let (valid, errors) = validate_topics(ctx, requests);
    let mut applied: std::vec::IntoIter<(i16, Option<String>)> = Vec::new().into_iter();
    if !valid.is_empty() && !validate_only {
        applied = match ctx.proposer.propose(CreateTopicsOp { topics: valid.clone() }).await {
            Ok(items) => {
                wait_placed(ctx, &valid).await;
                items.into_iter()
            }
            Err(e) => failed(&e, valid.len()).into_iter(),
        };
    } else if validate_only {
        // Still report a name clash, as Kafka does for validate_only.
        ctx.applied.state(|state| {
            let clash: Vec<_> = valid
                .iter()
                .map(|t| {
                    if state.topics.contains_key(&t.name) {
                        (
                            error_code::TOPIC_ALREADY_EXISTS,
                            Some(format!("Topic '{}' already exists.", t.name)),
                        )
                    } else {
                        (error_code::NONE, None)
                    }
                })
                .collect();
            applied = clash.into_iter();
        })
    }
    errors
        .into_iter()
        .map(|e| match e {
            Some((code, msg)) => (code, Some(msg)),
            None => applied.next().unwrap_or((error_code::NONE, None)),
        })
        .collect()
}

/// Waits, at most `TOPIC_PLACED_WAIT_MS`, until each topic placed in another group than 0 is
/// held by that group too where this node runs it (docs/SCALING.md §2: CreateTopics is
/// answered once both are applied), so a client's first Produce finds it.
async fn wait_placed(ctx: &Ctx, topics: &[NewTopic]) {
    let deadline =
        tokio::time::Instant::now() + std::time::Duration::from_millis(limits::TOPIC_PLACED_WAIT_MS);
    for topic in topics {
        let Some(lane) = ctx.lane(recorded_topic_group(&topic.configs)).filter(|l| l.group != 0) else {
            continue;
        };
        let mut applied = lane.applied.applied_index();
        let held = |s: &onelog_state::BrokerState| {
            s.topics.get(&topic.name).is_some_and(|t| t.topic_id == topic.topic_id)
        };
        while !lane.applied.state(held) {
            if !matches!(tokio::time::timeout_at(deadline, applied.changed()).await, Ok(Ok(()))) {
                tracing::warn!(topic = %topic.name, group = lane.group, "the topic's Raft group does not hold it yet");
                break;
            }
        }
    }
}

pub async fn delete_topics(ctx: &Ctx, names: Vec<String>) -> ItemResults {
    if !ctx.config.settings.delete_topic_enable {
        return vec![(error_code::POLICY_VIOLATION, Some("Topic deletion is disabled.".into())); names.len()];
    }
    // The virtual internal topic is not in the state: refuse it here, delete the rest.
    let refused: Vec<bool> = ctx.applied.state(|state| {
        names.iter().map(|n| internal_topic::is_internal(n) && !state.topics.contains_key(n)).collect()
    });
    let names: Vec<String> = names.into_iter().zip(&refused).filter(|(_, r)| !**r).map(|(n, _)| n).collect();
    let n = names.len();
    let mut deleted = if n == 0 {
        Vec::new().into_iter()
    } else {
        ctx.proposer.propose(DeleteTopicsOp { names }).await.unwrap_or_else(|e| failed(&e, n)).into_iter()
    };
    let internal = || {
        (
            error_code::INVALID_TOPIC_EXCEPTION,
            Some(format!("Cannot delete internal topic {}", internal_topic::NAME)),
        )
    };
    refused
        .into_iter()
        .map(|r| if r { internal() } else { deleted.next().unwrap_or((error_code::NONE, None)) })
        .collect()
}

pub async fn create_partitions(ctx: &Ctx, items: Vec<NewPartitions>) -> ItemResults {
    let n = items.len();
    if items.iter().any(|i| i.count > limits::TOPIC_PARTITIONS_MAX) {
        let msg = format!("At most {} partitions per topic.", limits::TOPIC_PARTITIONS_MAX);
        return vec![(error_code::INVALID_PARTITIONS, Some(msg)); n];
    }
    // Broker ids are membership, not applied state: the controller checks them before
    // proposing; apply checks the rest again.
    let brokers = broker_ids(ctx);
    let refused: Vec<Option<String>> = ctx.applied.state(|state| {
        let problem = |i: &NewPartitions| {
            let t = state.topics.get(&i.topic)?;
            let rf = t.replication_factor;
            onelog_state::assignment::problem(i, t.partitions.len(), rf, Some(&brokers))
        };
        items.iter().map(problem).collect()
    });
    let valid: Vec<NewPartitions> =
        items.into_iter().zip(&refused).filter(|(_, r)| r.is_none()).map(|(i, _)| i).collect();
    let mut applied = if valid.is_empty() {
        Vec::new().into_iter()
    } else {
        let count = valid.len();
        let outcome = ctx.proposer.propose(CreatePartitionsOp { topics: valid }).await;
        outcome.unwrap_or_else(|e| failed(&e, count)).into_iter()
    };
    refused
        .into_iter()
        .map(|r| match r {
            Some(why) => (error_code::INVALID_REPLICA_ASSIGNMENT, Some(why)),
            None => applied.next().unwrap_or((error_code::NONE, None)),
        })
        .collect()
}

/// The registered brokers: the Raft voters.
pub fn broker_ids(ctx: &Ctx) -> std::collections::BTreeSet<i32> {
    ctx.leadership.voter_ids().into_iter().collect()
}
